"""The MPI engine under ember's CPU process groups (mpi4py over the ``mpich`` wheel).

Importing this module does not import mpi4py: ``mpi()`` does, once, after setting the
environment MPICH reads at start-up.

How ranks form one MPI world (``form_world``):

- started by ``mpiexec -n N`` (the environment has MPICH's PMI variables and MPI_COMM_WORLD has
  ``world_size`` processes): MPI_COMM_WORLD is the world;
- started any other way (ember's launcher, ``ember.multiprocessing.spawn``, torchrun-style
  launchers, by hand with RANK/WORLD_SIZE): each process becomes a one-process MPI job and the
  jobs join through an MPI port (``MPI_Open_port`` on rank 0, its name passed through the
  rendezvous store, ``Comm_accept``/``Comm_connect`` one rank at a time in rank order, each
  intercommunicator merged so that the new rank comes last).

A plain MPICH singleton (a process that calls MPI_Init with no process manager) cannot take
part in ``Comm_accept``/``Comm_connect`` with MPICH 5.0: every singleton gets the same world
id, so two singletons' processes compare equal and the connection fails with "Local and remote
groups in MPI_Intercomm_create must not contain the same processes" (MPICH issue 7805). So a
process started without a process manager borrows one first: it starts the wheel's
``mpiexec -pmi-port -n 1`` over a small helper that only reports the PMI address hydra gives
it (PMI_PORT, PMI_ID) and then waits for the process to exit; the process puts those in its
own environment before MPI_Init, and becomes the one rank of a fresh hydra job with a world id
of its own. The helper (and with it its mpiexec) exits once the process is gone, so MPI_Finalize
still finds its process manager.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import time

_MPI = None
_helper = None  # the borrowed process manager (see the module docstring)
broken = False  # a collective timed out or failed: the world is aborted at exit

# MPICH settings ember chooses unless the user set them. MPICH 5 (ch4) has no wait policy
# for blocking calls (they poll the network in a loop); ember issues every collective
# non-blocking and polls it with a sleeping back-off (Work.wait), so an idle rank does not
# spin. Only forming the world (accept/connect/merge) blocks inside MPI.
_ENV_DEFAULTS = {
    "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1",  # yield (nanosleep) when threads contend for MPI
}


def _mpiexec() -> str:
    """The wheel's hydra mpiexec (next to the interpreter in a virtual environment)."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec.hydra")
    if os.path.exists(here):
        return here
    import shutil
    found = shutil.which("mpiexec.hydra") or shutil.which("mpiexec")
    if found is None:
        raise RuntimeError("ember.distributed: the MPI engine needs MPICH's mpiexec (pip install "
                           "mpich mpi4py, or ember[distributed])")
    return found


def under_process_manager() -> bool:
    """Whether an MPI process manager (mpiexec) started this process."""
    return any(k in os.environ for k in ("PMI_FD", "PMI_PORT", "PMI_RANK", "PMIX_NAMESPACE"))


_HELPER_CODE = (
    "import json, os, sys, time\n"
    "env = {k: v for k, v in os.environ.items() if k.startswith(('PMI_', 'MPI_LOCAL'))}\n"
    "tmp = sys.argv[1] + '.tmp'\n"
    "with open(tmp, 'w') as fh:\n"
    "    json.dump(env, fh)\n"
    "os.rename(tmp, sys.argv[1])\n"
    "pid = int(sys.argv[2])\n"
    "while True:\n"
    "    try:\n"
    "        os.kill(pid, 0)\n"
    "    except OSError:\n"
    "        break\n"
    "    time.sleep(0.1)\n"
)


def _borrow_process_manager(timeout: float) -> None:
    """Start ``mpiexec -pmi-port -n 1`` over a helper and take its PMI address (see the module
    docstring); the caller then initialises MPI as that job's rank."""
    global _helper
    fd, path = tempfile.mkstemp(prefix="ember-pmi-", suffix=".env")
    os.close(fd)
    os.unlink(path)
    _helper = subprocess.Popen(
        [_mpiexec(), "-pmi-port", "-n", "1", sys.executable, "-c", _HELPER_CODE, path,
         str(os.getpid())],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "HYD"))})
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if _helper.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"ember.distributed: could not start MPICH's process manager "
                               f"({_mpiexec()}): exit status {_helper.poll()}")
        time.sleep(0.005)
    with open(path) as fh:
        env = json.load(fh)
    os.unlink(path)
    os.environ.update(env)


def mpi(borrow: bool = False, timeout: float = 60.0):
    """mpi4py's ``MPI`` module, importing (and so initialising) MPI on first use."""
    global _MPI
    if _MPI is None:
        for k, v in _ENV_DEFAULTS.items():
            os.environ.setdefault(k, v)
        if borrow and not under_process_manager():
            _borrow_process_manager(timeout)
        try:
            import mpi4py
        except ImportError:
            raise RuntimeError("ember.distributed: the MPI engine needs mpi4py and MPICH "
                               "(pip install mpi4py mpich, or ember[distributed])") from None
        mpi4py.rc.threads = True
        mpi4py.rc.thread_level = "multiple"
        from mpi4py import MPI
        _MPI = MPI
        atexit.register(_at_exit)
    return _MPI


def _at_exit() -> None:
    """A world with a failed collective cannot finalize (MPI_Finalize would wait on peers):
    abort it instead."""
    if broken and _MPI is not None and _MPI.Is_initialized() and not _MPI.Is_finalized():
        sys.stdout.flush()
        sys.stderr.flush()
        _MPI.COMM_WORLD.Abort(1)


ABORT_KEY = "ember/abort"


def abort_world(store, reason: str | None = None) -> None:
    """Mark the world broken (so that exit aborts instead of finalizing) and, with a
    ``reason``, tell the other ranks through ``store`` (their waits poll it)."""
    global broken
    broken = True
    if store is not None and reason is not None:
        try:
            store.compare_set(ABORT_KEY, "", reason)  # the first reason stays
        except Exception:  # noqa: BLE001  (the store may be gone with its process)
            pass


def abort_reason(store, needs_rank0: bool = True) -> str | None:
    """Why the world was aborted, or None if it was not. A store that cannot be reached
    means that rank 0's process (its server) is gone: an abort for an operation that needs
    rank 0 (``needs_rank0``), and nothing to go by for one that does not (rank 0 may have
    finished normally; that operation's own timeout still applies)."""
    if store is None:
        return None
    try:
        if not store.check([ABORT_KEY]):
            return None
        return store.get(ABORT_KEY).decode()
    except Exception:  # noqa: BLE001  (the store's server process is gone)
        if not needs_rank0:
            return None
        return "the rendezvous store is unreachable (rank 0's process has exited)"


def install_excepthook(store, rank: int) -> None:
    """An exception that ends this rank aborts the world (the other ranks' waits raise)."""
    previous = sys.excepthook

    def hook(tp, value, tb):
        previous(tp, value, tb)
        abort_world(store, f"rank {rank} failed with {tp.__name__}: {value}")
    sys.excepthook = hook


def form_world(rank: int, world_size: int, store, timeout: float):
    """An intracommunicator of ``world_size`` processes in which this process has ``rank``."""
    if under_process_manager():
        MPI = mpi()
        world = MPI.COMM_WORLD
        if world.size == world_size:
            if world.rank != rank:
                raise RuntimeError(f"ember.distributed: rank {rank} was asked for, but mpiexec "
                                   f"started this process as rank {world.rank} of "
                                   f"{world.size}")
            return world.Dup()
        if world.size != 1:
            raise RuntimeError(f"ember.distributed: mpiexec started {world.size} processes "
                               f"but world_size is {world_size}")
    else:
        MPI = mpi(borrow=world_size > 1, timeout=timeout)
    if world_size == 1:
        return MPI.COMM_SELF.Dup()
    return _join(MPI, rank, world_size, store, timeout)


def _join(MPI, rank: int, world_size: int, store, timeout: float):
    """Join one-process jobs into one intracommunicator through a port named in ``store``."""
    if rank == 0:
        port = MPI.Open_port()
        store.set("mpi/port", port)
        comm = MPI.COMM_SELF
    else:
        store.wait(["mpi/port", f"mpi/joined/{rank - 1}"], timeout)
        port = store.get("mpi/port").decode()
        store.set(f"mpi/connect/{rank}", "1")
        inter = MPI.COMM_SELF.Connect(port)
        comm = inter.Merge(True)
        inter.Free()
    store.set(f"mpi/joined/{rank}", "1")
    for k in range(rank + 1, world_size):
        store.wait([f"mpi/connect/{k}"], timeout)
        inter = comm.Accept(port, root=0)
        merged = inter.Merge(False)
        inter.Free()
        if comm is not MPI.COMM_SELF:
            comm.Free()
        comm = merged
    if rank == 0:
        MPI.Close_port(port)
    comm.Barrier()  # every rank is done with the store (rank 0's process serves it)
    if comm.rank != rank or comm.size != world_size:
        raise RuntimeError(f"ember.distributed: joining the MPI world gave rank {comm.rank} of "
                           f"{comm.size}, expected {rank} of {world_size}")
    return comm
