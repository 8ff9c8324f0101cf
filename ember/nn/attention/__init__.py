"""``ember.nn.attention``: which kernel ``scaled_dot_product_attention`` runs (PyTorch's
``torch.nn.attention``).

``sdpa_kernel(backends)`` selects for the calling thread only (a context variable in
``ember.backends.cuda``), where PyTorch flips process-wide flags; inside it
``ember.backends.cuda.flash_sdp_enabled()`` and friends report the selection. On CUDA the three
fused backends all name ember's one flash kernel (ember/ops/attention.py says which calls it
takes); MATH is the composed reference path.

FlexAttention (``flex_attention``, ``BlockMask``, ``create_block_mask``, ...) is the submodule
``ember.nn.attention.flex_attention``, imported on first use as PyTorch's is.
"""

from __future__ import annotations

import contextlib
import enum

from ...backends import cuda as _cuda

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.Enum):
    """The backends of scaled dot product attention (``int(backend)`` is PyTorch's number)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __int__(self) -> int:
        return self.value


_NAMES = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
          SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
          SDPBackend.CUDNN_ATTENTION: "cudnn", SDPBackend.OVERRIDEABLE: "overrideable"}
_BACKENDS = {name: b for b, name in _NAMES.items()}


@contextlib.contextmanager
def sdpa_kernel(backends: list[SDPBackend] | SDPBackend, set_priority: bool = False):
    """``with sdpa_kernel(SDPBackend.FLASH_ATTENTION):`` scaled_dot_product_attention on this
    thread uses only the listed backends (with ``set_priority``, preferred in the list's
    order); the previous selection returns on exit."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of SDPBackend "
                             f"instances, got {type(backends).__name__}")
    if isinstance(backends, SDPBackend):
        backends = [backends]
    names = [_NAMES[b] for b in dict.fromkeys(backends) if b in _NAMES]
    priority = None
    if set_priority:
        _, current = _cuda.sdp_selection()
        priority = tuple(names) + tuple(n for n in current if n not in names)
    token = _cuda.select_sdp(names, priority)
    try:
        yield {}
    finally:
        _cuda.reset_sdp(token)


def _cur_sdpa_kernel_backends(with_priority: bool = False) -> list[SDPBackend]:
    """The enabled backends of this thread (in priority order with ``with_priority``)."""
    enabled, priority = _cuda.sdp_selection()
    order = priority if with_priority else tuple(_NAMES.values())
    return [_BACKENDS[n] for n in order if n in enabled]
