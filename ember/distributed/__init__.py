"""``ember.distributed``: process groups, collectives and DistributedDataParallel (PyTorch's
``torch.distributed`` API) for CPU tensors, on MPI (mpi4py over MPICH).

Layout: ``store.py`` (TCPStore, FileStore: rendezvous), ``_engine.py`` (MPI: start-up and how
ranks form one world), ``process_group.py`` (init_process_group, groups), ``work.py`` (Work,
ReduceOp, reductions), ``collectives.py`` and ``p2p.py`` (the operations), ``ddp.py``
(DistributedDataParallel, bound to ``ember.nn.parallel``), ``run.py`` (the launcher:
``python -m ember.distributed.run``). Importing this package does not import mpi4py; the first
``init_process_group`` does.

Not built yet: the NCCL engine (CUDA tensors), DeviceMesh, DTensor, FSDP2, distributed
checkpoint.
"""

from __future__ import annotations

from .collectives import (all_gather, all_gather_into_tensor, all_reduce, all_to_all,
                          all_to_all_single,
                          barrier, broadcast, gather, monitored_barrier, reduce, reduce_scatter,
                          reduce_scatter_tensor, scatter)
from ..utils.data import distributed as _sampler_module
from .ddp import DistributedDataParallel
from .errors import DistBackendError, DistError, DistNetworkError, DistStoreError
from .p2p import (P2POp, all_gather_object, batch_isend_irecv, broadcast_object_list,
                  gather_object, irecv, isend, recv, scatter_object_list, send)
from .process_group import (Backend, GroupMember, ProcessGroup, default_pg_timeout,
                            destroy_process_group, get_backend, get_default_store,
                            get_global_rank, get_group_rank, get_process_group_ranks, get_rank,
                            get_world_size, group, init_process_group, is_available,
                            is_gloo_available, is_initialized, is_mpi_available,
                            is_nccl_available, is_torchelastic_launched, new_group)
from .store import FileStore, PrefixStore, Store, TCPStore
from .work import ReduceOp, Work

def _group_info():
    return get_world_size(), get_rank()


_sampler_module.group_info = _group_info

# PyTorch's deprecated names
_all_gather_base = all_gather_into_tensor
_reduce_scatter_base = reduce_scatter_tensor

__all__ = [
    "Backend", "DistBackendError", "DistError", "DistNetworkError", "DistStoreError",
    "DistributedDataParallel", "FileStore", "GroupMember", "P2POp", "PrefixStore",
    "ProcessGroup", "ReduceOp", "Store", "TCPStore", "Work", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all", "all_to_all_single",
    "barrier",
    "batch_isend_irecv", "broadcast", "broadcast_object_list", "default_pg_timeout",
    "destroy_process_group", "gather", "gather_object", "get_backend", "get_default_store",
    "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank",
    "get_world_size", "group", "init_process_group", "irecv", "is_available",
    "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available",
    "is_torchelastic_launched", "isend", "monitored_barrier", "new_group", "recv", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "scatter", "scatter_object_list", "send",
]
