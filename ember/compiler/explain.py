"""``explain(fn)(*args)``: capture a function for some arguments and report its graphs,
graph breaks, ops per graph and guards, as ``torch._dynamo.explain`` does."""

from __future__ import annotations

import warnings
from collections.abc import Callable

from ..nn.modules.module import Module
from .api import CompiledFunction, OptimizedModule


class BreakReason:
    """Why a graph was not captured: ``reason``, the user's source line in ``user_stack``."""

    def __init__(self, reason: str, user_line: str):
        self.reason = reason
        self.user_stack = [user_line] if user_line else []
        self.graph_break = True

    def __repr__(self) -> str:
        return f"BreakReason(reason={self.reason!r}, user_stack={self.user_stack!r})"


class ExplainOutput:
    """What ``explain(fn)(*args)`` found: the captured ``graphs`` (``graph_count``), the
    graph breaks (``break_reasons``; ``graph_break_count`` counts them: ember does not split
    a function into several graphs, so a break means the call ran eagerly), the ops of each
    graph (``ops_per_graph``, ``op_count``), the guards of each entry (``out_guards``) and
    the compile time."""

    def __init__(self, graphs: list, break_reasons: list, guards_: list, seconds: float):
        self.graphs = graphs
        self.graph_count = len(graphs)
        self.break_reasons = break_reasons
        self.graph_break_count = len(break_reasons)
        self.ops_per_graph = [[n.target.name for n in g.nodes if n.kind == "call"]
                              for g in graphs]
        self.op_count = sum(len(o) for o in self.ops_per_graph)
        self.out_guards = guards_
        self.guards = guards_
        self.compile_times = f"capture and compile: {seconds:.4f} s"

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        for i, b in enumerate(self.break_reasons):
            lines += [f"  Break Reason {i + 1}:", f"    Reason: {b.reason}", "    User Stack:"]
            lines += [f"      {u}" for u in b.user_stack]
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"  Ops {i + 1}:")
            lines += [f"    {o}" for o in ops]
        lines.append("Out Guards:")
        lines += [f"  {g}" for g in self.out_guards]
        lines.append(f"Compile Times: {self.compile_times}")
        return "\n".join(lines) + "\n"

    __repr__ = __str__


def explain(fn: Callable, *extra_args, **extra_kwargs):
    """explain(fn)(*args, **kwargs) -> ExplainOutput

    Capture ``fn`` (a function, Module or compiled function) for these arguments and report
    its graphs, graph breaks, ops and guards. The call really runs once (side effects such
    as ``print`` happen); the graph is run op by op. Passing the arguments directly,
    ``explain(fn, *args)``, is deprecated as in PyTorch."""
    if isinstance(fn, OptimizedModule):
        fn = fn._orig_mod
    elif isinstance(fn, CompiledFunction):
        fn = fn._fn
    target = fn.__call__ if isinstance(fn, Module) else fn

    def run(*args, **kwargs) -> ExplainOutput:
        import time

        seen: list = []
        cf = CompiledFunction(target, "eager", False, None, {})
        cf._observer = lambda entry, names: seen.append((entry, names))
        t0 = time.perf_counter()
        cf(*args, **kwargs)
        seconds = time.perf_counter() - t0
        graphs = [e.graph for e, _ in seen if e.graph is not None]
        breaks = [BreakReason(e.reason, getattr(e, "user_line", "")) for e, _ in seen
                  if e.graph is None]
        out_guards = [g for e, names in seen for g in e.guard_list(names)]
        return ExplainOutput(graphs, breaks, out_guards, seconds)

    if extra_args or extra_kwargs:
        warnings.warn("explain(f, *args, **kwargs) is deprecated, use explain(f)(*args, "
                      "**kwargs) instead.", FutureWarning, stacklevel=2)
        return run(*extra_args, **extra_kwargs)
    return run
