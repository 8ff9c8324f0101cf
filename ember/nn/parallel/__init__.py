"""``ember.nn.parallel``: ``DataParallel`` (one process, several devices) and
``DistributedDataParallel`` (one process per device), which ``ember.distributed`` defines and
binds here (``import ember`` imports it: a higher layer registers into a lower one)."""

from __future__ import annotations

from ..modules.module import Module


class DataParallel(Module):
    """``DataParallel(module, device_ids=None, output_device=None, dim=0)``: splits each batch
    over the CUDA devices and runs a replica of ``module`` on each. With no CUDA device (as
    here) it runs ``module`` itself, as PyTorch does; ``.module`` is the wrapped module and
    state_dict keys carry the ``module.`` prefix."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        self.module = module
        self.device_ids = []  # no CUDA device: nothing to replicate on
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

