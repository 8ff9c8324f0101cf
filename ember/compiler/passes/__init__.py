"""Graph passes: pure functions ``Graph -> Graph``, one per file, run in PIPELINE order."""

from __future__ import annotations

from ..graph import Graph
from .constant_fold import constant_fold
from .cse import cse
from .dce import dce
from .decompose import decompose
from .functionalize import functionalize

# The pipeline every captured graph goes through before a backend sees it: decompositions
# may write in place (functionalize must follow them); folding and CSE need a pure graph.
PIPELINE = [decompose, functionalize, constant_fold, cse, dce]


def run_pipeline(graph: Graph) -> Graph:
    for p in PIPELINE:
        graph = p(graph)
        graph.verify()
    return graph


__all__ = ["PIPELINE", "constant_fold", "cse", "dce", "decompose", "functionalize",
           "run_pipeline"]
