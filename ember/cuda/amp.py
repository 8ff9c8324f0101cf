"""``ember.cuda.amp``: PyTorch's deprecated spelling of ``ember.amp`` for CUDA."""

from __future__ import annotations

import warnings

from .. import _dtype as D
from ..amp.autocast_mode import _DeviceAutocast
from ..amp.autocast_mode import custom_bwd as _custom_bwd
from ..amp.autocast_mode import custom_fwd as _custom_fwd
from ..amp.grad_scaler import GradScaler as _GradScaler


class GradScaler(_GradScaler):
    """``ember.cuda.amp.GradScaler(...)``: ``ember.amp.GradScaler("cuda", ...)``, with
    PyTorch's deprecation warning."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


class autocast(_DeviceAutocast):
    """``ember.cuda.amp.autocast(enabled=True, dtype=ember.float16, cache_enabled=True)``:
    ``ember.autocast("cuda", ...)``, with PyTorch's deprecation warning."""

    _device = "cuda"
    _default = D.float16


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``ember.amp.custom_fwd(..., device_type="cuda")``, with PyTorch's deprecation warning."""
    warnings.warn("`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.", FutureWarning,
                  stacklevel=2)
    return _custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """``ember.amp.custom_bwd(..., device_type="cuda")``, with PyTorch's deprecation warning."""
    warnings.warn("`torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_bwd(args..., device_type='cuda')` instead.", FutureWarning,
                  stacklevel=2)
    return _custom_bwd(bwd, device_type="cuda")
