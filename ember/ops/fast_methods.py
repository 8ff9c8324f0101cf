"""Fast paths for Tensor methods and operators on tensors (``x.sum()``, ``x + y``,
``x.view(n)``): the same result as ``OpDef.__call__`` without its general dispatch."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd import engine
from ..autograd.grad_mode import state as _grad_state
from .registry import (_KERNEL_ERRORS, _NP_FROM, OpDef, call_as_method,
                       call_as_operator, translate_error)
from .._dispatch import STATE
from ..backends.cpu import quiet_enter, quiet_exit

_new = object.__new__

# ---------------------------------------------------------------------- fast Tensor methods
# A Tensor method or operator call on tensors (``x.sum()``, ``x + y``, ``x.add(y)``) is the
# commonest op call of all, and on small tensors the dispatcher's generality is most of its
# cost. For ops that need no promotion, list handling or special outputs (``OpDef._fast``),
# these closures run exactly what ``OpDef.__call__`` would run for that call, inline; any
# other call (a trace is active, ``out=``, a keyword tensor, a wrong type, too many arguments)
# goes to ``op(...)`` unchanged.
_NUMBERS = frozenset((int, float, bool, complex))


def _fast_result(op: OpDef, res, args: tuple, kwargs: dict, inputs: list):
    """The rest of ``OpDef.__call__`` after the impl, for the fast paths' uncommon results."""
    outs = op._wrap_outputs(res, None, inputs)
    if _grad_state.enabled and op.backward is not None:
        for t in inputs:
            if t._leaf_rg or t.grad_fn is not None:
                engine.record(op, args, kwargs, inputs, outs)
                break
    return outs


def fast_unary_method(op: OpDef) -> Callable:
    """``x.op(*args, **kwargs)`` for an op whose only tensor parameter is the first."""
    impl = op.impl
    max_args = op.n_positional - 1
    view = op.view

    def method(self, *args, **kwargs):
        if STATE.capture is not None or len(args) > max_args or "out" in kwargs or \
                not isinstance(self, Tensor):
            return op(self, *args, **kwargs)
        token = quiet_enter()
        try:
            res = impl(np, self._data, *args, **kwargs) if kwargs else impl(np, self._data, *args)
        except _KERNEL_ERRORS as e:
            raise translate_error(op, e, (self,) + args, kwargs) from None
        finally:
            quiet_exit(token)
        if type(res) is not np.ndarray or (dt := _NP_FROM.get(res.dtype)) is None:
            return _fast_result(op, res, (self,) + args, kwargs, [self])
        out = _new(Tensor)
        out._data = res
        out._dtype = dt
        if view and (view is True or np.may_share_memory(res, self._data)):
            base = self._base  # _mark_view, inline
            out._base = base if base is not None else self
            vc = self._vc
            out._vc = vc if vc is not None else self._version_counter()
        if _grad_state.enabled and (self._leaf_rg or self.grad_fn is not None) and \
                op.backward is not None:
            engine.record(op, (self,) + args, kwargs, [self], out)
        return out
    return method


# the dtypes an op's ``float_kernel`` takes (numpy dtype -> ember dtype)
_KERNEL_DTYPES = {D.float32.np: D.float32, D.float64.np: D.float64}


def fast_binary_method(op: OpDef, operator: bool = False) -> Callable:
    """``x.op(other)`` (or, with ``operator``, ``x <op> other``) for a non-view op whose tensor
    parameters are its first two; ``other`` may be a Python number when the op takes one."""
    impl = op.impl
    numbers = _NUMBERS if 1 not in op._arg_kind else frozenset()  # "Scalar|Tensor" other
    kernel = op.float_kernel
    kernel_dtypes = _KERNEL_DTYPES if kernel is not None else {}

    def binary(self, other):
        if STATE.capture is None and isinstance(self, Tensor):
            if isinstance(other, Tensor):
                a = self._data
                b = other._data
                dt = a.dtype
                if dt is b.dtype and (edt := kernel_dtypes.get(dt)) is not None:
                    token = quiet_enter()
                    try:
                        res = kernel(a, b)
                    except _KERNEL_ERRORS:
                        return op(self, other)  # the full path raises PyTorch's error
                    finally:
                        quiet_exit(token)
                    if type(res) is not np.ndarray:
                        res = np.asarray(res)  # numpy hands back scalars for 0-d operands
                    out = _new(Tensor)
                    out._data = res
                    out._dtype = edt
                    if _grad_state.enabled and (
                            self._leaf_rg or self.grad_fn is not None or other._leaf_rg or
                            other.grad_fn is not None) and op.backward is not None:
                        engine.record(op, (self, other), {}, [self, other], out)
                    return out
                inputs = [self, other]
            elif type(other) in numbers:
                inputs = [self]
                b = other
            else:
                inputs = None
            if inputs is not None:
                token = quiet_enter()
                try:
                    res = impl(np, self._data, b)
                except _KERNEL_ERRORS as e:
                    raise translate_error(op, e, (self, other), {}) from None
                finally:
                    quiet_exit(token)
                if type(res) is not np.ndarray or (dt := _NP_FROM.get(res.dtype)) is None:
                    return _fast_result(op, res, (self, other), {}, inputs)
                out = _new(Tensor)
                out._data = res
                out._dtype = dt
                if _grad_state.enabled and op.backward is not None:
                    for t in inputs:
                        if t._leaf_rg or t.grad_fn is not None:
                            engine.record(op, (self, other), {}, inputs, out)
                            break
                return out
        return call_as_operator(op, self, other)

    if operator:
        return binary

    def method(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and STATE.capture is None and \
                isinstance(self, Tensor) and (isinstance(args[0], Tensor) or
                                              type(args[0]) in numbers):
            return binary(self, args[0])  # takes its fast path (never the operator fallback)
        return call_as_method(op, self, args, kwargs)
    return method
