"""``ember.compile`` and the ``ember.compiler`` namespace: the public entry points, backends,
the per-function cache of guarded compiled entries, and recompilation."""

from __future__ import annotations

import functools
import logging
import os
import warnings
import weakref
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from .._tensor import Tensor
from ..autograd.grad_mode import state as _grad_state
from ..codegen.c.runtime import CompileError, CompilerUnavailable
from ..nn.modules.module import Module
from . import capture, guards, pytree, stance, symbolic
from .capture import GraphBreak
from .graph import Graph, GraphModule, interpret, with_writebacks
from .passes import run_pipeline
from .._dispatch import STATE

log = logging.getLogger("ember.compiler")

# EMBER_LOGS=graph,output_code,recompiles,graph_breaks,guards,dynamic,fusion (or "all") turns
# on those log lines.
LOG_TOPICS = ("graph", "output_code", "recompiles", "graph_breaks", "guards", "dynamic",
              "fusion")
_LOGS = frozenset(x.strip() for x in os.environ.get("EMBER_LOGS", "").split(",") if x.strip())
if _LOGS and not log.handlers:
    _h = logging.StreamHandler()
    _h.setFormatter(logging.Formatter("[ember.compiler] %(message)s"))
    log.addHandler(_h)
    log.setLevel(logging.DEBUG if "output_code" in _LOGS else logging.INFO)


def _log(kind: str, msg: str, *args) -> None:
    if kind in _LOGS or "all" in _LOGS:
        log.info(f"[{kind}] " + msg, *args)


class _Config(SimpleNamespace):
    """``ember.compiler.config``: ``recompile_limit`` (entries per compiled function before
    new call patterns run eagerly; ``cache_size_limit`` is PyTorch's older name for it) and
    ``automatic_dynamic_shapes`` (recompile with symbolic sizes after a size change)."""

    @property
    def cache_size_limit(self) -> int:
        return self.recompile_limit

    @cache_size_limit.setter
    def cache_size_limit(self, value: int) -> None:
        self.recompile_limit = value


config = _Config(recompile_limit=8, automatic_dynamic_shapes=True)
# eager_fallbacks: calls run eagerly past the recompile limit; alias_fallbacks: calls run
# eagerly because an input the graph writes in place shares memory with another input
counters: dict[str, int] = {"compiles": 0, "recompiles": 0, "graph_breaks": 0,
                            "eager_fallbacks": 0, "alias_fallbacks": 0}


class InvalidBackend(RuntimeError):
    """An unknown backend name was given to ``ember.compile``."""

    def __init__(self, name: str):
        super().__init__(f"Invalid backend: {name!r}, see ember.compiler.list_backends() for "
                         "available backends.")


class Unsupported(RuntimeError):
    """A graph break under ``fullgraph=True``."""


# ---------------------------------------------------------------------- backends
def _interpret_backend(gm: GraphModule, example_inputs: list) -> Callable:
    return gm


_NO_COMPILER_WARNED = [False]


def _needs_grad(example_inputs: list) -> bool:
    return _grad_state.enabled and any(t.requires_grad for t in example_inputs)


def _training(gm: GraphModule, example_inputs: list, make: Callable) -> Callable:
    """Forward graph (+ saved values) and derived backward graph, each built by
    ``make(graph, example_inputs, contiguous_inputs[, views_from])`` (CompiledGraph's
    parameters), joined by one autograd node. Falls
    back to running the graph op by op with eager autograd when a rule cannot be traced."""
    from .autograd import derive_backward, make_training_callable

    g = gm.graph
    try:
        bwd, saved, wanted = derive_backward(g, [t.requires_grad for t in example_inputs])
    except Exception as e:  # a backward rule that needs data or reads outside tensors
        _log("graph", "backward not derivable (%s); running op by op with autograd", e)
        return gm
    bwd = run_pipeline(bwd)
    _log("graph", "backward graph:\n%s", bwd)
    fwd = g.copy_with(g.nodes, g.outputs + saved)
    f = make(fwd, example_inputs, False, len(g.outputs))
    # the saved values come laid out as the forward returns them (views of its buffers);
    # the backward checks that and re-lays any that are not (a clone made for a write-back)
    laid = getattr(f, "output_strides", None)
    layouts = True if laid is None else \
        laid()[len(g.outputs):] + [None] * (len(bwd.inputs) - len(saved))
    b = make(bwd, None, layouts)
    return make_training_callable([o.meta for o in g.outputs], f, b, len(example_inputs),
                                  wanted, graph=g, backward_graph=bwd)


def _input_shapes(graph: Graph) -> list[tuple]:
    return [n.meta.shape for n in graph.inputs]


def _aot_eager_backend(gm: GraphModule, example_inputs: list) -> Callable:
    if _needs_grad(example_inputs):
        return _training(gm, example_inputs, lambda g, ex, *_: symbolic.bind_calls(
            interpret(g), _input_shapes(g), g.nodes))
    return gm


class _Strided:
    """An example input as the inductor backend sees it: its strides, symbolic for a graph
    input with symbolic sizes (dense in the example's dim order; guards check that)."""

    def __init__(self, t: Tensor, shape: tuple):
        self._st = t.stride()
        if symbolic.has_symbols(tuple(shape)):
            self._st = guards.dense_strides(tuple(shape), guards.stride_order(self._st))

    def stride(self):
        return self._st


def _inductor_backend(gm: GraphModule, example_inputs: list, options: dict) -> Callable:
    from .inductor import CompiledGraph

    def make(graph, ex, contiguous, views_from=None):
        shapes = _input_shapes(graph)
        if ex is not None:
            ex = [_Strided(t, sh) for t, sh in zip(ex, shapes)]
        cg = CompiledGraph(graph, ex, openmp=options.get("openmp", True),
                           contiguous_inputs=contiguous, views_from=views_from)
        _log("output_code", "generated C:\n%s\nwrapper:\n%s", cg.c_source, cg.wrapper_source)
        for line in cg.plan.fusion_log:
            _log("fusion", line)
        return symbolic.bind_calls(cg, shapes, graph.nodes)

    try:
        if _needs_grad(example_inputs):
            return _training(gm, example_inputs, make)
        return make(gm.graph, example_inputs, False)
    except CompilerUnavailable as e:
        if not _NO_COMPILER_WARNED[0]:
            _NO_COMPILER_WARNED[0] = True
            warnings.warn(f"ember.compile: {e}; compiled functions run eagerly", stacklevel=4)
        return gm
    except CompileError as e:  # results stay correct; the message says what to report
        warnings.warn(f"ember.compile: {e}\nThis graph runs op by op instead.", stacklevel=4)
        return gm


_BACKENDS: dict[str, tuple[Callable, tuple]] = {
    "inductor": (_inductor_backend, ()),
    "eager": (_interpret_backend, ("debug",)),
    "aot_eager": (_aot_eager_backend, ("debug",)),  # forward/backward graphs, interpreted
}

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Options of the inductor backend and their types. ``openmp`` changes generated code; the
# others are PyTorch's names, accepted so existing calls work, with no effect on CPU here.
_OPTIONS = {"openmp": bool, "max_autotune": bool, "epilogue_fusion": bool,
            "triton.cudagraphs": bool, "coordinate_descent_tuning": bool, "freezing": bool,
            "fx_graph_cache": bool, "trace.enabled": bool}


def _check_backend(backend) -> None:
    if isinstance(backend, str):
        if backend not in _BACKENDS:
            raise InvalidBackend(backend)
    elif not callable(backend):
        raise InvalidBackend(str(backend))


stance.check_backend = _check_backend


def list_backends(exclude_tags=("debug", "experimental")) -> list[str]:
    """Names of the registered backends (those tagged in ``exclude_tags`` left out)."""
    ex = set(exclude_tags or ())
    return sorted(n for n, (_, tags) in _BACKENDS.items() if not ex.intersection(tags))


def _check_options(options: dict | None) -> dict:
    out = {}
    for k, v in (options or {}).items():
        key = k.replace("-", "_")
        if key not in _OPTIONS:
            raise RuntimeError(f"Unexpected optimization option {key}, known options are "
                               f"{sorted(_OPTIONS)}")
        if not isinstance(v, _OPTIONS[key]):
            raise RuntimeError(f"Unexpected type of attr {key}, got {type(v).__name__} should "
                               f"be {_OPTIONS[key].__name__}")
        out[key] = v
    return out


# ---------------------------------------------------------------------- compiled entries
class _Entry:
    """One guarded compilation of a function (or an eager stand-in after a graph break).
    ``dyn`` is the DynamicGuard of an entry with symbolic sizes (None: all static)."""

    def __init__(self, guard_values: list, graph: Graph | None, lifted: list[Tensor],
                 run: Callable | None, reason: str = "", dyn: guards.DynamicGuard | None = None,
                 shapes: list | None = None):
        self.guards = guard_values
        self.graph = graph
        self.lifted = lifted
        self.lifted_keys = [guards.tensor_key(t) for t in lifted]
        self.run = run
        self.reason = reason
        self.dyn = dyn
        self.shapes = shapes or []  # the compiling call's tensor shapes (automatic dynamic)
        self.prefix: int | None = None  # eager entries: how many guard values to compare
        # input aliasing (guards.written_overlaps): the flat inputs the graph writes in place
        # and the number of call tensors among the flat inputs; a graph entry serves calls
        # where no written input overlaps another, an ``aliased`` (eager) entry the others
        self.written: tuple = ()
        self.n_args = 0
        self.aliased = False
        self.ints: tuple = ()  # the compiling call's Python int arguments (automatic dynamic)
        self.int_dyn: tuple = ()  # which of them are symbolic (each carried by an input)

    def matches(self, guard_values: list) -> bool:
        if self.prefix is not None:  # an eager entry: closure/global values do not matter
            p = self.prefix
            return len(guard_values) == len(self.guards) and \
                self.guards[:p] == guard_values[:p]
        if self.dyn is None:
            if self.guards != guard_values:
                return False
        elif not self.dyn.ok(guard_values):
            return False
        keys = self.lifted_keys
        for i, t in enumerate(self.lifted):
            if guards.tensor_key(t) != keys[i]:
                return False
        return True

    def flat(self, args: tuple, kwargs: dict, leaves: list[Tensor]) -> list[Tensor]:
        """The graph's inputs for this call: its tensors, the carriers of its symbolic ints
        (``symbolic.size_carrier``), the lifted tensors."""
        if not self.int_dyn:
            return leaves + self.lifted
        ints = guards.int_leaves(args, kwargs)
        return leaves + [symbolic.size_carrier(ints[k][1]) for k in self.int_dyn] + \
            self.lifted

    def alias_mismatch(self, args: tuple, kwargs: dict, leaves: list[Tensor],
                       names: list[str] | None = None) -> str | None:
        """None when this call's aliasing between inputs suits the entry, else why not."""
        pairs = guards.written_overlaps(self.flat(args, kwargs, leaves), self.n_args,
                                        self.written, self.aliased)
        if bool(pairs) == self.aliased:
            return None
        if self.aliased:
            return "inputs written in place no longer share memory with other inputs"
        return "input aliasing: " + guards.overlap_text(pairs, self.written, names or [])

    def mismatch(self, guard_values: list, names: list[str]) -> str | None:
        if self.dyn is not None:
            why = self.dyn.mismatch(guard_values, names)
        else:
            why = guards.first_mismatch(self.guards, guard_values, names)
        return why or guards.lifted_mismatch(self.lifted, self.lifted_keys)

    def guard_list(self, names: list[str]) -> list[str]:
        """The entry's guards, readable (what EMBER_LOGS=guards and explain show)."""
        out = []
        dyn_pos = self.dyn.patterns if self.dyn is not None else {}
        for i, (name, v) in enumerate(zip(names, self.guards)):
            if self.dyn is not None and i in self.dyn.ints:
                out.append(f"{name}: int (dynamic: {self.dyn.ints[i].name})")
            elif i in dyn_pos:
                dt, static, order, rg = dyn_pos[i]
                dims = ", ".join("*" if n is None else str(n) for n in static)
                out.append(f"{name}: {dt.name}[{dims}] (dynamic; dense, dim order {order}) "
                           f"requires_grad={rg}")
            else:
                out.append(f"{name} == {guards._fmt(v)}")
        for i, k in enumerate(self.lifted_keys):
            out.append(f"lifted tensor c{i} == {guards._fmt(k)}")
        if self.written:
            w = ", ".join((names[i] if i < self.n_args else f"lifted tensor c{i - self.n_args}")
                          for i in self.written)
            out.append(f"inputs written in place ({w}) "
                       f"{'share' if self.aliased else 'share no'} memory with other inputs")
        if self.dyn is not None:
            env = self.dyn.env
            out += [f"{s.name} = {s.source}" for s in env.symbols]
            out += [f"shape: {g}" for g in env.all_guards()]
        return out

    def __call__(self, fn, args, kwargs):
        if self.run is None:
            if self.aliased:
                counters["alias_fallbacks"] += 1
            return fn(*args, **kwargs)
        flat = self.flat(args, kwargs, pytree.collect((args, kwargs), Tensor, []))
        outs = self.run(*flat)
        return pytree.unflatten(self.graph.output_spec, list(outs))


def _tensor_names(args: tuple, kwargs: dict) -> list[str]:
    return pytree.paths(args, Tensor, "args") + pytree.paths(kwargs, Tensor, "kwargs")


def _leaf_name(path: str, d: int) -> str:
    return f"{path}.size()[{d}]"


class CompiledFunction:
    """What ``ember.compile(fn)`` returns: calls ``fn`` through guarded compiled graphs."""

    def __init__(self, fn: Callable, backend, fullgraph: bool, dynamic, options: dict):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._backend = backend
        self._fullgraph = fullgraph
        self._dynamic = dynamic
        self._options = options
        self._entries: list[_Entry] = []
        self._limit_warned = False
        self._auto_dims: set[tuple[int, int]] = set()  # (tensor leaf, dim) seen changing
        self._auto_ints: set[int] = set()  # Python int arguments seen changing
        self._free = guards.free_variables(fn)
        self._observer: Callable | None = None  # explain(): sees each new entry
        _ALL.add(self)

    def __get__(self, obj, objtype=None):  # decorating a method binds like a function
        if obj is None:
            return self
        return functools.partial(self, obj)

    def _modules(self, args: tuple) -> list:
        """Modules whose training flags and parameters the graph depends on: the owner of a
        compiled bound method and Modules passed as arguments (a decorated method's self)."""
        owner = getattr(self._fn, "__self__", None)
        mods = [owner] if isinstance(owner, Module) else []
        return mods + [a for a in args if isinstance(a, Module)]

    @property
    def graphs(self) -> list[Graph]:
        """The graphs compiled so far (one per guarded entry that captured a graph)."""
        return [e.graph for e in self._entries if e.graph is not None]

    def __call__(self, *args, **kwargs):
        if STATE.capture is not None:
            return self._fn(*args, **kwargs)  # inside another trace: inline
        mode = stance.check()
        if mode == "force_eager":
            return self._fn(*args, **kwargs)
        modules = self._modules(args)
        gv = guards.call_guards(args, kwargs, modules, self._free)
        leaves = None
        alias_reason = None
        for e in self._entries:
            if e.matches(gv):
                if e.written:  # the graph writes an input in place: check input aliasing
                    if leaves is None:
                        leaves = pytree.collect((args, kwargs), Tensor, [])
                    if e.alias_mismatch(args, kwargs, leaves) is not None:
                        alias_reason = e.alias_mismatch(args, kwargs, leaves,
                                                        _tensor_names(args, kwargs))
                        continue
                return e(self._fn, args, kwargs)
        reason = None
        if self._entries:
            reason = alias_reason or self._entries[-1].mismatch(
                gv, guards.guard_names(args, kwargs, modules, self._free))
        if mode == "eager_on_recompile":
            return self._fn(*args, **kwargs)
        if mode == "fail_on_recompile":
            code = getattr(getattr(self._fn, "__func__", self._fn), "__code__", None)
            where = (f" filename: '{code.co_filename}', function name: '{code.co_name}', line "
                     f"number: {code.co_firstlineno}") if code else ""
            raise RuntimeError("Detected recompile when ember.compile stance is "
                               f"'fail_on_recompile'.{where}" +
                               (f"\n    - {reason}" if reason else ""))
        if len(self._entries) >= config.recompile_limit:
            if not self._limit_warned:
                self._limit_warned = True
                warnings.warn(f"ember.compile hit config.recompile_limit "
                              f"({config.recompile_limit})\n   function: "
                              f"{getattr(self._fn, '__qualname__', self._fn)!s}\n   last reason: "
                              f"{reason}\nThe function runs eagerly for new call patterns "
                              "(EMBER_LOGS=recompiles shows every recompile).", stacklevel=2)
            counters["eager_fallbacks"] += 1
            return self._fn(*args, **kwargs)
        if leaves is None:
            leaves = pytree.collect((args, kwargs), Tensor, [])
        if self._entries:
            counters["recompiles"] += 1
            _log("recompiles", "recompiling %s: %s", getattr(self._fn, "__name__", "fn"),
                 reason)
            self._note_changes(leaves, guards.int_leaves(args, kwargs))
        entry, done = self._compile(args, kwargs, gv, leaves)
        if entry.graph is None:  # runs the original Python: right whatever globals hold
            entry.prefix = len(gv) - len(self._free)
        entry.ints = tuple(guards.int_leaves(args, kwargs))
        self._entries.append(entry)
        names = guards.guard_names(args, kwargs, modules, self._free)
        if "guards" in _LOGS or "all" in _LOGS:
            _log("guards", "guards of %s entry %d:\n  %s", getattr(self._fn, "__name__", "fn"),
                 len(self._entries) - 1, "\n  ".join(entry.guard_list(names)))
        if self._observer is not None:
            self._observer(entry, names)
        return done[0] if done else entry(self._fn, args, kwargs)

    # ------------------------------------------------------------------ dynamic shapes
    def _note_changes(self, leaves: list[Tensor], ints: list) -> None:
        """Automatic dynamic: remember the dims whose size differs from the last entry's,
        and the Python int arguments whose value does."""
        if self._dynamic is not None or not config.automatic_dynamic_shapes:
            return
        old_ints = self._entries[-1].ints
        if len(old_ints) == len(ints):
            self._auto_ints.update(k for k, (a, b) in enumerate(zip(old_ints, ints))
                                   if a[0] == b[0] and a[1] != b[1])
        prev = self._entries[-1].shapes
        if len(prev) != len(leaves):
            return
        for i, (old, t) in enumerate(zip(prev, leaves)):
            if len(old) == t.ndim:
                self._auto_dims.update((i, d) for d in range(t.ndim) if old[d] != t.shape[d])

    def _dynamic_spec(self, leaves: list[Tensor], paths: list[str]) -> dict:
        """flat tensor index -> {dim: (min, max, strict, source)} for this compilation."""
        spec: dict = {}
        for i, t in enumerate(leaves):
            marks = symbolic.marks_of(t)
            dims: dict = {}
            if self._dynamic is True:
                dims = {d: (2, None, False) for d in range(t.ndim)}
            elif self._dynamic is None:
                dims = {d: (2, None, False) for (j, d) in self._auto_dims
                        if j == i and d < t.ndim}
            for d in marks.weak:
                dims.setdefault(d, (2, None, False))
            for d, (lo, hi) in marks.strict.items():
                dims[d] = (lo, hi, True)
            for d in marks.static:
                dims.pop(d, None)
            keep = {}
            for d, (lo, hi, strict) in dims.items():
                n = t.shape[d]
                if n <= 1:  # sizes 0 and 1 are always specialised
                    continue
                if (lo is not None and n < lo) or (hi is not None and n > hi):
                    if strict and not self._entries:
                        raise symbolic.ConstraintViolationError(
                            f"{_leaf_name(paths[i], d)}: {n} not in range [{lo or 2}, "
                            f"{'inf' if hi is None else hi}]")
                    continue  # outside a marked range: this entry is static in it
                keep[d] = (max(lo or 2, 2), hi, strict, _leaf_name(paths[i], d))
            if keep and guards.dense_order(t) is not None:
                spec[i] = keep
        return spec

    def _compile(self, args, kwargs, gv, leaves) -> tuple[_Entry, list]:
        """A new entry for this call, and ``[result]`` if the call already ran eagerly."""
        spec = self._dynamic_spec(leaves, pytree.paths(args, Tensor, "args") +
                                  pytree.paths(kwargs, Tensor, "kwargs"))
        shapes = [tuple(t.shape) for t in leaves]
        ints = guards.int_leaves(args, kwargs)
        # int arguments that changed (dynamic=None) or all (dynamic=True) become symbols; a
        # negative one stays static
        chosen = range(len(ints)) if self._dynamic is True else \
            sorted(self._auto_ints) if self._dynamic is None else ()
        ispec = [k for k in chosen if k < len(ints) and ints[k][1] >= 0]
        for sp, isp in ((spec, ispec), (spec, [])) if ispec and spec else ((spec, ispec),):
            if not (sp or isp):
                continue
            try:
                return self._compile_with(args, kwargs, gv, leaves, sp, shapes, isp)
            except symbolic.ConstraintViolationError:
                raise
            except _Retry as r:
                _log("dynamic", "dynamic capture failed (%s); compiling %s", r,
                     "without symbolic ints" if isp and sp else "static")
        return self._compile_with(args, kwargs, gv, leaves, {}, shapes)

    def _compile_with(self, args, kwargs, gv, leaves, spec, shapes, ispec=()
                      ) -> tuple[_Entry, list]:
        counters["compiles"] += 1
        env = symbolic.ShapeEnv() if spec or ispec else None
        sym_shapes: dict = {}
        for i, dims in spec.items():
            shape = list(leaves[i].shape)
            for d, (lo, hi, strict, source) in sorted(dims.items()):
                shape[d] = env.new_symbol(shape[d], lo, hi, source, strict)
            sym_shapes[i] = tuple(shape)
        ints = guards.int_leaves(args, kwargs)
        int_syms = {k: env.new_int_symbol(ints[k][1], ints[k][0]) for k in ispec}
        t_fn, t_args, t_kwargs, carriers = capture.with_int_symbols(self._fn, args, kwargs,
                                                                    int_syms)
        sym_shapes.update({len(leaves) + j: (s,) for j, s in enumerate(int_syms.values())})
        if env is not None:
            _log("dynamic", "compiling %s with symbolic sizes: %s",
                 getattr(self._fn, "__name__", "fn"),
                 ", ".join(f"{s.name}={s.source} (hint {s.hint})" for s in env.symbols))
            STATE.shape_envs.append(env)
        effects = capture.SideEffects(args, kwargs, self._free, self._modules(args))
        try:
            try:
                graph, lifted = capture.trace(t_fn, t_args, t_kwargs, env, sym_shapes)
                changed = effects.changed()
                if changed:  # replaying the graph would drop it: run eagerly instead
                    raise GraphBreak(f"side effect: {changed}; the function runs eagerly so "
                                     "that it happens on every call")
            except GraphBreak as b:
                effects.restore()
                counters["graph_breaks"] += 1
                where = f" (at {b.user_line})" if b.user_line else ""
                if self._fullgraph:
                    raise Unsupported(f"graph break in a fullgraph=True region: {b.reason}"
                                      f"{where}") from None
                _log("graph_breaks", "graph break: %s%s; running eagerly", b.reason, where)
                e = _Entry(gv, None, [], None, b.reason, shapes=shapes)
                e.user_line = b.user_line
                return e, []
            except symbolic.ConstraintViolationError:
                effects.restore()
                raise
            except Exception as e:
                effects.restore()
                if env is not None:  # symbolic sizes are the likelier culprit: retry static
                    raise _Retry(f"{type(e).__name__}: {e}") from e
                # The symbolic run failed where eager may not: a genuine user error re-raises
                # from the eager run below; otherwise it is a capture limitation (a graph
                # break).
                result = self._fn(*args, **kwargs)
                counters["graph_breaks"] += 1
                reason = f"capture failed: {type(e).__name__}: {e}"
                if self._fullgraph:
                    raise Unsupported(f"graph break in a fullgraph=True region: {reason}") \
                        from e
                _log("graph_breaks", "graph break: %s; running eagerly", reason)
                return _Entry(gv, None, [], None, reason, shapes=shapes), [result]
            backend = stance.STATE["force_backend"] or self._backend
            try:
                graph = run_pipeline(graph)
                lifted = graph.lifted_tensors()  # passes may add constants (constant_fold)
                _log("graph", "captured graph:\n%s", graph)
                flat = leaves + carriers + lifted
                aliased = self._aliased_entry(graph, flat, len(leaves), lifted, args, kwargs,
                                              gv, shapes)
                if aliased is not None:
                    aliased.int_dyn = tuple(int_syms)
                    return aliased, []
                gm = GraphModule(graph)
                if callable(backend):
                    run = backend(gm, flat)
                else:
                    make, _ = _BACKENDS[backend]
                    run = make(gm, flat, self._options) if make is _inductor_backend else \
                        make(gm, flat)
            except Exception as e:
                if env is None:
                    raise
                raise _Retry(f"backend: {type(e).__name__}: {e}") from e
        finally:
            if env is not None:
                STATE.shape_envs.pop()
        dyn = None
        if env is not None:
            bad = env.violations()
            if bad:
                raise symbolic.ConstraintViolationError(
                    "Constraints violated (" + ", ".join(s.source for s in env.specialized
                                                         if s.strict) + ")! " + " ".join(bad))
            for s, (v, why) in env.specialized.items():
                _log("dynamic", "specialised %s (%s) to %d: %s", s.name, s.source, v, why)
            if not getattr(run, "_ember_binds", False):  # the backend's callable may bind
                run = symbolic.bind_calls(run, _input_shapes(graph), graph.nodes)
            dyn = guards.DynamicGuard(gv, {i: (sym_shapes[i], guards.stride_order(
                leaves[i].stride())) for i in sym_shapes if i < len(leaves)}, env,
                functools.partial(capture.revalidate, env),
                dict(zip((guards.int_positions(gv, len(ints))[k] for k in int_syms),
                         int_syms.values())))
        run = with_writebacks(graph, run)  # in-place writes to inputs (functionalize)
        entry = _Entry(gv, graph, lifted, run, dyn=dyn, shapes=shapes)
        entry.written, entry.n_args = tuple(i for i, _ in graph.writebacks), len(leaves)
        entry.int_dyn = tuple(int_syms)
        return entry, []

    def _aliased_entry(self, graph: Graph, flat: list, n_args: int, lifted: list, args,
                       kwargs, gv, shapes) -> _Entry | None:
        """An eager entry when an input the graph writes in place shares memory with another
        input of this call (the graph would treat them as independent values, and the
        other would not see the write); None when the graph serves the call."""
        written = tuple(i for i, _ in graph.writebacks)
        pairs = guards.written_overlaps(flat, n_args, written, True) if written else ()
        if not pairs:
            return None
        why = guards.overlap_text(pairs, written, _tensor_names(args, kwargs))
        _log("graph_breaks", "input aliasing: %s; this call pattern runs eagerly", why)
        e = _Entry(gv, None, lifted, None, f"input aliasing: {why}", shapes=shapes)
        e.written, e.n_args, e.aliased = written, n_args, True
        return e


class _Retry(Exception):
    """Capture with symbolic sizes failed; the entry is compiled static instead."""


_ALL: weakref.WeakSet = weakref.WeakSet()  # every live CompiledFunction, for reset()


class OptimizedModule(Module):
    """A compiled Module: ``_orig_mod`` is the original; attributes are forwarded to it and
    ``state_dict`` keys carry the ``_orig_mod.`` prefix (as PyTorch's)."""

    def __init__(self, mod: Module, compiled: CompiledFunction):
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compiled_call"] = compiled

    def forward(self, *args, **kwargs):
        return self._compiled_call(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_modules"]["_orig_mod"], name)


# ---------------------------------------------------------------------- public API
def compile(model: Callable | None = None, *, fullgraph: bool = False,
            dynamic: bool | None = None, backend: str | Callable = "inductor",
            mode: str | None = None, options: dict | None = None,
            disable: bool = False, **ignored: Any) -> Callable:
    """compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,
    options=None, disable=False) -> Callable

    Compile a function or Module: on each call, the function is captured into a graph for
    the arguments' shapes/dtypes (guarded; a change recompiles, up to
    ``ember.compiler.config.recompile_limit`` entries, after which new call patterns run
    eagerly with one warning naming the last failing guard), optimized, and run by
    ``backend`` ("inductor": fused C kernels; "eager"/"aot_eager": the graph op by op; or a
    callable ``backend(graph_module, example_inputs) -> callable``). Code that needs tensor
    data is a graph break: it raises ``Unsupported`` with ``fullgraph=True`` and otherwise
    the whole function runs eagerly for that call pattern (ember does not split graphs).

    Shapes: with ``dynamic=None`` the first graph is static; a call whose sizes differ
    recompiles once with exactly the changed dimensions symbolic, and that graph (its kernels
    take the sizes as parameters) serves every later size in its range. Sizes 0 and 1 are
    always specialised. ``dynamic=True`` makes every dimension symbolic from the first call;
    ``dynamic=False`` never makes a dimension symbolic on its own (one graph per shape), but
    dims marked with ``ember.compiler.mark_dynamic`` are still honoured. Code that tests a
    symbolic size (``if x.shape[0] > 8``) adds a guard; code that needs its exact value
    (``range(x.shape[0])``) specialises it (EMBER_LOGS=dynamic says where). A Python int
    argument is guarded by value at first; under ``dynamic=None``, once its value changes the
    recompiled graph takes it as a symbol too (any value >= 0).

    Aliasing: a graph treats its tensor inputs as independent values. When an input it
    writes in place (``x.add_(1)``, ``out=x``) shares memory with another input of a call
    (``f(a, a[0])``, a module's buffer passed as an argument), that call pattern is guarded
    apart and runs eagerly (EMBER_LOGS=graph_breaks says so;
    ``ember.compiler.counters["alias_fallbacks"]`` counts such calls), so every alias sees
    the write as in eager mode.

    Python side effects: capture runs the function once and a compiled graph then replays
    only its tensor operations. So ``print`` is a graph break, and a change to a Python list,
    dict or set reachable from the arguments, closure or globals, the rebinding of a global
    or closure variable, or setting an attribute on the compiled Module is detected after
    capture, undone, and made a graph break too: such a function runs eagerly on every call,
    each side effect happening exactly once per call (with ``fullgraph=True`` it raises
    ``Unsupported`` instead). Side effects hidden deeper (inside other objects) are not
    detected and happen only at capture.

    Modes: "default", "reduce-overhead", "max-autotune" and "max-autotune-no-cudagraphs" are
    accepted. On CPU none of them changes what ember generates: "reduce-overhead" means CUDA
    graphs and "max-autotune" means autotuned Triton/GEMM templates in PyTorch, neither of
    which ember's C backend has, so every mode compiles exactly as "default".
    """
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           f"{', '.join(m for m in _MODES if m)}")
    _check_backend(backend)
    opts = _check_options(options)
    if model is None:
        def decorator(m):
            if m is None:
                raise RuntimeError("Model can't be None")
            return compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                           mode=mode, options=options, disable=disable)
        return decorator
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model, CompiledFunction(model.__call__, backend, fullgraph,
                                                       dynamic, opts))
    if not callable(model):
        raise RuntimeError("compile(): model must be callable")
    return CompiledFunction(model, backend, fullgraph, dynamic, opts)


def _compile_module(self: Module, *args, **kwargs) -> None:
    """``Module.compile(*args, **kwargs)``: compile the module's ``forward`` in place."""
    self.forward = compile(self.forward, *args, **kwargs)


Module.compile = _compile_module  # bound from here: nn sits below the compiler


def reset() -> None:
    """Forget every compiled entry and counter (the on-disk kernel cache is kept)."""
    for cf in _ALL:
        cf._entries.clear()
        cf._limit_warned = False
        cf._auto_dims.clear()  # automatic dynamic starts static again
        cf._auto_ints.clear()
    for k in counters:
        counters[k] = 0


def is_compiling() -> bool:
    """True while ember.compile is capturing a function."""
    return STATE.tracing > 0


def disable(fn: Callable | None = None, recursive: bool = True, *, reason: str | None = None):
    """Run ``fn`` eagerly even when called from a compiled function (a graph break there)."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if STATE.capture is not None:
            raise GraphBreak(f"call to ember.compiler.disable'd function "
                             f"{getattr(fn, '__name__', fn)}" + (f": {reason}" if reason else ""))
        return fn(*args, **kwargs)
    return wrapper
