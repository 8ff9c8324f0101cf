"""Complex-number ops: real, imag, conj, angle, view_as_real, view_as_complex, complex, polar."""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .bind import tensor_method
from .registry import INT_TO_FLOAT, op

PW = ("pointwise",)
PUBLIC = ["is_conj", "resolve_conj"]


@op(tags=PW, out=False)
def conj(xp, input: "Tensor"):
    # PyTorch's conj is a lazy view; ember's is the value (a copy for complex, the input for real)
    return xp.conj(input) if input.dtype.kind == "c" else input


@conj.def_backward
def _(ctx, g):
    return g.conj()


@op(tags=PW, out=False)
def conj_physical(xp, input: "Tensor"):
    return xp.conj(input) if input.dtype.kind == "c" else input.copy()


@conj_physical.def_backward
def _(ctx, g):
    return g.conj_physical()


def resolve_conj(input):
    return input


def is_conj(input) -> bool:
    return False


@op(view=True, out=False, method=False)
def real(xp, input: "Tensor"):
    return input.real if input.dtype.kind == "c" else input.view()


@real.def_backward
def _(ctx, g):
    return g


@op(view=True, out=False, method=False)
def imag(xp, input: "Tensor"):
    if input.dtype.kind != "c":
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return input.imag


@imag.def_backward
def _(ctx, g):
    return g * 1j


# PyTorch exposes real and imag as Tensor properties, not methods
tensor_method("real")(property(lambda self: real(self)))
tensor_method("imag")(property(lambda self: imag(self)))


@op(tags=PW, promote=INT_TO_FLOAT, saves=("input",))
def angle(xp, input: "Tensor"):
    if input.dtype.kind == "c":
        return xp.angle(input)
    return xp.where(input < 0, xp.pi, 0).astype(input.dtype) + input * 0  # keeps NaN


@angle.def_backward
def _(ctx, g):
    x = ctx.input
    if not x.is_complex():
        return g.new_zeros(g.shape)
    # d angle: grad * (-imag, real) / |z|^2, as a complex gradient
    denom = x.abs() ** 2
    # PyTorch: angle_backward = grad * z / |z|^2 rotated: (-imag + i*real) / |z|^2 ... with
    # its conjugate convention this is g * (x.imag + 1j * x.real).neg()... see tests
    return g * (-x.imag + 1j * x.real).conj() / denom.masked_fill(denom == 0, 1) * -1


@op(view=True, out=False)
def view_as_real(xp, input: "Tensor"):
    if input.dtype.kind != "c":
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return input[..., None].view(input.real.dtype)


@view_as_real.def_backward
def _(ctx, g):
    from .. import view_as_complex
    return view_as_complex(g.contiguous())


@op(view=True, out=False)
def view_as_complex(xp, input: "Tensor"):
    if input.dtype not in (np.float32, np.float64):
        raise RuntimeError("view_as_complex is only supported for float and double tensors, but "
                           f"got a tensor of scalar type: {D.TYPE_NAME[D.from_np(input.dtype)]}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if input.strides[-1] != input.itemsize:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    return input.view(np.complex64 if input.dtype == np.float32 else np.complex128)[..., 0]


@view_as_complex.def_backward
def _(ctx, g):
    from .. import view_as_real
    return view_as_real(g)


@op(tags=PW)
def complex(xp, real: "Tensor", imag: "Tensor"):
    if real.dtype != imag.dtype or real.dtype.kind != "f":
        raise RuntimeError("Expected both inputs to be Half, Float or Double tensors but got "
                           f"{D.TYPE_NAME[D.from_np(real.dtype)]} and "
                           f"{D.TYPE_NAME[D.from_np(imag.dtype)]}")
    return real + 1j * imag.astype(np.complex64 if real.dtype == np.float32 else np.complex128)


@complex.def_backward
def _(ctx, g):
    return g.real, g.imag


@op(tags=PW, saves=("abs", "angle"))
def polar(xp, abs: "Tensor", angle: "Tensor"):
    ct = np.complex64 if abs.dtype == np.float32 else np.complex128
    return (abs * xp.cos(angle) + 1j * abs * xp.sin(angle)).astype(ct)


@polar.def_backward
def _(ctx, g):
    r, th = ctx.abs, ctx.angle
    c, s = th.cos(), th.sin()
    gr = g.real * c + g.imag * s
    gth = r * (g.imag * c - g.real * s)
    return gr, gth
