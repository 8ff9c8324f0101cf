"""``ember.cpu.amp``: PyTorch's deprecated spelling of ``ember.amp`` for the CPU."""

from __future__ import annotations

import warnings

from .. import _dtype as D
from ..amp.autocast_mode import _DeviceAutocast
from ..amp.grad_scaler import GradScaler as _GradScaler


class autocast(_DeviceAutocast):
    """``ember.cpu.amp.autocast(enabled=True, dtype=ember.bfloat16, cache_enabled=True)``:
    ``ember.autocast("cpu", ...)``, with PyTorch's deprecation warning."""

    _device = "cpu"
    _default = D.bfloat16


class GradScaler(_GradScaler):
    """``ember.cpu.amp.GradScaler(...)``: ``ember.amp.GradScaler("cpu", ...)``, with PyTorch's
    deprecation warning."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        warnings.warn("`torch.cpu.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)
