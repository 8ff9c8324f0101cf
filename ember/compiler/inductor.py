"""The "inductor" backend on CPU: plan kernels, generate C and a Python wrapper, build, load."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

import numpy as np

from .. import _dtype as D
from .._tensor import _wrap
from ..autograd.grad_mode import no_grad
from . import pytree
from .codegen_c import generate, translation_units, unit_source
from .fusion import plan as make_plan
from .graph import Graph, Node
from .lower import contiguous_strides
from .runtime import build_many

# Generated kernels are short OpenMP regions between numpy/BLAS calls that run threads of their
# own: OpenMP threads spinning after each region would take those cores (read when the OpenMP
# runtime loads with the first kernel library; a user's setting wins).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# Generated C per extra compiler process: below this a graph builds as one unit (starting a
# process and parsing the prelude again would cost more than the split saves).
UNIT_MIN_CHARS = 12_000


def build_workers(source_chars: int) -> int:
    """How many translation units (compiler processes running at once) a graph's kernels are
    split into: ``$EMBER_COMPILE_THREADS`` if set, else one per usable CPU (at most 8), and
    no more than the source's size makes worth it."""
    env = os.environ.get("EMBER_COMPILE_THREADS")
    if env:
        cpus = max(1, int(env))
    else:
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cpus = os.cpu_count() or 1
        cpus = min(cpus, 8)
    return max(1, min(cpus, source_chars // UNIT_MIN_CHARS))


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` in C order, keeping its shape (``np.ascontiguousarray`` turns 0-d into 1-d)."""
    return np.require(a, requirements="C")


class CompiledGraph:
    """A graph turned into native kernels plus a generated Python wrapper."""

    def __init__(self, graph: Graph, example_inputs: list, openmp: bool = True,
                 contiguous_inputs: bool = False):
        """``contiguous_inputs``: assume nothing about the inputs' strides (no guard covers
        them, as for a backward graph's incoming gradients); the wrapper makes them
        contiguous first."""
        self.graph = graph
        self.units = 0  # translation units the kernels were built in
        strides = [contiguous_strides(n.meta.shape) for n in graph.inputs] \
            if contiguous_inputs else [t.stride() for t in example_inputs]
        self.plan = make_plan(graph, strides)
        self.c_source, self.wrapper_source, kparams = generate(self.plan, openmp,
                                                               contiguous_inputs)
        env: dict = {"_empty": np.empty, "_contig": _contiguous, "_wrap": _wrap,
                     "_view": _view}
        for dt in D.ALL:
            name = dt.name
            env[f"_np_{name}"] = dt.np
            env[f"_dt_{name}"] = dt
        if self.plan.kernels:
            units = translation_units(self.plan, build_workers(len(self.c_source)))
            libs = build_many([unit_source(self.plan, u) for u in units], openmp)
            lib_of = {name: lib for u, lib in zip(units, libs) for name in u}
            self.units = len(units)
            for k in self.plan.kernels:
                fn = getattr(lib_of[k.name], k.name)
                fn.argtypes = [ctypes.c_void_p] * len(kparams[k.name]) + \
                    [ctypes.c_int64] * len(self.plan.symbols)  # dynamic sizes
                fn.restype = None
                env[f"_k_{k.name}"] = fn
        for s in self.plan.steps:
            if s.kind == "eager":
                env[f"_eager_{s.node.name}"] = _eager_step(s.node, list(s.inputs), s.tuple_out)
        exec(compile(self.wrapper_source, f"<ember generated wrapper {id(self)}>", "exec"), env)
        self._call = env["call"]

    def __call__(self, *flat_inputs) -> tuple:
        return self._call(flat_inputs)


def _view(a: np.ndarray, shape: tuple, strides: tuple) -> np.ndarray:
    """``a``'s memory seen with element ``strides`` (index arithmetic the plan worked out)."""
    return np.lib.stride_tricks.as_strided(a, shape, tuple(s * a.itemsize for s in strides))


def _eager_step(node: Node, input_ids: list, tuple_out: bool) -> Callable:
    """Run one non-lowered op on arrays through its op-table entry (no autograd)."""
    ins = pytree.collect((node.args, node.kwargs), Node, [])
    by_id = {id(n): n for n in ins}
    order = [by_id[i] for i in input_ids]

    def run(*arrays):
        env = {id(n): _wrap(a, n.meta.dtype) for n, a in zip(order, arrays)}
        args = pytree.map_leaves(node.args, Node, lambda n: env[id(n)])
        kwargs = pytree.map_leaves(node.kwargs, Node, lambda n: env[id(n)])
        with no_grad():
            res = node.target(*args, **kwargs)
        if tuple_out:
            return [r._data for r in res]
        return [res._data]

    return run
