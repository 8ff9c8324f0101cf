"""ember.compile on whole models: the same outputs and the same training trajectory as eager.

Each model is built twice from one seed; one copy runs eagerly, the other through
``ember.compile(model)`` or ``model.compile()``. Both take the same optimizer steps on the same
data; losses, outputs and final parameters must agree (rtol 1e-4). Also: evaluation under
no_grad, gradient accumulation, a train->eval switch, dropout under a fixed seed, double
backward, and in-place writes to inputs, buffers and views (functionalized, written back).
"""

from __future__ import annotations

import numpy as np
import pytest

from compile_util import fresh_compiler  # noqa: F401 (autouse fixture)

import ember
from ember import nn
from ember.compiler import compile, counters

RTOL, ATOL = 1e-4, 1e-5


def data(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def same(a, b, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()),
                               rtol=rtol, atol=atol)


# ---------------------------------------------------------------------- models
class GPTBlock(nn.Module):
    """Pre-norm causal self-attention + GELU MLP, as in GPT-2."""

    def __init__(self, d: int = 16, heads: int = 2, p: float = 0.0):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        # no qkv bias: the key bias's true gradient is 0 (softmax ignores a per-query shift),
        # and Adam would turn its rounding noise into full-size steps
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class LSTMHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.head = nn.LSTM(6, 12, batch_first=True), nn.Linear(12, 3)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return self.head(out[:, -1]) + h[0].sum() * 0.1 + c.mean()


MODELS = {  # name -> (builder, input shape)
    "mlp": (lambda: nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 24), nn.Tanh(),
                                  nn.Linear(24, 4)), (6, 12)),
    # no conv bias before batch norm: its true gradient is 0, so Adam would amplify rounding
    "cnn_bn": (lambda: nn.Sequential(nn.Conv2d(3, 6, 3, padding=1, bias=False),
                                     nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                     nn.Linear(6 * 4 * 4, 4)),
               (4, 3, 8, 8)),
    "gpt_block": (lambda: GPTBlock(), (2, 8, 16)),
    "lstm": (lambda: LSTMHead(), (3, 5, 6)),
}

OPTIMS = {
    "adamw": lambda ps: ember.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "sgd_momentum": lambda ps: ember.optim.SGD(ps, lr=1e-2, momentum=0.9),
}


def build(name: str, how: str | None, seed: int = 0):
    """(model, callable): ``how`` is None (eager), "function" (``ember.compile(model)``) or
    "method" (``model.compile()``)."""
    ember.manual_seed(seed)
    model = MODELS[name][0]()
    if how == "function":
        return model, compile(model)
    if how == "method":
        model.compile()
    return model, model


def loss_of(out, step: int):
    target = data(*out.shape, seed=100 + step)
    return ((out - target) ** 2).mean()


def trajectory(name: str, how: str | None, optim: str, steps: int = 8, micro: int = 1):
    """Losses, first outputs and final parameters/buffers of ``steps`` optimizer steps, each
    over ``micro`` accumulated micro-batches."""
    model, run = build(name, how)
    opt = OPTIMS[optim](model.parameters())
    shape = MODELS[name][1]
    losses, outs = [], []
    for s in range(steps):
        opt.zero_grad()
        for m in range(micro):
            out = run(data(*shape, seed=10 * s + m))
            loss = loss_of(out, s) / micro
            loss.backward()
            losses.append(loss.detach())
            outs.append(out.detach())
        opt.step()
    state = [t.detach().clone() for t in model.state_dict().values()]
    return losses, outs, state, run


def assert_same_run(a, b):
    for x, y in zip(a[0], b[0]):
        same(x, y)
    for x, y in zip(a[1], b[1]):
        same(x, y)
    assert len(a[2]) == len(b[2])
    for x, y in zip(a[2], b[2]):
        same(x, y)


def compiled_entries(run) -> list:
    cf = run._compiled_call if hasattr(run, "_compiled_call") else run.forward
    return cf._entries


@pytest.mark.parametrize("optim", list(OPTIMS))
@pytest.mark.parametrize("how", ["function", "method"])
@pytest.mark.parametrize("name", list(MODELS))
def test_training_trajectory_matches_eager(name, how, optim):
    ref = trajectory(name, None, optim)
    got = trajectory(name, how, optim)
    assert_same_run(got, ref)
    assert counters["graph_breaks"] == 0, "the model should compile into one graph"
    (e,) = compiled_entries(got[3])
    # one compiled forward and one backward derived from the op table's rules
    assert e.run.backward.plan.kernels and e.run.forward.plan.kernels


@pytest.mark.parametrize("name", list(MODELS))
def test_gradient_accumulation(name):
    assert_same_run(trajectory(name, "function", "sgd_momentum", steps=2, micro=2),
                    trajectory(name, None, "sgd_momentum", steps=2, micro=2))


@pytest.mark.parametrize("name", list(MODELS))
def test_eval_no_grad_and_train_eval_switch(name):
    shape = MODELS[name][1]
    results = []
    for how in ("function", None):
        model, run = build(name, how)
        opt = OPTIMS["sgd_momentum"](model.parameters())
        outs = []
        for phase in ("train", "eval", "train", "eval"):
            model.train(phase == "train")
            x = data(*shape, seed=len(outs))
            if phase == "train":
                opt.zero_grad()
                out = run(x)
                loss_of(out, 0).backward()
                opt.step()
            else:
                with ember.no_grad():
                    out = run(x)
                assert not out.requires_grad
            outs.append(out.detach())
        results.append(outs + [t.detach().clone() for t in model.state_dict().values()])
    for a, b in zip(*results):
        same(a, b)


@pytest.mark.parametrize("name", ["mlp", "gpt_block"])
def test_dropout_under_fixed_seed(name):
    def with_dropout():
        if name == "gpt_block":
            return GPTBlock(p=0.2)
        return nn.Sequential(nn.Linear(12, 24), nn.Dropout(0.3), nn.ReLU(), nn.Linear(24, 4))

    runs = []
    for how in ("function", None):
        ember.manual_seed(0)
        model = with_dropout()
        run = compile(model) if how else model
        opt = OPTIMS["adamw"](model.parameters())
        ember.manual_seed(1234)
        outs = []
        for s in range(3):
            opt.zero_grad()
            out = run(data(*MODELS[name][1], seed=s))
            loss_of(out, s).backward()
            opt.step()
            outs.append(out.detach())
        outs.append(ember.rand(4))  # the generator advanced by the same draws
        runs.append(outs + [p.detach().clone() for p in model.parameters()])
    for a, b in zip(*runs):
        same(a, b)
    assert counters["graph_breaks"] == 0


@pytest.mark.parametrize("name", ["mlp", "gpt_block"])
def test_create_graph_through_compiled_model(name):
    """Double backward through a compiled region works: grad-of-grad equals eager's."""
    res = []
    for how in ("function", None):
        model, run = build(name, how)
        x = data(*MODELS[name][1]).requires_grad_()
        (gx,) = ember.autograd.grad(loss_of(run(x), 0), x, create_graph=True)
        penalty = gx.square().sum()
        params = list(model.parameters())
        res.append([gx] + list(ember.autograd.grad(penalty, [x] + params)))
    for a, b in zip(*res):
        same(a, b, rtol=1e-3, atol=1e-5)


# ---------------------------------------------------------------------- random ops
RANDOM = {  # name -> fn(x) drawing from the default generator
    "rand_randn": lambda x: x * ember.rand(3, 4) + ember.randn(3, 4),
    "randint_randperm": lambda x: x + ember.randint(0, 10, (3, 4)) + ember.randperm(4),
    "like": lambda x: ember.rand_like(x) * ember.randn_like(x),
    "bernoulli_multinomial": lambda x: ember.bernoulli(x.sigmoid()) +
    ember.multinomial(x.softmax(-1), 2, replacement=True).sum() + ember.normal(x, 0.5),
    "inplace_fills": lambda x: (x * 1).uniform_(-1, 1) + (x * 1).normal_() +
    ember.empty(3, 4).bernoulli_(0.3),
    "dropout_unused_draw": lambda x: (ember.rand(5), nn.functional.dropout(x, 0.5))[1] * 2,
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", list(RANDOM))
def test_random_ops_draw_eagers_numbers(name, backend):
    fn = RANDOM[name]
    cf = compile(fn, backend=backend, fullgraph=True)
    x = data(3, 4)
    for seed in (0, 1):  # the second call reuses the compiled graph
        ember.manual_seed(seed)
        got, after = cf(x), ember.rand(2)
        ember.manual_seed(seed)
        ref, ref_after = fn(x), ember.rand(2)
        same(got, ref, rtol=1e-6, atol=1e-6)
        same(after, ref_after, rtol=0, atol=0)
    assert len(cf._entries) == 1


# ---------------------------------------------------------------------- in-place writes
def _views_of_input(x):
    x[0].add_(1)
    x.t()[1].mul_(3)
    x.view(-1)[:2].zero_()
    return x.sum(0)


def _views_of_intermediate(x):
    y = x * 1
    row = y[1]
    y.diagonal().add_(10)  # row sees the write: it shares y's storage
    a, b = y.split(2)
    b.mul_(-1)
    return row * 2, y, a


def _out_and_detach(x, o):
    ember.add(x, 1, out=o)
    x.detach().mul_(2)  # detach() shares storage with x
    return o * x


def _returns_input(x):
    x.add_(1)
    return x


def _lifted_buffer(x):
    BUF.add_(x.sum())
    return BUF * x


BUF = ember.zeros(())

INPLACE = {  # name -> (fn, number of tensor arguments)
    "views_of_input": (_views_of_input, 1),
    "views_of_intermediate": (_views_of_intermediate, 1),
    "out_and_detach": (_out_and_detach, 2),
    "returns_input": (_returns_input, 1),
    "lifted_buffer": (_lifted_buffer, 1),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_writes_are_functionalized_and_written_back(name, backend):
    fn, n = INPLACE[name]
    cf = compile(fn, backend=backend, fullgraph=True)
    for call in range(2):
        args = [data(4, 4, seed=i) for i in range(n)]
        ref_args = [a.clone() for a in args]
        BUF.zero_()
        got, got_buf = cf(*args), BUF.clone()
        BUF.zero_()
        ref = fn(*ref_args)
        for g, r in zip(got if isinstance(got, tuple) else (got,),
                        ref if isinstance(ref, tuple) else (ref,)):
            same(g, r, rtol=1e-6)
        for a, r in zip(args, ref_args):
            same(a, r, rtol=1e-6)
        same(got_buf, BUF, rtol=1e-6)
        if name == "returns_input":
            assert got is args[0]
    assert len(cf._entries) == 1


def test_writeback_bumps_version_so_saved_tensor_checks_fire():
    w = data(4).requires_grad_()
    x = data(4, seed=1)
    y = (w * x).sum()  # saves x for backward
    compile(lambda t: t.mul_(2), fullgraph=True)(x)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_inplace_on_non_leaf_input_keeps_autograd_history(backend):
    def f(t):
        t[1:].mul_(t[:-1].detach() + 2)
        return t.sum(0)

    grads = []
    for g in (compile(f, backend=backend, fullgraph=True), f):
        a = data(3, 4).requires_grad_()
        t = a * 1
        out = g(t)
        (out * data(4, seed=2)).sum().backward()
        grads.append((out, t, a.grad))
    for x, y in zip(*grads):
        same(x, y)


def test_inplace_on_leaf_requiring_grad_raises_as_eager():
    x = data(3).requires_grad_()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        compile(lambda t: t.add_(1))(x)


def test_batchnorm_buffers_written_back_with_version_bump():
    ember.manual_seed(0)
    bn = nn.BatchNorm1d(5)
    cbn = compile(bn, fullgraph=True)
    ref = nn.BatchNorm1d(5)
    v = bn.running_mean._version
    for s in range(3):
        x = data(8, 5, seed=s)
        same(cbn(x), ref(x))
    for a, b in zip(bn.state_dict().values(), ref.state_dict().values()):
        same(a, b)
    assert bn.running_mean._version > v


# ---------------------------------------------------------------------- passes alone
def test_passes_each_runnable_alone():
    from ember.compiler import capture, passes
    from ember.compiler.graph import interpret

    def calls(g, name):
        return [n for n in g.nodes if n.kind == "call" and n.target.name == name]

    x = data(4, 4)
    # functionalize: mutate nodes become dataflow plus a write-back of the input
    g, _ = capture.trace(_views_of_input, (x,), {})
    assert any(n.kind == "mutate" for n in g.nodes)
    f = passes.functionalize(g)
    f.verify()
    assert not any(n.kind == "mutate" for n in f.nodes) and f.writebacks == [(0, 1)]
    out = interpret(f)(x.clone())
    ref = x.clone()
    same(out[0], _views_of_input(ref))
    same(out[1], ref)
    # decompose: training batch norm's hidden buffer update becomes explicit in-place ops
    bn = nn.BatchNorm1d(4)
    g, _ = capture.trace(bn, (x,), {})
    d = passes.decompose(g)
    d.verify()
    stats = [n for n in calls(d, "native_batch_norm")]
    assert stats and all(n.args[3] is None for n in stats)
    # written: num_batches_tracked, running_mean, running_var
    assert len({n.args[0].target.shape for n in d.nodes if n.kind == "mutate"}) == 2
    assert len({id(n.args[0]) for n in d.nodes if n.kind == "mutate"}) == 3
    # constant_fold: an input-independent chain becomes one lifted constant
    g, _ = capture.trace(lambda t: t + ember.ones(4, 4).tril().cumsum(0) * 2, (x,), {})
    c = passes.constant_fold(g)
    c.verify()
    assert len(c.inputs) == 2 and not calls(c, "tril") and not calls(c, "cumsum")
    same(interpret(c)(x, *c.lifted_tensors())[0], x + ember.ones(4, 4).tril().cumsum(0) * 2)


def test_saved_input_modified_in_place_later_fails_backward_as_eager():
    """A tensor the compiled forward saved, written by the caller afterwards, fails
    backward with eager's message."""
    def f(x, w):
        return (x * w).sum()

    for g in (compile(f, fullgraph=True), f):
        x, w = data(4), data(4, seed=1).requires_grad_()
        y = g(x, w)
        x.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()


def test_input_read_then_written_inside_keeps_its_old_value_for_backward():
    """Inside the compiled function the write to ``x`` is functional: the backward uses the
    value ``x`` had when it was read (eager would raise instead of computing it)."""
    def f(x, w):
        y = (x * w).sum()
        x.mul_(2)
        return y

    x, w = data(4), data(4, seed=1).requires_grad_()
    old = x.clone()
    compile(f, fullgraph=True)(x, w).backward()
    same(w.grad, old)
    same(x, old * 2)


def test_reshape_copy_is_not_an_alias():
    """``reshape`` of a transposed value copies in eager: writing the copy leaves the
    original alone; ``reshape`` of a contiguous value is a view: the write shows."""
    def f(x):
        y = x.t().reshape(-1)
        y.add_(100)
        z = x.reshape(-1)
        z[:2].mul_(-1)
        return y, x

    x, ref = data(3, 4), data(3, 4)
    got, want = compile(f, fullgraph=True)(x), f(ref)
    for g, w in zip(got + (x,), want + (ref,)):
        same(g, w)


def test_reading_a_buffer_written_in_the_region_breaks_the_graph():
    """BatchNorm(momentum=None) reads ``float(num_batches_tracked)`` right after adding 1 to
    it: a value the trace does not have, so that call runs eagerly (never a stale constant)."""
    mods = []
    for _ in range(2):
        ember.manual_seed(0)
        mods.append(nn.BatchNorm1d(3, momentum=None))
        mods[-1](data(5, 3, seed=9))  # one eager step first: the counter is not 0
    run = compile(mods[0])
    for s in range(3):
        same(run(data(5, 3, seed=s)), mods[1](data(5, 3, seed=s)))
    for a, b in zip(mods[0].state_dict().values(), mods[1].state_dict().values()):
        same(a, b)
    assert counters["graph_breaks"] == 1
