"""Lowering: graph nodes -> scalar expressions over loop indices, grouped into kernels.

Every tensor value becomes an ``Expr`` whose leaves are ``Load``s from buffers with explicit
element strides over the value's shape. Broadcasting, expand, permute/transpose and
stride-compatible reshapes only rewrite those strides (views are index arithmetic, never
copies). A pointwise op builds a new ``Op`` over its operands' expressions; nothing is stored
until a value must exist in memory ("materialized"): a graph output, a value read more than
once, or one read by something that cannot fuse it. A materialized expression becomes one
pointwise kernel (the whole producer chain fused into it). A reduction (over any dims) is
lowered in a "rows" iteration space: the kept dims outside, the reduced dims permuted last and
collapsed into one row; its statistics are ``RowRef``s, per-row locals of a rows kernel that
later reductions and pointwise consumers over the same rows join (softmax, var, LayerNorm are
one kernel each). Any other op runs its eager implementation from the Python wrapper
(``Step('eager')``).
Every refusal to fuse is recorded in ``plan.fusion_log``.
"""

from __future__ import annotations

import itertools

from .. import _dtype as D
from ..backends.base import contiguous_strides
from .graph import Node, TensorMeta

HALF = (D.float16, D.bfloat16)
LOWERABLE_DTYPES = frozenset([D.float16, D.bfloat16, D.float32, D.float64, D.int8, D.int16,
                              D.int32, D.int64, D.uint8, D.bool_])


def compute_dtype(dt: D.dtype) -> D.dtype:
    """Half types compute in float32 inside kernels, like the eager kernels."""
    return D.float32 if dt in HALF else dt


# ---------------------------------------------------------------------- expressions
class Buffer:
    """An array the wrapper holds: a graph input, a kernel output or an eager op's result.
    ``strides`` are element strides fixed at compile time (inputs are guarded on them; every
    other buffer is made C-contiguous)."""

    def __init__(self, name: str, meta: TensorMeta, strides: tuple):
        self.name, self.meta, self.strides = name, meta, tuple(strides)
        self.read_by_kernel = False
        self.step = -1  # index of the plan step that writes it (-1: a graph input)
        self.rows_owner = None  # the rows kernel writing it, if any


class Expr:
    dtype: D.dtype
    shape: tuple


class Load(Expr):
    """Element ``offset + sum(i * stride)`` of ``buf`` at index ``i`` of ``shape`` (a slice
    such as ``split``'s parts starts at an offset)."""

    def __init__(self, buf: Buffer, strides: tuple, shape: tuple, offset: int = 0):
        self.buf, self.strides, self.shape, self.dtype = buf, tuple(strides), tuple(shape), \
            buf.meta.dtype
        self.offset = offset

    @property
    def whole(self) -> bool:
        """Whether this reads its buffer entire, in the buffer's own layout."""
        return self.offset == 0 and self.strides == self.buf.strides and \
            self.shape == self.buf.meta.shape


class Const(Expr):
    shape = ()

    def __init__(self, value, dtype: D.dtype):
        self.value, self.dtype = value, dtype


class Op(Expr):
    """A primitive scalar operation (named as in the codegen interface) over operands."""

    def __init__(self, prim: str, args: list, dtype: D.dtype, shape: tuple, attrs=(),
                 label: str = ""):
        self.prim, self.args, self.dtype, self.shape = prim, list(args), dtype, tuple(shape)
        self.attrs, self.label = tuple(attrs), label


class RowRef(Expr):
    """Result ``part`` of reduction phase ``phase`` of the enclosing rows kernel, for the
    current row (constant along the row). Most phases have one result; a two-result phase
    (Welford's mean and M2, online softmax's max and sum, a max and its index) names its
    second with ``part=1``."""

    def __init__(self, phase: int, dtype: D.dtype, shape: tuple, part: int = 0):
        self.phase, self.dtype, self.shape, self.part = phase, dtype, tuple(shape), part

    @property
    def tag(self) -> str:
        """How the generated C names this result: ``red{tag}``."""
        return f"{self.phase}_{self.part}" if self.part else str(self.phase)


def _map_loads(e: Expr, shape: tuple, fn, memo: dict) -> Expr | None:
    """``e`` re-indexed to ``shape`` with ``fn(load) -> new strides or None`` on each leaf."""
    if id(e) in memo:
        return memo[id(e)]
    if isinstance(e, (Const, RowRef)):
        r: Expr | None = e
    elif isinstance(e, Load):
        st = fn(e)
        r = None if st is None else Load(e.buf, st, shape, e.offset)
    else:
        args = [_map_loads(a, shape, fn, memo) for a in e.args]
        r = None if any(a is None for a in args) else \
            Op(e.prim, args, e.dtype, shape, e.attrs, e.label)
    memo[id(e)] = r
    return r


def broadcast(e: Expr, shape: tuple) -> Expr:
    shape = tuple(shape)
    if isinstance(e, Const) or e.shape == shape:
        return e
    lead = len(shape) - len(e.shape)

    def fn(ld):
        return (0,) * lead + tuple(0 if (n == 1 and m != 1) else s
                                   for s, n, m in zip(ld.strides, ld.shape, shape[lead:]))
    return _map_loads(e, shape, fn, {})


def permute(e: Expr, dims: list) -> Expr:
    shape = tuple(e.shape[d] for d in dims)
    return _map_loads(e, shape, lambda ld: tuple(ld.strides[d] for d in dims), {})


def _nocopy_strides(shape: tuple, strides: tuple, new: tuple) -> tuple | None:
    """Strides that view (shape, strides) as ``new`` in row-major order, or None if the
    layout needs a copy."""
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out: list[int] = []
    i = 0
    for n in new:
        if n == 1:
            out.append(0)
            continue
        # gather old dims until their product reaches n
        prod, group = 1, []
        while prod < n and i < len(old):
            prod *= old[i][0]
            group.append(old[i])
            i += 1
        if prod != n:
            return None
        for (_, s1), (n2, s2) in itertools.pairwise(group):
            if s1 != s2 * n2:
                return None
        out.append(group[-1][1])
    if i != len(old):
        return None
    return tuple(out)


def _split_strides(shape: tuple, strides: tuple, new: tuple) -> tuple | None:
    """Like ``_nocopy_strides`` but also splitting a dim into several (``(B, T, H * D)`` seen
    as ``(B, T, H, D)`` when the last dim is part of a wider row, as a split's part is):
    the old dims form chunks of memory-contiguous runs, and the new dims divide each chunk
    from the outside in. Static sizes only."""
    if 0 in shape:
        return contiguous_strides(new)
    chunks: list = []  # (elements, innermost stride) of each contiguous run of old dims
    for n, s in zip(shape, strides):
        if n == 1:
            continue
        if chunks and chunks[-1][1] == s * n:
            chunks[-1] = (chunks[-1][0] * n, s)
        else:
            chunks.append((n, s))
    out, left, base, used = [], 1, 0, 0
    for n in new:
        if n == 1:
            out.append(0)
            continue
        if left == 1:
            if used == len(chunks):
                return None
            left, base = chunks[used]
            used += 1
        if left % n:
            return None
        left //= n
        out.append(base * left)
    return tuple(out) if used == len(chunks) and left == 1 else None


def reshape(e: Expr, new: tuple) -> Expr | None:
    new = tuple(new)
    if isinstance(e, Const):
        return e

    def strides(ld: Load) -> tuple | None:
        st = _nocopy_strides(ld.shape, ld.strides, new)
        if st is None and all(type(v) is int for v in (*ld.shape, *ld.strides, *new)):
            st = _split_strides(ld.shape, ld.strides, new)
        return st
    return _map_loads(e, new, strides, {})


def cast(e: Expr, dt: D.dtype) -> Expr:
    if e.dtype is dt:
        return e
    if isinstance(e, Const):
        return Const(e.value, dt)
    return Op("cast", [e], dt, e.shape)


def _wrap_dim(d: int, nd: int) -> int:
    return d + nd if d < 0 else d


def promoted(values: list) -> D.dtype:
    """result_type over graph operands (nodes by their metadata) and Python scalars."""
    return D.result_type(*(v.meta if isinstance(v, Node) else v for v in values))


def bound_args(node: Node) -> dict:
    """The call's arguments by parameter name, defaults filled in."""
    op = node.target
    out = dict(op.defaults)
    out.update(zip(op.params, node.args))
    out.update(node.kwargs)
    return out


def loads_of(e: Expr, out: list | None = None, seen: set | None = None) -> list:
    """Every ``Load`` leaf of ``e`` (each once)."""
    out = [] if out is None else out
    seen = set() if seen is None else seen
    if id(e) in seen:
        return out
    seen.add(id(e))
    if isinstance(e, Load):
        out.append(e)
    for a in getattr(e, "args", ()):
        loads_of(a, out, seen)
    return out


def substitute(e: Expr, fn, memo: dict | None = None) -> Expr | None:
    """``e`` with every Load replaced by ``fn(load)`` (an Expr, or None to give up)."""
    memo = {} if memo is None else memo
    if id(e) in memo:
        return memo[id(e)]
    if isinstance(e, Load):
        r = fn(e)
    elif isinstance(e, Op):
        args = [substitute(a, fn, memo) for a in e.args]
        r = None if any(a is None for a in args) else \
            Op(e.prim, args, e.dtype, e.shape, e.attrs, e.label)
    else:
        r = e
    memo[id(e)] = r
    return r
