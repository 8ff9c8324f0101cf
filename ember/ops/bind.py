"""Bind the op table onto ``Tensor`` and the public namespace: functions, methods, in-place
variants and Python operators all come from here, never written one by one."""

from __future__ import annotations

import functools

from .._tensor import Tensor
from .arguments import composite_method_error
from .registry import ALIASES, OPS, bind_overrides, call_as_operator, call_inplace

# Tensor methods whose Python signature differs from the function's (varargs sizes, ...):
# families register them here with ``tensor_method``.
METHODS: dict = {}


def tensor_method(name: str):
    def register(fn):
        if name in METHODS:
            raise RuntimeError(f"Tensor method {name!r} is defined twice")
        METHODS[name] = _without_self(fn) if hasattr(fn, "tensor_checks") else fn
        return fn
    return register


def _without_self(fn):
    """A ``takes_tensors`` function as a Tensor method: its argument errors do not count
    ``self`` (``x.outer(2)`` names position 1, as ``outer(x, 2)`` names position 2)."""
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except TypeError as e:
            renumbered = composite_method_error(e, fn)
            if renumbered is None:
                raise
            raise renumbered from None
    return method


def _method(d):
    return _named(d.method, d)  # the op's call path as a method (registry.specialise)


def _named(method, d):
    method.__name__ = d.name
    method.__doc__ = d.__doc__
    return method


def _inplace(d):
    def method(self, *args, **kwargs):
        return call_inplace(d, self, args, kwargs)
    method.__name__ = d.name + "_"
    return method


def _swap(d):
    def method(self, other):  # `2 @ x`: NotImplemented lets Python report the operand types
        return call_as_operator(d, other, self)
    return method


def _unary(d):
    if d.operator is not None:
        return d.operator

    def method(self):
        return d(self)
    return method


def _binary(d):
    if d.operator is not None:
        return d.operator

    def method(self, other):
        return call_as_operator(d, self, other)
    return method


def _binary_inplace(d):
    def method(self, other):
        return call_inplace(d, self, (other,), {})
    return method


# operator -> (op name, how it is called)
OPERATORS = {
    "__add__": ("add", _binary), "__radd__": ("add", _swap), "__iadd__": ("add", _binary_inplace),
    "__sub__": ("sub", _binary), "__rsub__": ("sub", _swap), "__isub__": ("sub", _binary_inplace),
    "__mul__": ("mul", _binary), "__rmul__": ("mul", _swap), "__imul__": ("mul", _binary_inplace),
    "__truediv__": ("div", _binary), "__rtruediv__": ("div", _swap),
    "__itruediv__": ("div", _binary_inplace),
    "__floordiv__": ("floor_divide", _binary), "__rfloordiv__": ("floor_divide", _swap),
    "__ifloordiv__": ("floor_divide", _binary_inplace),
    "__mod__": ("remainder", _binary), "__rmod__": ("remainder", _swap),
    "__imod__": ("remainder", _binary_inplace),
    "__pow__": ("pow", _binary), "__rpow__": ("pow", _swap), "__ipow__": ("pow", _binary_inplace),
    "__matmul__": ("matmul", _binary), "__rmatmul__": ("matmul", _swap),
    "__and__": ("bitwise_and", _binary), "__rand__": ("bitwise_and", _swap),
    "__iand__": ("bitwise_and", _binary_inplace),
    "__or__": ("bitwise_or", _binary), "__ror__": ("bitwise_or", _swap),
    "__ior__": ("bitwise_or", _binary_inplace),
    "__xor__": ("bitwise_xor", _binary), "__rxor__": ("bitwise_xor", _swap),
    "__ixor__": ("bitwise_xor", _binary_inplace),
    "__lshift__": ("bitwise_left_shift", _binary), "__rlshift__": ("bitwise_left_shift", _swap),
    "__ilshift__": ("bitwise_left_shift", _binary_inplace),
    "__rshift__": ("bitwise_right_shift", _binary),
    "__rrshift__": ("bitwise_right_shift", _swap),
    "__irshift__": ("bitwise_right_shift", _binary_inplace),
    "__eq__": ("eq", _binary), "__ne__": ("ne", _binary), "__lt__": ("lt", _binary),
    "__le__": ("le", _binary), "__gt__": ("gt", _binary), "__ge__": ("ge", _binary),
    "__neg__": ("neg", _unary), "__abs__": ("abs", _unary), "__pos__": ("positive", _unary),
    "__invert__": ("bitwise_not", lambda d: _invert(d)),
}


def _invert(d):
    def method(self):
        if self.dtype.is_floating_point or self.dtype.is_complex:
            raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                            "tensors")
        return d(self)
    return method


def bind_namespace(ns: dict) -> None:
    """Put every op's function into ``ns`` (the ``ember`` module) and its methods on Tensor,
    and the backends' overrides on the ops."""
    bind_overrides()
    for d in OPS.values():
        if d.has_function:
            ns[d.name] = d
            if d.has_inplace:
                ns[d.name + "_"] = _inplace_function(d)
        if d.has_method and d.name not in METHODS:
            setattr(Tensor, d.name, _method(d))
        if d.has_inplace:
            setattr(Tensor, d.name + "_", _inplace(d))
    for new, target in ALIASES.items():
        d = OPS[target]
        if d.has_function:
            ns[new] = d
        if d.has_method:
            setattr(Tensor, new, getattr(Tensor, target))
        if d.has_inplace:
            setattr(Tensor, new + "_", getattr(Tensor, target + "_"))
    for name, fn in METHODS.items():
        setattr(Tensor, name, fn)
    for dunder, (opname, how) in OPERATORS.items():
        if opname in OPS:
            setattr(Tensor, dunder, how(OPS[opname]))
    Tensor.__hash__ = lambda self: id(self)


def _inplace_function(d):
    def fn(input, *args, **kwargs):
        return call_inplace(d, input, args, kwargs)
    fn.__name__ = d.name + "_"
    return fn
