"""ember.compile dynamic shapes: automatic dynamic recompiles, dynamic=True/False,
mark_dynamic / maybe_mark_dynamic / mark_static, size-generic kernels, guards on sizes."""

from __future__ import annotations

import functools
import re
import warnings

import numpy as np
import pytest
import torch
from compile_util import close as _close
from compile_util import fresh_compiler, rand  # noqa: F401 (autouse fixture)

import ember
from ember import nn
from ember.compiler import (
    ConstraintViolationError,
    compile,
    counters,
    mark_dynamic,
    mark_static,
    maybe_mark_dynamic,
)

close = functools.partial(_close, scale=4)  # compiled vs eager, 4x the dtype's tolerance


def kinds(cf) -> list[str]:
    """Each entry: "static", "dynamic" (symbolic sizes) or "eager" (graph break)."""
    return ["eager" if e.graph is None else ("dynamic" if e.dyn is not None else "static")
            for e in cf._entries]


_W = rand(8, 5, seed=1)
_B = rand(4, seed=2)

# name -> (fn, args(n) for batch size n)
CASES = {
    "pointwise": (lambda x: (x.exp() * 2 + 1).tanh(), lambda n: (rand(n, 4),)),
    "broadcast_static": (lambda x: x * _B - 1, lambda n: (rand(n, 4),)),
    "two_inputs": (lambda x, y: x * y + x, lambda n: (rand(n, 3), rand(n, 3, seed=3))),
    "sum_last": (lambda x: x.sum(-1), lambda n: (rand(n, n + 1),)),
    "sum_first": (lambda x: x.sum(0) * 2, lambda n: (rand(n, 3),)),
    "mean_softmax": (lambda x: x.softmax(-1) + x.mean(-1, keepdim=True),
                     lambda n: (rand(3, n),)),
    "amax_all": (lambda x: x.amax() + x.abs().sum(), lambda n: (rand(n, 2, n),)),
    "reshape": (lambda x: x.reshape(-1, 2).relu() * 3, lambda n: (rand(n, 4),)),
    "flatten": (lambda x: x.flatten() + 1, lambda n: (rand(n, 2, 3),)),
    "view_sizes": (lambda x: x.view(x.shape[0], -1).sum(-1), lambda n: (rand(n, 2, 3),)),
    "expand_sizes": (lambda x: x.unsqueeze(1).expand(x.shape[0], 3, 4) * 2,
                     lambda n: (rand(n, 4),)),
    "transpose": (lambda x: x.t() * 2, lambda n: (rand(n, 3),)),
    "matmul": (lambda x: (x @ _W).relu(), lambda n: (rand(n, 8),)),
    "slice": (lambda x: x[1:] - x[:-1], lambda n: (rand(n, 4),)),
    "cat": (lambda x: ember.cat([x, x * 2]).sum(-1), lambda n: (rand(n, 4),)),
    "size_arith": (lambda x: x * x.shape[0] + x.shape[1] // 2, lambda n: (rand(n, 4),)),
    "noncontig_input": (lambda x: x.exp() + 1, lambda n: (rand(3, n).t(),)),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", list(CASES))
def test_static_then_one_dynamic_recompile(name, backend):
    fn, make = CASES[name]
    cf = compile(fn, backend=backend)
    for n in (3, 5, 7, 11, 6):
        args = make(n)
        close(cf(*args), fn(*args))
    assert kinds(cf) == ["static", "dynamic"], kinds(cf)
    assert counters["recompiles"] == 1


def test_generated_kernels_take_sizes_as_parameters():
    cf = compile(lambda x: (x * 2).sum(-1))
    cf(rand(3, 16))
    cf(rand(5, 16))
    cg = cf._entries[1].run.__wrapped__
    while hasattr(cg, "__wrapped__"):
        cg = cg.__wrapped__
    assert "int64_t s0" in cg.c_source and "< s0" in cg.c_source
    # the OpenMP threshold is decided per call (its value depends on the thread pool used)
    assert re.search(r"if\(16\*s0 >= \d+\)", cg.c_source)
    assert "s0 = inputs[0]._data.shape[0]" in cg.wrapper_source
    before = counters["compiles"]
    for n in (2, 9, 40, 100, 5000):
        x = rand(n, 16, seed=n)
        close(cf(x), (x * 2).sum(-1))
    assert counters["compiles"] == before


def test_recompile_counts_match_torch():
    """The same shape sequence compiles as often under ember as under torch.compile."""
    shapes = [(3, 4), (5, 4), (7, 4), (7, 6), (1, 4), (9, 8), (0, 4), (2, 3)]

    def counts(m, dynamic):
        n = [0]

        def backend(gm, example_inputs):
            n[0] += 1
            return gm.forward if m is torch else gm

        f = m.compile(lambda x: (x * 2).sum(-1), backend=backend, dynamic=dynamic)
        out = []
        for s in shapes:
            f(m.ones(*s))
            out.append(n[0])
        return out

    for dynamic in (None, True):
        torch._dynamo.reset()
        assert counts(ember, dynamic) == counts(torch, dynamic), dynamic


def test_sizes_zero_and_one_are_specialised():
    fn = lambda x: x.sum(0) + 1
    cf = compile(fn)
    for n in (3, 5, 1, 0, 8, 1, 0):
        x = rand(n, 3)
        close(cf(x), fn(x))
    assert kinds(cf) == ["static", "dynamic", "static", "static"]


@pytest.mark.parametrize("dynamic, expected", [
    (True, ["dynamic"]), (False, ["static"] * 4), (None, ["static", "dynamic"])])
def test_dynamic_flag(dynamic, expected):
    fn = lambda x: x.softmax(-1) * 2
    cf = compile(fn, dynamic=dynamic)
    for n in (3, 4, 6, 9):
        x = rand(n, n)
        close(cf(x), fn(x))
    assert kinds(cf) == expected


def test_size_tests_become_guards():
    fn = lambda x: x * 2 if x.shape[0] > 4 else x - 1
    cf = compile(fn, dynamic=True)
    for n in (3, 2, 4, 5, 9, 30, 3):
        x = rand(n, 2)
        close(cf(x), fn(x))
    assert kinds(cf) == ["dynamic", "dynamic"]
    guards = [g for e in cf._entries for g in e.dyn.env.all_guards()]
    assert "not (s0 > 4)" in guards and "s0 > 4" in guards


def test_exact_size_use_specialises_with_reason(caplog, monkeypatch):
    from ember.compiler import api
    monkeypatch.setattr(api, "_LOGS", frozenset(["dynamic"]))
    fn = lambda x: sum(x[i] for i in range(x.shape[0]))
    cf = compile(fn, dynamic=True)
    with caplog.at_level("INFO", logger="ember.compiler"):
        for n in (3, 4):
            x = rand(n, 2)
            close(cf(x), fn(x))
    assert "specialised s0 (args[0].size()[0]) to 3" in caplog.text
    assert len(cf._entries) == 2


def test_fitted_sizes_are_rechecked_per_new_size():
    """``x[:, :3]`` has 3 columns for every probed size >= 3, not for 2: the dynamic graph
    must not serve size 2 with a stale output size."""
    fn = lambda x: x[:, :3] * 2
    cf = compile(fn)
    for n in (5, 6, 2, 7, 2):
        x = rand(4, n)
        close(cf(x), fn(x))
    assert kinds(cf)[:2] == ["static", "dynamic"] and len(cf._entries) == 3


def _mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_module_forward_and_backward(backend):
    m = _mlp()
    cm = compile(m, backend=backend)
    for n in (3, 5, 7, 12):
        x = rand(n, 4, seed=n).requires_grad_()
        xe = x.detach().requires_grad_()
        out = cm(x)
        (out * out).sum().backward()
        grads = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        ref = m(xe)
        (ref * ref).sum().backward()
        close(out, ref)
        close(x.grad, xe.grad)
        close(grads, [p.grad for p in m.parameters()])
        m.zero_grad()
    assert kinds(cm._compiled_call) == ["static", "dynamic"]


def test_mark_dynamic_compiles_dynamic_first_with_range():
    fn = lambda x: x.sum(-1)
    cf = compile(fn)
    x = rand(5, 3)
    mark_dynamic(x, 0, min=2, max=16)
    close(cf(x), fn(x))
    assert kinds(cf) == ["dynamic"]
    env = cf._entries[0].dyn.env
    assert "s0 >= 2" in env.all_guards() and "s0 <= 16" in env.all_guards()
    for n in (2, 16, 9):
        y = rand(n, 3)
        close(cf(y), fn(y))
    assert len(cf._entries) == 1
    y = rand(17, 3)
    close(cf(y), fn(y))  # outside the marked range: a new entry
    assert len(cf._entries) == 2


def test_mark_dynamic_errors():
    x = rand(5, 3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        mark_dynamic(x, 2)
    with pytest.raises(ValueError, match="min"):
        mark_dynamic(x, 0, min=8, max=4)
    mark_dynamic(x, 0, min=6)
    with pytest.raises(ConstraintViolationError, match="5 not in range"):
        compile(lambda t: t + 1)(x)
    y = rand(5, 3)
    mark_dynamic(y, 0)
    with pytest.raises(ConstraintViolationError, match="specialized it to be a constant"):
        compile(lambda t: t + 1 if t.shape[0] == 5 else t)(y)


def test_maybe_mark_dynamic_allows_specialisation():
    fn = lambda t: t + 1 if t.shape[0] == 5 else t
    y = rand(5, 3)
    maybe_mark_dynamic(y, 0)
    cf = compile(fn)
    close(cf(y), fn(y))
    assert cf._entries[0].dyn.env.specialized


def test_mark_static_wins_over_dynamic_true():
    fn = lambda x: x * 2
    cf = compile(fn, dynamic=True)
    x = rand(3, 4)
    mark_static(x, 1)
    close(cf(x), fn(x))
    guard = cf._entries[0].dyn
    (pattern,) = guard.patterns.values()
    assert pattern[1] == (None, 4)  # dim 0 symbolic, dim 1 fixed
    z = rand(4, 4)
    mark_static(z)
    close(cf(z), fn(z))
    assert kinds(cf) == ["dynamic"]  # a static-marked tensor may still use a dynamic entry


def test_dtype_and_layout_still_guarded_on_dynamic_entries():
    fn = lambda x: x + 1
    cf = compile(fn, dynamic=True)
    for x in (rand(3, 4), rand(5, 4), rand(5, 4, dtype=ember.float64), rand(4, 5).t()):
        close(cf(x), fn(x))
    assert kinds(cf) == ["dynamic", "dynamic", "dynamic"]


def test_gpt_training_with_changing_batch_size():
    """The example GPT (embedding, attention, layer norm, tied head, cross entropy): forward
    and backward with batch sizes 2, 3, 5 compile twice (static, then dynamic)."""
    import ember.examples

    tg = ember.examples.load("train_gpt")
    ember.manual_seed(0)
    m = tg.GPT(vocab=11, block=8, n_layer=1, n_head=2, d=8)
    cm = compile(m)
    gen = np.random.default_rng(0)
    for b in (2, 3, 5):
        idx = ember.tensor(gen.integers(0, 11, (b, 6)))
        tgt = ember.tensor(gen.integers(0, 11, (b, 6)))
        loss = cm(idx, tgt)[1]
        loss.backward()
        grads = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        ref = m(idx, tgt)[1]
        ref.backward()
        close(loss, ref)
        close(grads, [p.grad for p in m.parameters()])
        m.zero_grad()
    assert kinds(cm._compiled_call) == ["static", "dynamic"]


def test_equal_sizes_do_not_confuse_the_fitted_shapes():
    """With all dims symbolic and sizes (3, 2, 3), ``view(s0, -1)`` has 6 = s0*s1 = s1*s2
    columns: the graph must use s1*s2 and so serve (5, 2, 3) and (4, 3, 5) too."""
    fn = lambda x: x.view(x.shape[0], -1).exp().sum(-1)
    cf = compile(fn, dynamic=True)
    for shape in ((3, 2, 3), (5, 2, 3), (4, 3, 5)):
        x = rand(*shape)
        close(cf(x), fn(x))
    assert kinds(cf) == ["dynamic"]


# sizes the backward needs that no backward input carries (found by the hypothesis chains)
SIZE_CARRIERS = {
    "broadcast_input_grad": (lambda x, y: (y + x).abs(), lambda n: [(n,), (1, n)]),
    "mean_divisor": (lambda x: x.mean(0).abs(), lambda n: [(n,)]),
    "select": (lambda x: x.select(0, 0) * 2, lambda n: [(n, 3)]),
    "linear": (lambda x, w: ember.nn.functional.linear(x, w).tanh(), lambda n: [(n, 4), (3, 4)]),
}


@pytest.mark.parametrize("name", list(SIZE_CARRIERS))
def test_backward_binds_sizes_no_backward_input_has(name):
    fn, shapes = SIZE_CARRIERS[name]
    cf = compile(fn, dynamic=True)
    for n in (2, 3, 5):
        args = [rand(*s, seed=i).requires_grad_() for i, s in enumerate(shapes(n))]
        refs = [a.detach().clone().requires_grad_() for a in args]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "runs op by op" fallback
            out = cf(*args)
        out.sum().backward()
        ref = fn(*refs)
        ref.sum().backward()
        close(out, ref)
        for a, r in zip(args, refs):
            close(a.grad, r.grad)
    assert counters["recompiles"] == 0  # one dynamic graph serves every size


def _view_then_write(x):
    v = x.view(-1)
    x.add_(1)
    return v * 2  # the view made before the write sees it


# functions writing into their input (whole, through views, out=), for m in (ember, torch)
MUTATING = {
    "whole": lambda m, x: (x.mul_(2), x.sum(-1))[1],
    "row": lambda m, x: (x[0].add_(1), x * 2)[1],
    "slice": lambda m, x: (x[1:].mul_(2), x.sum(-1))[1],
    "column_of_transpose": lambda m, x: (x.t()[1].sub_(3), x.exp())[1],
    "select_index": lambda m, x: (x.select(0, 1).mul_(x[0]), x.sum())[1],
    "out_into_view": lambda m, x: m.mul(x[0], 3, out=x[-1]),
    "view_then_write_whole": lambda m, x: _view_then_write(x),
}
MUTATING_SHAPES = [(3, 4), (5, 4), (7, 4), (7, 6), (9, 8), (3, 5)]


def _compile_counts(m, fn, dynamic):
    n = [0]

    def backend(gm, example_inputs):
        n[0] += 1
        return gm.forward if m is torch else gm

    f = m.compile(lambda x: fn(m, x), backend=backend, dynamic=dynamic)
    out = []
    for s in MUTATING_SHAPES:
        f(m.arange(float(s[0] * s[1])).reshape(s))
        out.append(n[0])
    return out


@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("name", list(MUTATING))
def test_input_mutation_serves_all_sizes_from_one_graph(name, dynamic):
    """A functionalized write-back into an input (or a view of one) is symbolic in the
    sizes: one dynamic graph serves every size, and the compile count over a shape sequence
    is torch.compile's."""
    fn = MUTATING[name]
    for backend in ("inductor", "aot_eager"):
        ember.compiler.reset()
        cf = compile(lambda x: fn(ember, x), backend=backend, dynamic=dynamic)
        for s in MUTATING_SHAPES:
            x, y = rand(*s, seed=s[0]), rand(*s, seed=s[0])
            close(cf(x), fn(ember, y))
            close(x, y)
        assert kinds(cf) == (["dynamic"] if dynamic else ["static", "dynamic", "dynamic"])
    ember.compiler.reset()
    torch._dynamo.reset()
    assert _compile_counts(ember, fn, dynamic) == _compile_counts(torch, fn, dynamic)


# a size-generic graph for ops that read sizes exactly during capture (select's backward
# builds a zeros of the input's shape)
SIZE_READERS = {
    "select": lambda x: x.select(0, 1) * 2,
    "index": lambda x: x[1] * 2 + x[-1],
    "index_column": lambda x: x[:, 2].exp(),
    "narrow_then_index": lambda x: x.narrow(0, 1, 2)[:, 1] * x[0, 0],
}


@pytest.mark.parametrize("name", list(SIZE_READERS))
def test_select_forward_and_backward_are_size_generic(name):
    fn = SIZE_READERS[name]
    cf = compile(fn, dynamic=True)
    for n in (3, 4, 6, 9):
        x = rand(n, n + 1, seed=n).requires_grad_()
        xe = x.detach().requires_grad_()
        out = cf(x)
        out.sum().backward()
        ref = fn(xe)
        ref.sum().backward()
        close(out, ref)
        close(x.grad, xe.grad)
    assert kinds(cf) == ["dynamic"]


# Python int arguments under automatic dynamic: fn(m, x, k) for m in (ember, torch)
INT_ARGS = {
    "scale": (lambda m, x, k: x * k + 1, (2, 3, 4, 1, 0, 5)),
    "keyword": (lambda m, x, k: m.roll(x, k, 0) - k, (2, 3, 5, 4)),
    "factory": (lambda m, x, k: x.sum() + m.zeros(k) + k, (2, 3, 5, 4)),
    "power_of_size": (lambda m, x, k: x ** k * x.shape[0], (2, 3, 5, 4)),
}


def _int_compile_counts(m, fn, values, dynamic=None):
    n = [0]

    def backend(gm, example_inputs):
        n[0] += 1
        return gm.forward if m is torch else gm

    f = m.compile(lambda x, k: fn(m, x, k), backend=backend, dynamic=dynamic)
    out = []
    for k in values:
        f(m.linspace(0.5, 1.5, 6), k)
        out.append(n[0])
    return out


@pytest.mark.parametrize("name", list(INT_ARGS))
def test_changed_int_argument_becomes_symbolic(name):
    """An int argument whose value changes recompiles once with the int symbolic (as
    PyTorch's automatic dynamic does); that graph serves later values, 0 and 1 included."""
    fn, values = INT_ARGS[name]
    for backend in ("inductor", "aot_eager"):
        ember.compiler.reset()
        cf = compile(lambda x, k: fn(ember, x, k), backend=backend)
        for k in values:
            x = rand(6, seed=k) + 2
            close(cf(x, k), fn(ember, x, k))
        assert kinds(cf) == ["static", "dynamic"], (backend, kinds(cf))
        assert cf._entries[1].dyn.env.symbols[0].source == "args[1]"
    ember.compiler.reset()
    torch._dynamo.reset()
    assert _int_compile_counts(ember, fn, values) == _int_compile_counts(torch, fn, values)


@pytest.mark.parametrize("name", list(INT_ARGS))
def test_int_arguments_symbolic_from_the_start_with_dynamic_true(name):
    fn, values = INT_ARGS[name]
    cf = compile(lambda x, k: fn(ember, x, k), dynamic=True)
    for k in values:
        x = rand(6, seed=k) + 2
        close(cf(x, k), fn(ember, x, k))
    assert set(kinds(cf)) == {"dynamic"}  # x ** 2 is special: one more graph for it
    assert "args[1]" in [s.source for s in cf._entries[-1].dyn.env.symbols]
    ember.compiler.reset()
    torch._dynamo.reset()
    assert _int_compile_counts(ember, fn, values, True) == \
        _int_compile_counts(torch, fn, values, True)


def test_int_argument_symbolic_in_training_and_with_dynamic_sizes():
    fn = lambda x, k: (x.tanh() * k).sum(0) + x.shape[0] * k
    cf = compile(fn)
    for n, k in ((3, 2), (5, 3), (7, 4), (4, 6)):
        x = rand(n, 3, seed=n).requires_grad_()
        xe = x.detach().requires_grad_()
        out = cf(x, k)
        out.sum().backward()
        ref = fn(xe, k)
        ref.sum().backward()
        close(out, ref)
        close(x.grad, xe.grad)
    assert kinds(cf) == ["static", "dynamic"]
    env = cf._entries[1].dyn.env
    assert [s.source for s in env.symbols] == ["args[0].size()[0]", "args[1]"]


def test_int_argument_needing_its_value_specialises(caplog, monkeypatch):
    """``range(k)`` needs k's value: the int is specialised (logged) and correct."""
    from ember.compiler import api
    monkeypatch.setattr(api, "_LOGS", frozenset(["dynamic"]))
    fn = lambda x, k: x + sum(x * i for i in range(k))
    cf = compile(fn)
    with caplog.at_level("INFO", logger="ember.compiler"):
        for k in (2, 3, 4, 3):
            x = rand(4, seed=k)
            close(cf(x, k), fn(x, k))
    assert "specialised s0 (args[1]) to 3" in caplog.text
    assert len(cf._entries) == 3  # one per value, the last call reusing k=3's
    assert counters["recompiles"] == 2


def test_int_arguments_stay_static_without_automatic_dynamic():
    fn = lambda x, k: x * k
    cf = compile(fn, dynamic=False)
    for k in (2, 3, 4):
        close(cf(rand(3), k), fn(rand(3), k))
    assert kinds(cf) == ["static"] * 3
