"""Python indexing (``x[key]``, ``x[key] = v``) and the ops it lowers to.

``x[key]`` is split the way PyTorch splits it: the basic part of the key (ints, slices, None,
Ellipsis) is applied first as one view (``index_view``), then the advanced part (integer and bool
tensors, lists, Python bools) as one ``index`` op over the view's dimensions. Applying the basic
part first is what gives PyTorch's placement rule: ints have already removed their dimensions,
so advanced indices that are adjacent among the remaining dimensions replace them in place,
and separated ones put the broadcast index dimensions first (numpy's rule, once only slices and
arrays are left in the key).

``x[key] = v`` writes through the same split: a basic key takes the view and copies/fills into
it (so autograd sees an in-place op on a view and rebases the base's history), an advanced key
runs ``index_put_`` on the (viewed) tensor. Without autograd both write the numpy array in place.

The dim-wise families (gather/scatter, index_select/add/copy/fill, masked_*) live in
``index_ops.py``.
"""

from __future__ import annotations

import numbers
import operator
import warnings

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor, _wrap
from ..autograd.grad_mode import state as _grad_state
from ..backends.casting import cast
from ..backends.cpu import BACKEND as CPU_BACKEND
from .bind import tensor_method
from .creation import as_tensor, tensor, zeros
from .registry import call_inplace, op

PUBLIC = ["argwhere"]

_BAD_INDEX_DTYPE = "tensors used as indices must be long, int, byte or bool tensors"

# C++ names PyTorch prints in "value cannot be converted to type ... without overflow"
_CPP_NAME = {D.bool_: "bool", D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
             D.int32: "int", D.int64: "int64_t", D.float16: "c10::Half",
             D.bfloat16: "c10::BFloat16", D.float32: "float", D.float64: "double",
             D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>",
             D.float8_e4m3fn: "c10::Float8_e4m3fn", D.float8_e5m2: "c10::Float8_e5m2"}


# ---------------------------------------------------------------------- scalar values
def scalar_value(xp, value, dtype: D.dtype) -> np.ndarray:
    """A Python number as a 0-d array of ``dtype``, with PyTorch's overflow check.

    PyTorch refuses a value that does not fit the destination (300 into uint8, NaN into an
    integer, a complex number into a real tensor) instead of wrapping it silently."""
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError("expected a 0-dimensional value tensor")
        value = value.item()
    bad = False
    kind = dtype.kind
    if isinstance(value, (bool, np.bool_)):
        pass
    elif isinstance(value, numbers.Integral):
        v = int(value)
        lo, hi = _limits(dtype)
        if kind == "u":  # PyTorch lets -max..max into unsigned types (wrapping negatives)
            bad = abs(v) > hi
        elif kind != "b":
            bad = not lo <= v <= hi
    elif isinstance(value, numbers.Real):
        v = float(value)
        lo, hi = _limits(dtype)
        if kind in "iu":
            bad = v != v or not lo - 1 < v < hi + 1
        elif kind in "fc":
            bad = abs(v) > hi and abs(v) != float("inf")
    elif isinstance(value, numbers.Complex):
        bad = dtype.kind != "c" and complex(value).imag != 0
        if not bad and dtype.kind != "c":
            value = complex(value).real
    else:
        raise TypeError(f"can't assign a {type(value).__name__} to a "
                        f"ember.{D.TYPE_NAME[dtype]}Tensor")
    if bad:
        raise RuntimeError(f"value cannot be converted to type {_CPP_NAME[dtype]} without "
                           "overflow")
    return cast(xp.asarray(value), dtype)


_LIMITS: dict = {}


def _limits(dtype: D.dtype) -> tuple:
    """(lowest, highest) finite value of ``dtype``, cached (finfo/iinfo are slow to build)."""
    r = _LIMITS.get(dtype)
    if r is None:
        if dtype.kind in "iu":
            info = np.iinfo(dtype.np)
            r = (int(info.min), int(info.max))
        elif dtype.kind in "fc":
            m = float(D.finfo(dtype.to_real() if dtype.kind == "c" else dtype).max)
            r = (-m, m)
        else:
            r = (0, 1)
        _LIMITS[dtype] = r
    return r


def cast_array(a: np.ndarray, dtype: D.dtype) -> np.ndarray:
    """``a`` converted to ``dtype`` as a tensor copy does (complex to real keeps the real part)."""
    return cast(a, dtype)


# ---------------------------------------------------------------------- advanced keys
def _index_array(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "b" or a.dtype in (np.int64, np.int32):
        return a
    if a.dtype == np.uint8:
        warnings.warn("indexing with dtype ember.uint8 is now deprecated, please use a dtype "
                      "ember.bool instead.", UserWarning, stacklevel=4)
        return a.astype(bool)
    raise IndexError(_BAD_INDEX_DTYPE)


def adv_key(xp, shape: tuple, arrays: list, dims) -> tuple:
    """The numpy key for advanced indices ``arrays`` starting at ``dims`` (None: one after the
    other from dim 0). Bool masks cover as many dims as they have; next to other indices they
    become their nonzero coordinates (a lone mask stays a mask). Checks dtypes, mask shapes,
    broadcasting and bounds with PyTorch's errors."""
    nd = len(shape)
    key: list = [slice(None)] * nd
    parts = []
    d = 0
    for k, a in enumerate(arrays):
        a = _index_array(a)
        if dims is not None:
            d = dims[k]
        if a.dtype == np.bool_:
            m = a.ndim
            if d + m > nd:
                raise IndexError(f"too many indices for tensor of dimension {nd}")
            for j in range(m):
                if a.shape[j] != shape[d + j]:
                    raise IndexError(f"The shape of the mask {list(a.shape)} at index {j} does "
                                     f"not match the shape of the indexed tensor {list(shape)} "
                                     f"at index {d + j}")
            if m == 0:  # a 0-dim mask is an index of one (True) or no (False) element
                raise IndexError("a 0-dimensional bool index needs a new dimension; use x[None]")
            if len(arrays) == 1:  # a lone mask: numpy's bool indexing is twice as fast
                return (slice(None),) * d + (a,)
            parts.extend(zip(range(d, d + m), xp.nonzero(a)))
            d += m
        else:
            if d >= nd:
                raise IndexError(f"too many indices for tensor of dimension {nd}")
            parts.append((d, a))
            d += 1
    try:
        b = parts[0][1].shape if len(parts) == 1 else np.broadcast_shapes(
            *(p.shape for _, p in parts))
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with "
                         "shapes " + ", ".join(str(list(p.shape)) for _, p in parts)) from None
    # like PyTorch, an empty result reads nothing, so its indices are not checked; they are
    # replaced by harmless ones numpy will accept
    empty = 0 in b or 0 in shape
    for rank, (d, p) in enumerate(parts):
        n = shape[d]
        if empty:
            if 0 in b:
                p = xp.zeros(b, np.int64)
            elif n == 0:
                raise IndexError("index is out of bounds for dimension with size 0")
            else:
                p = xp.zeros(p.shape, np.int64)
        elif p.size:
            # PyTorch moves the indexed dims to the front first: it names the rank
            xp.check_index(p, -n, n, "index", lambda v, rank=rank, n=n: IndexError(
                f"index {v} is out of bounds for dimension {rank} with size {n}"))
        key[d] = p
    while key and isinstance(key[-1], slice):
        key.pop()
    return tuple(key)


def adv_shape(xp, shape: tuple, key: tuple) -> tuple:
    """Shape of ``a[key]`` for ``a`` of ``shape`` (``key`` from ``adv_key``), without indexing."""
    pos, shapes, d = [], [], 0
    for k in key:
        if isinstance(k, slice):
            d += 1
        elif k.dtype == np.bool_:  # a mask covers its dims with one dim of its True count
            pos.extend(range(d, d + k.ndim))
            shapes.append((int(xp.count_nonzero(k)),))
            d += k.ndim
        else:
            pos.append(d)
            shapes.append(k.shape)
            d += 1
    b = np.broadcast_shapes(*shapes)
    if pos == list(range(pos[0], pos[-1] + 1)):
        return tuple(shape[:pos[0]]) + b + tuple(shape[pos[-1] + 1:])
    return b + tuple(s for i, s in enumerate(shape) if i not in pos)


def fit_value(xp, a: np.ndarray, shape: tuple, advanced: bool) -> np.ndarray:
    """Broadcast a value to the written region ``shape`` as setitem does (extra leading size-1
    dims are dropped), raising PyTorch's message when it does not fit."""
    if a.shape == shape or a.ndim == 0:  # numpy's assignment broadcasts these itself
        return a
    lead = a.ndim - len(shape)
    if lead > 0 and all(s == 1 for s in a.shape[:lead]):
        a = a.reshape(a.shape[lead:])
    try:
        return xp.broadcast_to(a, shape)
    except ValueError:
        pass
    if advanced:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(a.shape)} cannot be "
                           f"broadcast to indexing result of shape {list(shape)}")
    if a.ndim > len(shape):
        raise RuntimeError(f"expand(ember.{D.TYPE_NAME[D.from_np(a.dtype)]}Tensor"
                           f"{{{list(a.shape)}}}, size={list(shape)}): the number of sizes "
                           f"provided ({len(shape)}) must be greater or equal to the number of "
                           f"dimensions in the tensor ({a.ndim})")
    off = len(shape) - a.ndim
    for i in range(a.ndim - 1, -1, -1):
        if a.shape[i] not in (1, shape[off + i]):
            raise RuntimeError(f"The expanded size of the tensor ({shape[off + i]}) must match "
                               f"the existing size ({a.shape[i]}) at non-singleton dimension "
                               f"{off + i}.  Target sizes: {list(shape)}.  Tensor sizes: "
                               f"{list(a.shape)}")
    raise RuntimeError(f"cannot broadcast {list(a.shape)} to {list(shape)}")


# ---------------------------------------------------------------------- the ops
@op(view=True, method=False, function=False, out=False, grad_name="SliceBackward0")
def index_view(xp, input: "Tensor", key):
    """The basic part of ``x[key]``: ``key`` is a tuple of ints, slices and None (no Ellipsis);
    the result is a view of ``input``."""
    return input[key + (Ellipsis,)]  # the trailing Ellipsis keeps an all-int key a 0-d view


_index_view_fast = index_view.method  # x[1, 2:5] is a hot small-tensor call


@index_view.def_backward
def _(ctx, g):
    return index_view_backward(g, ctx.input.shape, ctx.key)


@op(method=False, function=False, out=False)
def index_view_backward(xp, grad: "Tensor", shape, key):
    """Zeros of ``shape`` with ``grad`` written at ``key`` (the gradient of ``index_view``)."""
    out = xp.zeros(shape, grad.dtype)
    out[key + (Ellipsis,)] = grad
    return out


@index_view_backward.def_backward
def _(ctx, g):
    return index_view(g, ctx.key)


def pad_to(t: Tensor, shape: tuple) -> Tensor:
    """``t`` in the leading corner of zeros of ``shape`` (differentiable)."""
    if tuple(t.shape) == tuple(shape):
        return t
    return index_view_backward(t, tuple(shape), tuple(slice(0, n) for n in t.shape))


@op(method=False, function=False, out=False, saves=("indices",), grad_name="IndexBackward0",
    tags=("host_indices",))
def index(xp, input: "Tensor", indices: "Tensor[]", dims=None):
    """Advanced indexing: ``indices`` (integer or bool tensors) start at ``dims`` (None: dims
    0, 1, ... in order)."""
    key = adv_key(xp, input.shape, indices, dims)
    if not key:
        return input.copy()
    adv = [d for d, k in enumerate(key) if not isinstance(k, slice)]
    if len(adv) == 1 and key[adv[0]].dtype != np.bool_:
        return xp.take(input, key[adv[0]], axis=adv[0])  # several times faster than input[key]
    return input[key]


# numpy-only: the meta evaluates the key on host stand-ins (shapes only, no tensor data)
@index.def_meta
def _(input, indices, dims=None):
    if any(i.dtype in (D.bool_, D.uint8) for i in indices):
        raise RuntimeError("index: output shape depends on the input's values (bool mask)")
    # shapes only: host numpy stand-ins, whatever the device
    stand_ins = [np.broadcast_to(np.zeros((), np.int64), tuple(i.shape)) for i in indices]
    key = adv_key(CPU_BACKEND.xp, tuple(input.shape), stand_ins, dims)
    return (adv_shape(np, tuple(input.shape), key) if key else tuple(input.shape)), input.dtype


@index.def_backward
def _(ctx, g):
    return index_put(g.new_zeros(ctx.input.shape), ctx.indices, g, True, dims=ctx.dims), None


@op(inplace=True, out=False, saves=("indices",), tags=("host_indices",))
def index_put(xp, input: "Tensor", indices: "Tensor[]", values: "Tensor", accumulate=False, *,
              dims=None):
    """index_put(input, indices, values, accumulate=False) -> Tensor

    ``input`` with ``input[indices] = values`` (or ``+=`` with ``accumulate``, adding every
    repeated index). ``dims`` (ember extension) places the indices on other dims than 0, 1, ...
    """
    if values.dtype != input.dtype:
        raise RuntimeError("Index put requires the source and destination dtypes match, got "
                           f"{_tname(input)} for the destination and {_tname(values)} for the "
                           "source.")
    key = adv_key(xp, input.shape, indices, dims)
    v = fit_value(xp, values, adv_shape(xp, input.shape, key) if key else input.shape, True)
    if accumulate:
        work = _upcast(input)
        out = work.copy()
        xp.ufunc_at("add", out, key, v.astype(work.dtype, copy=False))
        return out.astype(input.dtype, copy=False)
    out = input.copy()
    out[key] = v
    return out


@index_put.def_meta
def _(input, indices, values, accumulate=False, *, dims=None):
    return tuple(input.shape), input.dtype  # (stand-in masks would select nothing)


@index_put.def_backward
def _(ctx, g):
    idx, dims = ctx.indices, ctx.dims
    need = ctx.needs_input_grad
    g_in = g_val = None
    if need[0]:
        g_in = g if ctx.accumulate else index_put(g, idx, g.new_zeros(()), dims=dims)
    if need[2]:
        g_val = index(g, idx, dims)
        shape = tuple(ctx.values.shape)
        lead = len(shape) - g_val.ndim
        if lead > 0:  # values had extra leading size-1 dims that setitem dropped
            g_val = g_val.sum_to_size(shape[lead:]).reshape(shape)
    return g_in, None, g_val


def _tname(a: np.ndarray) -> str:
    return D.TYPE_NAME[D.from_np(a.dtype)]


def _upcast(a: np.ndarray) -> np.ndarray:
    """Half types accumulate in float32 (as PyTorch's CPU kernels do), then round once."""
    return a.astype(np.float32) if a.dtype in (np.float16, D.bfloat16.np) else a


@op(saves=("index",))
def take(xp, input: "Tensor", index: "Tensor"):
    """take(input, index) -> Tensor: elements of the flattened ``input`` at ``index``."""
    if index.dtype != np.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {_tname(index)}")
    n = input.size
    xp.check_index(index, -n, n, "take", lambda v: IndexError(
        f"out of range: tried to access index {v} on a tensor of {n} elements."))
    return input.reshape(-1)[index]


@take.def_backward
def _(ctx, g):
    x = ctx.input
    flat = index_put(g.new_zeros((x.numel(),)), [ctx.index], g, True)
    return flat.reshape(x.shape), None


@op(differentiable=False, out=False, tags=("dynamic_shape",))
def nonzero(xp, input: "Tensor", *, as_tuple=False):
    """nonzero(input, *, as_tuple=False) -> Tensor or tuple of Tensors"""
    a = input if input.ndim else input.reshape(1)
    coords = [c.astype(np.int64, copy=False) for c in xp.nonzero(a)]
    if as_tuple:
        return tuple(coords)
    if input.ndim == 0:
        return xp.zeros((len(coords[0]), 0), np.int64)
    return xp.stack(coords, axis=1) if coords else xp.zeros((0, 0), np.int64)


def argwhere(input: Tensor) -> Tensor:
    """argwhere(input) -> Tensor: the indices of non-zero elements, one row per element."""
    return nonzero(input)


tensor_method("argwhere")(argwhere)


# ---------------------------------------------------------------------- key parsing
_NEW, _ELL, _INT, _SLICE, _ADV, _BOOL = range(6)


def _as_index_tensor(e) -> Tensor:
    """A key entry given as host data (a numpy array, a list or tuple) as an index tensor."""
    if isinstance(e, np.ndarray):
        return as_tensor(e, D.int64 if e.dtype == np.uint64 else None)
    if isinstance(e, (list, tuple)) and len(e) == 0:
        return tensor(e, dtype=D.int64)
    return tensor(e)


def _seq_as_tuple(key: list) -> bool:
    """PyTorch's legacy rule: a list holding slices, None, Ellipsis, tensors or sequences is a
    multi-dimensional key, as if it were a tuple."""
    if len(key) >= 32:
        return False
    return any(e is None or e is Ellipsis or isinstance(e, (slice, Tensor, np.ndarray, list,
                                                             tuple)) for e in key)


def _slice_int(v):
    return None if v is None else operator.index(v)


def _parse_key(x: Tensor, key) -> tuple[tuple, list]:
    """Split ``key`` into a basic key for ``index_view`` and advanced entries
    ``[(tensor, dim in the view), ...]``."""
    if type(key) is not tuple:
        if isinstance(key, list) and _seq_as_tuple(key):
            warnings.warn("Using a non-tuple sequence for multidimensional indexing is "
                          "deprecated; use x[tuple(seq)] instead of x[seq].", UserWarning,
                          stacklevel=3)
            key = tuple(key)
        else:
            key = (key,)
    items = []
    consumed = 0
    for e in key:
        te = type(e)
        if te is int:  # the common entries first: plain ints and slices
            items.append((_INT, e))
            consumed += 1
        elif te is slice:
            items.append((_SLICE, e))
            consumed += 1
        elif e is None:
            items.append((_NEW, None))
        elif e is Ellipsis:
            items.append((_ELL, None))
        elif isinstance(e, (bool, np.bool_)):
            items.append((_BOOL, bool(e)))
        elif isinstance(e, numbers.Integral):
            items.append((_INT, int(e)))
            consumed += 1
        elif isinstance(e, slice):
            items.append((_SLICE, e))
            consumed += 1
        else:
            if isinstance(e, str):
                raise TypeError(f"new(): invalid data type '{type(e).__name__}'")
            if not isinstance(e, Tensor):
                if not isinstance(e, (list, tuple, np.ndarray)):
                    raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and "
                                     "long or byte Variables are valid indices (got "
                                     f"{type(e).__name__})")
                e = _as_index_tensor(e)
            if e._backend is not x._backend and e.device.type == "cpu":
                e = e.to(x.device)  # CPU indices index any device's tensor, as in PyTorch
            dt = e._dtype
            if dt is D.uint8:
                warnings.warn("indexing with dtype ember.uint8 is now deprecated, please use "
                              "a dtype ember.bool instead.", UserWarning, stacklevel=3)
                e = e.to(D.bool_)
                dt = D.bool_
            if dt is D.bool_:
                if e.ndim == 0:  # a host read: the key's shape depends on the value
                    items.append((_BOOL, bool(e.item())))
                else:
                    items.append((_ADV, e))
                    consumed += e.ndim
            elif dt in (D.int64, D.int32):
                items.append((_ADV, e))
                consumed += 1
            else:
                raise IndexError(_BAD_INDEX_DTYPE)
    shape = x._data.shape  # (the array's own shape: no Size built on this hot path)
    nd = len(shape)
    if consumed > nd:
        first = next(k for k, _ in items if k in (_INT, _SLICE, _ADV))
        if nd == 0 and first == _INT:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        if nd == 0 and first == _SLICE:
            raise IndexError("slice() cannot be applied to a 0-dim tensor.")
        raise IndexError(f"too many indices for tensor of dimension {nd}")
    bkey: list = []
    adv: list = []
    src = out = 0  # current dim of x and of the view
    ell_left = nd - consumed
    for kind, e in items:
        if kind == _SLICE:
            step = 1 if e.step is None else operator.index(e.step)
            if step <= 0:
                raise ValueError("slice step cannot be zero" if step == 0 else
                                 "step must be greater than zero")
            bkey.append(slice(_slice_int(e.start), _slice_int(e.stop),
                              None if step == 1 else step))
            src += 1
            out += 1
        elif kind == _INT:
            n = shape[src]
            if not -n <= e < n:
                raise IndexError(f"index {e} is out of bounds for dimension {src} with size {n}")
            bkey.append(e)
            src += 1
        elif kind == _NEW:
            bkey.append(None)
            out += 1
        elif kind == _ELL:
            bkey.extend([slice(None)] * ell_left)
            src += ell_left
            out += ell_left
            ell_left = 0  # PyTorch lets a second Ellipsis stand for no dims
        elif kind == _BOOL:  # a new dim of size 1, indexed by [0] (True) or [] (False)
            bkey.append(None)
            adv.append((zeros(1 if e else 0, dtype=D.int64, device=x.device), out))
            out += 1
        else:
            k = e.ndim if e._dtype is D.bool_ else 1
            bkey.extend([slice(None)] * k)
            adv.append((e, out))
            src += k
            out += k
    return tuple(bkey), adv


_FULL = slice(None)


def _trivial(bkey: tuple) -> bool:
    return all(k == _FULL for k in bkey)


# ---------------------------------------------------------------------- __getitem__/__setitem__
@tensor_method("__getitem__")
def _getitem(self: Tensor, key) -> Tensor:
    """``x[key]``: a view for ints/slices/None/Ellipsis, a copy with advanced indices."""
    bkey, adv = _parse_key(self, key)
    if not adv:
        return _index_view_fast(self, bkey)
    base = self if _trivial(bkey) else index_view(self, bkey)
    return index(base, [t for t, _ in adv], tuple(d for _, d in adv))


@tensor_method("__setitem__")
def _setitem(self: Tensor, key, value) -> None:
    """``x[key] = value``: value is a tensor (broadcast, cast to x's dtype) or a number."""
    bkey, adv = _parse_key(self, key)
    dt = self._dtype
    is_t = isinstance(value, Tensor)
    if not is_t:
        if isinstance(value, np.ndarray):
            value = _wrap(value, D.from_np(value.dtype))
            is_t = True
        else:
            # not a kernel: without autograd, setitem writes the CPU array (self._data) in place
            arr = scalar_value(np, value, dt)
    if _grad_state.enabled and (self.requires_grad or (is_t and value.requires_grad)) or \
            not self._backend.has_data:  # meta: the write's checks as in-place ops, no data
        _setitem_tracked(self, bkey, adv, value if is_t else arr, is_t)
        return
    if is_t:
        arr = cast_array(value._data, dt)
    target = _writable(self._data[bkey + (Ellipsis,)])
    if adv:
        k = adv_key(self._backend.xp, target.shape, [t._data for t, _ in adv],
                    [d for _, d in adv])
        target[k] = fit_value(np, arr, adv_shape(np, target.shape, k), True)
    else:
        target[...] = fit_value(np, arr, target.shape, False)
    self._bump()


def _writable(a: np.ndarray) -> np.ndarray:
    """``a`` itself, or for a read-only view (an expanded tensor) a writable alias of the same
    memory; PyTorch's error when elements of the written region alias each other."""
    if a.flags.writeable:
        return a
    if any(st == 0 and n > 1 for n, st in zip(a.shape, a.strides)):
        raise RuntimeError("unsupported operation: more than one element of the written-to "
                           "tensor refers to a single memory location. Please clone() the "
                           "tensor before performing the operation.")
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.writeable or not root.flags.c_contiguous:
        raise RuntimeError("the written-to tensor is read-only")
    off = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return np.ndarray(a.shape, a.dtype, buffer=root, offset=off, strides=a.strides)


def _setitem_tracked(self, bkey, adv, value, is_t):
    """setitem under autograd: an in-place op on the view (or on ``self``), so the engine
    records CopySlices/rebases history and the value gets its gradient."""
    dt = self._dtype
    if self._backend.has_data:  # PyTorch's error for self-overlapping targets (meta: none)
        _writable(self._data[bkey + (Ellipsis,)])
    if is_t and value._dtype is not dt:
        value = value.to(dt)
    if not adv:
        view = index_view(self, bkey)
        if not is_t:
            view.fill_(_wrap(value, dt))
            return
        if value._backend.has_data:  # PyTorch's message on mismatch
            fit_value(np, value._data, view._data.shape, False)
        lead = value._data.ndim - view._data.ndim
        if lead > 0:
            value = value.reshape(tuple(value.shape[lead:]))
        view.copy_(value)
        return
    target = self if _trivial(bkey) else index_view(self, bkey)
    vals = value if is_t else _wrap(value, dt)
    call_inplace(index_put, target, ([t for t, _ in adv], vals),
                 {"dims": tuple(d for _, d in adv)})
