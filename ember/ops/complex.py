"""Complex-number ops: real, imag, conj, angle, view_as_real, view_as_complex, complex, polar."""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from ..backends.xp_ops import interpret
from .bind import tensor_method
from .arguments import takes_tensors
from .pointwise_defn import fixed
from .registry import op

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


# real inputs: a copy (complex values do not lower)
conj_physical.pointwise_defn = fixed(lambda ops, x: x, ("input",))


@conj_physical.def_backward
def _(ctx, g):
    return g.conj_physical()


@takes_tensors("input")
def resolve_conj(input):
    return input


@takes_tensors("input")
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


@op(tags=PW, upcast_half=True, saves=("input",))
def angle(xp, input: "Tensor"):
    """``angle(input)``: the argument of complex input (a real tensor); pi for negative reals,
    0 otherwise (NaN stays NaN); integers give the default float type."""
    if input.dtype.kind == "c":
        return xp.angle(input)
    x = input if input.dtype.kind == "f" else input.astype(D.get_default_dtype().np)
    return _real_angle(xp, x)


@interpret
def _real_angle(ops, x):
    # min(|x|, 0): +0 at x >= 0, NaN at NaN
    return ops.where(ops.lt(x, 0), math.pi, ops.min(ops.abs(x), 0))


# real inputs (integers in the default float type, the result's)
angle.pointwise_defn = fixed(_real_angle.kernels.defn, ("input",), kinds="f")


@angle.def_backward
def _(ctx, g):
    z = ctx.input
    if not z.is_complex():
        return g.new_zeros(g.shape)
    # PyTorch: grad * z / |z|^2 * i, and 0 at z = 0
    a2 = z.abs().square()
    return (g * z / a2.masked_fill(a2 == 0, 1) * 1j).masked_fill(z == 0, 0)


@op(view=True, out=False)
def view_as_real(xp, input: "Tensor"):
    if input.dtype.kind != "c":
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return input[..., None].view(input.real.dtype)


@view_as_real.def_meta
def _(input):
    return tuple(input.shape) + (2,), input.dtype.to_real()


@view_as_real.def_backward
def _(ctx, g):
    return view_as_complex(g.contiguous())


@op(view=True, out=False)
def view_as_complex(xp, input: "Tensor"):
    if input.dtype == np.float16:
        raise NotImplementedError("ember has no complex32 (ComplexHalf) dtype")
    if input.dtype not in (np.float32, np.float64):
        raise RuntimeError("view_as_complex is only supported for half, float and double "
                           "tensors, but got a tensor of scalar type: "
                           f"{D.TYPE_NAME[D.from_np(input.dtype)]}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if input.strides[-1] != input.itemsize:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    return input.view(np.complex64 if input.dtype == np.float32 else np.complex128)[..., 0]


@view_as_complex.def_meta
def _(input):
    if len(input.shape) == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    return tuple(input.shape[:-1]), input.dtype.to_complex()


@view_as_complex.def_backward
def _(ctx, g):
    return view_as_real(g)


def _float_pair(real, imag):
    names = (D.TYPE_NAME[D.from_np(real.dtype)], D.TYPE_NAME[D.from_np(imag.dtype)])
    if real.dtype.kind != "f" or imag.dtype.kind != "f":
        raise RuntimeError("Expected both inputs to be Half, Float or Double tensors but got "
                           f"{names[0]} and {names[1]}")
    if real.dtype != imag.dtype:
        raise RuntimeError(f"Expected object of scalar type {names[0]} but got scalar type "
                           f"{names[1]} for second argument")
    if real.dtype == np.float16:
        raise NotImplementedError("ember has no complex32 (ComplexHalf) dtype")
    return np.complex64 if real.dtype == np.float32 else np.complex128


@op(tags=PW)
def complex(xp, real: "Tensor", imag: "Tensor"):
    """``complex(real, imag)``: a complex tensor from two float tensors of one dtype."""
    ct = _float_pair(real, imag)
    out = xp.empty(xp.broadcast_shapes(real.shape, imag.shape), ct)
    out.real, out.imag = real, imag
    return out


@complex.def_backward
def _(ctx, g):
    return g.real, g.imag


@op(tags=PW, save_output=True)
def polar(xp, abs: "Tensor", angle: "Tensor"):
    """``polar(abs, angle)``: abs * (cos(angle) + i sin(angle))."""
    ct = _float_pair(abs, angle)
    out = xp.empty(xp.broadcast_shapes(abs.shape, angle.shape), ct)
    out.real, out.imag = abs * xp.cos(angle), abs * xp.sin(angle)
    return out


@polar.def_backward
def _(ctx, g):
    # PyTorch: d abs = Re(conj(g) sgn(result)), d angle = Re(conj(g) i result)
    out, gc = ctx.out, g.conj()
    return (gc * out.sgn()).real, (gc * out * 1j).real
