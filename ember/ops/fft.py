"""Discrete Fourier transforms: the ops behind ``ember.fft`` (PyTorch's ``torch.fft``).

Every transform is one op ``fft_<name>`` (PyTorch's ATen names) computed through ``xp.fft``
(numpy's pocketfft on CPU, cuFFT through CuPy on CUDA). A transform reads its input resized to
the requested signal sizes (zero-padded or truncated along the transformed dims), then runs
one of three kernels over the dims:

    c2c   complex to complex (fft*, ifft*; real input is taken as complex)
    r2c   real to a one-sided complex spectrum (rfft*; ihfft* is its conjugate)
    c2r   a one-sided Hermitian spectrum to real (irfft*; hfft* reads its conjugate)

``norm`` scales as PyTorch's: "backward" leaves the forward transform unscaled and the inverse
by 1/n, "forward" the other way round, "ortho" both by 1/sqrt(n). The forward and the
inverse direction of one scale are the adjoint pair the gradients use (ember/ops/fft_grad.py).
"""

from __future__ import annotations

import operator

import numpy as np

from .. import _dtype as D
from .arguments import type_name
from .registry import op
from .shape import wrap_dim_nonscalar

NORMS = ("backward", "ortho", "forward")
# the same scale on the transform in the other direction (the adjoint's normalisation)
SWAP = {"backward": "forward", "ortho": "ortho", "forward": "backward"}
# PyTorch's errors for a transform of an empty batch: MKL's on CPU, cuFFT's on CUDA
_EMPTY_BATCH = "MKL FFT error: Intel oneMKL DFTI ERROR: Inconsistent configuration parameters"
_EMPTY_BATCH_CUDA = "cuFFT error: CUFFT_INVALID_SIZE"
PLAIN = dict(function=False, method=False)


# ---------------------------------------------------------------------- argument checks
def int_arg(fname: str, arg: str, v):
    """An optional int argument (``n``, ``dim``): PyTorch's TypeError for anything else."""
    if v is None or isinstance(v, int):
        return v
    if hasattr(v, "__index__") and not isinstance(v, bool):
        return operator.index(v)
    raise TypeError(f"{fname}(): argument '{arg}' must be int, not {type_name(v)}")


def ints_arg(fname: str, arg: str, v):
    """An optional int list (``s``, ``dim``): one int counts as a list of one."""
    if v is None:
        return None
    if isinstance(v, int) or (hasattr(v, "__index__") and not isinstance(v, (bool, float))):
        return (operator.index(v),)
    if isinstance(v, (list, tuple)) and all(
            hasattr(e, "__index__") and not isinstance(e, bool) for e in v):
        return tuple(operator.index(e) for e in v)
    raise TypeError(f"{fname}(): argument '{arg}' must be tuple of ints, not {type_name(v)}")


def norm_arg(fname: str, norm):
    if norm is not None and not isinstance(norm, str):
        raise TypeError(f"{fname}(): argument 'norm' must be str, not {type_name(norm)}")


def check_norm(norm) -> str:
    """PyTorch's norm name ("backward" for None); its error for anything else."""
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    return norm


def wrap(dim: int, ndim: int) -> int:
    """A dim in range (PyTorch's IndexError, kept as it is by the dispatcher)."""
    try:
        return wrap_dim_nonscalar(dim, ndim)
    except IndexError as e:
        e._ember_final = True
        raise


def _points(n: int) -> None:
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")


def plan_1d(shape: tuple, n, dim: int, c2r: bool = False):
    """(dims, signal sizes of the input, output length) of a 1-D transform of an input of
    ``shape``; c2r reads ``n // 2 + 1`` input points to make ``n`` (default 2 (m - 1))."""
    d = wrap(dim, len(shape))
    if c2r:
        last = 2 * (shape[d] - 1) if n is None else n
        _points(last)
        return (d,), (last // 2 + 1,), last
    size = shape[d] if n is None else n
    _points(size)
    return (d,), (size,), size


def plan_nd(fname: str, shape: tuple, s, dim, c2r: bool = False, at_least_one: bool = False):
    """(dims, signal sizes of the input, last output length) of an n-D transform, as
    PyTorch canonicalises ``s`` and ``dim``: ``s`` alone transforms the last len(s) dims,
    neither transforms all dims; an ``s`` entry of -1 keeps the input's size."""
    nd = len(shape)
    dims = None
    if dim is not None:
        dims = tuple(wrap(d, nd) for d in dim)
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is not None:
        if dims is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
        if dims is None:
            if len(s) > nd:
                raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                                   f"{nd} dimensions.")
            dims = tuple(range(nd - len(s), nd))
        sizes = [shape[d] if v == -1 else v for d, v in zip(dims, s)]
    else:
        if dims is None:
            dims = tuple(range(nd))
        sizes = [shape[d] for d in dims]
    for v in sizes:
        _points(v)
    if at_least_one and not dims:
        raise RuntimeError(f"{fname} must transform at least one axis")
    last = sizes[-1] if sizes else None
    if c2r:
        last = sizes[-1] if s is not None and s[-1] != -1 else 2 * (shape[dims[-1]] - 1)
        _points(last)
        sizes[-1] = last // 2 + 1
    return dims, tuple(sizes), last


# ---------------------------------------------------------------------- kernels
def promote(x, complex_: bool = False):
    """PyTorch's FFT input types: integers and bool as the default float type; float and
    double (and their complex types) as they are; others refused."""
    kind = x.dtype.kind
    if kind in "biu":
        x = x.astype(D.get_default_dtype().np)
    elif x.dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        raise RuntimeError(f"Unsupported dtype {D.TYPE_NAME[D.from_np(x.dtype)]}")
    if complex_ and x.dtype.kind != "c":
        x = x.astype(np.complex64 if x.dtype == np.float32 else np.complex128)
    return x


def check_real(fname: str, x, message: str = "{} expects a real input tensor, but got {}"):
    if x.dtype.kind == "c":
        raise RuntimeError(message.format(fname, D.TYPE_NAME[D.from_np(x.dtype)]))


def resize(xp, x, dims, sizes):
    """``x`` with each of ``dims`` truncated or zero-padded to its size in ``sizes``."""
    for d, n in zip(dims, sizes):
        have = x.shape[d]
        if have > n:
            x = x[(slice(None),) * d + (slice(0, n),)]
        elif have < n:
            shape = list(x.shape)
            shape[d] = n
            y = xp.zeros(tuple(shape), x.dtype)
            y[(slice(None),) * d + (slice(0, have),)] = x
            x = y
    return x


def _refuse_empty(x):
    """A transform of an empty batch: PyTorch's error (MKL and cuFFT both refuse a zero
    batch; measured with torch 2.11's CUDA build on the H200)."""
    raise RuntimeError(_EMPTY_BATCH if type(x) is np.ndarray else _EMPTY_BATCH_CUDA)


def c2c(xp, x, dims, norm: str, forward: bool):
    """Complex transform of (complex or real) ``x`` over ``dims``."""
    x = promote(x, complex_=True) if x.dtype.kind != "c" else x
    if not dims:
        return x.copy()
    if x.size == 0:
        _refuse_empty(x)
    f = xp.fft.fftn if forward else xp.fft.ifftn
    return _same_precision(f(x, axes=dims, norm=norm), x.dtype)


def r2c(xp, x, dims, norm: str, forward: bool):
    """One-sided transform of real ``x`` over ``dims`` (the last of them halved)."""
    if x.size == 0:
        _refuse_empty(x)
    want = np.complex64 if x.dtype == np.float32 else np.complex128
    if forward:
        return _same_precision(xp.fft.rfftn(x, axes=dims, norm=norm), want)
    return _same_precision(xp.conj(xp.fft.rfftn(x, axes=dims, norm=SWAP[norm])), want)


def c2r(xp, x, dims, norm: str, forward: bool, last: int):
    """Real signal of ``last`` points along ``dims[-1]`` from its one-sided spectrum ``x``."""
    x = promote(x, complex_=True) if x.dtype.kind != "c" else x
    shape = [x.shape[d] for d in dims[:-1]] + [last]
    if x.size == 0:
        _refuse_empty(x)
    want = x.real.dtype
    if forward:
        return _same_precision(xp.fft.irfftn(xp.conj(x), s=shape, axes=dims, norm=SWAP[norm]),
                               want)
    return _same_precision(xp.fft.irfftn(x, s=shape, axes=dims, norm=norm), want)


def _same_precision(r, dtype):
    """The result in the input's precision: numpy before 2.0 computed (and returned) single
    precision transforms in double; numpy 2 and CuPy keep complex64 / float32."""
    return r if r.dtype == dtype else r.astype(dtype)


# ---------------------------------------------------------------------- the transforms
def _c2c_1d(fname, forward):
    def impl(xp, input, n=None, dim=-1, norm=None):
        n, dim = int_arg(fname, "n", n), int_arg(fname, "dim", dim)
        norm_arg(fname, norm)
        x = promote(input)
        dims, sizes, _ = plan_1d(input.shape, n, dim)
        return c2c(xp, resize(xp, x, dims, sizes), dims, check_norm(norm), forward)
    return impl


def _c2c_nd(fname, forward, default_dim=None):
    def impl(xp, input, s=None, dim=default_dim, norm=None):
        s, dim = ints_arg(fname, "s", s), ints_arg(fname, "dim", dim)
        norm_arg(fname, norm)
        dims, sizes, _ = plan_nd(fname, input.shape, s, dim)
        x = promote(input)
        return c2c(xp, resize(xp, x, dims, sizes), dims, check_norm(norm), forward)
    return impl


def _r2c_1d(fname, name, forward):
    def impl(xp, input, n=None, dim=-1, norm=None):
        n, dim = int_arg(fname, "n", n), int_arg(fname, "dim", dim)
        norm_arg(fname, norm)
        check_real(name, input)
        x = promote(input)
        dims, sizes, _ = plan_1d(input.shape, n, dim)
        return r2c(xp, resize(xp, x, dims, sizes), dims, check_norm(norm), forward)
    return impl


def _r2c_nd(fname, name, forward, default_dim=None):
    message = ("{} expects a real-valued input tensor, but got {}" if forward else
               "Only supports floating-point dtypes, but found: {1}")

    def impl(xp, input, s=None, dim=default_dim, norm=None):
        s, dim = ints_arg(fname, "s", s), ints_arg(fname, "dim", dim)
        norm_arg(fname, norm)
        if forward:  # (rfftn checks the type first, ihfftn the dims)
            check_real("rfftn", input, message)
        dims, sizes, _ = plan_nd(name, input.shape, s, dim, at_least_one=True)
        check_real(name, input, message)
        x = promote(input)
        return r2c(xp, resize(xp, x, dims, sizes), dims, check_norm(norm), forward)
    return impl


def _c2r_1d(fname, forward):
    def impl(xp, input, n=None, dim=-1, norm=None):
        n, dim = int_arg(fname, "n", n), int_arg(fname, "dim", dim)
        norm_arg(fname, norm)
        x = promote(input, complex_=True)
        dims, sizes, last = plan_1d(input.shape, n, dim, c2r=True)
        return c2r(xp, resize(xp, x, dims, sizes), dims, check_norm(norm), forward, last)
    return impl


def _c2r_nd(fname, name, forward, default_dim=None):
    def impl(xp, input, s=None, dim=default_dim, norm=None):
        s, dim = ints_arg(fname, "s", s), ints_arg(fname, "dim", dim)
        norm_arg(fname, norm)
        dims, sizes, last = plan_nd(name, input.shape, s, dim, c2r=True, at_least_one=True)
        x = promote(input, complex_=True)
        return c2r(xp, resize(xp, x, dims, sizes), dims, check_norm(norm), forward, last)
    return impl


def _out_rule(name: str, complex_out: bool):
    """The out= dtype PyTorch accepts: a complex tensor for complex results, a floating one
    for real results (the result is cast into it)."""
    def rule(opname, res, out):
        if complex_out and not out.is_complex:
            return f"{name} expects a complex output tensor, but got {D.TYPE_NAME[out]}"
        if not complex_out and not out.is_floating_point:
            return f"{name} expects a floating point output tensor, but got {D.TYPE_NAME[out]}"
        return None
    return rule


def _define(name: str, kind: str, forward: bool, nd: str, sig):
    """Register op ``fft_<name>``: ``kind`` c2c / r2c / c2r, ``nd`` "1", "2" or "n"."""
    fname = "fft_" + name
    default_dim = (-2, -1) if nd == "2" else None
    if kind == "c2c":
        impl = _c2c_1d(fname, forward) if nd == "1" else _c2c_nd(fname, forward, default_dim)
    elif kind == "r2c":
        impl = _r2c_1d(fname, name, forward) if nd == "1" else \
            _r2c_nd(fname, name, forward, default_dim)
    else:
        impl = _c2r_1d(fname, forward) if nd == "1" else \
            _c2r_nd(fname, name, forward, default_dim)
    impl.__signature__ = sig(nd)
    impl.__name__ = fname
    impl.__doc__ = f"fft.{name}: the {'forward' if forward else 'inverse'} {kind} transform " \
                   f"over {'one dim' if nd == '1' else 'two dims' if nd == '2' else 'n dims'}."
    # the result is not written into an out= tensor of the wrong kind
    complex_out = kind != "c2r"
    d = op(fname, grad_name=_grad_name(kind, forward),
           out_exact=_out_rule(name, complex_out), **PLAIN)(impl)
    d.fft = (kind, forward, nd)
    return d


def _grad_name(kind, forward):
    return {"c2c": "FftC2CBackward0", "r2c": "FftR2CBackward0",
            "c2r": "FftC2RBackward0"}[kind]


def _signature(nd):
    import inspect
    P = inspect.Parameter
    first = [P("xp", P.POSITIONAL_OR_KEYWORD),
             P("input", P.POSITIONAL_OR_KEYWORD, annotation="Tensor")]
    if nd == "1":
        rest = [P("n", P.POSITIONAL_OR_KEYWORD, default=None),
                P("dim", P.POSITIONAL_OR_KEYWORD, default=-1)]
    else:
        rest = [P("s", P.POSITIONAL_OR_KEYWORD, default=None),
                P("dim", P.POSITIONAL_OR_KEYWORD, default=(-2, -1) if nd == "2" else None)]
    return inspect.Signature(first + rest + [P("norm", P.POSITIONAL_OR_KEYWORD, default=None)])


# name -> (kernel, forward direction, dims)
TRANSFORMS = {
    "fft": ("c2c", True, "1"), "ifft": ("c2c", False, "1"),
    "fft2": ("c2c", True, "2"), "ifft2": ("c2c", False, "2"),
    "fftn": ("c2c", True, "n"), "ifftn": ("c2c", False, "n"),
    "rfft": ("r2c", True, "1"), "ihfft": ("r2c", False, "1"),
    "rfft2": ("r2c", True, "2"), "ihfft2": ("r2c", False, "2"),
    "rfftn": ("r2c", True, "n"), "ihfftn": ("r2c", False, "n"),
    "irfft": ("c2r", False, "1"), "hfft": ("c2r", True, "1"),
    "irfft2": ("c2r", False, "2"), "hfft2": ("c2r", True, "2"),
    "irfftn": ("c2r", False, "n"), "hfftn": ("c2r", True, "n"),
}
OPS = {name: _define(name, *spec, _signature) for name, spec in TRANSFORMS.items()}
