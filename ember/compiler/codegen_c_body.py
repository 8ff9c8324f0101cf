"""How a kernel's body is spelled in C, shared by codegen_c.py (the kernel frame, pointwise and
cat kernels) and codegen_rows.py (rows kernels): values as they are stored and loaded, the
statements computing an expression (``_Body``), index arithmetic, and output runs streamed
through an L1 buffer (``streamed``; the em_stream helper is codegen_c's STREAM_PRELUDE).
"""

from __future__ import annotations

from .. import _dtype as D
from ..codegen.c.scalar_ops import CTYPE, CScalarOps, cast_expr
from ..codegen.c.scalar_ops import c_literal as _number_literal
from .lower import Const, Expr, Load, RowRef
from .symbolic import SymInt

STORAGE = {**CTYPE, D.float16: "_Float16", D.bfloat16: "uint16_t"}
STREAM_BLOCK = 2048  # elements computed into the L1 buffer per em_stream call


def c_literal(value, dt: D.dtype) -> str:
    ct = CTYPE[dt]
    if isinstance(value, SymInt):  # a size of a dynamic graph (a kernel parameter)
        return f"(({ct})({value}))"
    return _number_literal(value, dt)


def load_expr(dt: D.dtype, ref: str) -> str:
    if dt is D.bfloat16:
        return f"em_bf16_load({ref})"
    if dt is D.float16:
        return f"(float){ref}"
    return ref


def store_expr(dt: D.dtype, value: str) -> str:
    if dt is D.bfloat16:
        return f"em_bf16_store((float)({value}))"
    if dt is D.bool_:
        return f"(uint8_t)(({value}) != 0)"
    return f"({STORAGE[dt]})({value})"


class _Body:
    """Emits the statements computing one expression at given index variables."""

    def __init__(self, params: dict, indent: str, rowref: str = "red{}"):
        self.params = params  # buffer name -> C parameter name
        self.rowref = rowref  # how a reduction phase's per-row result is named
        self.lines: list[str] = []
        self.memo: dict = {}
        self.indent = indent
        self.n = 0

    def emit(self, e: Expr, idx: list[str]) -> str:
        key = ("load", e.buf.name, e.strides, e.offset) if isinstance(e, Load) else id(e)
        if key in self.memo:
            return self.memo[key]
        if isinstance(e, Const):
            return c_literal(e.value, e.dtype)
        if isinstance(e, RowRef):
            return self.rowref.format(e.tag)
        if isinstance(e, Load):
            terms = [str(e.offset)] if e.offset else []
            terms += [v if s == 1 else f"{v} * {s}" for v, s in zip(idx, e.strides) if s != 0]
            ref = f"{self.params[e.buf.name]}[{' + '.join(terms) or '0'}]"
            rhs = load_expr(e.dtype, ref)
        else:
            args = [self.emit(a, idx) for a in e.args]
            if e.prim == "cast":
                rhs = cast_expr(e.args[0].dtype, e.dtype, args[0])
            else:
                dt = e.args[0].dtype if e.prim in ("eq", "ne", "lt", "le", "gt", "ge") \
                    else e.dtype
                ops = CScalarOps(CTYPE[dt], dt)
                if e.prim == "pow":
                    c = e.args[1]
                    rhs = ops.pow(*args, const=c.value if isinstance(c, Const) else None)
                else:
                    rhs = getattr(ops, e.prim)(*args)
        name = f"v{self.n}"
        self.n += 1
        self.lines.append(f"{self.indent}const {CTYPE[e.dtype]} {name} = {rhs};")
        self.memo[key] = name
        return name


def _index(idx: list, strides) -> str:
    return " + ".join(v if s == 1 else f"{v} * {s}" for v, s in zip(idx, strides)
                      if s != 0) or "0"


def stream_block(n: int) -> int:
    return min(STREAM_BLOCK, n)


def streamed(outs, dsts: list, lo: str, n, ind: str) -> tuple[list, list, str]:
    """The loop over elements ``lo`` .. min(lo + STREAM_BLOCK, n) - 1 of a run of output
    (index ``r``), each output's values going to an L1 buffer ``t<j>`` (``t<j>[r - lo]``), and
    the em_stream calls writing the buffers to ``dsts`` (C parameter, index of element lo).
    Returns the lines before the loop body, those after it, and the body's indent."""
    bl = stream_block(n)
    head = [f"{ind}const int64_t hi = {lo} + {bl} < {n} ? {lo} + {bl} : {n};"]
    head += [f"{ind}{STORAGE[b.meta.dtype]} t{j}[{bl}];" for j, b in enumerate(outs)]
    head.append(f"{ind}for (int64_t r = {lo}; r < hi; ++r) {{")
    tail = [f"{ind}}}"]
    tail += [f"{ind}em_stream({p} + {at}, t{j}, (hi - {lo}) * "
             f"(int64_t)sizeof({STORAGE[b.meta.dtype]}));"
             for j, (b, (p, at)) in enumerate(zip(outs, dsts))]
    return head, tail, ind + "    "
