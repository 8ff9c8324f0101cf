"""Functionalization: ``mutate`` nodes (captured in-place ops and ``out=`` writes) become
dataflow, so every later pass and backend sees a pure graph.

Values are tracked per storage: a view (an op tagged ``view``, an output of a multi-output
view op, ``detach``) shares the storage of its base, so each value has a root (the value that
owns the storage) and a chain of view nodes from the root. Writing ``R`` into a value:

- into a root: the root's current value becomes ``R``;
- into a view: the root's current value becomes the root with ``R`` scattered at the view's
  elements. Which elements those are is computed in the graph itself: the same view chain
  applied to ``arange(numel).reshape(root shape)`` gives each view element's flat index.

Each write bumps the root's version; a later read of a view made at an older version replays
the view chain on the root's current value, as a read of the shared memory would see.
Mutated roots that are graph inputs or lifted tensors become extra graph outputs listed in
``graph.writebacks``; the runtime copies them back into the caller's tensors
(``graph.with_writebacks``), which bumps their version counters as eager in-place ops do.
"""

from __future__ import annotations

from ..._dispatch import STATE
from .. import pytree
from ..graph import Graph, Node, TensorMeta
from ..views import StorageProbe, base_of, is_view


class _Builder:
    """Appends new nodes (metadata from the op table's meta) to a node list."""

    def __init__(self, nodes: list[Node], count: int):
        self.nodes, self.count = nodes, count

    def node(self, kind: str, target, args: tuple, kwargs: dict, meta) -> Node:
        n = Node(f"f{self.count}", kind, target, args, kwargs, meta)
        self.count += 1
        self.nodes.append(n)
        return n

    @staticmethod
    def meta(op, args: tuple, kwargs: dict):
        """The output metadata of ``op`` on these (node) arguments; with symbolic sizes, the
        output sizes are expressions over them (fitted as capture fits them, and re-checked
        per new set of sizes), so a write-back does not specialise the graph."""
        from ..capture import _Shaped, symbolic_meta
        metas = pytree.map_leaves((args, kwargs), Node,
                                  lambda n: _Shaped(n.meta.shape, n.meta.dtype))
        meta = symbolic_meta(STATE.shape_envs[-1], op, *metas)
        if isinstance(meta[1], tuple):
            return tuple(TensorMeta(*m) for m in meta)
        return TensorMeta(*meta)

    def call(self, name: str, *args, **kwargs) -> Node:
        from ...ops import registry
        op = registry.OPS[name]
        return self.node("call", op, args, kwargs, self.meta(op, args, kwargs))


def functionalize(graph: Graph) -> Graph:
    """A new graph without ``mutate`` nodes, with write-backs for mutated inputs."""
    if not any(n.kind == "mutate" for n in graph.nodes):
        return graph
    nodes: list[Node] = []
    b = _Builder(nodes, graph._count)
    cur: dict[int, tuple[Node, int]] = {}  # old node -> (new node, root version it saw)
    alias: dict[int, tuple[Node, list[Node]]] = {}  # old view node -> (root, chain)
    version: dict[int, int] = {}  # old root -> number of writes so far
    mutated: list[Node] = []  # roots that are inputs/params and were written
    probe = StorageProbe()

    def replay(chain: list[Node], x: Node) -> Node:
        """The view chain's nodes re-applied to ``x`` (new nodes)."""
        for c in chain:
            if c.kind == "call":
                base = base_of(c)
                def arg(n: Node, x: Node = x, base: Node = base) -> Node:
                    return x if n is base else value(n)
                args, kwargs = pytree.map_leaves((c.args, c.kwargs), Node, arg)
                x = b.node("call", c.target, args, kwargs, b.meta(c.target, args, kwargs))
            else:  # getitem or detach
                meta = x.meta[c.target] if c.kind == "getitem" else x.meta
                x = b.node(c.kind, c.target, (x,), {}, meta)
        return x

    def value(n: Node) -> Node:
        """The new node holding old node ``n``'s value as of now."""
        new, seen = cur[id(n)]
        if id(n) in alias:
            root, chain = alias[id(n)]
            v = version.get(id(root), 0)
            if seen != v:  # its storage was written since: read it again through the views
                new = replay(chain, value(root))
                cur[id(n)] = (new, v)
        return new

    def write(target: Node, result: Node) -> None:
        root, chain = alias.get(id(target), (target, []))
        v = version.get(id(root), 0) + 1
        if chain:
            rv = value(root)
            shape = root.meta.shape
            numel = 1
            for s in shape:
                numel *= s
            idx = b.call("arange", numel, dtype=_int64())
            idx = replay(chain, b.call("reshape", idx, shape))
            flat = b.call("reshape", rv, (-1,))
            new_flat = b.call("scatter", flat, 0, b.call("reshape", idx, (-1,)),
                              b.call("reshape", result, (-1,)))
            cur[id(root)] = (b.call("reshape", new_flat, shape), v)
        else:
            cur[id(root)] = (result, v)
        version[id(root)] = v
        cur[id(target)] = (result, v)
        if root.kind in ("input", "param") and root not in mutated:
            mutated.append(root)

    for n in graph.nodes:
        if n.kind in ("input", "param"):
            nodes.append(n)
            cur[id(n)] = (n, 0)
            continue
        if n.kind == "mutate":
            write(n.args[0], value(n.args[1]))
            continue
        args, kwargs = pytree.map_leaves((n.args, n.kwargs), Node, value)
        new = Node(n.name, n.kind, n.target, args, kwargs, n.meta)
        nodes.append(new)
        if is_view(n) and not isinstance(n.meta, tuple):
            # an output of a multi-output view (split, unbind) replays its call, then picks
            extra = [n.args[0], n] if n.kind == "getitem" else [n]
            base = base_of(extra[0])
            root, chain = alias.get(id(base), (base, []))
            if n.kind == "call" and n.target.view == "maybe" and \
                    not probe.shares_storage(root, chain + extra):
                cur[id(n)] = (new, 0)  # reshape of a non-contiguous value: a copy
                continue
            alias[id(n)] = (root, chain + extra)
            cur[id(n)] = (new, version.get(id(root), 0))
        else:
            cur[id(n)] = (new, 0)
    outputs = [value(o) for o in graph.outputs]
    inputs = graph.inputs
    out = graph.copy_with(nodes, outputs)
    out._count = b.count
    for root in mutated:
        out.writebacks.append((inputs.index(root), len(out.outputs)))
        out.outputs.append(value(root))
    for k, o in enumerate(graph.outputs):  # eager returned the (mutated) input itself
        if o in mutated:
            out.returns_input[k] = inputs.index(o)
    return out


def _int64():
    from ... import _dtype as D
    return D.int64
