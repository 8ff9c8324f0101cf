"""Fusion: walk a graph once and decide which values become kernels, which stay inline in
their consumers' expressions and which ops run eagerly. The result is a ``Plan``: buffers,
ordered steps, and a log of every fusion refusal with its reason.

Joins, each checked against the buffers already written at the joined kernel's step:
- a reduction joins an earlier rows kernel over the same rows (its phases read the earlier
  per-row results as locals): softmax's max and sum, var's mean, sibling reductions;
- a pointwise value reading a rows kernel's per-row results joins that kernel's row pass
  (``x - x.mean(-1, keepdim=True)``) or its per-row stores (``x.amax(-1) * 2``);
- a pointwise value reading a pointwise kernel's output element for element becomes a second
  output of that kernel (a saved pre-activation and its activation);
- a library call (linear) leaves its bias add to the next kernel's expression, and strided
  operands reach library calls as numpy views, not copies."""

from __future__ import annotations

from typing import Any

from .. import _dtype as D
from . import pytree
from .graph import Graph, Node, TensorMeta
from .gemm import library_call
from .lower import (
    LOWERABLE_DTYPES,
    Buffer,
    Const,
    Expr,
    Load,
    Op,
    RowRef,
    _wrap_dim,
    bound_args,
    broadcast,
    cast,
    compute_dtype,
    contiguous_strides,
    loads_of,
    permute,
    reshape,
    substitute,
)
from .lower_pointwise import lower_pointwise
from .rules import EPILOGUE_BIAS, PERMUTES, REDUCTIONS, RESHAPES, RULES, SLICES
from .symbolic import SymInt

# A rows kernel whose rows are few and long runs its row pass on one thread: a pointwise
# consumer only joins it when that loses little parallelism.
ROW_JOIN_MIN_ROWS = 16
ROW_JOIN_MAX_LENGTH = 1 << 14


class Kernel:
    """One generated C function computing ``expr`` at every index of its shape into ``out``
    (contiguous): a pointwise kernel."""

    def __init__(self, name: str, kind: str, expr: Expr, out: Buffer, attrs: dict):
        self.name, self.kind, self.expr, self.out, self.attrs = name, kind, expr, out, attrs
        self.extra: list[tuple] = []  # (buffer, expr): more outputs over the same index space

    @property
    def outs(self) -> list[Buffer]:
        return [self.out] + [b for b, _ in self.extra]

    def exprs(self) -> list[Expr]:
        return [self.expr] + [e for _, e in self.extra]


class CatKernel:
    """One generated C function writing each of ``parts`` (an expression, and where its
    slice of ``out`` starts along ``dim``) into ``out`` (contiguous): a ``cat`` whose inputs
    are computed straight into their slices (the transposes of attention's q, k, v gradients
    in a GPT backward), not stored and then copied."""

    kind = "cat"

    def __init__(self, name: str, parts: list, out: Buffer, dim: int):
        self.name, self.parts, self.out, self.dim = name, parts, out, dim

    @property
    def outs(self) -> list[Buffer]:
        return [self.out]

    def exprs(self) -> list[Expr]:
        return [e for e, _ in self.parts]


# reduction phases with two per-row results, each made in one pass over the row
PAIRED = {
    "welford": ("mean", "sum of squared deviations (M2)"),
    "max_sumexp": ("max", "sum of exp(x - max)"),  # online softmax (rules.ONLINE_SOFTMAX_MIN)
    "argmax": ("max", "index of its first occurrence"),  # NaN counts as the maximum
    "argmin": ("min", "index of its first occurrence"),
}


class RowsKernel:
    """One generated C function over a rows iteration space ``outer + (n,)``: for each outer
    index (an OpenMP-parallel loop), the reduction ``phases`` run over the row in order (each a
    per-row local, ``RowRef(i)``, that later phases and outputs read), then ``scalar_outs``
    (one value per row) are stored and ``row_outs`` are computed in one last pass over the row.
    ``space`` = (perm, outer, n, src_shape): the source tensor's dims permuted by ``perm`` (kept
    dims first) and the reduced ones collapsed into the row."""

    def __init__(self, index: int, space: tuple, step: int):
        self.index, self.space, self.step = index, space, step
        self.perm, self.outer, self.n, self.src_shape = space
        self.name = f"k{index}"
        self.ops: list[str] = []
        # (prim, expr, accumulator dtype); prim is one of sum/prod/max/min or a two-result
        # phase of PAIRED (codegen_rows.py emits each)
        self.phases: list[tuple] = []
        self.scalar_outs: list[tuple] = []  # (buffer, expr)
        self.row_outs: list[tuple] = []  # (buffer, expr, strides in the rows space)

    @property
    def kind(self) -> str:
        return "+".join(dict.fromkeys(self.ops))

    @property
    def outs(self) -> list[Buffer]:
        return [b for b, _ in self.scalar_outs] + [b for b, _, _ in self.row_outs]

    @property
    def out(self) -> Buffer:
        return self.outs[0]

    def exprs(self) -> list[Expr]:
        return [p[1] for p in self.phases] + [e for _, e in self.scalar_outs] + \
            [e for _, e, _ in self.row_outs]


class Rows:
    """What a reduction rule (rules.py) builds with: ``x`` (and ``args``) in the rows space of
    kernel ``k`` (an existing kernel over the same rows it joins, or a new one made on first
    use)."""

    def __init__(self, fuser: Fuser, space: tuple, k: RowsKernel | None, x: Expr,
                 args: dict, name: str, indices_used: bool):
        self.fuser, self.space, self.k, self.x, self.args = fuser, space, k, x, args
        self.name, self.indices_used = name, indices_used
        self.n = space[2]
        self.shape = tuple(space[1]) + (space[2],)
        self.touched = False

    def kernel(self) -> RowsKernel:
        self.touched = True
        if self.k is None:
            self.k = self.fuser.new_rows_kernel(self.space)
        if not self.k.ops or self.k.ops[-1] != self.name:
            self.k.ops.append(self.name)
        return self.k

    def reduce(self, prim: str, e: Expr, acc: D.dtype) -> RowRef:
        k = self.kernel()
        e = cast(e, acc)
        self.fuser._mark_reads(e, set())
        k.phases.append((prim, e, acc))
        return RowRef(len(k.phases) - 1, acc, self.shape)

    def reduce_pair(self, prim: str, e: Expr, acc: D.dtype) -> tuple[RowRef, RowRef]:
        """A phase of PAIRED over ``e`` (taken in its own dtype): its first result has ``e``'s
        dtype, its second ``acc``."""
        assert prim in PAIRED, prim
        k = self.kernel()
        self.fuser._mark_reads(e, set())
        k.phases.append((prim, e, acc))
        p = len(k.phases) - 1
        return RowRef(p, e.dtype, self.shape), RowRef(p, acc, self.shape, part=1)

    def scalar_out(self, meta: TensorMeta, e: Expr) -> Buffer:
        k = self.kernel()
        buf = self.fuser.new_buffer(meta)
        buf.step, buf.rows_owner = k.step, k
        k.scalar_outs.append((buf, cast(e, meta.dtype)))
        return buf

    def row_out(self, meta: TensorMeta, e: Expr) -> Buffer:
        k = self.kernel()
        st = self.fuser.out_strides(meta, k)
        assert st is not None, "a contiguous output always maps to its own rows space"
        buf = self.fuser.new_buffer(meta)
        buf.step, buf.rows_owner = k.step, k
        self.fuser._mark_reads(e, set())
        k.row_outs.append((buf, cast(e, meta.dtype), st))
        return buf


class Step:
    """One line of the wrapper: run a kernel, run an op eagerly, or pick a tuple element."""

    def __init__(self, kind: str, **fields):
        self.kind = kind
        self.__dict__.update(fields)


class Plan:
    def __init__(self):
        self.buffers: list[Buffer] = []
        self.steps: list[Step] = []
        self.kernels: list[Kernel] = []
        self.inputs: list[Buffer] = []
        # Buffer, ("input", i) for an input returned as is, or Load: a view of a buffer
        self.outputs: list[Any] = []
        self.fusion_log: list[str] = []
        self.kernel_sources: dict[str, str] = {}  # kernel name -> its C function (codegen)


def _labels(e: Expr, out: list, seen: set) -> list:
    if id(e) in seen:
        return out
    seen.add(id(e))
    for a in getattr(e, "args", ()):
        _labels(a, out, seen)
    lab = getattr(e, "label", "")
    if lab and lab not in out:
        out.append(lab)
    return out


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class Fuser:
    def __init__(self, graph: Graph, input_strides: list[tuple], views_from: int | None = None):
        self.g = graph
        self.views_from = views_from
        self.plan = Plan()
        self.users = graph.users()
        self.val: dict[int, Any] = {}
        self.input_strides = input_strides
        self.rows_kernels: list[RowsKernel] = []

    # ------------------------------------------------------------------ buffers
    def new_buffer(self, meta: TensorMeta, strides=None) -> Buffer:
        b = Buffer(f"buf{len(self.plan.buffers)}", meta,
                   contiguous_strides(meta.shape) if strides is None else strides)
        b.step = len(self.plan.steps)  # the step that writes it (made right after)
        self.plan.buffers.append(b)
        return b

    def materialize(self, e: Expr, why: str) -> Buffer:
        """The buffer holding ``e``: the loaded buffer itself when ``e`` reads one whole in its
        own layout, else a new pointwise kernel computing ``e``."""
        if isinstance(e, Load) and e.whole:
            return e.buf
        if isinstance(e, Const):
            raise AssertionError("a constant is never materialized")
        out = self.join_rows(e)
        if out is None:
            out = self.join_pointwise(e)
        if out is not None:
            return out
        out = self.new_buffer(TensorMeta(e.shape, e.dtype))
        self.kernel("pointwise", e, out, {})
        if why:
            self.plan.fusion_log.append(f"{out.name}: stored ({why})")
        return out

    def kernel(self, kind: str, e: Expr, out: Buffer, attrs: dict) -> None:
        labels = _labels(e, [], set())[:6]
        if kind != "pointwise":
            labels.append(kind)
        name = f"k{len(self.plan.kernels)}_" + "_".join(labels or ["copy"])
        k = Kernel(name, kind, e, out, attrs)
        self._mark_reads(e, set())
        self.plan.kernels.append(k)
        self.plan.steps.append(Step("kernel", kernel=k))

    def _mark_reads(self, e, seen):
        if id(e) in seen:
            return
        seen.add(id(e))
        if isinstance(e, Load):
            e.buf.read_by_kernel = True
        for a in getattr(e, "args", ()):
            self._mark_reads(a, seen)

    def as_load(self, buf: Buffer) -> Load:
        return Load(buf, buf.strides, buf.meta.shape)

    # ------------------------------------------------------------------ decisions
    def fusable_consumer(self, user: Node | None) -> bool:
        if user is None:
            return False
        if user.kind == "detach":
            return True
        if user.kind != "call":
            return False
        n = user.target.name
        return n in RULES or getattr(user.target, "pointwise_defn", None) is not None or \
            n in RESHAPES or n in PERMUTES or n in ("expand", "cat") or n in REDUCTIONS or \
            n in EPILOGUE_BIAS

    def settle(self, node: Node, e: Expr) -> Expr:
        """Store ``e`` now if its consumers cannot all read it inline."""
        if isinstance(e, (Load, Const)):
            return e
        users = self.users[node]
        why = None
        if None in users:
            why = "graph output"
        elif len(users) > 1:
            why = f"read by {len(users)} consumers"
        else:
            bad = [u for u in users if not self.fusable_consumer(u)]
            if bad:
                why = f"read by {bad[0].target.name if bad[0].kind == 'call' else bad[0].kind}" \
                      ", which does not fuse"
        if why is None:
            return e
        return self.as_load(self.materialize(e, f"{node.name} {why}"))

    def operand(self, v: Any, shape: tuple) -> Any:
        """An argument as an expression of ``shape`` (tensors) or Const (numbers)."""
        if isinstance(v, Node):
            e = self.val[id(v)]
            if _numel(shape) > _numel(e.shape) and not isinstance(e, (Load, Const)):
                buf = self.materialize(e, f"{v.name} broadcast to {list(shape)} would be "
                                          "recomputed per element")
                e = self.as_load(buf)
                self.val[id(v)] = e
            return broadcast(e, shape)
        if isinstance(v, SymInt):  # a size of a dynamic graph: an int64 kernel parameter
            return Const(v, D.int64)
        if isinstance(v, (bool, int, float)):
            return Const(v, D.scalar_dtype(v))
        return v

    # ------------------------------------------------------------------ per node
    def run(self) -> Plan:
        ins = self.g.inputs
        for node, st in zip(ins, self.input_strides):
            buf = self.new_buffer(node.meta, st)
            buf.step = -1
            self.plan.inputs.append(buf)
            self.val[id(node)] = self.as_load(buf)
        for node in self.g.nodes:
            if node.kind in ("input", "param"):
                continue
            if node.kind == "detach":
                self.val[id(node)] = self.val[id(node.args[0])]
            elif node.kind == "getitem":
                v = self.val[id(node.args[0])][node.target]
                self.val[id(node)] = v if isinstance(v, Expr) else self.as_load(v)
            else:
                self.call(node)
        fresh = {id(b) for st in self.plan.steps
                 for b in (st.kernel.outs if st.kind == "kernel" else
                           st.outs if st.kind == "eager" and library_call(st.node) else ())}
        for i, o in enumerate(self.g.outputs):
            if o.kind in ("input", "param"):
                self.plan.outputs.append(("input", ins.index(o)))
                continue
            v = self.val[id(o)]
            if self.views_from is not None and i >= self.views_from and \
                    isinstance(v, Load) and not v.whole and id(v.buf) in fresh and \
                    not any(isinstance(n, SymInt) for n in (*v.shape, *v.strides, v.offset)):
                self.plan.outputs.append(v)  # a view of memory this graph made: no copy
            else:
                self.plan.outputs.append(self.materialize(v, ""))
        self.finish()
        return self.plan

    def call(self, node: Node) -> None:
        name = node.target.name
        tensor_metas = pytree.collect((node.args, node.kwargs), Node, [])
        outs = node.meta if isinstance(node.meta, tuple) else (node.meta,)
        ok_types = all(m is None or isinstance(m, TensorMeta) and m.dtype in LOWERABLE_DTYPES
                       for m in outs) and \
            all(isinstance(t.meta, TensorMeta) and t.meta.dtype in LOWERABLE_DTYPES
                for t in tensor_metas)
        e = None
        if ok_types:
            try:
                e = self.lower(node, name)
            except _Refuse as r:
                self.plan.fusion_log.append(f"{node.name} ({name}): runs eagerly ({r})")
        if e is None:
            self.eager(node)
        elif isinstance(e, list):  # a multi-output reduction's buffers
            self.val[id(node)] = e
        else:
            self.val[id(node)] = self.settle(node, e)

    def lower(self, node: Node, name: str) -> Expr | list | None:
        a = bound_args(node)
        if name in REDUCTIONS:
            return self.reduction(node, name, a)
        if name in EPILOGUE_BIAS and isinstance(a.get("bias"), Node):
            return self.bias_epilogue(node, a)
        if name in SLICES:
            return self.slices(node, name, a)
        if name == "cat":
            return self.cat(node, a)
        if isinstance(node.meta, tuple):  # other multi-output ops (batch norm) run eagerly
            return None
        shape = node.meta.shape
        pd = getattr(node.target, "pointwise_defn", None)
        if pd is not None or name in RULES:
            tp = node.target.tensor_params
            args = {k: self.operand(v, shape) if k in tp else v for k, v in a.items()}
            if pd is not None:
                return lower_pointwise(node, args, a)
            return RULES[name](node, args, a)
        src = self.val.get(id(a.get("input", a.get("self"))))
        if src is None:
            return None
        if name == "expand":
            return broadcast(src, shape)
        if name in RESHAPES:
            r = reshape(src, shape)
            if r is None:
                buf = self.materialize(src, f"{node.name}: {name} needs a contiguous input")
                r = reshape(self.as_load(buf), shape)
            return r
        if name in PERMUTES:
            return permute(src, _permutation(name, a, len(src.shape)))
        return None

    # ------------------------------------------------------------------ rows kernels
    def rows_space(self, shape: tuple, red: list) -> tuple:
        kept = [d for d in range(len(shape)) if d not in red]
        return (tuple(kept + red), tuple(shape[d] for d in kept),
                _numel([shape[d] for d in red]), tuple(shape))

    @staticmethod
    def to_space(e: Expr, space: tuple) -> Expr | None:
        """``e`` (of the space's source shape) indexed as outer + (row,), or None when a
        collapsed row is not one stride in ``e``'s layout."""
        perm, outer, n, _ = space
        if isinstance(e, Const):
            return e
        if list(perm) != list(range(len(perm))):
            e = permute(e, list(perm))
        return reshape(e, tuple(outer) + (n,))

    def out_strides(self, meta: TensorMeta, k: RowsKernel) -> tuple | None:
        probe = Buffer("probe", meta, contiguous_strides(meta.shape))
        r = self.to_space(self.as_load(probe), k.space)
        return None if r is None else r.strides

    def new_rows_kernel(self, space: tuple) -> RowsKernel:
        k = RowsKernel(len(self.plan.kernels), space, len(self.plan.steps))
        self.plan.kernels.append(k)
        self.plan.steps.append(Step("kernel", kernel=k))
        self.rows_kernels.append(k)
        return k

    def bind(self, k: RowsKernel, e: Expr) -> Expr | None:
        """``e`` (in ``k``'s space) as ``k`` can compute it: loads of ``k``'s per-row results
        become those results; None if ``e`` reads a buffer not yet written when ``k`` runs."""
        lin = contiguous_strides(k.outer)

        def leaf(ld: Load) -> Expr | None:
            b = ld.buf
            if getattr(b, "rows_owner", None) is k:
                row_const = (ld.strides[-1] == 0 or k.n == 1) and ld.offset == 0
                same_row = all(n == 1 or s == t for n, s, t in zip(k.outer, ld.strides, lin))
                for buf, ex in k.scalar_outs:
                    if buf is b and row_const and same_row:
                        return cast(ex, b.meta.dtype)  # the value as stored
                return None
            return ld if b.step < k.step else None
        return substitute(e, leaf)

    def pick_rows_kernel(self, space: tuple, exprs: list) -> tuple:
        """The latest kernel over the same rows that can take ``exprs`` (bound to it), or
        (None, exprs) for a new kernel."""
        for k in reversed(self.rows_kernels):
            if k.space != space:
                continue
            bound = [self.bind(k, e) for e in exprs]
            if all(b is not None for b in bound):
                return k, bound
        return None, exprs

    def join_rows(self, e: Expr) -> Buffer | None:
        """Compute pointwise ``e`` in the last pass of the rows kernel whose per-row results it
        reads (``x - x.mean(-1, keepdim=True)``), instead of a kernel of its own."""
        owners = [getattr(ld.buf, "rows_owner", None) for ld in loads_of(e)]
        owners = [k for k in owners if k is not None]
        if not owners:
            return None
        k = max(owners, key=lambda k: k.step)
        meta = TensorMeta(e.shape, e.dtype)
        if [n for n in e.shape if n != 1] == [n for n in k.outer if n != 1]:
            # one value per row (``x.amax(-1) * 2``): stored with the kernel's statistics
            te = reshape(e, tuple(k.outer) + (1,))
            te = None if te is None else self.bind(k, te)
            if te is None:
                return None
            buf = self.new_buffer(meta)
            buf.step, buf.rows_owner = k.step, k
            k.scalar_outs.append((buf, te))
        else:
            if tuple(e.shape) != k.src_shape or not (
                    _numel(k.outer) >= ROW_JOIN_MIN_ROWS or k.n <= ROW_JOIN_MAX_LENGTH):
                return None
            te, st = self.to_space(e, k.space), self.out_strides(meta, k)
            te = None if te is None or st is None else self.bind(k, te)
            if te is None:
                return None
            buf = self.new_buffer(meta)
            buf.step, buf.rows_owner = k.step, k
            k.row_outs.append((buf, te, st))
        self._mark_reads(te, set())
        self.plan.fusion_log.append(f"{buf.name}: computed in rows kernel {k.name}")
        return buf

    def join_pointwise(self, e: Expr) -> Buffer | None:
        """Store ``e`` from the pointwise kernel whose output it reads element for element (an
        activation after a bias add that is itself kept for backward): one pass, two
        outputs, the shared value computed once."""
        by_kernel = {id(k.out): k for k in self.plan.kernels[-4:] if isinstance(k, Kernel)}
        same = [by_kernel[id(ld.buf)] for ld in loads_of(e) if id(ld.buf) in by_kernel
                and ld.whole]
        if not same:
            return None
        k = max(same, key=lambda k: k.out.step)
        if tuple(k.expr.shape) != tuple(e.shape):
            return None
        mine = {id(b): ex for b, ex in [(k.out, k.expr), *k.extra]}

        def leaf(ld: Load) -> Expr | None:
            if id(ld.buf) in mine:
                return mine[id(ld.buf)] if ld.whole else None
            return ld if ld.buf.step < k.out.step else None
        te = substitute(e, leaf)
        if te is None:
            return None
        buf = self.new_buffer(TensorMeta(e.shape, e.dtype))
        buf.step = k.out.step
        self._mark_reads(te, set())
        k.extra.append((buf, te))
        self.plan.fusion_log.append(f"{buf.name}: a second output of kernel {k.name}")
        return buf

    def reduction(self, node: Node, name: str, a: dict) -> Expr | list:
        spec = REDUCTIONS[name]
        src = self.val.get(id(a.get(spec.main)))
        if src is None or isinstance(src, (Const, list)):
            raise _Refuse("input is not a lowered tensor")
        if _numel(src.shape) == 0:
            raise _Refuse("empty input")
        red = spec.dims(a, tuple(src.shape))
        if red is None:
            raise _Refuse("a layout the generated kernel does not cover")
        rows = self.make_rows(node, name, a, spec, src, red)
        r = spec.build(node, a, rows)
        if r is None:
            assert not rows.touched, "a reduction rule refuses before building"
            raise _Refuse(f"dtype {node.meta}")
        if rows.k is not None and rows.k is rows.joined:
            self.plan.fusion_log.append(f"{node.name} ({name}): joins rows kernel {rows.k.name}")
        return r if isinstance(r, list) else self.as_load(r)

    def make_rows(self, node: Node, name: str, a: dict, spec, src: Expr, red: list) -> Rows:
        """The builder for reducing ``src`` (and the spec's other operands) over ``red``."""
        space = self.rows_space(src.shape, red)
        extra = {p: self.operand(a[p], src.shape) for p in spec.extra if a.get(p) is not None}
        exprs = [src, *extra.values()]
        mapped = []
        for e in exprs:
            m = self.to_space(e, space)
            if m is None:  # reduced dims that no single stride walks: copy in row order first
                pe = permute(e, list(space[0]))
                buf = self.new_buffer(TensorMeta(pe.shape, pe.dtype))
                self.kernel("pointwise", pe, buf, {})
                self.plan.fusion_log.append(f"{buf.name}: stored ({node.name}: {name} rows "
                                            "are not one stride apart)")
                m = self.to_space(self.as_load(buf), (tuple(range(len(red) + len(space[1]))),
                                                      space[1], space[2], None))
            mapped.append(m)
        k, bound = self.pick_rows_kernel(space, mapped)
        indices_used = any(u is not None and u.kind == "getitem" and u.target == 1
                           for u in self.users[node])
        rows = Rows(self, space, k, bound[0], dict(zip(extra, bound[1:])), name, indices_used)
        rows.joined = k
        rows.over = lambda dims: self.make_rows(node, name, a, spec, src, dims)
        return rows

    def finish(self) -> None:
        """Drop per-row results nobody reads any more (they were joined into their kernel's
        later passes) and name the rows kernels after what they compute."""
        used: set = set()
        for k in self.plan.kernels:
            for e in k.exprs():
                used.update(id(ld.buf) for ld in loads_of(e))
        for s in self.plan.steps:
            if s.kind != "kernel":
                used.update(id(b) for b in s.inputs.values())
        used.update(id(o) for o in self.plan.outputs if isinstance(o, Buffer))
        used.update(id(o.buf) for o in self.plan.outputs if isinstance(o, Load))
        for k in self.rows_kernels:
            k.scalar_outs = [(b, e) for b, e in k.scalar_outs if id(b) in used]
            labels: list = []
            seen: set = set()
            for e in k.exprs():
                _labels(e, labels, seen)
            kinds = [o for o in dict.fromkeys(k.ops) if o not in labels[:6]]
            k.name = f"k{k.index}_" + "_".join(labels[:6] + kinds)
        for k in self.plan.kernels:
            if isinstance(k, Kernel) and k.extra:
                labels, seen = [], set()
                for e in k.exprs():
                    _labels(e, labels, seen)
                k.name = k.name.split("_")[0] + "_" + "_".join(labels[:6])
        dead = [k for k in self.rows_kernels if not k.outs]
        self.plan.kernels = [k for k in self.plan.kernels if k not in dead]
        self.plan.steps = [s for s in self.plan.steps
                           if not (s.kind == "kernel" and s.kernel in dead)]

    def bias_epilogue(self, node: Node, a: dict) -> Expr:
        """``linear(x, w, b)``: the library matmul without ``b``, whose add becomes part of the
        next kernel's expression (with the activation after it): no pass of its own. A bias
        the drivers take (gemm.library_call) fills the product's output instead, so the
        consumers read one buffer and a product read as is (split into q, k, v) needs no
        kernel at all."""
        out = node.meta.dtype
        if out.kind != "f" or library_call(node):
            return None
        pos = node.target.params.index("bias")
        core = Node(node.name, node.kind, node.target,
                    tuple(None if i == pos else v for i, v in enumerate(node.args)),
                    {k: (None if k == "bias" else v) for k, v in node.kwargs.items()},
                    node.meta)
        self.eager(core)
        mm = self.val.pop(id(core))
        c = compute_dtype(out)
        bias = cast(self.operand(a["bias"], node.meta.shape), c)
        return cast(Op("add", [cast(mm, c), bias], c, node.meta.shape, label="bias"), out)

    def slices(self, node: Node, name: str, a: dict) -> Expr | list | None:
        """split / unbind parts, narrow and select: loads of the source buffer at an offset
        (index arithmetic, no copy). A computed source is stored first; sizes that are
        symbolic (dynamic shapes) run the op eagerly."""
        src = self.val.get(id(a.get("input", a.get("tensor"))))
        if not isinstance(src, Expr) or isinstance(src, Const):
            return None
        if not isinstance(src, Load):
            src = self.as_load(self.materialize(src, f"{node.name}: {name} of a computed value"))
        metas = node.meta if isinstance(node.meta, tuple) else (node.meta,)
        sizes = [*src.shape, *src.strides, src.offset, *(n for m in metas for n in m.shape)]
        if any(isinstance(v, SymInt) for v in sizes):
            return None
        pos = a.get("index", a.get("start", 0))
        if not isinstance(pos, int) or isinstance(pos, (bool, SymInt)):
            return None  # a tensor or symbolic position
        nd = len(src.shape)
        d = _wrap_dim(a.get("dim", 0), nd)
        st = src.strides
        if name in ("select", "unbind"):
            keep = [i for i in range(nd) if i != d]
            at = [pos] if name == "select" else range(src.shape[d])
            parts = [Load(src.buf, [st[i] for i in keep], metas[0].shape,
                          src.offset + (j % src.shape[d] if src.shape[d] else 0) * st[d])
                     for j in at]
        else:  # split, narrow: consecutive runs along d
            start = pos % src.shape[d] if name == "narrow" and src.shape[d] else 0
            parts = []
            for m in metas:
                parts.append(Load(src.buf, st, m.shape, src.offset + start * st[d]))
                start += m.shape[d]
        return parts if isinstance(node.meta, tuple) else parts[0]

    def cat(self, node: Node, a: dict) -> Expr | None:
        """``cat``: one kernel computing every input into its slice of the output (static
        shapes; an input that is not a lowered tensor runs the op eagerly)."""
        meta = node.meta
        shape = meta.shape
        if any(isinstance(n, SymInt) for n in shape) or not shape or a.get("axis") is not None:
            return None
        d = _wrap_dim(a.get("dim", 0), len(shape))
        parts, at = [], 0
        for t in a["tensors"]:
            e = self.val.get(id(t)) if isinstance(t, Node) else None
            if not isinstance(e, Expr) or isinstance(e, Const):
                return None
            if tuple(e.shape) == (0,) and len(shape) > 1:
                continue  # PyTorch's legacy rule: 1-d empty tensors are skipped
            if len(e.shape) != len(shape) or any(isinstance(n, SymInt) for n in e.shape):
                return None
            if e.shape[d]:
                parts.append((cast(e, meta.dtype), at))
            at += e.shape[d]
        if at != shape[d]:
            return None
        out = self.new_buffer(meta)
        k = CatKernel(f"k{len(self.plan.kernels)}_cat", parts, out, d)
        for e, _ in parts:
            self._mark_reads(e, set())
        self.plan.kernels.append(k)
        self.plan.steps.append(Step("kernel", kernel=k))
        return self.as_load(out)

    def view(self, ld: Load) -> Buffer:
        """A strided view of a buffer (a transposed weight for the library matmul, a broadcast
        operand, a part of a split) handed to an eager op without copying it: numpy and BLAS
        take strides."""
        src = ld.buf
        src.read_by_kernel = True  # an eager result is made contiguous, so its strides are known
        out = self.new_buffer(TensorMeta(ld.shape, ld.dtype), ld.strides)
        self.plan.steps.append(Step("view", src=src, inputs={id(src): src}, outs=[out],
                                    offset=ld.offset))
        return out

    def product_strides(self, node: Node) -> tuple | None:
        """The layout a matrix product writes when its one reader permutes it with the last
        dim kept in place (attention heads back to (B, T, H, D)): the one that reader sees
        as contiguous, so the drivers write the permuted result directly and the reshape
        after it is a view, not a copy. None (contiguous) otherwise."""
        users = self.users.get(node, [])  # (linear's core without its bias is no graph node)
        if node.target.name == "linear" or not library_call(node) or len(users) != 1 or \
                users[0] is None or users[0].kind != "call" or \
                users[0].target.name not in PERMUTES:
            return None
        shape = node.meta.shape
        dims = _permutation(users[0].target.name, bound_args(users[0]), len(shape))
        if dims[-1] != len(shape) - 1 or any(isinstance(n, SymInt) for n in shape):
            return None
        within = contiguous_strides(tuple(shape[d] for d in dims))
        strides = [0] * len(shape)
        for i, d in enumerate(dims):
            strides[d] = within[i]
        return tuple(strides)

    def eager(self, node: Node) -> None:
        ins = pytree.collect((node.args, node.kwargs), Node, [])
        bufs = {}
        for i in ins:
            if id(i) in bufs:
                continue
            v = self.val[id(i)]
            if isinstance(v, Load) and not v.whole:
                bufs[id(i)] = self.view(v)
            else:
                bufs[id(i)] = self.materialize(v, f"{i.name} read by eager {node.target.name}")
        if isinstance(node.meta, tuple):
            outs = [self.new_buffer(m) for m in node.meta]
            self.val[id(node)] = outs
        else:
            outs = [self.new_buffer(node.meta, self.product_strides(node))]
            self.val[id(node)] = self.as_load(outs[0])
        self.plan.steps.append(Step("eager", node=node, inputs=bufs, outs=outs,
                                    tuple_out=isinstance(node.meta, tuple)))


def _permutation(name: str, a: dict, nd: int) -> list:
    """The source dim of each result dim of PERMUTES op ``name`` with bound args ``a``."""
    dims = list(range(nd))
    if name == "transpose":
        i, j = _wrap_dim(a["dim0"], nd), _wrap_dim(a["dim1"], nd)
        dims[i], dims[j] = dims[j], dims[i]
    elif name == "permute":
        dims = [_wrap_dim(d, nd) for d in a["dims"]]
    elif name == "adjoint":
        dims[-2:] = dims[:-3:-1]
    else:
        dims = dims[::-1]
    return dims


class _Refuse(Exception):
    pass


def plan(graph: Graph, input_strides: list[tuple], views_from: int | None = None) -> Plan:
    """Lower ``graph`` (inputs laid out with ``input_strides``) to kernels and eager steps.
    Outputs from index ``views_from`` on (a training forward's saved values, which only the
    backward graph reads) may be strided views of buffers the graph made, not copies."""
    return Fuser(graph, input_strides, views_from).run()
