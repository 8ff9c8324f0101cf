"""Graph passes: pure functions ``Graph -> Graph``, one per file, run in PIPELINE order."""

from __future__ import annotations

from ..graph import Graph
from .cse import cse
from .dce import dce

# The pipeline every captured graph goes through before a backend sees it.
PIPELINE = [cse, dce]


def run_pipeline(graph: Graph) -> Graph:
    for p in PIPELINE:
        graph = p(graph)
        graph.verify()
    return graph


__all__ = ["PIPELINE", "cse", "dce", "run_pipeline"]
