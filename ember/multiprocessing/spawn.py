"""``spawn`` / ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` processes, PyTorch's way.

A child that raises writes its traceback to an error file and exits with 1; the parent's
``ProcessContext.join`` terminates the others and raises ``ProcessRaisedException`` with that
traceback. A child that dies by a signal or exits non-zero without an error file gives
``ProcessExitedException``.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import warnings

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


class ProcessException(Exception):
    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """A process failed because its code raised an exception."""


class ProcessExitedException(ProcessException):
    """A process failed by a signal or exited with a non-zero code."""

    __slots__ = ["exit_code"]

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return (type(self), (self.msg, self.error_index, self.error_pid, self.exit_code,
                             self.signal_name))


def _die_with_parent() -> None:
    """Ask Linux to send SIGINT to this process when its parent dies (PyTorch does too)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGINT))
        except (OSError, AttributeError):
            pass


def _wrap(fn, i, args, error_file):
    _die_with_parent()
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # SIGINT: the parent is gone or stopping us
    except Exception:  # noqa: BLE001  (any error goes to the parent)
        import traceback
        with open(error_file, "wb") as fh:
            pickle.dump(traceback.format_exc(), fh)
        sys.exit(1)


class ProcessContext:
    """The processes ``start_processes`` started, with their error files."""

    def __init__(self, processes, error_files):
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list:
        return [int(p.pid) for p in self.processes]

    def _join_all(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for p in self.processes:
            p.join(max(0, end - time.monotonic()))

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Wait up to ``timeout`` for processes to finish; True once all have finished.

        When one has failed, the others are terminated (after ``grace_period``, if given;
        SIGKILL if SIGTERM does not stop them) and the first failure is raised."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            p = self.processes[index]
            p.join()
            if p.exitcode != 0:
                error_index = index
                break
        if error_index is None:
            return not self.sentinels

        if grace_period is not None:
            self._join_all(grace_period)
        for p in self.processes:
            if p.is_alive():
                log.warning("Terminating process %s via signal SIGTERM", p.pid)
                p.terminate()
        self._join_all(30 if grace_period is None else grace_period)
        for p in self.processes:
            if p.is_alive():
                log.warning("Unable to shutdown process %s via SIGTERM , forcefully exiting via "
                            "SIGKILL", p.pid)
                p.kill()
            p.join()

        failed = self.processes[error_index]
        error_file = self.error_files[error_index]
        if not os.access(error_file, os.R_OK):
            code = failed.exitcode
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"<Unknown signal {-code}>"
                raise ProcessExitedException(
                    f"process {error_index:d} terminated with signal {name}",
                    error_index=error_index, error_pid=failed.pid, exit_code=code,
                    signal_name=name)
            raise ProcessExitedException(
                f"process {error_index:d} terminated with exit code {code:d}",
                error_index=error_index, error_pid=failed.pid, exit_code=code)

        with open(error_file, "rb") as fh:
            trace = pickle.load(fh)
        os.unlink(error_file)
        msg = f"\n\n-- Process {error_index:d} terminated with the following error:\n" + trace
        raise ProcessRaisedException(msg, error_index, failed.pid)


class SpawnContext(ProcessContext):
    def __init__(self, processes, error_files):
        warnings.warn("SpawnContext is renamed to ProcessContext since 1.4 release.",
                      stacklevel=2)
        super().__init__(processes, error_files)


def _error_file_name() -> str:
    """A path for a child's traceback, not created (the child creates it only on error)."""
    fd, name = tempfile.mkstemp(prefix="ember-errorfile-", suffix=".pickle")
    os.close(fd)
    os.unlink(name)
    return name


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` processes of ``start_method`` running ``fn(i, *args)``; wait for them
    when ``join``, else return their ``ProcessContext``."""
    ctx = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        name = _error_file_name()
        p = ctx.Process(target=_wrap, args=(fn, i, args, name), daemon=daemon)
        p.start()
        processes.append(p)
        error_files.append(name)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Spawn ``nprocs`` processes that run ``fn(i, *args)`` (``i`` the process index).

    When one exits with a non-zero status the others are terminated and an exception with the
    cause is raised (a child's exception comes with its traceback). Returns None when ``join``,
    else a ``ProcessContext``. Always uses the spawn start method (``start_processes`` takes
    others)."""
    if start_method != "spawn":
        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\n"
                      "To use a different start_method use:\n\t\t"
                      " torch.multiprocessing.start_processes(...)", FutureWarning,
                      stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
