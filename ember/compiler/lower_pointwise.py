"""The generic lowering of pointwise ops: an op's definition over the scalar primitives
(``OpDef.pointwise_defn``, ops/pointwise_defn.py) run over ``LowerOps``, a handler whose
primitives build loop-IR nodes (``Op``, ``Const``, casts) instead of computing.

The operands are cast to the compute dtype first, as eager promotion does (float16 and
bfloat16 compute in float32, rounded once at the op's output; integers at their width), and
the definition's result is cast to the op's output dtype (the node's meta). A Python number
inside a definition is weakly typed: it takes its partner's dtype, as the primitives say.
"""

from __future__ import annotations

import abc

from .. import _dtype as D
from ..codegen.prims import PRIMS, ScalarOps
from .lower import Const, Expr, Load, Op, cast, compute_dtype, promoted

_BOOL_RESULT = frozenset(["eq", "ne", "lt", "le", "gt", "ge"])
_KIND = {"f": "f", "i": "i", "u": "i", "b": "b"}


class LowerOps(ScalarOps):
    """The primitives as loop-IR nodes of one output ``shape`` (operands are already
    broadcast to it; constants are shapeless)."""

    def __init__(self, shape: tuple):
        self.shape = tuple(shape)

    def _typed(self, name: str, args: tuple) -> tuple[list, D.dtype]:
        dts = [a.dtype for a in args if isinstance(a, Expr) and not isinstance(a, Const)] or \
            [a.dtype for a in args if isinstance(a, Expr)]
        if not dts:
            raise TypeError(f"{name}: a primitive needs at least one value operand")
        dt = dts[0]
        return [a if isinstance(a, Expr) else Const(a, dt) for a in args], dt

    def cast(self, a, dtype: D.dtype):
        return cast(a, dtype) if isinstance(a, Expr) else Const(a, dtype)

    def constant(self, value, dtype: D.dtype):
        return Const(value, dtype)

    def where(self, c, a, b):
        (x, y), dt = self._typed("where", (a, b))
        return Op("where", [c, x, y], dt, self.shape)


def _primitive(name: str):
    def method(self, *args):
        vals, dt = self._typed(name, args)
        return Op(name, vals, D.bool_ if name in _BOOL_RESULT else dt, self.shape)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = PRIMS[name].semantics
    return method


for _name, _p in PRIMS.items():
    if _name not in ("cast", "constant", "where"):
        setattr(LowerOps, _name, _primitive(_name))
abc.update_abstractmethods(LowerOps)
del _name, _p


def compute_type(node, pd, raw: dict) -> D.dtype:
    """The dtype ``node``'s definition computes in (see PointwiseDefn.compute)."""
    if pd.compute == "out":
        return compute_dtype(node.meta.dtype)
    return compute_dtype(promoted([raw[n] for n in pd.operands if raw.get(n) is not None]))


def lower_pointwise(node, args: dict, raw: dict) -> Expr | None:
    """``node``'s output expression from its op's pointwise definition, or None when this call
    is not covered (it then runs eagerly). ``args``: the arguments by parameter name, tensor
    operands as expressions of the output shape; ``raw``: the graph's arguments."""
    pd = node.target.pointwise_defn
    out = node.meta.dtype
    ct = compute_type(node, pd, raw)
    if _KIND.get(ct.kind) not in pd.kinds:
        return None
    args = dict(args)
    for n in pd.operands:
        if isinstance(args.get(n), Expr):
            args[n] = cast(args[n], ct)
    chosen = pd.select(args, ct, out)
    if chosen is None:
        return None
    defn, values = chosen
    r = defn(LowerOps(node.meta.shape), *values)
    if not isinstance(r, Expr):
        return None
    if isinstance(r, Op) and not r.label and not any(r is v for v in values):
        r.label = node.target.name
    return fresh(cast(r, out))


def fresh(e: Expr) -> Expr:
    """``e``, as a value of its own: an op's result is a new tensor, so an identity (integer
    floor, clone) of a whole buffer is a copy, or the graph would hand back its input."""
    if isinstance(e, Load):
        return Op("cast", [e], e.dtype, e.shape, label="copy")
    return e
