"""ember.compiler API surface: explain, EMBER_LOGS topics, Python side effects in compiled
functions, the recompile limit, and compile modes."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
from compile_util import close as _close
from compile_util import fresh_compiler, rand  # noqa: F401 (autouse fixture)

import ember
from ember import nn
from ember.compiler import (
    ExplainOutput,
    Unsupported,
    api,
    compile,
    config,
    counters,
    explain,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


close = functools.partial(_close, scale=4)  # compiled vs eager, 4x the dtype's tolerance


# ---------------------------------------------------------------------- explain
def _brk(x):
    y = x.sin()
    if y.sum() > 0:  # needs data: a graph break
        return y * 2
    return y


@pytest.mark.parametrize("form", ["function", "compiled", "module", "deprecated"])
def test_explain_graphs_ops_and_guards(form):
    m = nn.Linear(3, 2)
    x = rand(4, 3)
    if form == "module":
        out = explain(m)(x)
        ops = ["linear"]
    elif form == "deprecated":
        with pytest.warns(FutureWarning, match="deprecated"):
            out = explain(lambda t: t.sin() * 2, x)
        ops = ["sin", "mul"]
    else:
        fn = lambda t: (t.sin() * 2).sum(-1)
        out = explain(compile(fn) if form == "compiled" else fn)(x)
        ops = ["sin", "mul", "sum"]
    assert isinstance(out, ExplainOutput)
    assert (out.graph_count, out.graph_break_count, out.break_reasons) == (1, 0, [])
    assert out.ops_per_graph == [ops] and out.op_count == len(ops)
    assert any("tensor args[0] == float32[4, 3]" in g for g in out.guards)
    text = str(out)
    for part in ("Graph Count: 1", "Graph Break Count: 0", f"Op Count: {len(ops)}",
                 "Ops per Graph:", "Out Guards:", "Compile Times:"):
        assert part in text


def test_explain_graph_break_reason_and_user_line(capsys):
    def f(x):
        print("side effect")
        return x + 1

    for fn, why, line in [(_brk, "bool(tensor)", "if y.sum() > 0"),
                          (f, "print() is a side effect", 'print("side effect")')]:
        out = explain(fn)(rand(3))
        assert (out.graph_count, out.graph_break_count) == (0, 1)
        (b,) = out.break_reasons
        assert why in b.reason and line in b.user_stack[0]
        assert f"Reason: {b.reason}" in str(out)
    assert capsys.readouterr().out.count("side effect") == 1  # the call really ran, once


# ---------------------------------------------------------------------- logs
_LOG_SCRIPT = textwrap.dedent("""
    import ember
    f = ember.compile(lambda x: (x * 2 + 1).sum(-1))
    f(ember.ones(3, 4)); f(ember.ones(5, 4))
    h = ember.compile(lambda x: (x * 2).exp() + (x * 2).sum())
    h(ember.ones(3, 4))
    g = ember.compile(lambda x: x * 2 if x.sum() > 0 else x)
    g(ember.ones(3))
""")

_TOPICS = {"graph": "captured graph", "output_code": "generated C", "recompiles": "recompiling",
           "graph_breaks": "graph break: bool(tensor)", "guards": "tensor args[0] == float32[3, 4]",
           "dynamic": "with symbolic sizes: s0=args[0].size()[0]", "fusion": "stored"}


def test_every_log_topic_prints_from_the_environment_variable(tmp_path):
    env = dict(os.environ, EMBER_LOGS=",".join(_TOPICS), PYTHONPATH=ROOT,
               EMBER_CACHE_DIR=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", _LOG_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=240)
    assert res.returncode == 0, res.stderr
    for topic, marker in _TOPICS.items():
        assert f"[{topic}]" in res.stderr and marker in res.stderr, topic


@pytest.mark.parametrize("topic", list(_TOPICS))
def test_only_the_chosen_topic_logs(topic, monkeypatch, caplog):
    monkeypatch.setattr(api, "_LOGS", frozenset([topic]))
    with caplog.at_level("INFO", logger="ember.compiler"):
        f = compile(lambda x: (x * 2 + 1).sum(-1))
        f(ember.ones(3, 4))
        f(ember.ones(5, 4))
        compile(lambda x: (x * 2).exp() + (x * 2).sum())(ember.ones(3, 4))
        compile(lambda x: x * 2 if x.sum() > 0 else x)(ember.ones(3))
    text = caplog.text
    assert _TOPICS[topic] in text
    others = [t for t in _TOPICS if t != topic]
    assert not any(f"[{t}]" in text for t in others)


def test_guards_topic_lists_symbolic_guards(monkeypatch, caplog):
    monkeypatch.setattr(api, "_LOGS", frozenset(["guards"]))
    with caplog.at_level("INFO", logger="ember.compiler"):
        f = compile(lambda x: x * 2 if x.shape[0] > 4 else x, dynamic=True)
        f(ember.ones(6, 2))
    assert "float32[*, *] (dynamic" in caplog.text
    assert "s0 = args[0].size()[0]" in caplog.text and "shape: s0 > 4" in caplog.text


# ---------------------------------------------------------------------- side effects
_SEEN: list = []
_COUNT = 0


def _append_global(x):
    _SEEN.append(1)
    return x * 2


def _rebind_global(x):
    global _COUNT
    _COUNT += 1
    return x * 2


class _Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * 2


def _side_effect_cases():
    log: list = []
    seen: dict = {}

    def append_closure(x):
        log.append(x.shape[0])
        return x * 2

    def dict_arg(x, d):
        d["k"] = d.get("k", 0) + 1
        return x * 2

    def printing(x):
        print("called", x.shape[0])
        return x * 2

    module = _Counting()
    return {  # name -> (function, count(printed text) -> how often the side effect happened)
        "list_closure": (append_closure, lambda out: len(log)),
        "list_global": (_append_global, lambda out: len(_SEEN)),
        "global_rebind": (_rebind_global, lambda out: _COUNT),
        "dict_argument": (lambda x: dict_arg(x, seen), lambda out: seen.get("k", 0)),
        "module_attribute": (module, lambda out: module.calls),
        "print": (printing, lambda out: out.count("called")),
    }


@pytest.mark.parametrize("name", list(_side_effect_cases()))
def test_side_effects_happen_once_per_call(name, capsys):
    global _COUNT
    _SEEN.clear()
    _COUNT = 0
    fn, count = _side_effect_cases()[name]
    cf = compile(fn)
    for _ in range(3):
        x = rand(3)
        close(cf(x), x * 2)
    assert count(capsys.readouterr().out) == 3
    entries = cf._compiled_call._entries if isinstance(fn, nn.Module) else cf._entries
    assert [e.graph for e in entries] == [None]  # a graph break: the function runs eagerly
    with pytest.raises(Unsupported, match="side effect"):
        compile(fn, fullgraph=True)(rand(3))
    assert count(capsys.readouterr().out) in (3, 0)  # nothing happened under fullgraph


def test_side_effects_of_a_partial_trace_are_undone():
    """The trace stops at a graph break after appending: the eager run must not see the
    capture's append (one append per call, not two)."""
    log: list = []

    def f(x):
        log.append(1)
        if x.sum() > 0:
            return x + 1
        return x - 1

    cf = compile(f)
    for _ in range(2):
        cf(rand(3))
    assert log == [1, 1]


def test_tensor_lists_built_inside_are_not_side_effects():
    def f(x):
        parts = []
        for k in range(3):
            parts.append(x * k)
        return ember.stack(parts).sum(0)

    cf = compile(f, fullgraph=True)
    x = rand(4)
    close(cf(x), f(x))


# ---------------------------------------------------------------------- recompile limit
@pytest.mark.parametrize("limit", [None, 3])
def test_recompile_limit_one_warning_with_last_guard(limit, monkeypatch):
    if limit is not None:  # through PyTorch's older name for the same setting
        monkeypatch.setattr(config, "cache_size_limit", limit)
    lim = config.recompile_limit
    assert limit is not None or lim == 8
    cf = compile(lambda x: x + 1, dynamic=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(2, lim + 6):
            x = rand(n)
            close(cf(x), x + 1)
    msgs = [str(x.message) for x in w if "recompile_limit" in str(x.message)]
    assert len(msgs) == 1
    assert f"({lim})" in msgs[0] and f"expected float32[{lim + 1}]" in msgs[0] and \
        f"actual float32[{lim + 2}]" in msgs[0]
    assert len(cf._entries) == lim and counters["eager_fallbacks"] == 4


def test_recompile_limit_still_uses_existing_entries():
    cf = compile(lambda x: x * 3, dynamic=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in range(1, config.recompile_limit + 3):
            cf(rand(n))
    before = counters["eager_fallbacks"]
    close(cf(rand(2)), rand(2) * 3)
    assert counters["eager_fallbacks"] == before


# ---------------------------------------------------------------------- modes
def test_modes_accepted_and_compile_like_default():
    fn = lambda x: (x.exp() + 1).sum(-1)
    x = rand(4, 5)
    sources = set()
    for mode in (None, "default", "reduce-overhead", "max-autotune",
                 "max-autotune-no-cudagraphs"):
        cf = compile(fn, mode=mode)
        close(cf(x), fn(x))
        sources.add(cf._entries[0].run.c_source)
    assert len(sources) == 1
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        compile(fn, mode="fastest")
    assert "Modes:" in compile.__doc__ and "Python side effects" in compile.__doc__


def test_dynamo_namespace_mirrors_torch():
    import torch

    names = ["config", "disable", "explain", "mark_dynamic", "mark_static",
             "maybe_mark_dynamic", "reset", "is_compiling"]
    for name in names:
        assert hasattr(torch._dynamo, name), name  # the names programs call exist in torch
        assert getattr(ember._dynamo, name) is getattr(ember.compiler, name)


# ---------------------------------------------------------------------- input aliasing
class _Buffered(nn.Module):
    """Writes its argument in place and reads its buffer (or the reverse): called with its
    own buffer (or a view of it) as the argument, both are one memory."""

    def __init__(self, write_buffer: bool):
        super().__init__()
        self.register_buffer("b", ember.arange(6.0).reshape(2, 3))
        self.write_buffer = write_buffer

    def forward(self, x):
        if self.write_buffer:
            self.b.mul_(2)
            return x + 1
        x.add_(1)
        return self.b * 2, self.b.clone()


_GLOBAL = ember.arange(4.0)


def _write_arg_read_global(x):
    x.mul_(3)
    return _GLOBAL + 1


def _alias_cases():
    """name -> factory of (fn, make(aliased) -> args); a module case builds a new module per
    factory call, so the compiled and the eager run each own one."""
    def pair(first, second):
        """Arguments ``first(g), second(g)`` of one grid ``g``, or of two grids."""
        def make(aliased):
            g = ember.arange(12.0).reshape(3, 4)
            return first(g), second(g if aliased else ember.arange(12.0).reshape(3, 4))
        return make

    def add_into(x, y):
        ember.add(y, 1, out=x)
        return y * 1

    def two(written, read):
        def fn(x, y):
            written(x, y)
            return read(x, y)
        return fn

    def module(write_buffer, view):
        m = _Buffered(write_buffer)
        return m, lambda al: ((m.b[0] if view else m.b) if al else
                              ember.ones(3 if view else (2, 3)),)

    def same(g):
        return g

    return {
        "row_of_written": lambda: (two(lambda x, y: x.add_(1), lambda x, y: y * 2),
                                   pair(same, lambda g: g[0])),
        "transpose_of_written": lambda: (two(lambda x, y: y.mul_(2), lambda x, y: x + 1),
                                         pair(lambda g: g[:3, :3], lambda g: g[:3, :3].t())),
        "same_tensor_twice": lambda: (two(lambda x, y: x.add_(y), lambda x, y: x * y),
                                      pair(same, same)),
        "overlapping_slices": lambda: (two(lambda x, y: x.mul_(2), lambda x, y: y.sum(0)),
                                       pair(lambda g: g[0:2], lambda g: g[1:3])),
        "out_into_alias": lambda: (add_into, pair(same, same)),
        "buffer_as_argument": lambda: module(False, False),
        "argument_views_written_buffer": lambda: module(True, True),
        "global_as_argument": lambda: (_write_arg_read_global,
                                       lambda al: (_GLOBAL if al else ember.ones(4),)),
    }


def _entries_of(cf):
    return cf._compiled_call._entries if isinstance(cf, api.OptimizedModule) else cf._entries


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", list(_alias_cases()))
def test_aliased_inputs_written_in_place_match_eager(name, backend):
    """A graph treats its inputs as independent values; when an input it writes in place
    shares memory with another input, that call pattern is guarded apart and runs eagerly,
    and calls without aliasing keep using the graph."""
    fn_c, make_c = _alias_cases()[name]()
    fn_e, make_e = _alias_cases()[name]()
    cf = compile(fn_c, backend=backend)
    state = (lambda m: [m.b.clone()] if isinstance(m, nn.Module) else [])
    for aliased in (False, True, False, True):
        _GLOBAL.copy_(ember.arange(4.0))
        a = make_c(aliased)
        out = cf(*a)
        got = [out, [t.clone() for t in a]] + state(fn_c)
        _GLOBAL.copy_(ember.arange(4.0))
        b = make_e(aliased)
        ref = fn_e(*b)
        close(got, [ref, list(b)] + state(fn_e))
    entries = _entries_of(cf)
    assert [e.graph is not None for e in entries] == [True, False]
    assert entries[1].aliased and "input aliasing" in entries[1].reason
    assert counters["alias_fallbacks"] == 2 and counters["recompiles"] == 1


def test_aliasing_first_then_independent_inputs():
    """Compiled first with aliased inputs: the eager entry does not serve independent ones."""
    fn = lambda x, y: (x.add_(1), y * 2)[1]
    cf = compile(fn)
    for aliased in (True, False, True):
        g, h = ember.zeros(2, 3), ember.zeros(2, 3)
        close(cf(g, g[0] if aliased else ember.zeros(3)),
              fn(h, h[0] if aliased else ember.zeros(3)))
        close(g, h)
    assert [e.aliased for e in cf._entries] == [True, False]
    assert counters["alias_fallbacks"] == 2


def test_disjoint_views_of_one_base_keep_the_graph():
    """Columns of one matrix share a base but no element: no fallback."""
    fn = lambda x, y: (x.mul_(2), x + y)[1]
    cf = compile(fn)
    for _ in range(2):
        g, h = ember.arange(6.0).reshape(3, 2), ember.arange(6.0).reshape(3, 2)
        close(cf(g[:, 0], g[:, 1]), fn(h[:, 0], h[:, 1]))
        close(g, h)
    assert [e.graph is not None for e in cf._entries] == [True]
    assert counters["alias_fallbacks"] == 0


def test_aliasing_without_writes_is_not_guarded():
    fn = lambda x, y: x * y + 1
    cf = compile(fn)
    g = rand(4)
    close(cf(g, rand(4, seed=1)), fn(g, rand(4, seed=1)))
    close(cf(g, g), fn(g, g))
    close(cf(g[None], g), fn(g[None], g))
    assert counters["alias_fallbacks"] == 0 and all(not e.written for e in cf._entries)


def test_aliasing_is_logged_and_listed_in_guards(monkeypatch, caplog):
    monkeypatch.setattr(api, "_LOGS", frozenset(["graph_breaks", "recompiles"]))
    fn = lambda x, y: (x.add_(1), y * 2)[1]
    cf = compile(fn)
    with caplog.at_level("INFO", logger="ember.compiler"):
        cf(ember.zeros(3), ember.zeros(3))
        g = ember.zeros(3)
        cf(g, g)
    assert "recompiling <lambda>: input aliasing: args[0] (written in place) shares memory " \
           "with args[1]" in caplog.text
    assert "[graph_breaks] input aliasing" in caplog.text and "runs eagerly" in caplog.text
    out = explain(fn)(g, g)
    assert out.graph_count == 0 and "input aliasing" in out.break_reasons[0].reason
    out = explain(fn)(ember.zeros(3), ember.zeros(3))
    assert any("share no memory with other inputs" in x for x in out.out_guards)


# ---------------------------------------------------------------------- overlapping writes
# name -> (fn(m, x) writing into a view whose elements share memory, x(m))
_OVERLAPPING_WRITES = {
    "add_": (lambda m, x: x.expand(4, 3).add_(1), lambda m: m.ones(1, 3)),
    "out": (lambda m, x: m.add(m.ones(4, 3), 1, out=x.expand(4, 3)), lambda m: m.ones(1, 3)),
    "copy_": (lambda m, x: x.expand(4, 3).copy_(m.ones(4, 3)), lambda m: m.ones(1, 3)),
    "view_of_expand": (lambda m, x: x.unsqueeze(0).expand(2, 4, 3)[1:].mul_(2),
                       lambda m: m.ones(1, 3)),
    "expand_as_of_local": (lambda m, x: (x * 2).expand_as(m.ones(4, 3)).sub_(1),
                           lambda m: m.ones(1, 3)),
    "expanded_argument": (lambda m, x: x.add_(1), lambda m: m.ones(3).expand(4, 3)),
    "column_of_expanded_argument": (lambda m, x: x[:, 1].mul_(2),
                                    lambda m: m.ones(3).expand(4, 3)),
}


@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", list(_OVERLAPPING_WRITES))
def test_write_into_self_overlapping_view_raises_like_eager(name, backend, fullgraph):
    import torch
    from oracle import raises_like

    fn, make = _OVERLAPPING_WRITES[name]
    x = make(ember)
    cf = compile(lambda t: fn(ember, t), backend=backend, fullgraph=fullgraph)
    err, _ = raises_like(lambda: cf(x), lambda: fn(torch, make(torch)),
                         "unsupported operation: more than one element of the written-to "
                         "tensor refers to a single memory location")
    with pytest.raises(RuntimeError) as eager:
        fn(ember, make(ember))
    assert str(err) == str(eager.value)
    close(x, make(ember))  # nothing was written
