"""Factories (tensor, zeros, arange, ...), conversions (to, clone, copy_) and the ``new_*``
methods."""

from __future__ import annotations

import numbers

import numpy as np

from .. import _device as _device_mod, _dtype as D
from .._device import check_device
from .._dispatch import STATE
from ..backends import base as backends_base
from ..backends.casting import cast
from .._tensor import MEMORY_FORMATS, Size, Tensor, _wrap, pinned_result
from ..autograd.grad_mode import state as _grad_state
from .bind import tensor_method
from .registry import call_inplace, op

FACTORY = ("factory",)
# factories that allocate on the default device when given none (``with ember.device(...)``,
# ``set_default_device``): PyTorch's list, which leaves out the ``*_like`` ones
CONSTRUCTOR = ("factory", "default_device")
PUBLIC = ["tensor", "as_tensor", "asarray", "from_numpy", "from_dlpack", "zero_"]


def _size(size, op: str | None = None, keyword=None) -> tuple:
    """``zeros(2, 3)``, ``zeros((2, 3))``, ``zeros([2, 3])``, ``zeros(Size)`` and
    ``zeros(size=(2, 3))`` (``keyword``) all mean (2, 3); with ``op``, no size at all
    (``zeros()``) is PyTorch's TypeError (``zeros(())`` is 0-d), and so is a size given both
    ways."""
    if keyword is not None:
        if size:
            raise TypeError(f"{op}() got multiple values for argument 'size'")
        size = (keyword,)
    if not size and op is not None:
        raise TypeError(f'{op}() missing 1 required positional arguments: "size"')
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s)
        if not isinstance(s, numbers.Integral) or isinstance(s, bool):
            raise TypeError(f"expected a sequence of integers for the size, but got an element of "
                            f"type {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(size)}")
        out.append(int(s))
    return tuple(out)


def _number(value, dt: D.dtype):
    """A fill value for an array of ``dt``: numpy would store a number into float8 through
    ml_dtypes' conversion, which is not PyTorch's (see backends/casting.py)."""
    return cast(value, dt) if dt.is_float8 else value


def _np_dtype(dtype, default=None):
    if dtype is None:
        dtype = default or D.get_default_dtype()
    if not isinstance(dtype, D.dtype):
        raise TypeError(f"dtype must be an ember.dtype, not {type(dtype).__name__}")
    return dtype.np


# ---------------------------------------------------------------------- from data
def _infer_dtype(data) -> D.dtype:
    """The dtype ``ember.tensor`` gives nested Python data: bool < int64 < default float <
    complex."""
    kind = 0
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, Tensor):
            return x._dtype if kind == 0 else D.promote_types(x._dtype, _kinds[kind])
        elif isinstance(x, (bool, np.bool_)):
            kind = max(kind, 1)
        elif isinstance(x, (numbers.Integral,)):
            kind = max(kind, 2)
        elif isinstance(x, numbers.Real):
            kind = max(kind, 3)
        elif isinstance(x, numbers.Complex):
            kind = max(kind, 4)
        else:
            raise TypeError(f"Could not infer dtype of {type(x).__name__}")
    return _kinds[kind]


_kinds = {0: None, 1: D.bool_, 2: D.int64, 3: None, 4: None}


# numpy-only: host data: what ember.tensor reads, before it moves to a device
def _data_to_array(data, dtype: D.dtype | None) -> np.ndarray:
    if isinstance(data, Tensor):
        a = data._data
        return a.copy() if dtype is None or a.dtype == dtype.np else cast(a, dtype)
    if isinstance(data, (np.ndarray, np.generic)):
        dt = dtype or D.from_np(data.dtype)
        return np.array(data) if data.dtype == dt.np else cast(data, dt)
    if dtype is None:
        dtype = _infer_dtype(data)
        if dtype is None:  # floats or complex: the default dtypes
            k = _max_kind(data)
            dtype = D.get_default_dtype().to_complex() if k == 4 else D.get_default_dtype()
    if isinstance(data, (list, tuple)):
        data = _unwrap_nested(data)
    try:
        if dtype.kind in "uib":
            arr = np.array(data)
            if arr.dtype.kind in "fc":
                arr = arr.real.astype(np.int64) if arr.dtype.kind == "c" else np.trunc(arr)
            return arr.astype(dtype.np)
        return cast(np.array(data, dtype=np.complex128 if dtype.is_complex else np.float64),
                    dtype)
    except (ValueError, TypeError) as e:
        raise ValueError(f"tensor(): could not build a tensor from the data: {e}") from None


def _max_kind(data) -> int:
    kind = 0
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral):
            kind = max(kind, 3)
        elif isinstance(x, numbers.Complex) and not isinstance(x, numbers.Real):
            kind = max(kind, 4)
    return kind


def _unwrap_nested(data):
    if isinstance(data, (list, tuple)):
        return [_unwrap_nested(x) for x in data]
    if isinstance(data, Tensor):
        if data._data.ndim:
            return _unwrap_nested(data.tolist())
        return data.item()
    return data


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    """``ember.tensor(data, *, dtype=None, device=None, requires_grad=False)``: copies ``data``."""
    dev = check_device(device if device is not None else STATE.device)
    arr = _data_to_array(data, dtype)
    dt = D.from_np(arr.dtype) if dtype is None else dtype
    if dev.type == "cpu":
        t = _wrap(arr, dt)
    else:  # read on the host, then copied to the device
        backend = backends_base.of_device(dev)
        t = _wrap(backend.from_host(arr, dev), dt, backend)
    if pin_memory:
        t = pinned_result(t)
    if requires_grad:
        if not (t._dtype.is_floating_point or t._dtype.is_complex):
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        t.requires_grad_()
    return t


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like ``tensor`` but shares memory with a tensor or numpy array of the same dtype."""
    if device is None:
        device = STATE.device  # None unless a default device is set
    dev = check_device(device)
    if isinstance(data, Tensor):
        return data.to(*(d for d in (device, dtype) if d is not None))
    if isinstance(data, np.ndarray) and (dtype is None or dtype.np == data.dtype) and \
            dev.type == "cpu":
        if data.dtype in D._FROM_NP:
            return _wrap(data, D._FROM_NP[data.dtype])
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor over ``ndarray``'s memory (writes are seen by both)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    dt = D._FROM_NP.get(ndarray.dtype)
    if dt is None:
        raise TypeError(f"can't convert np.ndarray of type numpy.{ndarray.dtype}. The only "
                        "supported types are: float64, float32, float16, complex64, complex128, "
                        "int64, int32, int16, int8, uint8, and bool.")
    return _wrap(ndarray, dt)


# numpy-only: host data: a DLPack capsule read on the host
def from_dlpack(ext_tensor) -> Tensor:
    """A tensor over the memory of any object that exports DLPack (``__dlpack__``)."""
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    return from_numpy(np.from_dlpack(ext_tensor))


# ---------------------------------------------------------------------- legacy constructors
def _legacy(dtype: D.dtype, name: str, args: tuple, device) -> Tensor:
    """PyTorch's legacy constructors (``ember.Tensor``, ``FloatTensor``, ...): ``T(data)`` a
    copy of a sequence or array at ``dtype``; ``T(*sizes)`` or ``T(Size)`` uninitialised;
    ``T(tensor)`` an alias of the tensor (same memory, differentiable); ``T()`` empty."""
    check_device(device)
    if not args:
        return empty(0, dtype=dtype)
    if len(args) == 1:
        a = args[0]
        if isinstance(a, Tensor):
            if name != "Tensor" and a._dtype is not dtype:
                raise TypeError(f"{name}(): expected a {D.TYPE_NAME[dtype]} tensor (got "
                                f"{D.TYPE_NAME[a._dtype]})")
            return a.view(a.shape)  # an alias: same memory, and differentiable (as PyTorch)
        if isinstance(a, Size):
            return empty(tuple(a), dtype=dtype)
        if isinstance(a, (list, tuple, np.ndarray)):
            return tensor(a, dtype=dtype)
        if isinstance(a, str) or not isinstance(a, numbers.Integral) or isinstance(a, bool):
            what = "invalid data type" if isinstance(a, str) else "data must be a sequence (got"
            close = f"'{type(a).__name__}'" if isinstance(a, str) else f"{type(a).__name__})"
            raise TypeError(f"new(): {what} {close}")
    for i, a in enumerate(args):
        if not isinstance(a, numbers.Integral) or isinstance(a, bool):
            got = ", ".join(type(v).__name__ for v in args)
            raise TypeError(f"new() received an invalid combination of arguments - got ({got}), "
                            f"but expected sizes (*int), data (a sequence) or a Tensor: argument "
                            f"{i + 1} is {type(a).__name__}")
    return empty(_size(args), dtype=dtype)


def _tensor_new(cls, *args, device=None):
    if cls is not Tensor:  # subclasses (Parameter, the compiler's Proxy) make themselves
        return object.__new__(cls)
    return _legacy(D.get_default_dtype(), "Tensor", args, device)


Tensor.__new__ = staticmethod(_tensor_new)  # ``ember.Tensor(...)``: bound from here (a layer
# above _tensor), as the op table binds the methods


class _LegacyType(type):
    """The class of ``ember.FloatTensor`` and its kin: calling one is its legacy constructor;
    ``isinstance(t, ember.FloatTensor)`` asks whether t is a float32 tensor, as in PyTorch."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj._dtype is cls.dtype

    def __call__(cls, *args, device=None):
        return _legacy(cls.dtype, cls.__name__, args, device)


def _legacy_type(name: str, dtype: D.dtype) -> _LegacyType:
    return _LegacyType(name, (), {"dtype": dtype, "__doc__": f"{name}(data | *sizes): legacy "
                                  f"constructor of {D.TYPE_NAME[dtype]} tensors"})


FloatTensor = _legacy_type("FloatTensor", D.float32)
DoubleTensor = _legacy_type("DoubleTensor", D.float64)
HalfTensor = _legacy_type("HalfTensor", D.float16)
BFloat16Tensor = _legacy_type("BFloat16Tensor", D.bfloat16)
ByteTensor = _legacy_type("ByteTensor", D.uint8)
CharTensor = _legacy_type("CharTensor", D.int8)
ShortTensor = _legacy_type("ShortTensor", D.int16)
IntTensor = _legacy_type("IntTensor", D.int32)
LongTensor = _legacy_type("LongTensor", D.int64)
BoolTensor = _legacy_type("BoolTensor", D.bool_)
LEGACY_TYPES = (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, ByteTensor, CharTensor,
                ShortTensor, IntTensor, LongTensor, BoolTensor)


# ---------------------------------------------------------------------- sized factories
@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def empty(xp, *sizes, size=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False, memory_format=None):
    check_device(device)
    return xp.empty(_size(sizes, "empty", size), _np_dtype(dtype))


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def zeros(xp, *sizes, size=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False):
    check_device(device)
    return xp.zeros(_size(sizes, "zeros", size), _np_dtype(dtype))


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def ones(xp, *sizes, size=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    check_device(device)
    return xp.ones(_size(sizes, "ones", size), _np_dtype(dtype))


def _fill_dtype(fill_value):
    if isinstance(fill_value, Tensor):
        return fill_value._dtype
    return D.scalar_dtype(fill_value)


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def full(xp, size, fill_value, *, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    check_device(device)
    dt = dtype or _fill_dtype(fill_value)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return xp.full(_size((size,)), _number(fill_value, dt), dtype=dt.np)


def _like(name, fill):
    def impl(xp, input: "Tensor", *, dtype=None, layout=None, device=None, requires_grad=False,
             memory_format=None):
        check_device(device)
        return fill(xp, input.shape, (dtype.np if dtype is not None else input.dtype))
    impl.__name__ = name
    return op(name, tags=FACTORY, method=False, differentiable=False, out=False)(impl)


empty_like = _like("empty_like", lambda xp, s, d: xp.empty(s, d))
zeros_like = _like("zeros_like", lambda xp, s, d: xp.zeros(s, d))
ones_like = _like("ones_like", lambda xp, s, d: xp.ones(s, d))


@op(tags=FACTORY, method=False, differentiable=False, out=False)
def full_like(xp, input: "Tensor", fill_value, *, dtype=None, layout=None, device=None,
              requires_grad=False, memory_format=None):
    check_device(device)
    dt = dtype or D.from_np(input.dtype)
    return xp.full(input.shape, _number(fill_value, dt), dtype=dt.np)


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def empty_strided(xp, size, stride, *, dtype=None, layout=None, device=None,
                  requires_grad=False, pin_memory=False):
    check_device(device)
    size, stride = tuple(size), tuple(stride)
    dt = np.dtype(_np_dtype(dtype))
    span = 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    buf = xp.empty(max(span, 0), dt)
    return xp.lib.stride_tricks.as_strided(buf, size, [s * dt.itemsize for s in stride])


def _new(name, factory):
    @tensor_method(name)
    def method(self, *sizes, size=None, dtype=None, device=None, requires_grad=False,
               layout=None, pin_memory=False):
        return factory(_size(sizes, name, size), dtype or self._dtype,
                       self.device if device is None else device, requires_grad)
    return method


_new("new_zeros", lambda s, d, dev, rg: zeros(s, dtype=d, device=dev, requires_grad=rg))
_new("new_ones", lambda s, d, dev, rg: ones(s, dtype=d, device=dev, requires_grad=rg))
_new("new_empty", lambda s, d, dev, rg: empty(s, dtype=d, device=dev, requires_grad=rg))


@tensor_method("new_full")
def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
             layout=None, pin_memory=False):
    return full(size, fill_value, dtype=dtype or self._dtype,
                device=self.device if device is None else device, requires_grad=requires_grad)


@tensor_method("new_tensor")
def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    return tensor(data, dtype=dtype or self._dtype, requires_grad=requires_grad)


# ---------------------------------------------------------------------- ranges
def _arange_dtype(*vals):
    for v in vals:
        if isinstance(v, Tensor):
            v = v.item()
        if isinstance(v, float) or isinstance(v, np.floating):
            return D.get_default_dtype()
    return D.int64


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def arange(xp, start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False):
    check_device(device)
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    dt = dtype or _arange_dtype(start, end, step)
    if step == 0:
        raise RuntimeError("arange(): step must be nonzero")
    for v in (start, end):
        if isinstance(v, float) and not np.isfinite(v):  # numpy-only: host math on Python numbers
            raise RuntimeError(f"arange(): unsupported range: {start} -> {end}")
    if (end - start) / step < 0:
        raise RuntimeError("arange(): upper bound and larger bound inconsistent with step sign")
    if dt.kind in "iu" and any(isinstance(v, float) for v in (start, end, step)):
        return _int_arange(xp, start, end, step, dt)
    if dt is D.int64 and type(start) is int and type(end) is int and type(step) is int:
        return xp.arange(start, end, step, dtype=np.int64)  # exact: one kernel on a GPU
    n = int(np.ceil((end - start) / step))  # numpy-only: host math on Python numbers
    vals = start + xp.arange(n, dtype=np.float64 if dt.kind in "fc" or any(
        isinstance(v, float) for v in (start, end, step)) else np.int64) * step
    return vals.astype(dt.np)


def _int_arange(xp, start, end, step, dt):
    """Integer arange from float bounds, as PyTorch does it: the values come from the bounds
    truncated towards zero; the length too for int64, from the float bounds otherwise."""
    xs, xe, xst = int(start), int(end), int(step)
    if dt is D.int64:
        if xst == 0:
            raise RuntimeError("step must be nonzero")
        span = xe - xs + xst - (1 if xst > 0 else -1)
        n = abs(span) // abs(xst) * (1 if (span >= 0) == (xst > 0) else -1)  # C's truncation
    else:
        n = int(np.ceil((end - start) / step))  # numpy-only: host math on Python numbers
    return (xs + xp.arange(max(n, 0), dtype=np.int64) * xst).astype(dt.np)


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def range_(xp, start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
           requires_grad=False):
    """Deprecated ``torch.range``: includes ``end``."""
    dt = dtype or D.get_default_dtype()
    n = int(np.floor((end - start) / step)) + 1  # numpy-only: host math on Python numbers
    return (start + xp.arange(n) * step).astype(dt.np)


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def linspace(xp, start, end, steps, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    check_device(device)
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    if not isinstance(steps, numbers.Integral) or steps < 0:
        raise RuntimeError(f"linspace(): number of steps must be non-negative, got {steps}")
    dt = dtype or D.get_default_dtype()
    if steps == 1:
        return xp.full((1,), start).astype(dt.np)
    i = xp.arange(steps, dtype=np.float64)
    step = (end - start) / max(steps - 1, 1)
    half = steps // 2
    vals = xp.where(i < half, start + step * i, end - step * (steps - 1 - i))
    if dt.kind in "ui":
        vals = xp.trunc(vals)
    return vals.astype(dt.np)


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def logspace(xp, start, end, steps, base=10.0, *, out=None, dtype=None, layout=None,
             device=None, requires_grad=False):
    check_device(device)
    dt = dtype or D.get_default_dtype()
    exps = linspace.impl(xp, start, end, steps, dtype=D.float64)
    return xp.power(float(base), exps).astype(dt.np)


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def eye(xp, n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
        pin_memory=False):
    check_device(device)
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f"eye(): n and m must be non-negative, got n={n}, m={m}")
    return xp.eye(n, n if m is None else m, dtype=_np_dtype(dtype))


def _tri_indices(name):
    def impl(xp, row, col, offset=0, *, dtype=None, device=None, layout=None):
        check_device(device)
        r, c = getattr(xp, name)(row, offset, col)
        return xp.stack([r, c]).astype((dtype or D.int64).np)
    return impl


tril_indices = op("tril_indices", tags=CONSTRUCTOR, method=False, differentiable=False,
                  out=False)(_tri_indices("tril_indices"))
triu_indices = op("triu_indices", tags=CONSTRUCTOR, method=False, differentiable=False,
                  out=False)(_tri_indices("triu_indices"))


# ---------------------------------------------------------------------- factories' metas
# What a factory makes, from its arguments alone: the meta device allocates nothing.
def _sized_meta(name: str):
    def meta(*sizes, size=None, dtype=None, **kwargs):
        shape = _size(sizes, name, size)
        _np_dtype(dtype)  # the impl's dtype check
        return shape, dtype or D.get_default_dtype()
    return meta


for _d in (empty, zeros, ones):
    _d.def_meta(_sized_meta(_d.name))


@full.def_meta
def _(size, fill_value, *, dtype=None, **kwargs):
    return _size((size,)), dtype or _fill_dtype(fill_value)


def _like_meta(input, *args, dtype=None, **kwargs):
    return tuple(input.shape), dtype or input.dtype


for _d in (empty_like, zeros_like, ones_like, full_like):
    _d.def_meta(_like_meta)


@empty_strided.def_meta
def _(size, stride, *, dtype=None, **kwargs):
    if len(tuple(size)) != len(tuple(stride)):
        raise RuntimeError("mismatch in length of strides and shape")
    _np_dtype(dtype)
    return _size((tuple(size),)), dtype or D.get_default_dtype()


@eye.def_meta
def _(n, m=None, *, dtype=None, **kwargs):
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f"eye(): n and m must be non-negative, got n={n}, m={m}")
    _np_dtype(dtype)
    return (n, n if m is None else m), dtype or D.get_default_dtype()


def _steps_meta(start, end, steps, *args, dtype=None, **kwargs):
    if not isinstance(steps, numbers.Integral) or steps < 0:
        raise RuntimeError(f"linspace(): number of steps must be non-negative, got {steps}")
    return (int(steps),), dtype or D.get_default_dtype()


linspace.def_meta(_steps_meta)
logspace.def_meta(_steps_meta)


# ---------------------------------------------------------------------- conversions
@op(method=False, function=False, out=False, grad_name="ToCopyBackward0")
def _to_copy(xp, self: "Tensor", dtype):
    return cast(self, dtype)


@_to_copy.def_backward
def _(ctx, g):
    dt = ctx.self.dtype
    if g.is_complex() and not dt.is_complex:
        g = g.real  # the gradient of a real input is the real part
    return g if g._dtype is dt else _to_copy(g, dt)  # g.to(dt), without its parsing


@op(method=False, function=False, out=False, grad_name="ToCopyBackward0")
def _to_device(xp, self: "Tensor", *, device, source, non_blocking=False):
    """A copy of ``self`` on ``device`` (the dispatcher runs it on that device's backend;
    ``source`` is self's device, where the gradient goes back to). ``non_blocking``: a copy
    from pinned host memory to a GPU runs asynchronously on the current stream."""
    return backends_base.transfer(self, backends_base.of_device(device), device,
                                  non_blocking=non_blocking)


@_to_copy.def_meta
def _(self, dtype):
    return tuple(self.shape), dtype


@_to_device.def_meta
def _(self, *, device, source, non_blocking=False):
    return tuple(self.shape), self.dtype


@_to_device.def_backward
def _(ctx, g):
    return g.to(ctx.source)


def _parse_to(args, kwargs):
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    for a in args:
        if isinstance(a, D.dtype):
            dtype = a
        elif isinstance(a, Tensor):  # x.to(other): other's dtype and device
            dtype, device = a._dtype, a.device
        elif isinstance(a, str) or a is not None and type(a).__name__ == "device":
            device = a
        elif isinstance(a, int) and not isinstance(a, bool):
            device = "cuda"
    return dtype, device


@tensor_method("to")
def to(self, *args, non_blocking=False, copy=False, memory_format=None, **kwargs):
    """``x.to(dtype)``, ``x.to(device)``, ``x.to(other)``, ``x.to(device, dtype)``."""
    dtype, device = _parse_to(args, kwargs)
    t = self
    if device is not None:
        dev = check_device(device)
        if dev.type == "cuda" and dev.index is None:
            dev = _device_mod.device("cuda", _current_cuda_index())
        if dev != self.device:
            t = _to_device(self, device=dev, source=self.device, non_blocking=True) if \
                non_blocking and dev.type == "cuda" else \
                _to_device(self, device=dev, source=self.device)
    if dtype is not None and dtype is not t._dtype:
        return _to_copy(t, dtype)
    return t.clone() if copy and t is self else t


def _current_cuda_index() -> int:
    return backends_base.get("cuda").current_index()


@tensor_method("cuda")
def cuda(self, device=None, non_blocking=False, memory_format=None):
    return to(self, "cuda" if device is None else
              device if not isinstance(device, int) else f"cuda:{device}",
              non_blocking=non_blocking)


@tensor_method("cpu")
def cpu(self, memory_format=None):
    return to(self, "cpu")


def _caster(dtype):
    def method(self, memory_format=None):
        return to(self, dtype)
    return method


for _name, _dt in dict(float=D.float32, double=D.float64, half=D.float16,
                       bfloat16=D.bfloat16, int=D.int32, long=D.int64, short=D.int16,
                       char=D.int8, byte=D.uint8, bool=D.bool_, cfloat=D.complex64,
                       cdouble=D.complex128).items():
    tensor_method(_name)(_caster(_dt))


@tensor_method("type")
def type_(self, dtype=None, non_blocking=False):
    if dtype is None:
        return f"ember.{D.TYPE_NAME[self._dtype]}Tensor"
    if isinstance(dtype, str):
        name = dtype.rsplit(".", 1)[-1].replace("Tensor", "")
        dtype = {v: k for k, v in D.TYPE_NAME.items()}[name]
    return to(self, dtype)


@tensor_method("type_as")
def type_as(self, other):
    return to(self, other._dtype)


@op(out=False)
def clone(xp, input: "Tensor", *, memory_format=None):
    return input.copy()


@clone.def_meta
def _(input, *, memory_format=None):
    return tuple(input.shape), input.dtype


@clone.def_backward
def _(ctx, g):
    return g


_CONTIGUOUS = MEMORY_FORMATS["contiguous_format"]


@tensor_method("contiguous")
def contiguous(self, memory_format=None):
    return self if self.is_contiguous() else clone(self, memory_format=_CONTIGUOUS)


@op(function=False, method=False, inplace=True, out=False, grad_name="CopyBackwards")
def copy(xp, self: "Tensor", src: "Scalar|Tensor", non_blocking=False):  # torch takes numbers
    try:
        b = xp.broadcast_to(src, self.shape)
    except ValueError:
        raise RuntimeError(f"The size of tensor a ({self.shape[-1] if self.ndim else 1}) must "
                           f"match the size of tensor b ({src.shape[-1] if src.ndim else 1}) at "
                           "non-singleton dimension") from None
    return cast(b, D.from_np(self.dtype))


@tensor_method("copy_")
def copy_(self, src, non_blocking=False):
    """``self.copy_(src)``: ``src`` broadcast and cast into ``self``. A source on another
    device moves over first, differentiably (its gradient goes back to its device), as
    PyTorch's copy between devices."""
    if isinstance(src, Tensor) and src.device != self.device and not (
            src.ndim == 0 and src.device.type == "cpu"):
        src = src.to(self.device, non_blocking=non_blocking)
    return call_inplace(copy, self, (src, non_blocking), {})


@copy.def_meta
def _(self, src, non_blocking=False):
    if isinstance(src, Tensor):
        shape = tuple(self.shape)
        try:
            ok = np.broadcast_shapes(tuple(src.shape), shape) == shape
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"The size of tensor a ({shape[-1] if shape else 1}) must match "
                               f"the size of tensor b ({src.shape[-1] if src.ndim else 1}) at "
                               "non-singleton dimension")
    return tuple(self.shape), self.dtype


@copy.def_backward
def _(ctx, g):
    return g.new_zeros(g.shape), g


@op(inplace=True, out=False, promote=None)
def fill(xp, input: "Tensor", value: "Scalar|Tensor"):
    if isinstance(value, np.ndarray) and value.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.ndim} dimensions.")
    return xp.full(input.shape, _number(value, D.from_np(input.dtype)), dtype=input.dtype)


@fill.def_meta
def _(input, value):
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.ndim} dimensions.")
    return tuple(input.shape), input.dtype


@fill.def_backward
def _(ctx, g):
    return g.new_zeros(g.shape), g.sum()


@tensor_method("zero_")
def zero_(self: Tensor) -> Tensor:
    """zero_(input) -> Tensor: fill ``input`` with zeros in place (also ``torch.zero_``)."""
    return self.fill_(0)


_ = _grad_state
