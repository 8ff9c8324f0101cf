"""Gradient clipping by total norm or by value."""

from __future__ import annotations

import numpy as np

from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ...backends.cpu import quiet
from ...ops.linalg_norm import linalg_vector_norm


def _grads(tensors):
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    return [t for t in tensors if t is not None]


@quiet  # (an inf norm or gradient gives NaN and inf silently, as PyTorch)
def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """The norm of all the given tensors together, as if concatenated into one vector."""
    from ...ops.creation import tensor
    from ...ops.joining import stack
    from ...linalg import vector_norm
    ts = _grads(tensors)
    norm_type = float(norm_type)
    if not ts:
        return tensor(0.0)
    dt = ts[0].dtype
    if norm_type == 2.0 and dt.is_floating_point and dt.itemsize >= 4 and \
            all(t.dtype is dt and t._backend.name == "cpu" for t in ts):
        # the commonest call (a training step's clipping), without ~50 dispatches: each
        # norm is sqrt(sum(x * x)) in the gradients' dtype, exactly as vector_norm's kernel
        # computes it, and their norm is that kernel's
        norms = np.array([np.sqrt(np.add.reduce(np.multiply(d, d), axis=None))
                          for d in (t._data for t in ts)], dtype=dt.np)
        total = tensor(linalg_vector_norm.impl(np, norms, 2.0), dtype=dt)
    else:
        with no_grad():
            norms = [vector_norm(t, norm_type) for t in ts]
            total = vector_norm(stack(norms), norm_type)  # stack promotes, as torch's
    if error_if_nonfinite and not bool(total.isfinite()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable this "
                           "error and scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")
    return total


@quiet
def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None):
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    with no_grad():
        coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        as_dtype: dict = {}  # coef in each gradient dtype, converted once
        for g in grads:
            c = as_dtype.get(g.dtype)
            if c is None:
                c = as_dtype[g.dtype] = coef.to(g.dtype)
            backend = g._backend
            if g.grad_fn is None and g.dtype.is_floating_point and c._backend is backend and \
                    backend.writeable(g._data):
                # g.mul_(coef) without its dispatch (a training step clips ~50 gradients)
                backend.xp.multiply(g._data, c._data, out=g._data)
                g._bump()
            else:
                g.mul_(c)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale gradients in place so their total norm is at most ``max_norm``; returns the norm
    before clipping."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    import warnings
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    clip_value = float(clip_value)
    with no_grad():
        for p in params:
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
