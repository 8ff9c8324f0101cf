"""ember.compile's generated kernels against eager ember: reductions over any dims, multi-
reduction rows kernels (softmax, var, LayerNorm, RMSNorm), consumers joining a reduction's
kernel, column-mode reductions, bias epilogues after library matmuls, dead-buffer reuse.

Most cases run many functions in one compiled graph (one C build per layout and dtype) so the
file stays fast; fusion is checked by counting the kernels of single-case plans."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from compile_util import fresh_compiler, rand  # noqa: F401 (autouse fixture)
from oracle import TOL, assert_same, to_torch

import ember
from ember import nn
from ember.compiler import compile, fusion
from ember.compiler.fusion import Plan, RowsKernel

F = ember.nn.functional


def same(out, ref, scale=1.0):
    """Compiled ``out`` equals eager ``ref`` (tensors or tuples, dtype's tolerance)."""
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    assert len(outs) == len(refs)
    for i, (o, r) in enumerate(zip(outs, refs)):
        rtol, atol = TOL.get(r.dtype.name, (0, 0))
        assert_same(o, to_torch(r), rtol=rtol * scale, atol=atol * scale, path=f"out[{i}]")


def plan(cf):
    return cf._entries[-1].run.plan


def kinds(cf) -> list[str]:
    return [k.kind for k in plan(cf).kernels]


# ---------------------------------------------------------------------- reductions table
# name -> (fn(m, x, w, b) over x of shape (6, 5, 12), w and b of shape (12,);
#          kernels expected for a contiguous float32 x, or None where not asserted)
CASES = {
    "sum_last": (lambda m, x, w, b: (x * 2 + 1).exp().sum(-1), 1),
    "sum_first": (lambda m, x, w, b: x.sum(0), 1),
    "sum_middle_keepdim": (lambda m, x, w, b: x.abs().sum(1, keepdim=True), 1),
    "sum_outer_dims": (lambda m, x, w, b: x.sum((0, 2)), 2),  # not one stride: copy first
    "sum_all": (lambda m, x, w, b: (x * x).sum(), 1),
    "sum_all_list": (lambda m, x, w, b: x.sum([0, 1, 2], keepdim=True), 1),
    "mean_two_dims": (lambda m, x, w, b: m.mean(m.tanh(x), (1, 2), keepdim=True), 1),
    "mean_all": (lambda m, x, w, b: x.mean(), 1),
    "prod_dim": (lambda m, x, w, b: (x * 0.5 + 1).prod(1), 1),
    "prod_all": (lambda m, x, w, b: (x * 0.1 + 1).prod(), 1),
    "amax_first": (lambda m, x, w, b: m.amax(x, 0), 1),
    "amin_dims": (lambda m, x, w, b: m.amin(x - 1, (1, 2)), 1),
    "max_values": (lambda m, x, w, b: x.max(1)[0] * 2, 1),
    "min_values_keepdim": (lambda m, x, w, b: x.min(dim=-1, keepdim=True).values, 1),
    "max_all": (lambda m, x, w, b: x.max(), 1),
    "max_with_indices": (lambda m, x, w, b: x.max(2), None),
    "var_last": (lambda m, x, w, b: x.var(-1), 1),
    "var_first_biased": (lambda m, x, w, b: x.var(0, correction=0), 1),
    "std_dims_keepdim": (lambda m, x, w, b: x.std((1, 2), keepdim=True), 1),
    "var_unbiased_flag": (lambda m, x, w, b: x.var(1, False), 1),
    "var_mean_last": (lambda m, x, w, b: m.var_mean(x, -1), 1),
    "std_mean_first": (lambda m, x, w, b: m.std_mean(x, 0, correction=2), 1),
    "var_all": (lambda m, x, w, b: m.var(x * 3), 1),
    "softmax_last": (lambda m, x, w, b: m.softmax(x * 3, -1), 1),
    "softmax_first": (lambda m, x, w, b: m.softmax(x, 0), 1),
    "softmax_middle": (lambda m, x, w, b: m.softmax(x, 1), 1),
    "log_softmax_last": (lambda m, x, w, b: F.log_softmax(x, dim=-1), 1),
    "log_softmax_first": (lambda m, x, w, b: F.log_softmax(x, dim=0), 1),
    "layer_norm": (lambda m, x, w, b: F.layer_norm(x, (12,), w, b), 1),
    "layer_norm_plain": (lambda m, x, w, b: F.layer_norm(x, (12,)), 1),
    "layer_norm_two_dims": (lambda m, x, w, b: F.layer_norm(x, (5, 12)), 1),
    "rms_norm": (lambda m, x, w, b: F.rms_norm(x, (12,), w), 1),
    "rms_norm_eps": (lambda m, x, w, b: F.rms_norm(x, (12,), None, 1e-3), 1),
    "centre": (lambda m, x, w, b: x - x.mean(-1, keepdim=True), 1),
    "standardise_middle": (lambda m, x, w, b: (x - x.mean(1, keepdim=True))
                           / x.std(1, keepdim=True), 1),
    "hand_written_var": (lambda m, x, w, b: ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1), 1),
    "sibling_reductions": (lambda m, x, w, b: (x.sum(-1), x.amax(-1), x.var(-1)), 1),
    "hand_written_softmax": (lambda m, x, w, b: (x - x.amax(-1, keepdim=True)).exp()
                             / (x - x.amax(-1, keepdim=True)).exp().sum(-1, keepdim=True),
                             None),
    "reduction_epilogue": (lambda m, x, w, b: x.sum(-1).sqrt() * 2 + x.amax(-1), 1),
    "int_sum_dtype": (lambda m, x, w, b: (x * 4).to(m.int64).sum(0), None),
    "mean_dtype_arg": (lambda m, x, w, b: x.mean(-1, dtype=m.float64), 1),
    "bool_sum": (lambda m, x, w, b: (x > 0).sum(1), None),
    "sum_to_size": (lambda m, x, w, b: (x * 2).sum_to_size(1, 5, 12), 1),
    "sign_and_not": (lambda m, x, w, b: (m.sign(x - 0.5) * 2, m.logical_not(x > 0.5)), None),
}

LAYOUTS = {  # name -> x of shape (6, 5, 12) laid out that way
    "contiguous": lambda dt: rand(6, 5, 12, dtype=dt),
    "permuted": lambda dt: rand(12, 5, 6, dtype=dt).permute(2, 1, 0),
    "transposed": lambda dt: rand(6, 12, 5, dtype=dt).transpose(1, 2),
    "broadcast": lambda dt: rand(1, 5, 12, dtype=dt).expand(6, 5, 12),
}


def _all_cases(m, x, w, b):
    return tuple(CASES[name][0](m, x, w, b) for name in CASES)


# every layout in float32 and float64; float16 (computed in float32) on two of them
COMBOS = [(lay, dt) for lay in LAYOUTS for dt in (ember.float32, ember.float64)] + \
    [("contiguous", ember.float16), ("permuted", ember.float16)]


@pytest.mark.parametrize("layout,dtype", COMBOS)
def test_reduction_table_matches_eager(layout, dtype):
    x = LAYOUTS[layout](dtype)
    w, b = rand(12, dtype=dtype, seed=1), rand(12, dtype=dtype, seed=2)
    out = compile(lambda *a: _all_cases(ember, *a))(x, w, b)
    ref = _all_cases(ember, x, w, b)
    for name, o, r in zip(CASES, out, ref):
        # half results round once where eager rounds per op: allow a few half ulps
        scale = 4 if dtype is ember.float16 else 1
        try:
            same(o, r, scale)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


def plan_only(fn, *inputs) -> Plan:
    """The kernel plan ember.compile makes for ``fn`` (no C build: the table test above runs
    the generated code)."""
    plans = []

    def backend(gm, example_inputs):
        plans.append(fusion.plan(gm.graph, [t.stride() for t in example_inputs]))
        return gm
    compile(fn, backend=backend)(*inputs)
    return plans[-1]


@pytest.mark.parametrize("name", [n for n, (_, k) in CASES.items() if k is not None])
def test_reduction_fuses_into_expected_kernels(name):
    fn, expected = CASES[name]
    p = plan_only(lambda *a: fn(ember, *a), rand(6, 5, 12), rand(12, seed=1), rand(12, seed=2))
    assert len(p.kernels) == expected, [k.name for k in p.kernels]
    assert isinstance(p.kernels[-1], RowsKernel), "the reduction is generated, not run eagerly"
    assert not [s for s in p.steps if s.kind == "eager"]


def test_max_with_indices_read_is_one_generated_phase():
    # values and indices in one pass (tests/test_compile_reductions.py covers the cases)
    p = plan_only(lambda x: x.max(2), rand(6, 5, 12))
    assert not [s for s in p.steps if s.kind == "eager"]
    assert [ph[0] for k in p.kernels for ph in k.phases] == ["argmax"]


# ---------------------------------------------------------------------- edge values
EDGES = {  # name -> (x, fn)
    "zero_dim": (rand(), lambda m, x: (x.sum(), m.softmax(x, 0), x.amax(), x.var(correction=0),
                                        x.prod(), F.log_softmax(x, -1))),
    "empty_rows": (rand(0, 4), lambda m, x: (x.sum(-1), x.sum(0), x.mean(0), x.prod(0),
                                             m.softmax(x, -1))),
    "single_element_rows": (rand(5, 1), lambda m, x: (x.sum(-1), m.softmax(x, -1), x.var(-1),
                                                      x.var(0), F.layer_norm(x, (1,)))),
    "nan_inf": (ember.tensor([[1.0, float("nan"), 2.0], [float("inf"), 0.0, -1.0],
                              [float("-inf"), float("-inf"), float("-inf")], [3.0, 3.0, 3.0]]),
                lambda m, x: (x.sum(-1), x.amax(-1), x.amin(0), x.max(1)[0], m.softmax(x, -1),
                              F.log_softmax(x, 0), x.var(-1), F.layer_norm(x, (3,)),
                              x.prod(-1), m.softmax(x, 0))),
    "large_values": (rand(3, 40) * 1e4, lambda m, x: (m.softmax(x, -1), F.log_softmax(x, -1),
                                                      x.var(-1), F.layer_norm(x, (40,)))),
    "ints": (ember.arange(60).reshape(5, 12) - 20,
             lambda m, x: (x.sum(0), x.sum(), x.prod(-1), x.amax(0), x.amin(-1),
                           x.max(1)[0], (x * x).sum(1, keepdim=True))),
}


@pytest.mark.parametrize("name", list(EDGES))
def test_edge_values(name):
    x, fn = EDGES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = compile(lambda a: fn(ember, a))(x)
        ref = fn(ember, x)
    same(out, ref)


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16])
def test_half_norms_and_softmax(dtype):
    x, w = rand(9, 40, dtype=dtype), rand(40, dtype=dtype, seed=1)
    fn = (lambda m, a, w: (m.softmax(a, -1), F.layer_norm(a, (40,), w, w), a.var(0),
                           a.sum(-1), a.amax(0)))
    out = compile(lambda a, w: fn(ember, a, w))(x, w)
    ref = fn(ember, x, w)
    for o, r in zip(out, ref):
        assert o.dtype is r.dtype
    same(out, ref, scale=4)


# ---------------------------------------------------------------------- code shape
def test_softmax_is_one_kernel_with_exp_kept_in_the_output():
    cf = compile(lambda x: ember.softmax(x, -1))
    x = rand(64, 300)
    same(cf(x), ember.softmax(x, -1))
    (k,) = plan(cf).kernels
    assert len(k.phases) == 2 and len(k.row_outs) == 1 and not k.scalar_outs
    row_pass = cf._entries[-1].run.c_source.split("kept =")[1]
    assert "em_expf(" not in row_pass, "exp is computed in the sum pass only"


@pytest.mark.parametrize("shape", [(64, 300), (3, 5, 64), (2, 9000)])
def test_second_pass_prefetches_the_next_row_of_short_rows(shape):
    """Softmax's sum pass reads the row from L1 and prefetches the next row's lines for the
    max pass; the last row prefetches itself (no address past the input). Rows longer than
    PREFETCH_ROW_MAX (9000) do not prefetch. Results equal eager's either way."""
    cf = compile(lambda x: ember.softmax(x, -1))
    x = rand(*shape)
    same(cf(x), ember.softmax(x, -1))
    src = cf._entries[-1].run.c_source
    body = src.split("softmax kernel")[1]
    hints = [ln.strip() for ln in body.splitlines() if "EM_PREFETCH(" in ln]
    if shape[-1] > 8192:
        assert not hints
        return
    rows, n = shape[-2], shape[-1]
    last = f"i{len(shape) - 2}"
    outer = f"i0 * {rows * n} + " if len(shape) == 3 else ""
    # the sum pass steps 16 float32 lanes, one 64-byte line of the row
    assert hints == [f"EM_PREFETCH(&in0[{outer}({last} + 1 < {rows} ? {last} + 1 : {last}) * {n}"
                     f" + r]);"]
    sum_pass = body.split("red1_lane[l] = 0;")[1].split("kept =")[0]
    assert all(h in sum_pass for h in hints), "the hints sit in the second (sum) pass"


def test_layer_norm_is_one_kernel_with_its_statistics():
    x, w, b = rand(8, 32), rand(32, seed=1), rand(32, seed=2)
    cf = compile(lambda a, w, b: ember.native_layer_norm(a, (32,), w, b, 1e-5)
                 if hasattr(ember, "native_layer_norm") else F.layer_norm(a, (32,), w, b))
    out = cf(x, w, b)
    (k,) = plan(cf).kernels
    assert k.kind == "native_layer_norm" and [p[0] for p in k.phases] == ["sum", "sum"]
    same(out, F.layer_norm(x, (32,), w, b) if not isinstance(out, tuple) else
         ember.native_layer_norm(x, (32,), w, b, 1e-5))


def test_column_reduction_reads_rows_contiguously():
    x = rand(300, 70)
    cf = compile(lambda a: (a.sum(0), a.var(0), ember.softmax(a, 0)))
    same(cf(x), (x.sum(0), x.var(0), ember.softmax(x, 0)))
    assert "j0 + jj" in cf._entries[-1].run.c_source


def test_unrelated_kernel_is_not_joined_across_a_later_buffer():
    # y's mean needs the first kernel's result: it must not be merged back before it exists
    def f(x):
        s = ember.softmax(x, -1)
        y = s.matmul(ember.ones(12, 12)) + x
        return y.mean(-1)
    x = rand(6, 12)
    cf = compile(f)
    same(cf(x), f(x))
    assert len([k for k in plan(cf).kernels if isinstance(k, RowsKernel)]) == 2


# ---------------------------------------------------------------------- training
TRAIN = {
    "layer_norm": lambda x, w, b: F.layer_norm(x, (12,), w, b).tanh().sum(),
    "softmax_ce": lambda x, w, b: (F.log_softmax(x * w, -1) * b).sum(),
    "var_std": lambda x, w, b: (x.var(0) * w).sum() + x.std(-1).sum(),
    "rms_norm": lambda x, w, b: (F.rms_norm(x, (12,), w) ** 2).mean(),
    "column_and_rows": lambda x, w, b: (ember.softmax(x, 0) * w).sum()
    + (x - x.mean(-1, keepdim=True)).abs().amax(),
}


EAGER_IN_TRAINING = {}  # ops a training case still runs eagerly


@pytest.mark.parametrize("name", list(TRAIN))
def test_backward_matches_eager(name):
    fn = TRAIN[name]

    def run(compiled):
        x, w, b = rand(8, 12), rand(12, seed=1), rand(12, seed=2)
        for t in (x, w, b):
            t.requires_grad_()
        f = compile(fn) if compiled else fn
        loss = f(x, w, b)
        loss.backward()
        return loss, [x.grad, w.grad, b.grad], f

    loss, grads, cf = run(True)
    ref_loss, ref_grads, _ = run(False)
    same(loss, ref_loss)
    for g, r in zip(grads, ref_grads):
        assert (g is None) == (r is None)
        if r is not None:
            same(g, r, scale=10)
    train = cf._entries[-1].run
    ks = train.forward.plan.kernels + train.backward.plan.kernels
    assert any(isinstance(k, RowsKernel) for k in ks)
    steps = train.forward.plan.steps + train.backward.plan.steps
    eager = sorted({s.node.target.name for s in steps if s.kind == "eager"})
    assert eager == EAGER_IN_TRAINING.get(name, []), eager


# ---------------------------------------------------------------------- epilogues, buffers
def _mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 8),
                         nn.ReLU()).eval()


def test_linear_bias_and_activation_are_one_kernel_after_the_matmul():
    """A float32 linear's bias fills the product's output (the gemm drivers, beta = 1); in
    half precision, which BLAS does not take, it is part of the activation's kernel."""
    model = _mlp()
    cm = compile(model)
    x = rand(5, 16)
    with ember.no_grad():
        same(cm(x), model(x))
    cg = cm._compiled_call._entries[-1].run
    names = [k.name for k in cg.plan.kernels]
    assert names == ["k0_gelu", "k1_relu"], names
    assert cg.wrapper_source.count("# linear: BLAS") == 2
    for step in (s for s in cg.plan.steps if s.kind == "eager"):
        assert len(step.inputs) == 3, step.node  # input, weight and bias
    half = compile(_mlp().to(ember.bfloat16))
    with ember.no_grad():
        half(x.to(ember.bfloat16))
    names = [k.name for k in half._compiled_call._entries[-1].run.plan.kernels]
    assert len(names) == 2 and "bias" in names[0] and "gelu" in names[0], names
    assert "relu" in names[1] and "bias" in names[1]


def test_dead_buffers_are_reused():
    def f(x):  # four same-shaped temporaries, each dead once the next exists
        a = (x * 2).exp()
        b = (a / a.sum(0)).tanh()
        c = (b - b.amax(0)).sigmoid()
        d = (c + c.sum(0)).sin()
        return d.sum(0) + d.mean(0)

    x = rand(16, 24)
    cf = compile(f)
    # sin's argument c + c.sum(0) (up to 16) is a 16-term sum, which the kernel and numpy
    # may add in other orders (an SSE-only numpy does): up to 16 * 16 * eps apart, so d by as
    # much, and d.sum(0) adds 16 of those errors (plus exp's and tanh's few ulp before it)
    eps = float(np.finfo(np.float32).eps)
    assert_same(cf(x), to_torch(f(x)), rtol=1e-5, atol=16 * (16 * 16 * eps))
    src = cf._entries[-1].run.wrapper_source
    assert src.count("dead buffer reused") == 2, src
    assert src.count("_empty((16, 24)") == 2


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_reused_buffer_results_stay_correct(dtype):
    # two rounds of same-shaped temporaries: the second round writes into the first's memory
    def f(x, y):
        t = (x @ y).relu() + 1
        u = (t * 2).exp()
        v = (u @ y).tanh() + 1
        return (v * 3).sin()

    x, y = rand(10, 10, dtype=dtype), rand(10, 10, dtype=dtype, seed=3)
    same(compile(f)(x, y), f(x, y))


def test_saved_pre_activation_and_activation_come_from_one_kernel():
    # training saves the bias add's result and the activation: both stored by one kernel
    def f(x, w, b):
        h = ember.matmul(x, w) + b
        return h, h.tanh() * 2

    x, w, b = rand(6, 8), rand(8, 5, seed=1), rand(5, seed=2)
    cf = compile(f)
    same(cf(x, w, b), f(x, w, b))
    (k,) = plan(cf).kernels
    assert len(k.outs) == 2 and "tanh" in k.name


def _many_kernels(x, w):
    """Several separate kernels (each reduction's consumer is a matmul, so nothing joins)."""
    outs = []
    for i in range(6):
        h = (x * (i + 1)).softmax(-1) @ w
        outs.append(F.layer_norm(h * (0.5 + i), (h.shape[-1],)))
    return tuple(outs)


def test_kernels_build_in_parallel_units_and_reuse_the_cache(monkeypatch, tmp_path):
    """A graph split into several translation units (one compiler process each, running at
    once) gives eager's results; a second compile of it loads every unit from the cache; a
    damaged cached unit is rebuilt."""
    from ember.codegen import cache
    from ember.compiler import inductor, reset

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_COMPILE_THREADS", "3")
    monkeypatch.setattr(inductor, "UNIT_MIN_CHARS", 1)
    x, w = rand(32, 48), rand(48, 48)
    ref = _many_kernels(x, w)
    before = dict(cache.STATS)
    cf = compile(_many_kernels)
    same(cf(x, w), ref, scale=10)
    run = cf._entries[-1].run
    assert run.units == 3 and len(run.plan.kernels) > 3
    assert cache.STATS["builds"] - before["builds"] == 3
    sos = sorted(p for p in tmp_path.rglob("*.so"))
    assert len(sos) == 3
    reset()
    before = dict(cache.STATS)
    same(compile(_many_kernels)(x, w), ref, scale=10)
    assert cache.STATS["hits"] - before["hits"] == 3
    assert cache.STATS["builds"] == before["builds"]
    bad = tmp_path / "bad"  # a damaged unit (a new file: the loaded one stays mapped)
    bad.write_bytes(b"not an object")
    bad.replace(sos[0])
    reset()
    before = dict(cache.STATS)
    same(compile(_many_kernels)(x, w), ref, scale=10)
    assert cache.STATS["builds"] - before["builds"] == 1
    assert cache.STATS["hits"] - before["hits"] == 2


def test_small_graph_builds_as_one_unit():
    cf = compile(lambda t: (t * 2).softmax(-1))
    x = rand(8, 16)
    same(cf(x), (x * 2).softmax(-1))
    assert cf._entries[-1].run.units == 1


def test_compile_error_in_one_unit_is_reported_after_all_finish(monkeypatch):
    from ember.codegen.c import runtime

    good = "int em_ok(void) { return 1; }\n"
    with pytest.raises(runtime.CompileError, match="failed on generated code"):
        runtime.build_many([good, "this is not C;\n", good + "/* other */\n"])
    a, b = runtime.build_many([good, good + "/* b */\n"])
    assert a.em_ok() == 1 and b.em_ok() == 1


ERF_POINTS = [0.0, -0.0, 1e-30, -1e-20, 1e-6, 0.3, 0.4758, -0.9999, 1.0, -1.0, 1.0001, 2.5,
              -3.7, 3.92, 4.0, 4.0001, -5.5, 30.0, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_erf_and_exact_gelu_kernels_match_eager(dtype):
    """The kernels' erf (a vectorizable polynomial in float32) against eager erf / GELU, with
    its branch points, signed zeros, infinities and NaN, forward and backward."""
    pts = ember.tensor(ERF_POINTS, dtype=dtype)
    dense = ember.linspace(-6, 6, 2001, dtype=dtype)

    def fn(a, b):
        return ember.erf(a), ember.erf(b), F.gelu(b), ember.erf(b * 0.37)

    out = compile(fn)(pts, dense)
    same(out, fn(pts, dense))
    assert math.copysign(1.0, out[0][1].item()) == -1.0  # erf(-0) is -0
    x = dense.clone().requires_grad_()
    compile(F.gelu)(x).pow(2).sum().backward()
    y = dense.clone().requires_grad_()
    F.gelu(y).pow(2).sum().backward()
    same(x.grad, y.grad)


EXP_POINTS = [0.0, -0.0, 1e-30, -1e-7, 0.5, -0.34657, 0.34658, 1.0, -5.88, 20.0, 88.0, 88.72,
              88.7228, 88.73, 89.0, 89.5, 1e4, 3e38, -87.3, -87.4, -100.0, -103.28, -103.97,
              -103.98, -104.0, -104.5, -1e4, -3e38, 1e-45, float("inf"), float("-inf"),
              float("nan")]


def test_exp_and_tanh_kernels_within_two_ulp():
    """The kernels' float32 exp (a vectorizable polynomial, the range settled by selects):
    overflow to inf, denormal results, underflow to 0, infinities and NaN as libm's, and every
    value within 2 ulp of exp rounded from float64; tanh, built on it, within 2 ulp too."""
    pts = np.array(EXP_POINTS, np.float32)
    rng = np.random.default_rng(0)
    dense = np.concatenate([pts, np.linspace(-106, 91, 200001, dtype=np.float32),
                            rng.integers(0, 2**32, 100000, dtype=np.uint32).view(np.float32)])
    x = ember.from_numpy(dense)
    with np.errstate(over="ignore", invalid="ignore"):  # NaN payloads, overflow to inf
        e, t = (o.numpy().astype(np.float64) for o in compile(lambda a: (a.exp(), a.tanh()))(x))
        refs = np.exp(dense.astype(np.float64)), np.tanh(dense.astype(np.float64))
        rounded_refs = [want.astype(np.float32).astype(np.float64) for want in refs]
    for got, want, rounded in zip((e, t), refs, rounded_refs):
        assert np.array_equal(np.isnan(got), np.isnan(rounded))
        assert np.array_equal(np.isinf(got), np.isinf(rounded))
        fin = np.isfinite(rounded)
        assert np.array_equal(got[np.isinf(got)], rounded[np.isinf(got)])
        ulp = np.spacing(np.abs(rounded[fin]).astype(np.float32)).astype(np.float64)
        err = np.abs(got[fin] - want[fin]) / ulp
        assert err.max() <= 2.0, (dense[fin][err.argmax()], err.max())
