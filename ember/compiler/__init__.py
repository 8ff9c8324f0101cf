"""ember's compiler: ``ember.compile`` captures Python code into a graph IR, optimizes it and
generates fused C kernels (see DESIGN.md, "The compiler")."""

from .api import (InvalidBackend, OptimizedModule, Unsupported, compile, config, counters,
                  disable, is_compiling, list_backends, reset)
from .capture import GraphBreak
from .explain import ExplainOutput, explain
from .graph import Graph, GraphModule
from .stance import set_stance
from .symbolic import (ConstraintViolationError, SymInt, mark_dynamic, mark_static,
                       maybe_mark_dynamic)
from . import eager_kernels  # noqa: F401  (registers eager ops' generated kernels: backends/native)

__all__ = ["compile", "reset", "disable", "is_compiling", "list_backends", "set_stance",
           "config", "counters", "InvalidBackend", "Unsupported", "OptimizedModule", "Graph",
           "GraphModule", "GraphBreak", "explain", "ExplainOutput", "mark_dynamic",
           "maybe_mark_dynamic", "mark_static", "ConstraintViolationError", "SymInt"]
