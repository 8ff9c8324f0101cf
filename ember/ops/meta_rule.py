"""How the dispatcher runs an op call on the meta device: no kernel, only metadata.

The general path (``OpDef.__call__``) hands a call whose backend is the meta backend to
``run``, which returns the meta arrays (``backends/meta.py``) the dispatcher then wraps, marks
as views and records for autograd as it does any backend's arrays:

- a view op runs its impl on probes (numpy arrays with the inputs' exact layout over memory
  that holds nothing), so the view's shape, strides and storage offset are the impl's own;
- any other op takes its output shapes and dtypes from the op table's ``meta``
  (``OpDef.run_meta``); the strides are contiguous, except where PyTorch keeps its input's
  layout (element-wise ops, copies, ``*_like`` factories);
- an op whose result depends on the tensors' values (``nonzero``, ``equal``) raises
  PyTorch's NotImplementedError.
"""

from __future__ import annotations

import numpy as np

from .._tensor import MEMORY_FORMATS, Tensor, _wrap
from ..backends import base as backends_base
from ..backends.cpu import BACKEND as CPU_BACKEND
from ..backends.meta import BACKEND as META
from ..backends.meta import NO_DATA, MetaArray, dense_like, from_probe, probe
from .arguments import translate_error

# ops whose result is laid out like their first input of the result's shape (PyTorch's
# preserve_format), besides the pointwise ones
_PRESERVE = frozenset(("clone", "_to_copy", "_to_device", "copy", "fill", "empty_like",
                       "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                       "randint_like", "uniform", "normal_functional", "random_", "exponential",
                       "geometric", "log_normal", "cauchy", "bernoulli_functional",
                       "bernoulli"))


_CONTIGUOUS = MEMORY_FORMATS["contiguous_format"]


def no_meta_kernel(op) -> NotImplementedError:
    return NotImplementedError(
        f"ember.{op.name}: attempted to run this operator with Meta tensors, but its result "
        "depends on the tensors' values, which meta tensors do not have")


def run(op, args: tuple, kwargs: dict):
    """The meta arrays of ``op(*args, **kwargs)`` (a tuple or list of them for several
    outputs)."""
    if op.name == "allclose":  # PyTorch's computes ``isclose(...).all().item()``
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")
    if op.returns == "python" or ("dynamic_shape" in op.tags and op.meta is None):
        raise no_meta_kernel(op)
    if op.view:
        return _run_view(op, args, kwargs)
    if op._takes_device and op.meta is None:
        kwargs = {**kwargs, "device": "cpu"}  # the stand-in run below is on the host
    try:
        if op.meta is None and "pointwise" in op.tags:
            meta = _pointwise_meta(op, args, kwargs)
        else:
            meta = op.run_meta(*args, **kwargs)
    except RuntimeError as e:
        if "depends on the input's values" in str(e):
            raise no_meta_kernel(op) from None
        raise
    except backends_base.KERNEL_ERRORS as e:  # a meta rule's own numpy error (broadcasting)
        raise translate_error(op, e, args, kwargs) from None
    if op.name == "empty_strided":  # the one factory whose caller picks the strides
        return MetaArray(meta[0], meta[1].np, args[1])
    return _arrays(meta, _layout_source(op, args, kwargs))


def mixed_devices(op, inputs: list):
    """The backend of a call mixing meta tensors with tensors of another device (zero-dim CPU
    tensors aside): anything may be copied into a meta tensor; nothing out of one; any other
    op raises PyTorch's error, which names the device its first tensor set."""
    def counts(t):
        return not (t._backend is CPU_BACKEND and t.ndim == 0)
    if op.name == "copy":
        if inputs[0]._backend is META:
            return META
        raise NotImplementedError(NO_DATA)
    first = next(t for t in inputs if counts(t))
    other = next(t for t in inputs if t._backend is not first._backend and counts(t))
    raise RuntimeError(f"Tensor on device {other.device} is not on the expected device "
                       f"{first.device}!")


def _pointwise_meta(op, args: tuple, kwargs: dict):
    """An element-wise op without a meta rule: the broadcast shape of its tensors, and the
    dtype the op's own meta evaluation gives on inputs of one element each (the dtype does not
    depend on the sizes; the dimension count, which promotion reads, is kept)."""
    shape = np.broadcast_shapes(*(tuple(a.shape) for a in args if isinstance(a, Tensor)))

    def small(a):
        if isinstance(a, Tensor) and a.ndim:
            return _wrap(MetaArray((1,) * a.ndim, a._dtype.np), a._dtype, META)
        return a
    meta = op.run_meta(*(small(a) for a in args), **kwargs)
    if isinstance(meta, tuple) and len(meta) == 2 and hasattr(meta[1], "np"):
        return shape, meta[1]
    return tuple((shape, m[1]) for m in meta)


def _run_view(op, args: tuple, kwargs: dict):
    """A view op's impl on probes of its meta inputs."""
    sources = []

    def unwrap(a):
        if isinstance(a, Tensor):
            if a._backend is META:
                sources.append(a._data)
                return probe(a._data)
            return a._data
        if isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) for x in a):
            return type(a)(unwrap(x) for x in a)
        return a
    vals = [unwrap(a) if i in op.tensor_pos else a for i, a in enumerate(args)]
    try:
        res = op.impl(CPU_BACKEND.xp, *vals, **kwargs)
    except backends_base.KERNEL_ERRORS as e:
        raise translate_error(op, e, args, kwargs) from None
    if isinstance(res, (tuple, list)):
        return type(res)(from_probe(r, sources) if r is not None else None for r in res)
    return from_probe(res, sources)


def _layout_source(op, args: tuple, kwargs: dict) -> list:
    """The (shape, strides) of the tensor inputs whose layout the op's result may keep (the
    first of the result's shape does); none for an op whose results are contiguous."""
    if op.name not in _PRESERVE and "pointwise" not in op.tags or \
            kwargs.get("memory_format") is _CONTIGUOUS:
        return []
    return [(tuple(a.shape), a.stride()) for a in args if isinstance(a, Tensor)]


def _arrays(meta, layout: list):
    """Meta arrays for a meta rule's answer: a (shape, dtype) pair, or a tuple of them."""
    if meta is None:
        return None
    if isinstance(meta, tuple) and len(meta) == 2 and hasattr(meta[1], "np"):
        shape, dtype = tuple(meta[0]), meta[1]
        like = next((st for sh, st in layout if sh == shape), None)
        if like is not None and len(shape) > 1:
            return MetaArray(shape, dtype.np, dense_like(shape, like))
        return MetaArray(shape, dtype.np)
    if isinstance(meta, (tuple, list)):
        return type(meta)(_arrays(m, layout) for m in meta)
    raise TypeError(f"meta rule returned {meta!r}, not (shape, dtype) pairs")
