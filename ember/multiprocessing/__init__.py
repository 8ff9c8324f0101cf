"""``ember.multiprocessing``: Python's ``multiprocessing`` with tensors that share memory.

Everything ``multiprocessing`` offers is re-exported, plus PyTorch's ``spawn`` /
``start_processes`` and the sharing-strategy settings. A tensor whose storage is in shared
memory (``Tensor.share_memory_``, ``Module.share_memory``, or one received from another process)
travels through queues, pipes and process arguments as a handle to the same memory; any other
tensor is copied. The reducer that does this is registered with ``ForkingPickler`` by
``ember.serialization``; the memory itself is ``ember/backends/cpu_shared.py``.
"""

import multiprocessing
import sys
from multiprocessing import *

from .. import serialization  # noqa: F401  (registers the tensor reducer)
from .spawn import (
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    SpawnContext,
    spawn,
    start_processes,
)

__all__ = [
    "ProcessContext",
    "ProcessException",
    "ProcessExitedException",
    "ProcessRaisedException",
    "SpawnContext",
    "get_all_sharing_strategies",
    "get_sharing_strategy",
    "set_sharing_strategy",
    "spawn",
    "start_processes",
]
__all__ += multiprocessing.__all__

# PyTorch's names. ember has one transport for both: a memfd block whose descriptor is passed
# to the receiver (``file_descriptor``'s mechanism). ``file_system`` exists in PyTorch to avoid
# running out of descriptors; ember keeps one descriptor per shared storage in each process
# that maps it, whichever name is set, and never leaves files behind in /dev/shm.
if sys.platform in ("darwin", "win32"):
    _all_sharing_strategies = {"file_system"}
    _sharing_strategy = "file_system"
else:
    _all_sharing_strategies = {"file_descriptor", "file_system"}
    _sharing_strategy = "file_descriptor"


def set_sharing_strategy(new_strategy: str) -> None:
    """Set the strategy for sharing CPU tensors (one of ``get_all_sharing_strategies()``)."""
    global _sharing_strategy
    if new_strategy not in _all_sharing_strategies:
        raise AssertionError(f"invalid sharing strategy {new_strategy!r}, "
                             f"expected one of {_all_sharing_strategies}")
    _sharing_strategy = new_strategy


def get_sharing_strategy() -> str:
    """The current strategy for sharing CPU tensors."""
    return _sharing_strategy


def get_all_sharing_strategies() -> set:
    """The strategies this system supports."""
    return _all_sharing_strategies
