"""``ember.distributed``: process groups and collectives (PyTorch's c10d API).

ember has no process-group engine yet (gloo on MPI, NCCL: the distributed-training issue
brings them). Until then this module answers as a process that never called
``init_process_group``: ``is_available()`` is False (no backend can be initialised here),
``is_initialized()`` False, ``init_process_group`` raises a RuntimeError saying so, and every
call that needs a default group raises PyTorch's ValueError for a missing one. Programs that
check before they go distributed run single-process, unchanged.
"""

from __future__ import annotations

import enum
import os

from ..nn import parallel as _parallel
from ..nn.modules.module import Module

_NO_ENGINE = ("ember.distributed: process groups are not available in this version of ember "
              "(no gloo, MPI or NCCL engine yet); run single-process, or check "
              "ember.distributed.is_available() first")
_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                    "init_process_group.")


class ReduceOp(enum.Enum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class group:
    WORLD = None


def is_available() -> bool:
    """Whether process groups can be created: not in this version of ember."""
    return False


def is_initialized() -> bool:
    return False


def is_gloo_available() -> bool:
    return False


def is_nccl_available() -> bool:
    return False


def is_mpi_available() -> bool:
    return False


def is_torchelastic_launched() -> bool:
    """Whether a torchrun-style elastic launcher started this process."""
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None) -> None:
    raise RuntimeError(_NO_ENGINE)


def _needs_group(*args, **kwargs):
    raise ValueError(_NOT_INITIALIZED)


get_rank = get_world_size = get_backend = barrier = destroy_process_group = _needs_group
all_reduce = broadcast = all_gather = all_gather_into_tensor = reduce_scatter_tensor = \
    _needs_group
reduce = gather = scatter = all_to_all_single = send = recv = isend = irecv = _needs_group
all_gather_object = broadcast_object_list = new_group = _needs_group


class DistributedDataParallel(Module):
    """``DistributedDataParallel(module, device_ids=None, ...)``: the module's gradients
    all-reduced across the ranks of a process group. It needs an initialised default group,
    which this version of ember cannot make (see the module docstring)."""

    def __init__(self, module: Module, *args, **kwargs):
        raise ValueError(_NOT_INITIALIZED)


_parallel.DistributedDataParallel = DistributedDataParallel
