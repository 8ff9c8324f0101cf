"""The Fourier helpers of ``ember.fft``: the sample frequencies (``fftfreq``, ``rfftfreq``)
and the shifts that move the zero frequency to the middle (``fftshift``, ``ifftshift``)."""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._device import check_device
from .._tensor import Tensor
from ..backends.xp_ops import convert
from .fft import PLAIN, ints_arg, wrap
from .registry import op

CONSTRUCTOR = ("factory", "default_device")


def _shifts(fname: str, input, dim, inverse: bool):
    dims = ints_arg(fname, "dim", dim)
    nd = input.ndim
    dims = tuple(range(nd)) if dims is None else tuple(wrap(d, nd) for d in dims)
    if not dims:
        raise RuntimeError("`shifts` required")
    shifts = [(input.shape[d] + 1) // 2 if inverse else input.shape[d] // 2 for d in dims]
    return shifts, dims


@op(**PLAIN, out=False, grad_name="RollBackward0")
def fft_fftshift(xp, input: "Tensor", dim=None):
    """fft.fftshift(input, dim=None): each of ``dim`` (all dims by default) rolled by half
    its size, so that the zero frequency sits in the middle."""
    shifts, dims = _shifts("fft_fftshift", input, dim, False)
    return xp.roll(input, shifts, dims)


@op(**PLAIN, out=False, grad_name="RollBackward0")
def fft_ifftshift(xp, input: "Tensor", dim=None):
    """fft.ifftshift(input, dim=None): the inverse of ``fftshift``."""
    shifts, dims = _shifts("fft_ifftshift", input, dim, True)
    return xp.roll(input, shifts, dims)


@fft_fftshift.def_backward
def _(ctx, g):
    return fft_ifftshift(g, ctx.dim)


@fft_ifftshift.def_backward
def _(ctx, g):
    return fft_fftshift(g, ctx.dim)


def _frequencies(xp, fname: str, k, n: int, d, dtype):
    """``k / (n d)`` in ``dtype``, as PyTorch computes it: the integers in ``dtype``, times
    the scale ``1 / (n d)`` in the dtype's compute type (float for the halves)."""
    if isinstance(d, Tensor):
        d = d.item()
    dt = dtype or D.get_default_dtype()
    if dt.is_complex:
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{D.TYPE_NAME[dt]}'")
    if not dt.is_floating_point:
        raise RuntimeError(f"{fname} requires a floating point or complex dtype")
    compute = D.float64 if dt is D.float64 else D.float32
    span = n * d
    scale = 1.0 / span if span else float("inf")
    k = convert(xp, convert(xp, k.astype(compute.np), dt), compute)  # (halves round k)
    return convert(xp, k * compute.np.type(scale), dt)


def _check_n(fname: str, n):
    if isinstance(n, bool) or not isinstance(n, int) and not hasattr(n, "__index__"):
        raise TypeError(f"{fname}(): argument 'n' (position 1) must be int, not "
                        f"{type(n).__name__}")
    return int(n)


def _check_length(m: int) -> None:
    if m < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {m}: [{m}]")


@op(tags=CONSTRUCTOR, differentiable=False, out_dtype="dtype", **PLAIN)
def fft_fftfreq(xp, n, d=1.0, *, out=None, dtype=None, layout=None, device=None,
                requires_grad=False, pin_memory=False):
    """fft.fftfreq(n, d=1.0): the sample frequencies of an ``n``-point transform with sample
    spacing ``d``: [0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (n d)."""
    check_device(device)
    n = _check_n("fft_fftfreq", n)
    _check_length(n)
    k = xp.arange(n, dtype=np.int64)
    k = xp.where(k < (n + 1) // 2, k, k - n)
    return _frequencies(xp, "fftfreq", k, n, d, dtype)


@op(tags=CONSTRUCTOR, differentiable=False, out_dtype="dtype", **PLAIN)
def fft_rfftfreq(xp, n, d=1.0, *, out=None, dtype=None, layout=None, device=None,
                 requires_grad=False, pin_memory=False):
    """fft.rfftfreq(n, d=1.0): the non-negative sample frequencies of an ``n``-point real
    transform: [0, 1, ..., n // 2] / (n d)."""
    check_device(device)
    n = _check_n("fft_rfftfreq", n)
    m = (n // 2 if n >= 0 else -(-n // 2)) + 1  # (PyTorch's n / 2 rounds towards zero)
    _check_length(m)
    return _frequencies(xp, "rfftfreq", xp.arange(m, dtype=np.int64), n, d, dtype)
