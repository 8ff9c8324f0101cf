"""Collectives and point-to-point operations on CPU tensors over the MPI engine.

Each operation works on the tensor's numpy array in place (no copy when it is contiguous; a
non-contiguous tensor is gathered into a contiguous copy and written back when the operation
completes, as PyTorch's gloo does), is issued as a non-blocking MPI request, and returns a
``Work`` when ``async_op=True``, else waits for it (polled against the group's timeout). Data
that is only moved (broadcast, gathers, scatters, all-to-all, send/recv) travels as bytes,
whatever the dtype; reductions upcast bfloat16/float16 to float32 (``work.py``).
"""

from __future__ import annotations

import warnings

import numpy as np

from .._tensor import Tensor, _wrap
from . import _engine
from .process_group import GroupMember, resolve
from .work import (ReduceOp, Work, check_reduce_op, done_work, finish_reduction,
                   gloo_order_reduce, mpi_op, work_array)


# ---------------------------------------------------------------------- helpers
def _check_tensor(t, name: str = "tensor") -> np.ndarray:
    if not isinstance(t, Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"torch.Tensor but got {type(t)} instead.")
    if t._backend.name != "cpu":
        raise RuntimeError(f"ember.distributed: {t.device} tensors need the NCCL engine, which "
                           "is not built yet; the MPI engine takes CPU tensors")
    return t._data


def _check_list(ts, name: str) -> list:
    if not isinstance(ts, (list, tuple)) or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        "List[torch.Tensor] but got " + str(type(ts)) + " instead.")
    return [_check_tensor(t, name) for t in ts]


def _group(group, op_name: str):
    """The group, or None when this rank is not in it (the operation is then skipped)."""
    if group is GroupMember.NON_GROUP_MEMBER:
        warnings.warn(f"Running {op_name} on a rank which does not belong to the given group.",
                      stacklevel=3)
        return None
    return resolve(group)


def _displacements(counts) -> np.ndarray:
    """Where each rank's block starts in a buffer of blocks of ``counts`` (int64)."""
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def _bytes(a: np.ndarray) -> np.ndarray:
    """A contiguous array's bytes as a flat uint8 view."""
    return a.reshape(-1).view(np.uint8)


def _contig(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _writer(t: Tensor, a: np.ndarray):
    """(a contiguous array to receive into, finish() that writes it into ``t``)."""
    if a.flags.c_contiguous and a.flags.writeable:
        return a, t._bump
    buf = np.empty(a.shape, a.dtype)

    def finish():
        a[...] = buf
        t._bump()
    return buf, finish


def _issue(pg, name, requests, finish, numel_in, numel_out, async_op, result=None,
           status=None):
    work = Work(pg, name, requests, finish, numel_in, numel_out, result, status)
    if async_op:
        return work
    work.wait()
    return None


def _group_rank(pg, rank, group_rank, what: str) -> int:
    """A root given as a global rank (``src``/``dst``) or a group rank (``group_src``...)."""
    if rank is not None and group_rank is not None:
        raise ValueError(f"Can not specify both {what} and group_{what}")
    if group_rank is not None:
        r = group_rank
    elif rank is None:
        r = 0
    elif pg._global_ranks == list(range(pg.size())):
        r = rank  # the world (or a group of its first ranks): global ranks are group ranks
    else:
        if rank not in pg._group_rank:
            raise ValueError(f"Global rank {rank} is not part of group {pg}")
        r = pg._group_rank[rank]
    if not 0 <= r < pg.size():
        raise RuntimeError(f"ProcessGroupGloo::{_GLOO_NAMES.get(what, what)}: invalid root "
                           f"rank: {r}")
    return r


_GLOO_NAMES = {"src": "broadcast", "dst": "reduce"}


def _shape(a: np.ndarray) -> str:
    return "(" + ", ".join(str(n) for n in a.shape) + ")"


# ---------------------------------------------------------------------- reductions
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` over the group's ranks in place (every rank gets the result)."""
    a = _check_tensor(tensor)
    pg = _group(group, "all_reduce")
    if pg is None:
        return None
    check_reduce_op(op, tensor.dtype)
    n = pg.size()
    if n > 2 and a.dtype.name in ("bfloat16", "float16") and \
            op in (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT):
        # rounded after each step, so the order matters: gather and reduce in gloo's order
        parts = np.empty((n, a.size), a.dtype)
        req = pg._comm.Iallgather(_bytes(_contig(a)), _bytes(parts))

        def finish_half():
            reduced = gloo_order_reduce(parts, op).reshape(a.shape)
            if op is ReduceOp.AVG:
                reduced = (reduced.astype(np.float32) / n).astype(a.dtype)
            a[...] = reduced
            tensor._bump()
        return _issue(pg, "ALLREDUCE", [req], finish_half, a.size, a.size, async_op, [tensor])
    MPI = _engine.mpi()
    w = work_array(a)
    req = pg._comm.Iallreduce(MPI.IN_PLACE, w, op=mpi_op(op, w.dtype))

    def finish():
        finish_reduction(w, a, op, pg.size())
        tensor._bump()
    return _issue(pg, "ALLREDUCE", [req], finish, a.size, a.size, async_op, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op: bool = False,
           group_dst=None):
    """Reduce ``tensor`` over the group into rank ``dst``'s tensor (the others keep theirs)."""
    a = _check_tensor(tensor)
    pg = _group(group, "reduce")
    if pg is None:
        return None
    check_reduce_op(op, tensor.dtype)
    root = _group_rank(pg, dst, group_dst, "dst")
    MPI = _engine.mpi()
    w = work_array(a)
    mop = mpi_op(op, w.dtype)
    if pg.rank() == root:
        req = pg._comm.Ireduce(MPI.IN_PLACE, w, op=mop, root=root)

        def finish():
            finish_reduction(w, a, op, pg.size())
            tensor._bump()
    else:
        req = pg._comm.Ireduce(w, None, op=mop, root=root)
        finish = None
    return _issue(pg, "REDUCE", [req], finish, a.size, a.size, async_op, [tensor])


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``input`` (the concatenation of one block per rank) over the group; rank i
    gets block i in ``output``."""
    out = _check_tensor(output, "output")
    inp = _check_tensor(input, "input")
    pg = _group(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    n = pg.size()
    if output.dtype is not input.dtype:
        raise RuntimeError("ProcessGroupGloo::reduce_scatter_tensor: output tensor must have "
                           "the same type as input tensor")
    if out.size * n != inp.size:
        raise RuntimeError(f"ProcessGroupGloo::reduce_scatter_tensor: input tensor must be the "
                           f"same size as output size times world size (input {_shape(inp)}, "
                           f"output {_shape(out)}, world size {n})")
    check_reduce_op(op, input.dtype)
    w_in = work_array(inp)
    w_out = np.empty(out.size, w_in.dtype)
    req = pg._comm.Ireduce_scatter_block(w_in.reshape(-1), w_out, op=mpi_op(op, w_in.dtype))

    def finish():
        finish_reduction(w_out.reshape(out.shape), out, op, n)
        output._bump()
    return _issue(pg, "REDUCE_SCATTER", [req], finish, inp.size, out.size, async_op, [output])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """``reduce_scatter_tensor`` with the input given as one tensor per rank."""
    arrays = _check_list(input_list, "input_list")
    pg = _group(group, "reduce_scatter")
    if pg is None:
        return None
    if len(arrays) != pg.size():
        raise ValueError(f"Argument ``input_list`` must have {pg.size()} tensors (one per "
                         f"rank), got {len(arrays)}")
    flat = np.concatenate([a.reshape(-1) for a in arrays])
    return reduce_scatter_tensor(output, _wrap(flat, input_list[0].dtype), op, group,
                                 async_op)


# ---------------------------------------------------------------------- data movement
def broadcast(tensor, src=None, group=None, async_op: bool = False, group_src=None):
    """Copy rank ``src``'s tensor into every rank's."""
    a = _check_tensor(tensor)
    pg = _group(group, "broadcast")
    if pg is None:
        return None
    root = _group_rank(pg, src, group_src, "src")
    if pg.rank() == root:
        buf, finish = _contig(a), None
    else:
        buf, finish = _writer(tensor, a)
    req = pg._comm.Ibcast(_bytes(buf), root=root)
    return _issue(pg, "BROADCAST", [req], finish, a.size, a.size, async_op, [tensor])


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op: bool = False):
    """Concatenate every rank's ``input_tensor`` (in rank order) into ``output_tensor``."""
    out = _check_tensor(output_tensor, "output_tensor")
    inp = _check_tensor(input_tensor, "input_tensor")
    pg = _group(group, "all_gather_into_tensor")
    if pg is None:
        return None
    n = pg.size()
    if output_tensor.dtype is not input_tensor.dtype:
        raise RuntimeError(f"ProcessGroupGloo::allgather: invalid tensor type at index 0 "
                           f"(expected dtype={input_tensor.dtype}, got "
                           f"dtype={output_tensor.dtype})")
    if out.size != inp.size * n:
        expect = (inp.shape[0] * n,) + inp.shape[1:] if inp.ndim else (n,)
        raise RuntimeError(f"ProcessGroupGloo::allgather: invalid tensor size at index 0 "
                           f"(expected ({', '.join(map(str, expect))}), got {_shape(out)})")
    buf, finish = _writer(output_tensor, out)
    req = pg._comm.Iallgather(_bytes(_contig(inp)), _bytes(buf))
    return _issue(pg, "ALLGATHER", [req], finish, inp.size, out.size, async_op,
                  [output_tensor])


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    """Every rank's ``tensor`` into ``tensor_list`` (one tensor per rank, in rank order)."""
    outs = _check_list(tensor_list, "tensor_list")
    a = _check_tensor(tensor)
    pg = _group(group, "all_gather")
    if pg is None:
        return None
    n = pg.size()
    if len(outs) != n:
        raise RuntimeError(f"ProcessGroupGloo::allgather: invalid output tensor list at index "
                           f"0 (expected length {n}, got {len(outs)})")
    for i, (t, o) in enumerate(zip(tensor_list, outs)):
        if t.dtype is not tensor.dtype:
            raise RuntimeError(f"ProcessGroupGloo::allgather: invalid tensor type at index {i} "
                               f"(expected dtype={tensor.dtype}, got dtype={t.dtype})")
        if o.shape != a.shape:
            raise RuntimeError(f"ProcessGroupGloo::allgather: invalid tensor size at index {i} "
                               f"(expected {_shape(a)}, got {_shape(o)})")
    buf = np.empty((n,) + a.shape, a.dtype)
    req = pg._comm.Iallgather(_bytes(_contig(a)), _bytes(buf))

    def finish():
        for i, t in enumerate(tensor_list):
            t._data[...] = buf[i]
            t._bump()
    return _issue(pg, "ALLGATHER", [req], finish, a.size, a.size * n, async_op,
                  list(tensor_list))


def gather(tensor, gather_list=None, dst=None, group=None, async_op: bool = False,
           group_dst=None):
    """Every rank's ``tensor`` into ``gather_list`` on rank ``dst``."""
    a = _check_tensor(tensor)
    pg = _group(group, "gather")
    if pg is None:
        return None
    root = _group_rank(pg, dst, group_dst, "dst")
    n = pg.size()
    if pg.rank() == root:
        if not gather_list:
            raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
        _check_list(gather_list, "gather_list")
        if len(gather_list) != n:
            raise RuntimeError(f"ProcessGroupGloo::gather: Incorrect output list size "
                               f"{len(gather_list)}. Output list size should be {n}, same as "
                               f"size of the process group.")
        buf = np.empty((n,) + a.shape, a.dtype)
        req = pg._comm.Igather(_bytes(_contig(a)), _bytes(buf), root=root)

        def finish():
            for i, t in enumerate(gather_list):
                t._data[...] = buf[i].reshape(t._data.shape)
                t._bump()
    else:
        if gather_list:
            raise ValueError("Argument ``gather_list`` must NOT be specified on "
                             "non-destination ranks.")
        req = pg._comm.Igather(_bytes(_contig(a)), None, root=root)
        finish = None
    return _issue(pg, "GATHER", [req], finish, a.size, a.size * n, async_op,
                  list(gather_list or []))


def scatter(tensor, scatter_list=None, src=None, group=None, async_op: bool = False,
            group_src=None):
    """Rank ``src``'s ``scatter_list[i]`` into rank i's ``tensor``."""
    a = _check_tensor(tensor)
    pg = _group(group, "scatter")
    if pg is None:
        return None
    root = _group_rank(pg, src, group_src, "src")
    n = pg.size()
    buf, finish = _writer(tensor, a)
    if pg.rank() == root:
        if not scatter_list:
            raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
        parts = _check_list(scatter_list, "scatter_list")
        if len(parts) != n:
            raise RuntimeError(f"ProcessGroupGloo::scatter: Incorrect input list size "
                               f"{len(parts)}. Input list size should be {n}, same as size of "
                               f"the process group.")
        for p in parts:
            if p.shape != a.shape or p.dtype != a.dtype:
                raise RuntimeError("ProcessGroupGloo::scatter: invalid tensor size or type in "
                                   "scatter_list (every tensor must match the output tensor)")
        send = np.stack([_contig(p) for p in parts]) if parts else None
        req = pg._comm.Iscatter(_bytes(send), _bytes(buf), root=root)
    else:
        if scatter_list:
            raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source "
                             "ranks.")
        req = pg._comm.Iscatter(None, _bytes(buf), root=root)
    return _issue(pg, "SCATTER", [req], finish, a.size * n, a.size, async_op, [tensor])


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op: bool = False):
    """Split ``input`` along dim 0 (equally, or by ``input_split_sizes``) and send part i to
    rank i; ``output`` receives the parts from every rank in rank order."""
    out = _check_tensor(output, "output")
    inp = _check_tensor(input, "input")
    pg = _group(group, "all_to_all_single")
    if pg is None:
        return None
    n = pg.size()
    if output.dtype is not input.dtype:
        raise RuntimeError("ProcessGroupGloo::alltoall_base: output and input tensors must "
                           "have the same dtype")
    in_counts = _splits(inp, input_split_sizes, n, "input")
    out_counts = _splits(out, output_split_sizes, n, "output")
    buf, finish = _writer(output, out)
    src = _bytes(_contig(inp))
    dst = _bytes(buf)
    sdispl, rdispl = _displacements(in_counts), _displacements(out_counts)
    MPI = _engine.mpi()
    req = pg._comm.Ialltoallv([src, (list(in_counts), list(sdispl)), MPI.BYTE],
                              [dst, (list(out_counts), list(rdispl)), MPI.BYTE])
    return _issue(pg, "ALLTOALL_BASE", [req], finish, inp.size, out.size, async_op, [output])


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op: bool = False):
    """Send ``input_tensor_list[i]`` to rank i; ``output_tensor_list[j]`` receives rank j's."""
    outs = _check_list(output_tensor_list, "output_tensor_list")
    ins = _check_list(input_tensor_list, "input_tensor_list")
    pg = _group(group, "all_to_all")
    if pg is None:
        return None
    n = pg.size()
    if len(outs) != n or len(ins) != n:
        raise RuntimeError(f"ProcessGroupGloo::alltoall: the tensor lists must have one tensor "
                           f"per rank ({n}), got {len(outs)} outputs and {len(ins)} inputs")
    send = np.concatenate([_bytes(_contig(a)) for a in ins]) if ins else np.empty(0, np.uint8)
    recv = np.empty(sum(a.nbytes for a in outs), np.uint8)
    scounts = [a.nbytes for a in ins]
    rcounts = [a.nbytes for a in outs]
    sdispl = [sum(scounts[:k]) for k in range(n)]
    rdispl = [sum(rcounts[:k]) for k in range(n)]
    MPI = _engine.mpi()
    req = pg._comm.Ialltoallv([send, (scounts, sdispl), MPI.BYTE],
                              [recv, (rcounts, rdispl), MPI.BYTE])

    def finish():
        for t, a, start, count in zip(output_tensor_list, outs, rdispl, rcounts):
            a[...] = recv[start:start + count].view(a.dtype).reshape(a.shape)
            t._bump()
    return _issue(pg, "ALLTOALL", [req], finish, sum(a.size for a in ins),
                  sum(a.size for a in outs), async_op, list(output_tensor_list))


def _splits(a: np.ndarray, sizes, n: int, what: str) -> list:
    """Byte counts of the parts of ``a`` along dim 0."""
    rows = a.shape[0] if a.ndim else 1
    row_bytes = (a.size // rows if rows else 0) * a.itemsize
    if sizes is None or len(sizes) == 0:
        if rows % n:
            raise RuntimeError(f"Tensor's dim 0 does not divide equally across group size "
                               f"({rows} rows, {n} ranks)")
        return [rows // n * row_bytes] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n:
        raise RuntimeError(f"Number of tensor splits not equal to group size ({what} has "
                           f"{len(sizes)} splits, the group {n} ranks)")
    if sum(sizes) != rows or any(s < 0 for s in sizes):
        raise RuntimeError(f"Split sizes doesn't match total dim 0 size ({what}: splits "
                           f"{sizes}, dim 0 {rows})")
    return [s * row_bytes for s in sizes]


def barrier(group=None, async_op: bool = False, device_ids=None):
    """Wait until every rank of the group has reached the barrier."""
    pg = _group(group, "barrier")
    if pg is None:
        return None
    req = pg._comm.Ibarrier()
    return _issue(pg, "BARRIER", [req], None, 0, 0, async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks: bool = False):
    pg = _group(group, "monitored_barrier")
    if pg is None:
        return None
    work = Work(pg, "BARRIER", [pg._comm.Ibarrier()])
    work.wait(timeout)


__all__ = ["all_reduce", "reduce", "reduce_scatter_tensor", "reduce_scatter", "broadcast",
           "all_to_all",
           "all_gather_into_tensor", "all_gather", "gather", "scatter", "all_to_all_single",
           "barrier", "monitored_barrier", "done_work"]
