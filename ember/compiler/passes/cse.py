"""Common-subexpression elimination: one node per identical (op, arguments) call."""

from __future__ import annotations

from typing import Any

from ..graph import Graph, Node


def _key(v: Any) -> Any:
    # Python's 1 == 1.0 == True would merge calls that promote differently: key by type too
    if isinstance(v, Node):
        return ("node", id(v))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_key(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((k, _key(x)) for k, x in v.items()))
    if isinstance(v, float):
        return ("float", repr(v))
    hash(v)
    return (type(v).__name__, v)


def cse(graph: Graph) -> Graph:
    """A new graph where a call repeating an earlier identical call reads the earlier node."""
    seen: dict[Any, Node] = {}
    replace: dict[int, Node] = {}
    nodes: list[Node] = []

    def sub(v):
        if isinstance(v, Node):
            return replace.get(id(v), v)
        if isinstance(v, (list, tuple)) and not hasattr(type(v), "_fields"):
            return type(v)(sub(x) for x in v)
        if isinstance(v, dict):
            return {k: sub(x) for k, x in v.items()}
        return v

    for n in graph.nodes:
        if n.kind in ("input", "param"):
            nodes.append(n)
            continue
        new = Node(n.name, n.kind, n.target, sub(n.args), sub(n.kwargs), n.meta)
        if n.kind == "call" and "random" in n.target.tags:  # two draws are two values
            replace[id(n)] = new
            nodes.append(new)
            continue
        try:
            key = (n.kind, id(n.target) if n.kind == "call" else n.target, _key(new.args),
                   _key(new.kwargs))
        except TypeError:  # an unhashable argument: keep the node as it is
            key = None
        if key is not None and key in seen:
            replace[id(n)] = seen[key]
            continue
        if key is not None:
            seen[key] = new
        replace[id(n)] = new
        nodes.append(new)
    return graph.copy_with(nodes, [replace.get(id(o), o) for o in graph.outputs])
