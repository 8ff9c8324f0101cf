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
from ..nn.modules.module import Module
from ..ops import registry
from . import capture, guards, pytree, stance
from .capture import GraphBreak
from .graph import Graph, GraphModule, interpret
from .passes import run_pipeline
from .runtime import CompileError, CompilerUnavailable

log = logging.getLogger("ember.compiler")

# EMBER_LOGS=graph,output_code,recompiles,graph_breaks,fusion turns on those log lines.
_LOGS = frozenset(x.strip() for x in os.environ.get("EMBER_LOGS", "").split(",") if x.strip())
if _LOGS and not log.handlers:
    _h = logging.StreamHandler()
    _h.setFormatter(logging.Formatter("[ember.compiler] %(message)s"))
    log.addHandler(_h)
    log.setLevel(logging.DEBUG if "output_code" in _LOGS else logging.INFO)


def _log(kind: str, msg: str, *args) -> None:
    if kind in _LOGS or "all" in _LOGS:
        log.info(f"[{kind}] " + msg, *args)


config = SimpleNamespace(recompile_limit=8)
counters: dict[str, int] = {"compiles": 0, "recompiles": 0, "graph_breaks": 0,
                            "eager_fallbacks": 0}


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
    ``make(graph, example_inputs, contiguous_inputs)``, joined by one autograd node. Falls
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
    f = make(fwd, example_inputs, False)
    b = make(bwd, None, True)
    return make_training_callable([o.meta for o in g.outputs], f, b, len(example_inputs),
                                  wanted)


def _aot_eager_backend(gm: GraphModule, example_inputs: list) -> Callable:
    if _needs_grad(example_inputs):
        return _training(gm, example_inputs, lambda g, ex, contig: interpret(g))
    return gm


def _inductor_backend(gm: GraphModule, example_inputs: list, options: dict) -> Callable:
    from .inductor import CompiledGraph

    def make(graph, ex, contiguous):
        cg = CompiledGraph(graph, ex, openmp=options.get("openmp", True),
                           contiguous_inputs=contiguous)
        _log("output_code", "generated C:\n%s\nwrapper:\n%s", cg.c_source, cg.wrapper_source)
        for line in cg.plan.fusion_log:
            _log("fusion", line)
        return cg

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
    """One guarded compilation of a function (or an eager stand-in after a graph break)."""

    def __init__(self, guard_values: list, graph: Graph | None, lifted: list[Tensor],
                 run: Callable | None, reason: str = ""):
        self.guards = guard_values
        self.graph = graph
        self.lifted = lifted
        self.lifted_keys = [guards.tensor_key(t) for t in lifted]
        self.run = run
        self.reason = reason

    def matches(self, guard_values: list) -> bool:
        if self.guards != guard_values:
            return False
        keys = self.lifted_keys
        for i, t in enumerate(self.lifted):
            if guards.tensor_key(t) != keys[i]:
                return False
        return True

    def mismatch(self, guard_values: list, names: list[str]) -> str | None:
        return guards.first_mismatch(self.guards, guard_values, names) or \
            guards.lifted_mismatch(self.lifted, self.lifted_keys)

    def __call__(self, fn, args, kwargs):
        if self.run is None:
            return fn(*args, **kwargs)
        flat = pytree.collect((args, kwargs), Tensor, []) + self.lifted
        outs = self.run(*flat)
        return pytree.unflatten(self.graph.output_spec, list(outs))


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
        self._free = guards.free_variables(fn)
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
        if registry.TRACE[0] is not None:
            return self._fn(*args, **kwargs)  # inside another trace: inline
        mode = stance.check()
        if mode == "force_eager":
            return self._fn(*args, **kwargs)
        modules = self._modules(args)
        gv = guards.call_guards(args, kwargs, modules, self._free)
        for e in self._entries:
            if e.matches(gv):
                return e(self._fn, args, kwargs)
        reason = None
        if self._entries:
            reason = self._entries[-1].mismatch(gv, guards.guard_names(args, kwargs, modules,
                                                                      self._free))
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
                              f"{reason}\nThe function runs eagerly for new call patterns.",
                              stacklevel=2)
            counters["eager_fallbacks"] += 1
            return self._fn(*args, **kwargs)
        if self._entries:
            counters["recompiles"] += 1
            _log("recompiles", "recompiling %s: %s", getattr(self._fn, "__name__", "fn"),
                 reason)
        entry, done = self._compile(args, kwargs, gv)
        self._entries.append(entry)
        return done[0] if done else entry(self._fn, args, kwargs)

    def _compile(self, args, kwargs, gv) -> tuple[_Entry, list]:
        """A new entry for this call, and ``[result]`` if the call already ran eagerly."""
        counters["compiles"] += 1
        try:
            graph, lifted = capture.trace(self._fn, args, kwargs)
        except GraphBreak as b:
            counters["graph_breaks"] += 1
            where = f" (at {b.user_line})" if b.user_line else ""
            if self._fullgraph:
                raise Unsupported(f"graph break in a fullgraph=True region: {b.reason}{where}") \
                    from None
            _log("graph_breaks", "graph break: %s%s; running eagerly", b.reason, where)
            return _Entry(gv, None, [], None, b.reason), []
        except Exception as e:
            # The symbolic run failed where eager may not: a genuine user error re-raises from
            # the eager run below; otherwise it is a capture limitation (a graph break).
            result = self._fn(*args, **kwargs)
            counters["graph_breaks"] += 1
            reason = f"capture failed: {type(e).__name__}: {e}"
            if self._fullgraph:
                raise Unsupported(f"graph break in a fullgraph=True region: {reason}") from e
            _log("graph_breaks", "graph break: %s; running eagerly", reason)
            return _Entry(gv, None, [], None, reason), [result]
        graph = run_pipeline(graph)
        _log("graph", "captured graph:\n%s", graph)
        flat = pytree.collect((args, kwargs), Tensor, []) + lifted
        gm = GraphModule(graph)
        backend = stance.STATE["force_backend"] or self._backend
        if callable(backend):
            run = backend(gm, flat)
        else:
            fn, _ = _BACKENDS[backend]
            run = fn(gm, flat, self._options) if fn is _inductor_backend else fn(gm, flat)
        return _Entry(gv, graph, lifted, run), []


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
    ``ember.compiler.config.recompile_limit`` entries), optimized, and run by ``backend``
    ("inductor": fused C kernels; "eager"/"aot_eager": the graph op by op; or a callable
    ``backend(graph_module, example_inputs) -> callable``). Code that needs tensor data is a
    graph break: it raises ``Unsupported`` with ``fullgraph=True`` and otherwise runs eagerly.
    Shapes are static: ``dynamic=True`` is not supported yet and raises NotImplementedError.
    """
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           f"{', '.join(m for m in _MODES if m)}")
    _check_backend(backend)
    opts = _check_options(options)
    if dynamic:
        raise NotImplementedError("ember.compile(dynamic=True): dynamic shapes are not "
                                  "supported yet; use dynamic=None or False (one graph per "
                                  "static shape, recompiled on a shape change)")
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


def reset() -> None:
    """Forget every compiled entry and counter (the on-disk kernel cache is kept)."""
    for cf in _ALL:
        cf._entries.clear()
        cf._limit_warned = False
    for k in counters:
        counters[k] = 0


def is_compiling() -> bool:
    """True while ember.compile is capturing a function."""
    return capture.TRACING[0] > 0


def disable(fn: Callable | None = None, recursive: bool = True, *, reason: str | None = None):
    """Run ``fn`` eagerly even when called from a compiled function (a graph break there)."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if registry.TRACE[0] is not None:
            raise GraphBreak(f"call to ember.compiler.disable'd function "
                             f"{getattr(fn, '__name__', fn)}" + (f": {reason}" if reason else ""))
        return fn(*args, **kwargs)
    return wrapper
