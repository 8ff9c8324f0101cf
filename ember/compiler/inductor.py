"""The "inductor" backend on CPU: plan kernels, generate C and a Python wrapper, build, load."""

from __future__ import annotations

import ctypes
import math
import os
from collections.abc import Callable

import numpy as np

from .. import _dtype as D
from .._tensor import _wrap
from ..autograd.grad_mode import no_grad
from ..codegen.c.runtime import build_many
from . import gemm, pytree
from .codegen_c import generate, translation_units, unit_source
from .fusion import plan as make_plan
from .graph import Graph, Node
from .lower import contiguous_strides


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
                 contiguous_inputs: bool | list = False, one_pool: bool = True,
                 views_from: int | None = None):
        """``contiguous_inputs``: assume nothing about the inputs' strides (no guard covers
        them, as for a backward graph's incoming gradients); the wrapper makes them
        contiguous first, or, given a list, lays input i out with strides ``[i]`` (None:
        contiguous) where it is not already (a backward graph's saved values, as the forward
        made them). ``one_pool``: run on one thread pool (gemm.py) where possible;
        eager-mode kernels (backends/native.py) run between numpy's BLAS calls and pass
        False. ``views_from``: fusion.plan's."""
        self.graph = graph
        self.units = 0  # translation units the kernels were built in
        strides = [t.stride() for t in example_inputs] if contiguous_inputs is False else \
            [contiguous_strides(n.meta.shape) if contiguous_inputs is True or
             contiguous_inputs[i] is None else contiguous_inputs[i]
             for i, n in enumerate(graph.inputs)]
        self.plan = make_plan(graph, strides, views_from)
        self.one_pool, self.pool = _one_pool(self.plan, one_pool and openmp)
        self.c_source, self.wrapper_source, kparams = generate(
            self.plan, openmp, contiguous_inputs, one_pool=self.one_pool)
        env: dict = {"_empty": np.empty, "_contig": _contiguous, "_wrap": _wrap,
                     "_view": _view, "_empty_strided": _empty_strided,
                     "_restride": _restride}
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
        env.update({f"_gemm_{name}": fn for name, fn in gemm.RUNNERS.items()})
        if self.pool is not None:  # the drivers and BLAS entry points, called directly
            for dt in (D.float32, D.float64):
                env[f"_drv_{dt.name}"] = self.pool.drivers[np.dtype(dt.np)]
                env[f"_drv2_{dt.name}"] = self.pool.pairs[np.dtype(dt.np)]
                env[f"_blas_{dt.name}"] = self.pool.fns[np.dtype(dt.np)]
        for s in self.plan.steps:
            if s.kind == "eager":
                env[f"_eager_{s.node.name}"] = _eager_step(s.node, list(s.inputs), s.tuple_out)
        exec(compile(self.wrapper_source, f"<ember generated wrapper {id(self)}>", "exec"), env)
        self._call = env["call"]

    def output_strides(self) -> list:
        """Each output's element strides as the wrapper returns it (None: a graph input
        returned as is, laid out as the caller's)."""
        return [None if isinstance(o, tuple) else tuple(o.strides)
                for o in self.plan.outputs]

    def __call__(self, *flat_inputs) -> tuple:
        if self.pool is None:
            return self._call(flat_inputs)
        with self.pool.serial_blas():
            return self._call(flat_inputs)


def _one_pool(plan, wanted: bool) -> tuple[bool, gemm.Pool | None]:
    """(whether the graph runs on one thread pool, the matmul drivers it calls): not when an
    eager step calls numpy's BLAS itself, nor when its products need drivers that cannot be
    built; a graph without products needs none (and builds none)."""
    eager = [s.node for s in plan.steps if s.kind == "eager"]
    if not wanted or any(gemm.calls_numpy_blas(n) for n in eager):
        return False, None
    if not any(gemm.library_call(n) for n in eager):
        return True, None
    p = gemm.pool()
    return p is not None, p


def _view(a: np.ndarray, shape: tuple, strides: tuple, offset: int = 0) -> np.ndarray:
    """``a``'s memory from element ``offset`` on, seen with element ``strides`` (index
    arithmetic the plan worked out). ``np.ndarray`` over a contiguous buffer costs 0.3 us
    where ``as_strided`` costs 6."""
    st = tuple(s * a.itemsize for s in strides)
    if 0 in shape:  # no element to reach: the offset may lie past a's (empty) memory
        offset = 0
    if a.flags.c_contiguous:
        return np.ndarray(shape, a.dtype, a, offset * a.itemsize, st)
    if offset:  # a's data pointer moved on by ``offset`` elements, whatever a's layout
        a = np.lib.stride_tricks.as_strided(a, (offset + 1,), (a.itemsize,))[offset:]
    return np.lib.stride_tricks.as_strided(a, shape, st)


def _empty_strided(shape: tuple, strides: tuple, dtype) -> np.ndarray:
    """An uninitialised array laid out with (non-negative) element ``strides``: a matrix
    product written the way its reader permutes it, or a saved value's layout (a part of a
    buffer, with gaps)."""
    if not math.prod(shape):
        return np.empty(shape, dtype)
    buf = np.empty(1 + sum((n - 1) * s for n, s in zip(shape, strides)), dtype)
    return np.ndarray(shape, dtype, buf, 0, tuple(s * buf.itemsize for s in strides))


def _restride(a: np.ndarray, strides: tuple) -> np.ndarray:
    """``a``'s values laid out with the element ``strides`` the plan gave its buffer (``a``
    itself when it already is)."""
    if a.strides == tuple(s * a.itemsize for s in strides):
        return a
    out = _empty_strided(a.shape, strides, a.dtype)
    out[...] = a
    return out


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
