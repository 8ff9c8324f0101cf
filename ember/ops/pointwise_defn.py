"""How an op's pointwise math, a definition over the scalar primitives (codegen/prims.py),
is reached from its op-table entry: ``OpDef.pointwise_defn``, a ``PointwiseDefn``.

Eager numpy interprets the same definition (backends/xp_ops.interpret); the compiler lowers
it by running it over a handler whose primitives build loop-IR nodes (compiler/lower_pointwise.py).
The record says which arguments are the op's operands (promoted to one compute dtype and cast
to it before the definition sees them, as eager promotion does), how that compute dtype is
found, and how a call's arguments become the definition's (``select``): arguments such as
add's alpha, gelu's ``approximate`` or softplus' ``beta`` are Python constants, weakly typed
inside the definition. ``select`` returns None for a call the definition does not cover
(div with a rounding mode, an ``approximate`` PyTorch refuses): that call runs eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class PointwiseDefn(NamedTuple):
    """select:   ``select(args, ct) -> (defn, values) | None``: ``args`` the call's arguments
                 by parameter name (operands already in the compute dtype ``ct``), ``defn``
                 the definition to run on ``values``.
    operands:    the parameters promoted to the compute dtype.
    compute:     "out": the compute dtype is the result's (float16 / bfloat16 widened to
                 float32); "operands": the promoted operands' (comparisons, predicates: their
                 result is bool).
    kinds:       the compute dtype's categories it lowers ("f" floating, "i" integer, "b"
                 bool); others run eagerly (the eager op raises PyTorch's error for them).
    """

    select: Callable
    operands: tuple
    compute: str = "out"
    kinds: str = "fib"


def fixed(defn: Callable, params: tuple, operands: tuple | None = None, **kw) -> PointwiseDefn:
    """The definition ``defn(ops, *params)`` for every call (``params`` by name, in order; the
    operands default to all of them)."""
    params = tuple(params)

    def select(args, ct, out):
        return defn, [args[p] for p in params]
    return PointwiseDefn(select, params if operands is None else tuple(operands), **kw)


def attach(opdef, pd: PointwiseDefn):
    """Make ``pd`` ``opdef``'s pointwise definition; returns ``opdef``."""
    opdef.pointwise_defn = pd
    return opdef
