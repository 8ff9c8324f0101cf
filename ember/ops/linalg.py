"""Matrix products: matmul, mm, bmm, mv, dot, vdot, the add* family, inner, outer, tensordot,
kron, multi_dot.

PyTorch does not promote types in its BLAS products: both operands must share one dtype (the
error names the C++ type, "float != double"), float16/bfloat16 are computed in float32 and
rounded once, integers are supported and bool is not. Every product goes through ``_gemm`` so
those rules live in one place; backward rules are written with the same ops (so they are
differentiable again) and use ``A.mH`` so complex gradients are conjugate-correct.

The family's other modules (linalg_struct, linalg_einsum, linalg_decomp, linalg_norm: structure,
einsum, decompositions, norms) build on this one's helpers.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from .. import _dtype as D
from ..backends.casting import cast
from .bind import tensor_method
from .arguments import takes_tensors
from .arguments import broadcast_error
from .registry import DEFAULT, op
from .writes import write_out
from .shape import expand

PUBLIC = ["outer", "ger", "inner", "tensordot", "kron", "chain_matmul"]

# computed in float32 and rounded once at the end (PyTorch's gemm for them)
LOW_PRECISION = _LOW = (np.dtype(np.float16), D.bfloat16.np, *(d.np for d in D.FLOAT8))
_HALF16 = (np.dtype(np.float16), D.bfloat16.np)

# PyTorch's C++ type names, used by its "same dtype" errors.
_CNAME = {D.float32: "float", D.float64: "double", D.float16: "c10::Half",
          D.bfloat16: "c10::BFloat16", D.complex64: "c10::complex<float>",
          D.complex128: "c10::complex<double>", D.int64: "long int", D.int32: "int",
          D.int16: "short int", D.int8: "signed char", D.uint8: "unsigned char",
          D.bool_: "bool", D.float8_e4m3fn: "c10::Float8_e4m3fn",
          D.float8_e5m2: "c10::Float8_e5m2"}


def is_inexact(a: np.ndarray) -> bool:
    """Floating or complex (ml_dtypes' types may have numpy kind 'V': kind alone misses them)."""
    return a.dtype.kind in "fc" or a.dtype in _LOW


def edtype(a) -> D.dtype:
    """The ember dtype of an array, a tensor or a tensor stand-in (``TensorMeta``)."""
    return a.dtype if isinstance(a.dtype, D.dtype) else D.from_np(a.dtype)


def tname(a) -> str:
    """PyTorch's scalar-type name (``Float``) of an array or tensor."""
    return D.TYPE_NAME[edtype(a)]


def cname(a) -> str:
    return _CNAME[edtype(a)]


def _gemm(fn, kernel: str, *arrays):
    """Run a product kernel with PyTorch's dtype rules (bool unsupported, half in float32)."""
    dt = arrays[0].dtype
    if dt == np.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
    if dt in _LOW and not (dt in _HALF16 and getattr(fn, "widens_half", False)):
        return cast(fn(*[a.astype(np.float32) for a in arrays]), D.from_np(dt))
    return fn(*arrays)  # a matmul that ``widens_half`` accumulates halves in float32 itself


def _shape_str(s) -> str:
    return "x".join(str(n) for n in s)


# ---------------------------------------------------------------------- checks
def _mm_dtype(a, b):
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {cname(a)} != "
                           f"{cname(b)}")


def _mm_shapes(a_shape, b_shape):
    if a_shape[-1] != b_shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_shape_str(a_shape)} "
                           f"and {_shape_str(b_shape)})")


def _mv_checks(mat, vec, rows=None):
    if mat.dtype != vec.dtype:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{tname(vec)}, {tname(mat)}, and {tname(vec)}")
    n, k = mat.shape if rows is None else (rows, mat.shape[-1])
    if k != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({n}), mat ({n}x{k}), vec ({vec.shape[0]})")


def _dot_checks(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype != b.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{tname(a)} and {tname(b)}")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                           f"[{b.shape[0]}] to have the same number of elements, but got "
                           f"{a.shape[0]} and {b.shape[0]} elements respectively")


def _bmm_checks(a, b, batch, k):
    """Batched product of (..., n, k) by (..., k2, m): the dtype and inner-size messages."""
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {tname(a)} but found {tname(b)}")
    if b.shape[-2] != k:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{batch}, {k}] but got: [{batch}, {b.shape[-2]}].")


def _check_matmul(a, b):
    """PyTorch's matmul errors; which one it raises depends on the case it folds the call to."""
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    if a.ndim == 1 and b.ndim == 1:
        return _dot_checks(a, b)
    if b.ndim == 1:  # (..., n, k) @ (k,): a matrix-vector product over the folded rows
        return _mv_checks(a, b, rows=math.prod(a.shape[:-1]))
    if b.ndim == 2:  # (..., n, k) @ (k, m): one matrix product over the folded rows
        _mm_dtype(a, b)
        rows = math.prod(a.shape[:-1])
        return _mm_shapes((rows, a.shape[-1]), b.shape)
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    msg = broadcast_error([batch_a, batch_b])
    if msg:
        raise RuntimeError(msg)
    batch = math.prod(np.broadcast_shapes(batch_a, batch_b))
    _bmm_checks(a, b, batch, a.shape[-1])


# ---------------------------------------------------------------------- matmul and friends
@op(saves=("input", "other"), grad_name="MmBackward0", out_exact=True)
def matmul(xp, input: "Tensor", other: "Tensor"):
    """matmul(input, other) -> Tensor: the matrix product with NumPy-style broadcasting."""
    _check_matmul(input, other)
    if input.ndim == 1 and other.ndim == 1:
        kernel = "dot"
    elif other.ndim == 1:
        kernel = "addmv_impl_cpu"
    elif other.ndim > 2:
        kernel = "bmm"
    else:
        kernel = "addmm_impl_cpu_"
    return _gemm(xp.matmul, kernel, input, other)


def matmul_grads(g, a, b, need_a=True, need_b=True):
    """Gradients of ``a @ b`` (any of matmul's cases); broadcast batch dims are left to the
    engine, which sums a gradient down to its input's shape."""
    if a.ndim == 1 and b.ndim == 1:
        return (g * b.conj() if need_a else None), (g * a.conj() if need_b else None)
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    g2 = g.unsqueeze(-2) if a.ndim == 1 else g
    g2 = g2.unsqueeze(-1) if b.ndim == 1 else g2
    ga = gb = None
    n, k, m = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    if need_a:
        if a2.ndim == 2 and b2.ndim > 2:
            # a was broadcast over b's batch: contract the batch inside one BLAS call
            rows = math.prod(b2.shape[:-2]) * m  # explicit sizes: -1 is ambiguous when empty
            ga = matmul(g2.movedim(-2, 0).reshape(n, rows), b2.mH.reshape(rows, k))
        else:
            ga = matmul(g2, b2.mH)
        if a.ndim == 1:
            ga = ga.squeeze(-2)
    if need_b:
        if b2.ndim == 2 and a2.ndim > 2:  # the linear-layer case: fold the batch into rows
            rows = math.prod(a2.shape[:-1])
            gb = matmul(a2.reshape(rows, k).mH, g2.reshape(rows, m))
        else:
            gb = matmul(a2.mH, g2)
        if b.ndim == 1:
            gb = gb.squeeze(-1)
    return ga, gb


def matmul_shape(sa: tuple, sb: tuple) -> tuple:
    """matmul's result shape (1-D operands are promoted to matrices, then dropped again)."""
    a = (1,) + tuple(sa) if len(sa) == 1 else tuple(sa)
    b = tuple(sb) + (1,) if len(sb) == 1 else tuple(sb)
    shape = np.broadcast_shapes(a[:-2], b[:-2]) + (a[-2], b[-1])
    if len(sb) == 1:
        shape = shape[:-1]
    if len(sa) == 1:
        shape = shape[:-2] + shape[-1:] if len(sb) > 1 else shape[:-1]
    return shape


@matmul.def_meta
def _(input, other):
    _check_matmul(input, other)
    return matmul_shape(input.shape, other.shape), edtype(input)


@matmul.def_backward
def _(ctx, g):
    return matmul_grads(g, ctx.input, ctx.other, *ctx.needs_input_grad)


@op(saves=("input", "mat2"), out_exact=True)
def mm(xp, input: "Tensor", mat2: "Tensor"):
    """mm(input, mat2) -> Tensor: the product of two matrices (no broadcasting)."""
    if input.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if mat2.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    _mm_dtype(input, mat2)
    _mm_shapes(input.shape, mat2.shape)
    return _gemm(xp.matmul, "addmm_impl_cpu_", input, mat2)


def _mm_grads(g, a, b, need_a=True, need_b=True):
    return (mm(g, b.mH) if need_a else None), (mm(a.mH, g) if need_b else None)


@mm.def_backward
def _(ctx, g):
    return _mm_grads(g, ctx.input, ctx.mat2, *ctx.needs_input_grad)


def _bmm_shapes(a, b, first="batch1", second="batch2"):
    if a.ndim != 3:
        raise RuntimeError(f"{first} must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError(f"{second} must be a 3D tensor")
    if b.shape[0] != a.shape[0] or b.shape[1] != a.shape[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, "
                           f"{b.shape[1]}].")


@op(saves=("input", "mat2"), out_exact=True)
def bmm(xp, input: "Tensor", mat2: "Tensor"):
    """bmm(input, mat2) -> Tensor: a batch of matrix products, (b, n, k) @ (b, k, m)."""
    _bmm_shapes(input, mat2)
    if input.dtype != mat2.dtype:
        raise RuntimeError(f"expected scalar type {tname(input)} but found {tname(mat2)}")
    return _gemm(xp.matmul, "bmm", input, mat2)


def _bmm_grads(g, a, b, need_a=True, need_b=True):
    return (bmm(g, b.mH) if need_a else None), (bmm(a.mH, g) if need_b else None)


@bmm.def_backward
def _(ctx, g):
    return _bmm_grads(g, ctx.input, ctx.mat2, *ctx.needs_input_grad)


def _mv_shapes(mat, vec):
    if mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {mat.ndim}, {vec.ndim}")


@op(saves=("input", "vec"), out_exact=True)
def mv(xp, input: "Tensor", vec: "Tensor"):
    """mv(input, vec) -> Tensor: matrix (n, m) times vector (m,)."""
    _mv_shapes(input, vec)
    _mv_checks(input, vec)
    return _gemm(xp.matmul, "addmv_impl_cpu", input, vec)


def _mv_grads(g, a, v, need_a=True, need_v=True):
    ga = g.unsqueeze(-1) * v.conj() if need_a else None
    return ga, (mv(a.mH, g) if need_v else None)


@mv.def_backward
def _(ctx, g):
    return _mv_grads(g, ctx.input, ctx.vec, *ctx.needs_input_grad)


@op(saves=("input", "tensor"))
def dot(xp, input: "Tensor", tensor: "Tensor"):
    """dot(input, tensor) -> Tensor: the inner product of two 1-D tensors (no conjugation)."""
    _dot_checks(input, tensor)
    return _gemm(xp.dot, "dot", input, tensor)


@dot.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.tensor
    return g * b.conj(), g * a.conj()


@op(saves=("input", "other"))
def vdot(xp, input: "Tensor", other: "Tensor"):
    """vdot(input, other) -> Tensor: sum(conj(input) * other) of two 1-D tensors."""
    _dot_checks(input, other)
    return _gemm(xp.vdot, "vdot", input, other)


@vdot.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    return b * g.conj(), a * g


# ---------------------------------------------------------------------- beta*input + alpha*(a@b)
def _scalar_for(arr, value):
    """beta/alpha as the tensor's type: truncated for integers, as PyTorch converts them."""
    if arr.dtype.kind == "b":
        return bool(value)
    if isinstance(value, complex) and arr.dtype.kind != "c":
        raise RuntimeError("value cannot be converted to type float without overflow")
    if arr.dtype.kind in "iu":
        return int(value.real if isinstance(value, complex) else value)
    return value


def _combine(xp, input, prod, beta, alpha, out_shape):
    expand.impl(xp, input, out_shape)  # PyTorch's expand errors for a bad input shape
    if prod.dtype == np.bool_:
        r = prod if alpha else xp.zeros(out_shape, np.bool_)
        return r | input if beta else xp.array(xp.broadcast_to(r, out_shape))
    beta = _scalar_for(prod, beta)
    alpha = _scalar_for(prod, alpha)
    r = prod if alpha == 1 else prod * alpha
    if beta != 0:  # beta == 0 ignores input entirely (NaN in it is not propagated)
        r = r + (input if beta == 1 else input * beta)
    return xp.array(xp.broadcast_to(r, out_shape), dtype=prod.dtype)


def _check_addmm(input, a, b, beta, alpha):
    if input.dtype != b.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {tname(input)} and "
                           f"{tname(b)}")


def _check_addmv(input, a, b, beta, alpha):
    if len({input.dtype, a.dtype, b.dtype}) > 1:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{tname(input)}, {tname(a)}, and {tname(b)}")
    if a.ndim == 2 and b.ndim == 1 and input.ndim == 1 and input.shape[0] not in (1, a.shape[0]):
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat "
                           f"({a.shape[0]}x{a.shape[1]}), vec ({b.shape[0]})")


def _check_baddbmm(input, a, b, beta, alpha):
    if len({input.dtype, a.dtype, b.dtype}) > 1:
        raise RuntimeError(f"Input dtypes must be the same, got: input {cname(input)}, batch1: "
                           f"{cname(a)}, batch2: {cname(b)}")


def _addbmm_product(xp, a, b):
    if a.ndim == 3 and b.ndim == 3 and a.shape[0] != b.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got "
                           f"{a.shape[0]} and {b.shape[0]}")
    _bmm_shapes(a, b)
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {tname(a)} but found {tname(b)}")
    nb, n, k = a.shape  # sum_b a[b] @ b[b] as one product
    a2 = xp.moveaxis(a, 0, 1).reshape(n, nb * k)
    return _gemm(xp.matmul, "addbmm", a2, b.reshape(nb * k, b.shape[2]))


def _addbmm_grads(g, a, b, need_a=True, need_b=True):
    g3 = g.unsqueeze(0)
    return (matmul(g3, b.mH) if need_a else None), (matmul(a.mH, g3) if need_b else None)


def _outer_grads(g, a, b, need_a=True, need_b=True):
    return (mv(g, b.conj()) if need_a else None), (mv(g.mT, a.conj()) if need_b else None)


def _check_addr(input, a, b, beta, alpha):
    if input.dtype.kind in "iu":
        for name, v in (("beta", beta), ("alpha", alpha)):
            if isinstance(v, float):
                raise RuntimeError(f"For integral input tensors, argument {name} must not be a "
                                   "floating point number.")


# name: (names of the two product operands, input dtype check, product kernel, product grads,
#        type promotion). addr is a broadcast multiply in PyTorch, so it alone promotes.
_ADD_FAMILY = {
    "addmm": (("mat1", "mat2"), _check_addmm, lambda xp, a, b: mm.impl(xp, a, b), _mm_grads,
              None),
    "addmv": (("mat", "vec"), _check_addmv, lambda xp, a, b: mv.impl(xp, a, b), _mv_grads, None),
    "baddbmm": (("batch1", "batch2"), _check_baddbmm, lambda xp, a, b: bmm.impl(xp, a, b),
                _bmm_grads, None),
    "addbmm": (("batch1", "batch2"), _check_addmm, _addbmm_product, _addbmm_grads, None),
    "addr": (("vec1", "vec2"), _check_addr, lambda xp, a, b: _outer_array(a, b), _outer_grads,
             DEFAULT),
}


def _outer_array(a, b):
    for name, v in (("vec1", a), ("vec2", b)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    if a.dtype == np.bool_:
        return np.logical_and.outer(a, b)  # numpy-only: ufunc .outer
    return np.multiply.outer(a, b)  # numpy-only: ufunc .outer


def _conj_scalar(v):
    return v.conjugate() if isinstance(v, complex) else v


def _register_add_family(name, operands, check, product, grads, promote):
    p1, p2 = operands

    def impl(xp, input, a, b, *, beta=1, alpha=1):
        check(input, a, b, beta, alpha)
        dt = a.dtype
        if dt in _LOW and b.dtype == dt:  # one rounding at the end, as PyTorch's half gemm
            prod = product(xp, a.astype(np.float32), b.astype(np.float32))
            r = _combine(xp, input.astype(np.float32), prod, beta, alpha, prod.shape)
            return cast(r, D.from_np(dt))
        prod = product(xp, a, b)
        return _combine(xp, input, prod, beta, alpha, prod.shape)

    P = inspect.Parameter
    impl.__signature__ = inspect.Signature(
        [P("xp", P.POSITIONAL_OR_KEYWORD)]
        + [P(n, P.POSITIONAL_OR_KEYWORD, annotation="Tensor") for n in ("input", p1, p2)]
        + [P("beta", P.KEYWORD_ONLY, default=1), P("alpha", P.KEYWORD_ONLY, default=1)])
    impl.__doc__ = (f"{name}(input, {p1}, {p2}, *, beta=1, alpha=1) -> Tensor: "
                    f"beta * input + alpha * (the product of {p1} and {p2}).")
    # addr promotes and casts into out=; the products want out='s dtype to be the result's
    d = op(name, saves=operands, inplace=True, promote=promote, out_exact=promote is None)(impl)

    def backward(ctx, g):
        need_in, need_a, need_b = ctx.needs_input_grad
        beta, alpha = ctx.beta, ctx.alpha
        gi = (g * _conj_scalar(beta) if beta != 1 else g) if need_in else None
        ga = g * _conj_scalar(alpha) if alpha != 1 else g
        return (gi,) + tuple(grads(ga, getattr(ctx, p1), getattr(ctx, p2), need_a, need_b))

    d.def_backward(backward)
    return d


for _name, _spec in _ADD_FAMILY.items():
    globals()[_name] = _register_add_family(_name, *_spec)


# ---------------------------------------------------------------------- compositions
class _Named:
    """What ``write_out`` reads from an op (its name, its return type, its ``out_exact`` rule)
    for a composition."""

    returns = None

    def __init__(self, name, out_exact=False):
        self.name = name
        self.out_exact = out_exact


def write_out_as(name, out, result, out_exact=False):
    """``out=`` for public functions composed of ops (``out_exact`` as the op option)."""
    return write_out(_Named(name, out_exact), out, result) if out is not None else result


@takes_tensors("input", "vec2")
def outer(input, vec2, *, out=None):
    """outer(input, vec2) -> Tensor: the outer product of two 1-D tensors (types promote)."""
    for name, v in (("self", input), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v.ndim}-D")
    return write_out_as("outer", out, input.reshape(-1, 1) * vec2)


@takes_tensors("input", "vec2")
def ger(input, vec2, *, out=None):
    """ger(input, vec2) -> Tensor: the old name of ``outer``."""
    return outer(input, vec2, out=out)


def _dims_pair(dims, na, nb):
    """tensordot's ``dims``: an int (the last/first ``dims`` dims) or two lists of dims."""
    if hasattr(dims, "_data"):  # a tensor: an int, or two rows of dims
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > na or dims > nb:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        return list(range(-dims, 0)), list(range(dims))
    da, db = dims
    da = [da] if isinstance(da, int) else list(da)
    db = [db] if isinstance(db, int) else list(db)
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    return da, db


# PyTorch's message for an out= tensor of another dtype (see registry.out_dtype_message)
_TENSORDOT_OUT = ("tensordot: Expected the output tensor to have dtype {res}, but got an output "
                  "tensor with dtype {out}")


@takes_tensors("a", "b")
def tensordot(a, b, dims=2, out=None):
    """tensordot(a, b, dims=2) -> Tensor: contract ``dims`` of a with ``dims`` of b."""
    from .._tensor import _wrap_dim
    da, db = _dims_pair(dims, a.ndim, b.ndim)
    ea, eb = list(a.shape), list(b.shape)
    for x, y in zip(da, db):
        xa, yb = _wrap_dim(x, a.ndim), _wrap_dim(y, b.ndim)
        sa, sb = a.shape[xa], b.shape[yb]
        if sa != sb and 1 not in (sa, sb):
            raise RuntimeError(f"contracted dimensions need to match, but first has size {sa} in "
                               f"dim {x} and second has size {sb} in dim {y}")
        ea[xa] = eb[yb] = sb if sa == 1 else sa  # a contracted size-1 dimension broadcasts
    if ea != list(a.shape):
        a = a.expand(ea)
    if eb != list(b.shape):
        b = b.expand(eb)
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    ca = [_wrap_dim(x, a.ndim) for x in da]
    cb = [_wrap_dim(y, b.ndim) for y in db]
    free_a = [i for i in range(a.ndim) if i not in ca]
    free_b = [i for i in range(b.ndim) if i not in cb]
    k = math.prod(a.shape[i] for i in ca)
    sa, sb = [a.shape[i] for i in free_a], [b.shape[i] for i in free_b]
    left = a.permute(free_a + ca).reshape(math.prod(sa), k)
    right = b.permute(cb + free_b).reshape(k, math.prod(sb))
    return write_out_as("tensordot", out, mm(left, right).reshape(sa + sb), _TENSORDOT_OUT)


@takes_tensors("input", "other")
def inner(input, other, *, out=None):
    """inner(input, other) -> Tensor: contract the last dimension of both tensors."""
    if input.ndim == 0 or other.ndim == 0:
        return write_out_as("inner", out, input * other)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got "
                           f"shapes {list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, dims=([-1], [-1]), out=out)


@takes_tensors("input", "other")
def kron(input, other, *, out=None):
    """kron(input, other) -> Tensor: the Kronecker product (types promote)."""
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + tuple(input.shape)
    sb = (1,) * (nd - other.ndim) + tuple(other.shape)
    # a[i0, 1, i1, 1, ...] * b[1, j0, 1, j1, ...] laid out as (i0, j0, i1, j1, ...)
    a = input.reshape([s for n in sa for s in (n, 1)])
    b = other.reshape([s for n in sb for s in (1, n)])
    return write_out_as("kron", out, (a * b).reshape([x * y for x, y in zip(sa, sb)]))


def _chain_order(dims: list[int]) -> list:
    """Cheapest parenthesisation of a chain of matrices with sizes dims[i] x dims[i+1]."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s
    return split


@takes_tensors("tensors[]", name="linalg_multi_dot")
def multi_dot(tensors, *, out=None):
    """linalg.multi_dot(tensors) -> Tensor: a chain of matrix products in the cheapest order.
    The first and last tensors may be 1-D (a row and a column vector)."""
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        edge = i in (0, len(ts) - 1)
        if not (t.ndim == 2 or edge and t.ndim == 1):
            which = "first" if i == 0 else "last" if i == len(ts) - 1 else None
            if which:
                raise RuntimeError(f"multi_dot(): the {which} tensor must be 1D or 2D but got "
                                   f"{t.ndim}D")
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
        if t.dtype is not ts[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor "
                               f"0 is {tname(ts[0]).lower()} and tensor {i} "
                               f"{tname(t).lower()}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = list(ts)
    if first_vec:
        mats[0] = mats[0].unsqueeze(0)
    if last_vec:
        mats[-1] = mats[-1].unsqueeze(-1)
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(mats[i].shape)} and {list(mats[i + 1].shape)} cannot be "
                               "multiplied")
    split = _chain_order([mats[0].shape[0]] + [m.shape[1] for m in mats])

    def product(i, j):
        if i == j:
            return mats[i]
        s = split[i][j]
        return mm(product(i, s), product(s + 1, j))

    r = product(0, len(mats) - 1)
    if first_vec and last_vec:
        r = r.reshape(())
    elif first_vec:
        r = r.squeeze(0)
    elif last_vec:
        r = r.squeeze(-1)
    return write_out_as("multi_dot", out, r)


@takes_tensors("matrices[]")
def chain_matmul(*matrices, out=None):
    """chain_matmul(*matrices) -> Tensor: deprecated spelling of linalg.multi_dot (2-D only)."""
    if len(matrices) == 1:
        return write_out_as("chain_matmul", out, matrices[0].clone())
    return multi_dot(matrices, out=out)


for _name in ("outer", "ger", "inner", "kron"):
    tensor_method(_name)(globals()[_name])
