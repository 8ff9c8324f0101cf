"""Small pieces the optimizers added for real-program parity share: PyTorch's scalar-state dtype,
its learning-rate check, complex parameters seen as real pairs, and old-checkpoint upgrades."""

from __future__ import annotations

from .. import _dtype as D
from .._tensor import Tensor
from ..ops.creation import tensor, zeros
from .optimizer import Optimizer


def scalar_dtype():
    """The dtype PyTorch keeps scalar state in (``step``, ASGD's ``eta``/``mu``): float64 when
    the default dtype is float64, else float32."""
    return D.float64 if D.get_default_dtype() is D.float64 else D.float32


def zero_step() -> Tensor:
    return zeros((), dtype=scalar_dtype())


def check_lr(lr, message: str = "Invalid learning rate: {}") -> None:
    """A tensor lr must hold one element; any lr must be >= 0 (ValueError, PyTorch's words)."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(message.format(lr))


def scalar_or_tensor(x):
    """A hyperparameter as PyTorch's optimizers read it: a Python number as is, a 1-element
    tensor as a 0-dim tensor (so arithmetic with it keeps the tensor's dtype)."""
    return x.reshape(()) if isinstance(x, Tensor) and x.dim() != 0 else x


def as_real(*tensors):
    """Complex tensors as views of (real, imaginary) pairs; real tensors unchanged."""
    from ..ops.complex import view_as_real
    return tuple(view_as_real(t) if t.is_complex() else t for t in tensors)


def upgrade_state(opt: Optimizer, flags: dict, scalars=("step",)) -> None:
    """After ``__setstate__``: fill group flags an older checkpoint lacks and turn Python-number
    scalar state (written by old PyTorch versions) into tensors, as PyTorch's optimizers do."""
    for group in opt.param_groups:
        for k, v in flags.items():
            group.setdefault(k, v)
        for p in group["params"]:
            state = opt.state.get(p)
            if not state:
                continue
            for key in scalars:
                if key in state and not isinstance(state[key], Tensor):
                    state[key] = tensor(float(state[key]), dtype=scalar_dtype())
