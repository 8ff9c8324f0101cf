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
