"""Gradients of the Fourier transforms (ember/ops/fft.py), written in ember ops so that they
are differentiable again.

A transform is linear: its gradient is the adjoint transform with the same scale in the
other direction, read back through the adjoint of the input's resize (padding becomes
truncation and the other way round). The one-sided kernels weight as PyTorch's do:

    r2c   the one-sided gradient zero-padded to the full spectrum, through the complex
          adjoint, its real part
    c2r   the r2c transform of the gradient, with the bins that stand for two (all but the
          zero frequency and, for an even length, the Nyquist bin) doubled

ihfft* is the conjugate of an r2c transform and hfft* a c2r transform of the conjugate, so
their gradients conjugate on the way through. A real input takes the real part.
"""

from __future__ import annotations

from .fft import OPS as FFT, SWAP, check_norm, ints_arg, int_arg, plan_1d, plan_nd
from .joining import cat


def _plan(ctx, name: str, nd: str, kind: str):
    shape = tuple(ctx.input.shape)
    c2r = kind == "c2r"
    if nd == "1":
        return plan_1d(shape, int_arg(name, "n", ctx.n), int_arg(name, "dim", ctx.dim), c2r)
    return plan_nd(name, shape, ints_arg(name, "s", ctx.s), ints_arg(name, "dim", ctx.dim),
                   c2r)


def unresize(g, shape: tuple, dims, sizes):
    """The adjoint of resizing an input of ``shape`` to ``sizes`` along ``dims``: the
    gradient of the padding dropped, zeros for what the truncation dropped."""
    for d, n in zip(dims, sizes):
        have = shape[d]
        if have < n:
            g = g.narrow(d, 0, have)
        elif have > n:
            pad = list(g.shape)
            pad[d] = have - n
            g = cat([g, g.new_zeros(pad)], d)
    return g


def pad_to(g, d: int, n: int):
    """``g`` zero-padded along ``d`` to ``n`` entries."""
    if g.shape[d] >= n:
        return g
    pad = list(g.shape)
    pad[d] = n - g.shape[d]
    return cat([g, g.new_zeros(pad)], d)


def double_halves(g, d: int, last: int):
    """The one-sided spectrum's bins that stand for two bins of a ``last``-point signal
    (1 .. last - (last // 2 + 1)) doubled."""
    k = last - g.shape[d]
    if k <= 0:
        return g
    parts = [g.narrow(d, 0, 1), g.narrow(d, 1, k) * 2]
    rest = g.shape[d] - 1 - k
    if rest:
        parts.append(g.narrow(d, 1 + k, rest))
    return cat(parts, d)


def _backward(name: str, kind: str, forward: bool, nd: str):
    fname = "fft_" + name

    def rule(ctx, g):
        dims, sizes, last = _plan(ctx, fname, nd, kind)
        norm = check_norm(ctx.norm)
        if kind == "c2c":  # the other direction, same scale
            inverse = FFT["ifftn"] if forward else FFT["fftn"]
            gx = inverse(g, None, dims, SWAP[norm])
        elif kind == "r2c":
            if not forward:  # ihfft: the conjugate of an r2c transform in the other scale
                g, norm = g.conj(), SWAP[norm]
            full = pad_to(g, dims[-1], last)
            gx = FFT["ifftn"](full, None, dims, SWAP[norm]).real
        else:
            if forward:  # hfft: a c2r transform (other scale) of the conjugate
                norm = SWAP[norm]
            gx = double_halves(FFT["rfftn"](g, None, dims, SWAP[norm]), dims[-1], last)
            if forward:
                gx = gx.conj()
        if not ctx.input.dtype.is_complex:
            gx = gx.real
        return unresize(gx, tuple(ctx.input.shape), dims, sizes)
    return rule


for _name, _d in FFT.items():
    _d.def_backward(_backward(_name, *_d.fft))
