"""Point-to-point operations (send/recv/isend/irecv, ``P2POp`` and ``batch_isend_irecv``) and
the object collectives (``all_gather_object``, ``broadcast_object_list``, ``gather_object``),
which pickle Python objects as PyTorch does."""

from __future__ import annotations

import pickle

import numpy as np

from . import _engine
from .collectives import (_bytes, _check_tensor, _contig, _displacements, _group, _issue,
                          _writer)
from .work import Work


def _peer(pg, rank, group_rank, what: str) -> int:
    if rank is not None and group_rank is not None:
        raise ValueError(f"Can not specify both {what} and group_{what}")
    if group_rank is not None:
        r = group_rank
    else:
        if rank is None:
            raise ValueError(f"Must specify either {what} or group_{what}")
        if rank not in pg._group_rank:
            raise ValueError(f"Global rank {rank} is not part of group {pg}")
        r = pg._group_rank[rank]
    if r == pg.rank():
        kind = "destination" if what == "dst" else "source"
        raise ValueError(f"Invalid {kind} rank: should not be the same as rank of the current "
                         f"process.")
    return r


def _isend(tensor, dst, group, tag, group_dst) -> Work | None:
    a = _check_tensor(tensor)
    pg = _group(group, "isend")
    if pg is None:
        return None
    peer = _peer(pg, dst, group_dst, "dst")
    buf = _contig(a)
    req = pg._comm.Isend(_bytes(buf), dest=peer, tag=tag)
    return Work(pg, "SEND", [req], None, a.size, a.size, [tensor])


def _irecv(tensor, src, group, tag, group_src) -> Work | None:
    a = _check_tensor(tensor)
    pg = _group(group, "irecv")
    if pg is None:
        return None
    MPI = _engine.mpi()
    peer = MPI.ANY_SOURCE if src is None and group_src is None else \
        _peer(pg, src, group_src, "src")
    buf, finish = _writer(tensor, a)
    status = MPI.Status()
    req = pg._comm.Irecv(_bytes(buf), source=peer, tag=tag)
    return Work(pg, "RECV", [req], finish, a.size, a.size, [tensor], status)


def isend(tensor, dst=None, group=None, tag: int = 0, group_dst=None):
    """Send ``tensor`` to rank ``dst`` without waiting: returns a Work."""
    return _isend(tensor, dst, group, tag, group_dst)


def irecv(tensor, src=None, group=None, tag: int = 0, group_src=None):
    """Receive into ``tensor`` from rank ``src`` (any rank when None) without waiting."""
    return _irecv(tensor, src, group, tag, group_src)


def send(tensor, dst=None, group=None, tag: int = 0, group_dst=None) -> None:
    work = _isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor, src=None, group=None, tag: int = 0, group_src=None) -> int:
    """Receive into ``tensor``; returns the sender's rank (-1 if not in the group)."""
    work = _irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1
    work.wait()
    return work.source_rank()


class P2POp:
    """One point-to-point operation for ``batch_isend_irecv``: ``op`` is ``isend`` or
    ``irecv``."""

    def __init__(self, op, tensor, peer=None, group=None, tag: int = 0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type "
                             "``torch.distributed.isend`` or ``torch.distributed.irecv``.")
        _check_tensor(tensor)
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag
        self.group_peer = group_peer

    def __repr__(self):
        return f"P2POp(op={self.op.__name__}, peer={self.peer}, tag={self.tag})"


def batch_isend_irecv(p2p_op_list) -> list:
    """Issue every operation of the list; returns their Works."""
    if not isinstance(p2p_op_list, list) or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``torch.distributed.P2POp``.")
    if not p2p_op_list:
        raise ValueError("Invalid ``p2p_op_list``: it is empty")
    works = []
    for p in p2p_op_list:
        works.append(p.op(p.tensor, p.peer, p.group, p.tag, p.group_peer))
    return [w for w in works if w is not None]


# ---------------------------------------------------------------------- objects
def _pickled(obj) -> np.ndarray:
    return np.frombuffer(pickle.dumps(obj), np.uint8)


def all_gather_object(object_list, obj, group=None) -> None:
    """Every rank's picklable ``obj`` into ``object_list`` (one entry per rank)."""
    pg = _group(group, "all_gather_object")
    if pg is None:
        return
    n = pg.size()
    if len(object_list) != n:
        raise RuntimeError(f"all_gather_object: object_list must have {n} entries (the group "
                           f"size), got {len(object_list)}")
    data = _pickled(obj)
    sizes = np.zeros(n, np.int64)
    MPI = _engine.mpi()
    _issue(pg, "ALLGATHER", [pg._comm.Iallgather(np.array([data.size], np.int64), sizes)],
           None, 1, n, False)
    buf = np.empty(int(sizes.sum()), np.uint8)
    displs = _displacements(sizes)
    req = pg._comm.Iallgatherv(data, [buf, (list(sizes), list(displs)), MPI.BYTE])
    _issue(pg, "ALLGATHER", [req], None, data.size, buf.size, False)
    for i in range(n):
        object_list[i] = pickle.loads(buf[displs[i]:displs[i] + sizes[i]].tobytes())


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None) -> None:
    """Every rank's ``obj`` into ``object_gather_list`` on rank ``dst``."""
    from .collectives import _group_rank
    pg = _group(group, "gather_object")
    if pg is None:
        return
    root = _group_rank(pg, dst, group_dst, "dst")
    n = pg.size()
    if pg.rank() == root and (object_gather_list is None or len(object_gather_list) != n):
        raise ValueError(f"Argument ``object_gather_list`` must be specified on destination "
                         f"rank with {n} entries")
    data = _pickled(obj)
    sizes = np.zeros(n, np.int64)
    MPI = _engine.mpi()
    _issue(pg, "GATHER", [pg._comm.Iallgather(np.array([data.size], np.int64), sizes)],
           None, 1, n, False)
    displs = _displacements(sizes)
    if pg.rank() == root:
        buf = np.empty(int(sizes.sum()), np.uint8)
        req = pg._comm.Igatherv(data, [buf, (list(sizes), list(displs)), MPI.BYTE], root=root)
    else:
        buf = None
        req = pg._comm.Igatherv(data, None, root=root)
    _issue(pg, "GATHER", [req], None, data.size, int(sizes.sum()), False)
    if pg.rank() == root:
        for i in range(n):
            object_gather_list[i] = pickle.loads(buf[displs[i]:displs[i] + sizes[i]].tobytes())


def broadcast_object_list(object_list, src=None, group=None, device=None,
                          group_src=None) -> None:
    """Rank ``src``'s ``object_list`` entries into every rank's ``object_list`` in place."""
    from .collectives import _group_rank
    pg = _group(group, "broadcast_object_list")
    if pg is None:
        return
    root = _group_rank(pg, src, group_src, "src")
    k = len(object_list)
    if pg.rank() == root:
        parts = [_pickled(o) for o in object_list]
        sizes = np.array([p.size for p in parts], np.int64)
    else:
        sizes = np.zeros(k, np.int64)
    _issue(pg, "BROADCAST", [pg._comm.Ibcast(sizes, root=root)], None, k, k, False)
    if pg.rank() == root:
        buf = np.concatenate(parts) if parts else np.empty(0, np.uint8)
    else:
        buf = np.empty(int(sizes.sum()), np.uint8)
    _issue(pg, "BROADCAST", [pg._comm.Ibcast(buf, root=root)], None, buf.size, buf.size, False)
    if pg.rank() != root:
        offset = 0
        for i in range(k):
            object_list[i] = pickle.loads(buf[offset:offset + sizes[i]].tobytes())
            offset += int(sizes[i])


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None) -> None:
    """Rank ``src``'s ``scatter_object_input_list[i]`` into rank i's
    ``scatter_object_output_list[0]``."""
    from .collectives import _group_rank
    pg = _group(group, "scatter_object_list")
    if pg is None:
        return
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size "
                         "at least 1.")
    root = _group_rank(pg, src, group_src, "src")
    n = pg.size()
    MPI = _engine.mpi()
    size = np.zeros(1, np.int64)
    if pg.rank() == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != n:
            raise ValueError(f"Argument ``scatter_object_input_list`` must have {n} entries on "
                             f"the source rank")
        parts = [_pickled(o) for o in scatter_object_input_list]
        sizes = np.array([p.size for p in parts], np.int64)
        req = pg._comm.Iscatter(sizes, size, root=root)
    else:
        req = pg._comm.Iscatter(None, size, root=root)
    _issue(pg, "SCATTER", [req], None, n, 1, False)
    buf = np.empty(int(size[0]), np.uint8)
    if pg.rank() == root:
        send = np.concatenate(parts) if parts else np.empty(0, np.uint8)
        displs = [int(sum(sizes[:k])) for k in range(n)]
        req = pg._comm.Iscatterv([send, (list(sizes), displs), MPI.BYTE], buf, root=root)
    else:
        req = pg._comm.Iscatterv(None, buf, root=root)
    _issue(pg, "SCATTER", [req], None, buf.size, buf.size, False)
    scatter_object_output_list[0] = pickle.loads(buf.tobytes())
