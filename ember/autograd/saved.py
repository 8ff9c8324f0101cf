"""Values saved for backward: ``SavedTensor`` (an input, with the version it had),
``SavedOutput`` (an op's own output), ``TensorMeta`` (the shape and dtype of an input a rule
does not read). Under ``saved_tensors_hooks`` (``ember/autograd/graph.py``) the first two
hold what the innermost pack hook returned and unpack through the unpack hook."""

from __future__ import annotations

from .._tensor import Size, Tensor, _wrap
from .grad_mode import state as _state


class TensorMeta:
    """Shape and dtype of an input a backward rule did not save (no data, no version check)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, t):
        self.shape = Size(t._data.shape)
        self.dtype = t._dtype

    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return len(self.shape)

    def size(self, d=None):
        return self.shape if d is None else self.shape[d]

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def is_complex(self):
        return self.dtype.is_complex

    def is_floating_point(self):
        return self.dtype.is_floating_point


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved. Under
    ``saved_tensors_hooks`` it holds what the innermost pack hook returned instead (``packed``)
    and unpacks through the unpack hook, without a version check (as PyTorch)."""

    __slots__ = ("tensor", "version", "node", "hooked")

    def __init__(self, t, node=None):
        self.node = node
        hooks = _state.saved_hooks
        if hooks:
            self.tensor = None
            self.version = 0
            self.hooked = _pack(hooks, t, t.grad_fn, t._out_idx)
            return
        self.tensor = t
        self.version = t._version_counter()[0]
        self.hooked = None

    def unpack(self):
        if self.hooked is not None:
            return _unpack(self.hooked)
        t = self.tensor
        if t._vc[0] != self.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [ember.{_type_name(t)} {list(t.shape)}], which is output "
                f"{t._out_idx} of {t.grad_fn.name() if t.grad_fn else 'a leaf'}, is at version "
                f"{t._vc[0]}; expected version {self.version} instead. Hint: the backtrace "
                "further above shows the operation that failed to compute its gradient.")
        return t


class _Hooked:
    """A saved tensor packed by a ``saved_tensors_hooks`` pair: the pack hook's result, the
    unpack hook, and the history the unpacked tensor gets (the original's)."""

    __slots__ = ("packed", "unpack_hook", "grad_fn", "out_idx", "leaf_rg", "acc")

    def __init__(self, packed, unpack_hook, grad_fn, out_idx, leaf_rg, acc):
        self.packed, self.unpack_hook = packed, unpack_hook
        self.grad_fn, self.out_idx, self.leaf_rg, self.acc = grad_fn, out_idx, leaf_rg, acc


def _pack(hooks, t, grad_fn, out_idx):
    """Run the innermost pack hook on ``t`` (the hooks are off while it runs)."""
    pack_hook, unpack_hook = hooks[-1]
    _state.saved_hooks = None
    try:
        packed = pack_hook(t)
    finally:
        _state.saved_hooks = hooks
    return _Hooked(packed, unpack_hook, grad_fn, out_idx, t._leaf_rg, t._acc)


def _unpack(h):
    """The tensor an unpack hook gives back, carrying the saved tensor's history."""
    r = h.unpack_hook(h.packed)
    if not isinstance(r, Tensor):
        raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                        f"result of type {type(r).__name__}")
    t = _wrap(r._data, r._dtype, r._backend)
    t._vc = r._version_counter()
    t.grad_fn, t._out_idx, t._leaf_rg, t._acc = h.grad_fn, h.out_idx, h.leaf_rg, h.acc
    return t


def _type_name(t):
    from .._dtype import TYPE_NAME
    return TYPE_NAME[t._dtype] + "Tensor"


class SavedOutput:
    """An op's own output saved for backward; unpacks to a tensor whose grad_fn is the node
    (under ``saved_tensors_hooks``: through the unpack hook, without a version check)."""

    __slots__ = ("data", "dtype", "backend", "vc", "version", "idx", "hooked")

    def __init__(self, t, idx):
        self.idx = idx
        hooks = _state.saved_hooks
        if hooks:
            self.hooked = _pack(hooks, t, None, idx)
            return
        self.hooked = None
        self.data, self.dtype, self.backend = t._data, t._dtype, t._backend
        self.vc = t._version_counter()
        self.version = self.vc[0]

    def unpack(self, node):
        if self.hooked is not None:
            t = _unpack(self.hooked)
            t.grad_fn, t._out_idx = node, self.idx
            return t
        if self.vc[0] != self.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: output {self.idx} of {node.name()} is at version "
                f"{self.vc[0]}; expected version {self.version} instead.")
        t = _wrap(self.data, self.dtype, self.backend)
        t._vc = self.vc
        t.grad_fn, t._out_idx = node, self.idx
        return t
