"""Fusion: walk a graph once and decide which values become kernels, which stay inline in
their consumers' expressions and which ops run eagerly. The result is a ``Plan``: buffers,
ordered steps, and a log of every fusion refusal with its reason."""

from __future__ import annotations

from typing import Any

from .. import _dtype as D
from . import pytree
from .graph import Graph, Node, TensorMeta
from .lower import (
    LOWERABLE_DTYPES,
    Buffer,
    Const,
    Expr,
    Load,
    _wrap_dim,
    bound_args,
    broadcast,
    cast,
    compute_dtype,
    contiguous_strides,
    permute,
    reshape,
)
from .rules import PERMUTES, REDUCTIONS, RESHAPES, RULES, SOFTMAXES


class Kernel:
    """One generated C function: ``kind`` is "pointwise" or a reduction/softmax over the last
    dimension of ``expr``; it writes ``out`` (contiguous)."""

    def __init__(self, name: str, kind: str, expr: Expr, out: Buffer, attrs: dict):
        self.name, self.kind, self.expr, self.out, self.attrs = name, kind, expr, out, attrs


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
        self.outputs: list[Any] = []  # Buffer, or ("input", i) for an input returned as is
        self.fusion_log: list[str] = []


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
    def __init__(self, graph: Graph, input_strides: list[tuple]):
        self.g = graph
        self.plan = Plan()
        self.users = graph.users()
        self.val: dict[int, Any] = {}
        self.input_strides = input_strides

    # ------------------------------------------------------------------ buffers
    def new_buffer(self, meta: TensorMeta, strides=None) -> Buffer:
        b = Buffer(f"buf{len(self.plan.buffers)}", meta,
                   contiguous_strides(meta.shape) if strides is None else strides)
        self.plan.buffers.append(b)
        return b

    def materialize(self, e: Expr, why: str) -> Buffer:
        """The buffer holding ``e``: the loaded buffer itself when ``e`` reads one whole in its
        own layout, else a new pointwise kernel computing ``e``."""
        if isinstance(e, Load) and e.strides == e.buf.strides and e.shape == e.buf.meta.shape:
            return e.buf
        if isinstance(e, Const):
            raise AssertionError("a constant is never materialized")
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
        return n in RULES or n in RESHAPES or n in PERMUTES or n == "expand" or \
            n in REDUCTIONS or n in SOFTMAXES

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
        if isinstance(v, (bool, int, float)):
            return Const(v, D.scalar_dtype(v))
        return v

    # ------------------------------------------------------------------ per node
    def run(self) -> Plan:
        ins = self.g.inputs
        for node, st in zip(ins, self.input_strides):
            buf = self.new_buffer(node.meta, st)
            self.plan.inputs.append(buf)
            self.val[id(node)] = self.as_load(buf)
        for node in self.g.nodes:
            if node.kind in ("input", "param"):
                continue
            if node.kind == "detach":
                self.val[id(node)] = self.val[id(node.args[0])]
            elif node.kind == "getitem":
                self.val[id(node)] = self.as_load(self.val[id(node.args[0])][node.target])
            else:
                self.call(node)
        for o in self.g.outputs:
            if o.kind in ("input", "param"):
                self.plan.outputs.append(("input", ins.index(o)))
            else:
                self.plan.outputs.append(self.materialize(self.val[id(o)], ""))
        return self.plan

    def call(self, node: Node) -> None:
        name = node.target.name
        tensor_metas = pytree.collect((node.args, node.kwargs), Node, [])
        ok_types = isinstance(node.meta, TensorMeta) and node.meta.dtype in LOWERABLE_DTYPES \
            and all(isinstance(m.meta, TensorMeta) and m.meta.dtype in LOWERABLE_DTYPES
                    for m in tensor_metas)
        e = None
        if ok_types:
            try:
                e = self.lower(node, name)
            except _Refuse as r:
                self.plan.fusion_log.append(f"{node.name} ({name}): runs eagerly ({r})")
        if e is None:
            self.eager(node)
        else:
            self.val[id(node)] = self.settle(node, e)

    def lower(self, node: Node, name: str) -> Expr | None:
        a = bound_args(node)
        shape = node.meta.shape
        if name in RULES:
            tp = node.target.tensor_params
            args = {k: self.operand(v, shape) if k in tp else v for k, v in a.items()}
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
            nd = len(src.shape)
            dims = list(range(nd))
            if name == "transpose":
                i, j = _wrap_dim(a["dim0"], nd), _wrap_dim(a["dim1"], nd)
                dims[i], dims[j] = dims[j], dims[i]
            elif name == "permute":
                dims = [_wrap_dim(d, nd) for d in a["dims"]]
            else:
                dims = dims[::-1]
            return permute(src, dims)
        if name in REDUCTIONS or name in SOFTMAXES:
            return self.reduction(node, name, a, src)
        return None

    def reduction(self, node: Node, name: str, a: dict, src: Expr) -> Expr:
        nd = len(src.shape)
        dim = a.get("dim")
        if dim is None:
            dims = list(range(nd))
        elif isinstance(dim, int):
            dims = [_wrap_dim(dim, nd)]
        else:
            dims = [_wrap_dim(d, nd) for d in dim]
        if nd == 0 or dims != [nd - 1] or src.shape[-1] == 0:
            raise _Refuse("only last-dimension reductions of non-empty rows are generated")
        out = node.meta.dtype
        if out not in LOWERABLE_DTYPES or (name in SOFTMAXES and out.kind != "f"):
            raise _Refuse(f"result dtype {out}")
        if isinstance(src, Const):
            raise _Refuse("constant input")
        if a.get("dtype") is not None:
            src = cast(src, a["dtype"])
        if name in ("sum", "mean"):
            acc = D.float64 if out.kind == "f" else D.int64
        elif name in ("amax", "amin"):
            acc = compute_dtype(src.dtype)
        else:
            acc = D.float64
        if name in SOFTMAXES:
            src = cast(src, compute_dtype(out))
        buf = self.new_buffer(node.meta)
        self.kernel(name, src, buf, {"acc": acc, "n": src.shape[-1]})
        return self.as_load(buf)

    def eager(self, node: Node) -> None:
        ins = pytree.collect((node.args, node.kwargs), Node, [])
        bufs = {}
        for i in ins:
            if id(i) not in bufs:
                bufs[id(i)] = self.materialize(self.val[id(i)], f"{i.name} read by eager "
                                                                f"{node.target.name}")
        if isinstance(node.meta, tuple):
            outs = [self.new_buffer(m) for m in node.meta]
            self.val[id(node)] = outs
        else:
            outs = [self.new_buffer(node.meta)]
            self.val[id(node)] = self.as_load(outs[0])
        self.plan.steps.append(Step("eager", node=node, inputs=bufs, outs=outs,
                                    tuple_out=isinstance(node.meta, tuple)))


class _Refuse(Exception):
    pass


def plan(graph: Graph, input_strides: list[tuple]) -> Plan:
    """Lower ``graph`` (inputs laid out with ``input_strides``) to kernels and eager steps."""
    return Fuser(graph, input_strides).run()
