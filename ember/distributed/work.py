"""``Work``: a collective or point-to-point operation in flight, as MPI requests polled
against the group's timeout, and the reduction arithmetic that MPI does not have natively
(bfloat16 and float16, AVG)."""

from __future__ import annotations

import enum
import sys
import time

import numpy as np

from . import _engine
from .errors import DistBackendError


_ABORT_CHECK_S = 0.25  # how often a waiting rank asks the store whether the world was aborted


class ReduceOp(enum.Enum):
    """The reductions of ``all_reduce``/``reduce``/``reduce_scatter_tensor``."""
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8

    def __repr__(self):
        return f"<RedOpType.{self.name}: {self.value}>"


ReduceOp.RedOpType = ReduceOp


class Work:
    """One operation in flight: ``wait()`` polls its MPI requests until they complete (then runs
    what finishes the operation: copies back, casts back, divides for AVG) or the group's
    timeout passes (then raises DistBackendError and marks the world for abort)."""

    def __init__(self, pg, op_name: str, requests, finish=None, numel_in: int = 0,
                 numel_out: int = 0, result=None, status=None):
        self._pg = pg
        self._op = op_name
        self._requests = list(requests)
        self._finish = finish
        self._numel = (numel_in, numel_out)
        self._result = result or []
        self._status = status
        self._statuses = None if status is None else [status]
        self._done = False
        self._error = None
        pg._seq += 1
        self._seq = pg._seq
        self._start = time.monotonic()

    def _complete(self) -> None:
        self._requests = []
        self._done = True
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()

    def is_completed(self) -> bool:
        if self._done or self._error is not None:
            return True
        MPI = _engine.mpi()
        if MPI.Request.Testall(self._requests, self._statuses):
            self._complete()
            return True
        return False

    def is_success(self) -> bool:
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def wait(self, timeout=None) -> bool:
        if self._done:
            return True
        if self._error is not None:
            raise self._error
        limit = self._pg.timeout.total_seconds() if timeout is None else (
            timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout))
        deadline = self._start + limit if timeout is None else time.monotonic() + limit
        MPI = _engine.mpi()
        testall = MPI.Request.Testall
        requests, statuses = self._requests, self._statuses
        spins = 0
        pause = 2e-5
        next_check = time.monotonic() + _ABORT_CHECK_S
        while not testall(requests, statuses):
            spins += 1
            if spins > 8:  # a sleeping back-off: an idle rank leaves the core to the others
                time.sleep(pause)
                pause = min(pause * 1.5, 1e-3)
            if spins % 64 == 0:
                now = time.monotonic()
                if now > deadline:
                    self._timed_out(limit)
                if now > next_check:
                    next_check = now + _ABORT_CHECK_S
                    self._check_abort()
        self._complete()
        return True

    def _check_abort(self) -> None:
        """Raise if another rank has aborted the world (it set the store's abort key, or its
        process, which served the store, is gone)."""
        reason = _engine.abort_reason(self._pg._store, 0 in self._pg._group_rank)
        if reason is None:
            return
        self._error = DistBackendError(
            f"[Rank {self._pg._global_rank}] {self._op} (SeqNum={self._seq}, "
            f"NumelIn={self._numel[0]}, NumelOut={self._numel[1]}) stopped: {reason}")
        _engine.abort_world(None)
        raise self._error

    def _timed_out(self, limit: float):
        ms = round((time.monotonic() - self._start) * 1000)
        self._error = DistBackendError(
            f"[Rank {self._pg._global_rank}] Watchdog caught collective operation timeout: "
            f"WorkMPI(SeqNum={self._seq}, OpType={self._op}, NumelIn={self._numel[0]}, "
            f"NumelOut={self._numel[1]}, Timeout(ms)={round(limit * 1000)}) ran for {ms} "
            f"milliseconds before timing out. The MPI world is aborted when this process "
            f"exits.")
        _engine.abort_world(self._pg._store, f"rank {self._pg._global_rank} timed out in "
                            f"{self._op}")
        print(str(self._error), file=sys.stderr, flush=True)
        raise self._error

    def result(self) -> list:
        self.wait()
        return self._result

    def source_rank(self) -> int:
        self.wait()
        if self._status is None:
            raise RuntimeError("source_rank() may only be called on a recv Work")
        return self._pg._global_ranks[self._status.Get_source()]

    def _source_rank(self) -> int:
        return self.source_rank()

    def synchronize(self) -> None:
        self.wait()

    def get_future(self):
        raise RuntimeError("ember.distributed: Work.get_future is not supported by the MPI "
                           "engine; call wait()")


def done_work(pg, op_name: str, result=None) -> Work:
    """A Work for an operation that completed when issued."""
    w = Work(pg, op_name, [], result=result)
    w._done = True
    return w


# ---------------------------------------------------------------------- reductions
_INTEGRAL_OPS = (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)


def check_reduce_op(op, dtype) -> None:
    """PyTorch's (gloo's) checks on a reduction and a tensor dtype."""
    if not isinstance(op, ReduceOp):
        raise TypeError(f"op must be a ReduceOp, got {type(op).__name__}")
    if op is ReduceOp.PREMUL_SUM:
        raise RuntimeError("Cannot use ReduceOp.PREMUL_SUM with Gloo")
    if op in _INTEGRAL_OPS and (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"Cannot use ReduceOp.{op.name} with non-integral dtype")
    if op is ReduceOp.AVG and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{dtype.name.capitalize() if dtype.name != 'bool' else 'Bool'}")


def mpi_op(op, np_dtype):
    """The MPI reduction for ``op`` on arrays of ``np_dtype`` (after ``work_dtype``)."""
    MPI = _engine.mpi()
    is_bool = np_dtype == np.bool_
    if op in (ReduceOp.SUM, ReduceOp.AVG):
        return MPI.LOR if is_bool else MPI.SUM
    if op is ReduceOp.PRODUCT:
        return MPI.LAND if is_bool else MPI.PROD
    if op is ReduceOp.MIN:
        return MPI.LAND if is_bool else MPI.MIN
    if op is ReduceOp.MAX:
        return MPI.LOR if is_bool else MPI.MAX
    if op is ReduceOp.BAND:
        return MPI.LAND if is_bool else MPI.BAND
    if op is ReduceOp.BOR:
        return MPI.LOR if is_bool else MPI.BOR
    return MPI.LXOR if is_bool else MPI.BXOR


_HALF = ("bfloat16", "float16")


def work_array(a: np.ndarray) -> np.ndarray:
    """The array an MPI reduction runs on: bfloat16/float16 upcast to float32 (MPI has no
    such types), anything else ``a`` itself (contiguous)."""
    if a.dtype.name in _HALF:
        return a.astype(np.float32)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def gloo_order_reduce(parts: np.ndarray, op) -> np.ndarray:
    """Reduce ``parts`` (one row per rank, a half type) as gloo's ring all-reduce does: the
    row is cut into one segment per rank; segment c is accumulated starting from rank c+1 and
    going round the ring to rank c, rounding to the half type after every step. (Checked
    element for element against PyTorch's gloo for 3 ranks; with 2 ranks any order gives the
    same numbers.)"""
    n, count = parts.shape
    dtype = parts.dtype
    seg = -(-count // n)
    out = np.empty(count, dtype)
    combine = np.multiply if op is ReduceOp.PRODUCT else np.add
    for c in range(n):
        lo, hi = c * seg, min(count, (c + 1) * seg)
        if lo >= hi:
            continue
        acc = parts[(c + 1) % n, lo:hi]
        for j in range(2, n + 1):
            nxt = parts[(c + j) % n, lo:hi]
            acc = combine(acc.astype(np.float32), nxt.astype(np.float32)).astype(dtype)
        out[lo:hi] = acc
    return out


def finish_reduction(work: np.ndarray, dest: np.ndarray, op, n: int) -> None:
    """Write a reduction's result ``work`` into ``dest``: cast back to a half type once (the
    sum of two values rounded once, as gloo adds two half values in float and rounds), and
    AVG divided by ``n`` after that rounding (gloo sums, then divides the tensor)."""
    if dest.dtype.name in _HALF:
        rounded = work.astype(dest.dtype)
        if op is ReduceOp.AVG:
            rounded = (rounded.astype(np.float32) / n).astype(dest.dtype)
        dest[...] = rounded
        return
    if op is ReduceOp.AVG:
        np.divide(work, n, out=work, casting="unsafe")
    if work is not dest:
        dest[...] = work
