"""Custom autograd functions: ``class F(ember.autograd.Function)`` with forward and backward."""

from __future__ import annotations

from . import engine
from .grad_mode import state as _state


class FunctionCtx:
    """The ``ctx`` a custom Function's forward and backward receive."""

    def __init__(self):
        self._saved = ()
        self._non_diff = set()
        self._dirty = set()
        self.materialize_grads = True
        self.needs_input_grad = ()
        self._freed = False

    def save_for_backward(self, *tensors):
        self._saved = tuple(None if t is None else engine.SavedTensor(t) for t in tensors)

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(engine._FREED)
        return tuple(None if s is None else s.unpack() for s in self._saved)

    def mark_non_differentiable(self, *tensors):
        self._non_diff.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool):
        self.materialize_grads = bool(value)


class FunctionNode(engine.Node):
    def __init__(self, cls, ctx):
        super().__init__()
        self.cls, self.ctx = cls, ctx

    def name(self):
        return self.cls.__name__ + "Backward"

    def apply(self, grads):
        ctx = self.ctx
        if ctx.materialize_grads:
            ref = next(g for g in grads if g is not None)
            grads = [ref.new_zeros(m[0], dtype=m[1]) if g is None and m is not None else g
                     for g, m in zip(grads, self.out_meta)]
        res = self.cls.backward(ctx, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        if len(res) < len(self.arg_slots):
            raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                               f"gradients (expected {len(self.arg_slots)}, got {len(res)})")
        flat = [res[i] for i in self.tensor_arg_idx]
        return engine._conform(self, flat)

    def release(self):
        self.ctx._freed = bool(self.ctx._saved)


class _FunctionMeta(type):
    pass


class Function(metaclass=_FunctionMeta):
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``; call
    ``.apply(*args)``."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        from .._tensor import Tensor, _wrap
        ctx = FunctionCtx()
        tensor_idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        track = _state.enabled and any(ctx.needs_input_grad)
        prev = _state.enabled
        _state.enabled = False
        try:
            if cls.setup_context is not Function.setup_context:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        finally:
            _state.enabled = prev
        single = not isinstance(out, tuple)
        outs = [out] if single else list(out)
        ids = {id(a) for a in args if isinstance(a, Tensor)}
        for k, o in enumerate(outs):
            if isinstance(o, Tensor) and id(o) in ids and id(o) not in ctx._dirty:
                alias = _wrap(o._data, o._dtype)  # returning an input gives a new tensor
                alias._vc = o._version_counter()
                if id(o) in ctx._non_diff:
                    ctx._non_diff.add(id(alias))
                outs[k] = alias
        if track:
            node = FunctionNode(cls, ctx)
            inputs = [args[i] for i in tensor_idx]
            node.edges = [engine.edge_of(t) for t in inputs]
            node.in_meta = [(t.shape, t._dtype) for t in inputs]
            node.arg_slots = tuple(range(len(args)))
            node.tensor_arg_idx = tuple(tensor_idx)
            node.n_out = len(outs)
            meta = []
            for k, o in enumerate(outs):
                if isinstance(o, Tensor) and id(o) not in ctx._non_diff and \
                        o._dtype.kind in "fc":
                    o.grad_fn, o._out_idx, o._leaf_rg = node, k, False
                    meta.append((o.shape, o._dtype))
                else:
                    meta.append(None)
            node.out_meta = meta
        return outs[0] if single else tuple(outs)


def once_differentiable(fn):
    return fn
