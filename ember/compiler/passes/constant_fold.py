"""Constant folding: values that depend on no graph input are computed once, at compile
time, and read as lifted constants (``param`` nodes) on every call.

Only chains are folded (a factory call alone, ``zeros(3)``, is as cheap to rerun as to
read). Random ops, ``empty`` and ops tagged ``nondeterministic`` are never folded, and a
result larger than ``MAX_ELEMENTS`` or one whose size or arguments are symbolic (dynamic
shapes) stays computed at run time.
A graph whose callers cannot pass new inputs (``constants_as_inputs`` false: a derived
backward graph) is left alone.
"""

from __future__ import annotations

from typing import Any

from .. import pytree, symbolic
from ..graph import Graph, Node

MAX_ELEMENTS = 1 << 20
_NEVER = frozenset(["random", "nondeterministic"])


def _foldable(n: Node) -> bool:
    if n.kind in ("getitem", "detach"):
        return True
    return n.kind == "call" and not _NEVER.intersection(n.target.tags) and \
        n.target.name not in ("empty", "empty_like", "empty_strided")


def _numel(meta) -> int:
    total = 1
    for s in meta.shape:
        total *= s
    return total


def constant_fold(graph: Graph) -> Graph:
    """A new graph where each input-independent chain's result is a lifted constant."""
    from ...autograd.grad_mode import no_grad

    if not graph.constants_as_inputs:
        return graph
    value: dict[int, Any] = {}  # node -> computed tensor(s)
    depth: dict[int, int] = {}  # node -> longest chain of folded calls behind it
    for n in graph.nodes:
        if n.kind in ("input", "param", "mutate") or not _foldable(n):
            continue
        ins = n.inputs()
        if any(id(i) not in value for i in ins):
            continue
        metas = n.meta if isinstance(n.meta, tuple) else (n.meta,)
        if any(type(s) is not int for m in metas for s in m.shape) or \
                symbolic.has_symbols((n.args, tuple(n.kwargs.values()))):
            continue  # a symbolic size: the value differs from call to call
        if sum(_numel(m) for m in metas) > MAX_ELEMENTS:
            continue
        args, kwargs = pytree.map_leaves((n.args, n.kwargs), Node, lambda x: value[id(x)])
        try:
            with no_grad():
                if n.kind == "call":
                    value[id(n)] = n.target(*args, **kwargs)
                elif n.kind == "getitem":
                    value[id(n)] = args[0][n.target]
                else:
                    value[id(n)] = args[0].detach()
        except Exception:  # noqa: BLE001, S112  folding is optional: errors surface at run time
            continue
        depth[id(n)] = 1 + max((depth[id(i)] for i in ins), default=0)
    if not any(d > 1 for d in depth.values()):
        return graph
    users = graph.users()

    def read_unfolded(n: Node) -> bool:  # by an unfolded node or as a graph output
        return any(u is None or id(u) not in depth for u in users[n])

    consts: list[Node] = []
    replace: dict[int, Node] = {}
    for n in graph.nodes:
        if depth.get(id(n), 0) > 1 and not isinstance(n.meta, tuple) and read_unfolded(n):
            c = Node(f"{n.name}_const", "param", value[id(n)].detach(), meta=n.meta)
            consts.append(c)
            replace[id(n)] = c
    # inputs first (existing lifted tensors keep their indices), then the constants
    leaves = [n for n in graph.nodes if n.kind in ("input", "param")]
    body: list[Node] = []
    for n in graph.nodes:
        if n.kind in ("input", "param") or id(n) in replace:
            continue
        if id(n) in depth and not read_unfolded(n):
            continue  # only read by other folded nodes: gone with them
        args, kwargs = pytree.map_leaves((n.args, n.kwargs), Node,
                                         lambda x: replace.get(id(x), x))
        replace[id(n)] = Node(n.name, n.kind, n.target, args, kwargs, n.meta)
        body.append(replace[id(n)])
    return graph.copy_with(leaves + consts + body,
                           [replace.get(id(o), o) for o in graph.outputs])
