"""Dead-code elimination: drop computed nodes whose values nothing returns or reads."""

from __future__ import annotations

from ..graph import Graph


def dce(graph: Graph) -> Graph:
    """A new graph without unused call/getitem/detach nodes (inputs always stay: they fix the
    calling convention; random calls stay: each advances the generator, as in eager)."""
    live = {id(o) for o in graph.outputs}
    live.update(id(n) for n in graph.nodes if n.kind == "call" and "random" in n.target.tags)
    for n in reversed(graph.nodes):
        if id(n) in live:
            live.update(id(i) for i in n.inputs())
    kept = [n for n in graph.nodes if n.kind in ("input", "param") or id(n) in live]
    return graph.copy_with(kept, list(graph.outputs))
