"""Every pointwise op lowers from its own definition: for each op tagged "pointwise" in the op
table, compiling ``op(x, ...).exp()`` gives exactly one generated kernel (no eager step), and
the compiled values equal eager ember's: bitwise where every primitive the definition uses is
exact or correctly rounded (both sides then compute the same IEEE operations in the same
order), else within the primitives' ulp bounds. The ops that cannot lower are listed in
``UNLOWERABLE`` with the reason; the test fails when one of them starts lowering (or when an
op appears that neither lowers nor is listed).

Also: the new definitions on edge values (NaN, +-inf, +-0, the kinks) against torch, through
eager ember and through the compiler.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from compile_util import fresh_compiler  # noqa: F401  (autouse)

import ember
from ember.backends.xp_ops import _Recorder
from ember.codegen.prims import CORRECTLY_ROUNDED, PRIMS
from ember.compiler import reset
from ember.ops.registry import OPS

pytestmark = pytest.mark.skipif(
    __import__("ember.codegen.c.runtime", fromlist=["x"]).find_c_compiler() is None,
    reason="no C compiler")

POINTWISE = sorted(n for n, d in OPS.items() if d.name == n and "pointwise" in d.tags)

# op -> why it does not lower (each a whole op; dtype-specific gaps are in INT_EAGER)
UNLOWERABLE = {
    "erfinv": "a library special function (Library), no composition of primitives",
    "lgamma": "a library special function (Library)",
    "digamma": "a library special function (Library)",
    "polygamma": "a library special function of digamma's family",
    "mvlgamma": "a sum of lgamma terms (Library)",
    "complex": "a complex result: the loop IR has no complex types",
    "polar": "a complex result: the loop IR has no complex types",
    "conj": "returns its (real) input itself, an alias, not a computation",
    "positive": "a view of its input, not a computation",
    "fmod": "no primitive for C's fmod (a - trunc(a / b) b is not exact)",
    "remainder": "no fmod / floor-division primitive",
    "floor_divide": "no floor-division primitive (integer division included)",
    "bitwise_left_shift": "no shift primitive",
    "bitwise_right_shift": "no shift primitive",
}
# (op, dtype kind) -> why that dtype runs eagerly though the op lowers
INT_EAGER = {
    "pow": "integer powers are repeated products, no composition of the primitives",
    "float_power": None,  # integer operands are cast to float64: lowers
}


def _sample(dt, seed):
    a = np.random.default_rng(seed).standard_normal((3, 5)) * 2
    t = ember.tensor(a.astype(np.float32))
    return t.to(dt) if dt.is_floating_point else (t * 3).to(dt)


def _unit(x):  # inside (-1, 1) for floats
    return x.tanh() * 0.9 if x.is_floating_point() else x


def _pos(x):  # positive
    return x.abs() + (0.25 if x.is_floating_point() else 1)


F = ember.nn.functional
# op -> ``call(x, y)`` on two samples (default: the op on x alone); every tensor the op reads
# comes from x and y through pointwise ops, so the whole call is one kernel
CALLS = {
    "acosh": lambda x, y: ember.acosh(x.abs() + 1), "acos": lambda x, y: ember.acos(_unit(x)),
    "asin": lambda x, y: ember.asin(_unit(x)), "atanh": lambda x, y: ember.atanh(_unit(x)),
    "log": lambda x, y: ember.log(_pos(x)), "log2": lambda x, y: ember.log2(_pos(x)),
    "log10": lambda x, y: ember.log10(_pos(x)), "sqrt": lambda x, y: ember.sqrt(_pos(x)),
    "rsqrt": lambda x, y: ember.rsqrt(_pos(x)), "log1p": lambda x, y: ember.log1p(_pos(x)),
    "add": lambda x, y: ember.add(x, y, alpha=3), "sub": lambda x, y: ember.sub(x, 2, alpha=2),
    "mul": lambda x, y: ember.mul(x, y), "div": lambda x, y: ember.div(x, _pos(y)),
    "true_divide": lambda x, y: ember.true_divide(x, 3),
    "atan2": lambda x, y: ember.atan2(x, y), "hypot": lambda x, y: ember.hypot(x, y),
    "copysign": lambda x, y: ember.copysign(x, -1.5), "xlogy": lambda x, y: ember.xlogy(x, _pos(y)),
    "addcdiv": lambda x, y: ember.addcdiv(x, y, _pos(x), value=0.5),
    "addcmul": lambda x, y: ember.addcmul(x, x, y, value=2),
    "lerp": lambda x, y: ember.lerp(x, y, 0.3),
    "clamp": lambda x, y: ember.clamp(x, -1, 1), "clamp_min": lambda x, y: ember.clamp_min(x, y),
    "clamp_max": lambda x, y: ember.clamp_max(x, 1),
    "where": lambda x, y: ember.where(x > 0, x, y),
    "maximum": lambda x, y: ember.maximum(x, y), "minimum": lambda x, y: ember.minimum(x, y),
    "fmax": lambda x, y: ember.fmax(x, y), "fmin": lambda x, y: ember.fmin(x, y),
    "pow": lambda x, y: ember.pow(x.abs() if x.is_floating_point() else x, 3),
    "float_power": lambda x, y: ember.float_power(x, 2),
    "logaddexp": lambda x, y: ember.logaddexp(x, y),
    "logaddexp2": lambda x, y: ember.logaddexp2(x, y),
    "isclose": lambda x, y: ember.isclose(x, x * 1.000001 + y * 1e-7),
    "eq": lambda x, y: ember.eq(x, y), "ne": lambda x, y: ember.ne(x, 1),
    "lt": lambda x, y: ember.lt(x, y), "le": lambda x, y: ember.le(x, 0),
    "gt": lambda x, y: ember.gt(x, y), "ge": lambda x, y: ember.ge(x, 0),
    "logical_and": lambda x, y: ember.logical_and(x, y > 0),
    "logical_or": lambda x, y: ember.logical_or(x, y),
    "logical_xor": lambda x, y: ember.logical_xor(x, y > 0),
    "bitwise_and": lambda x, y: ember.bitwise_and(x, y),
    "bitwise_or": lambda x, y: ember.bitwise_or(x, 6),
    "bitwise_xor": lambda x, y: ember.bitwise_xor(x, y),
    "gelu": lambda x, y: F.gelu(x), "gelu_tanh": lambda x, y: F.gelu(x, approximate="tanh"),
    "gelu_backward": lambda x, y: OPS["gelu_backward"](y, x),
    "gelu_backward_tanh": lambda x, y: OPS["gelu_backward"](y, x, "tanh"),
    "elu": lambda x, y: F.elu(x, 0.7), "logit": lambda x, y: ember.logit(x, 0.05),
    "softplus": lambda x, y: F.softplus(x, 2.0, 3.0),
    "leaky_relu": lambda x, y: F.leaky_relu(x, 0.1),
    "hardtanh": lambda x, y: F.hardtanh(x, -0.5, 1.5),
    "threshold": lambda x, y: F.threshold(x, 0.1, 20),
    "threshold_backward": lambda x, y: OPS["threshold_backward"](y, x, 0.1),
    "hardshrink": lambda x, y: F.hardshrink(x, 0.7),
    "softshrink": lambda x, y: F.softshrink(x, 0.7),
    "round": lambda x, y: ember.round(x * 3, decimals=1) if x.is_floating_point() else
    ember.round(x),
    "nan_to_num": lambda x, y: ember.nan_to_num(x / ember.round(y), posinf=5.0)
    if x.is_floating_point() else ember.nan_to_num(x),
}
# the cases: every pointwise op, plus the variants of an op whose call picks another
# definition (the table name before the first "_" that is not part of it)
VARIANTS = {"gelu_tanh": "gelu", "gelu_backward_tanh": "gelu_backward"}
CASES = POINTWISE + sorted(VARIANTS)
INTEGER = ember.int32


def _uses(name: str) -> set:
    """The primitives the op's definitions call (recorded on stand-ins; a definition that
    branches on its values' dtypes records nothing)."""
    pd = OPS[name].pointwise_defn
    out = set()
    for ct in (ember.float32, ember.int32):
        args = {p: object() for p in OPS[name].params}
        args.update({k: v for k, v in OPS[name].defaults.items()})
        try:
            chosen = pd.select(args, ct, ct)
        except Exception:  # noqa: BLE001  (a select that reads its arguments' dtypes)
            chosen = None
        if chosen is None:
            continue
        rec = _Recorder()
        try:
            chosen[0](rec, *chosen[1])
        except Exception:  # noqa: BLE001
            return set(PRIMS)  # unknown: not bitwise
        out |= {c[0] for c in rec.calls}
    return out


def _ulp_bound(name: str) -> float:
    """The sum of the ulp bounds of the primitives the op uses (0: exact or correctly rounded
    everywhere, so compiled and eager run the same IEEE operations)."""
    return sum(PRIMS[p].ulp for p in _uses(name) if PRIMS[p].ulp > CORRECTLY_ROUNDED)


def _plan(cf):
    return cf._entries[-1].run.plan


@pytest.mark.parametrize("case", CASES)
def test_pointwise_op_lowers_to_one_kernel(case):
    name = VARIANTS.get(case, case)
    if name in UNLOWERABLE:
        assert OPS[name].pointwise_defn is None, f"{name} lowers now: drop it from UNLOWERABLE"
        return
    assert OPS[name].pointwise_defn is not None, f"{name}: a pointwise op without a definition"
    call = CALLS.get(case, lambda x, y: OPS[name](x))
    bound = _ulp_bound(name)
    ran = []
    for dt in (ember.float32, ember.float16, INTEGER):
        x, y = _sample(dt, 1), _sample(dt, 2)
        try:
            want_op = call(x, y)
        except (RuntimeError, NotImplementedError, TypeError):
            continue  # a dtype the op refuses (bitwise ops refuse floats)
        ran.append(dt)
        reset()
        cf = ember.compile(lambda a, b: call(a, b).exp())
        got = cf(x, y)
        plan = _plan(cf)
        steps = [s.kind for s in plan.steps]
        if dt is INTEGER and name in INT_EAGER and INT_EAGER[name]:
            assert "eager" in steps, f"{name} lowers on integers now: drop it from INT_EAGER"
            continue
        assert steps == ["kernel"], (case, dt, steps, plan.fusion_log)
        want = want_op.exp()
        _check(case, dt, got, want, want_op, bound)
        # the op alone, bitwise where its primitives are all exact or correctly rounded
        reset()
        alone = ember.compile(lambda a, b: call(a, b))(x, y)
        if bound == 0 and dt is not ember.float16:
            np.testing.assert_array_equal(_bits(alone), _bits(want_op), err_msg=f"{case} {dt}")
        else:
            _check(case, dt, alone, want_op, want_op, bound)
    assert ran, f"{case}: no sample dtype ran"


def _bits(t):
    a = t.numpy()
    return a.view(np.uint8 if a.dtype == np.bool_ else f"u{a.dtype.itemsize}") \
        if a.dtype.kind == "f" else a


def _check(case, dt, got, want, inner, bound):
    """``got`` against eager ``want``: the exp on top of the op contributes 2 x 4 ulp (each side
    within 4 of exact); the op's own error, ``bound`` ulp of ``inner`` on each side, moves
    exp by that much relatively; half outputs may round one ulp apart."""
    g, w = got.double().numpy(), want.double().numpy()
    with np.errstate(invalid="ignore"):  # inf - inf: the NaN test below decides those
        _check_values(case, dt, g, w, inner, bound)


def _check_values(case, dt, g, w, inner, bound):
    i = np.abs(inner.double().numpy())
    eps = np.finfo(np.float32).eps
    tol = 8 * eps + 2 * bound * eps * (1 + i) + (2.0 ** -10 if dt is ember.float16 else 0)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    near = np.abs(g - w) <= tol * np.abs(w) + 1e-30
    assert (same | near).all(), (case, dt, g[~(same | near)], w[~(same | near)])


# ---------------------------------------------------------------------- edge values
EDGES = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 3.0, -3.0, 20.0,
         -20.0, 1e-30, -1e-30, 0.7, -0.7, 100.0, -100.0, 1e30, -1e30]
# the definitions this change wrote, with torch's function
NEW = {
    "gelu": (lambda m, x: m.nn.functional.gelu(x)),
    "gelu_tanh": (lambda m, x: m.nn.functional.gelu(x, approximate="tanh")),
    "silu": (lambda m, x: m.nn.functional.silu(x)),
    "mish": (lambda m, x: m.nn.functional.mish(x)),
    "elu": (lambda m, x: m.nn.functional.elu(x, 0.7)),
    "selu": (lambda m, x: m.nn.functional.selu(x)),
    "celu": (lambda m, x: m.nn.functional.celu(x, 1.3)),
    "softplus": (lambda m, x: m.nn.functional.softplus(x, 2.0, 3.0)),
    "logsigmoid": (lambda m, x: m.nn.functional.logsigmoid(x)),
    "leaky_relu": (lambda m, x: m.nn.functional.leaky_relu(x, 0.1)),
    "relu": (lambda m, x: m.relu(x)),
    "hardtanh": (lambda m, x: m.nn.functional.hardtanh(x, -0.5, 1.5)),
    "hardsigmoid": (lambda m, x: m.nn.functional.hardsigmoid(x)),
    "hardswish": (lambda m, x: m.nn.functional.hardswish(x)),
    "hardshrink": (lambda m, x: m.nn.functional.hardshrink(x, 0.5)),
    "softshrink": (lambda m, x: m.nn.functional.softshrink(x, 0.5)),
    "threshold": (lambda m, x: m.nn.functional.threshold(x, 0.5, -2.0)),
    "round": (lambda m, x: m.round(x)),
    "round_1": (lambda m, x: m.round(x, decimals=1)),
    "logit": (lambda m, x: m.logit(x, 0.1)),
    "nan_to_num": (lambda m, x: m.nan_to_num(x)),
    "angle": (lambda m, x: m.angle(x)),
    "isinf": (lambda m, x: m.isinf(x)), "isnan": (lambda m, x: m.isnan(x)),
    "isfinite": (lambda m, x: m.isfinite(x)), "isposinf": (lambda m, x: m.isposinf(x)),
    "isneginf": (lambda m, x: m.isneginf(x)), "signbit": (lambda m, x: m.signbit(x)),
    "logical_not": (lambda m, x: m.logical_not(x)),
    "addcmul": (lambda m, x: m.addcmul(x, x, m.flip(x, [0]), value=0.5)),
    "addcdiv": (lambda m, x: m.addcdiv(x, x, m.flip(x, [0]), value=0.5)),
    "lerp": (lambda m, x: m.lerp(x, m.flip(x, [0]), 0.3)),
    "logaddexp": (lambda m, x: m.logaddexp(x, m.flip(x, [0]))),
    "fmax": (lambda m, x: m.fmax(x, m.flip(x, [0]))),
    "isclose": (lambda m, x: m.isclose(x, m.flip(x, [0]), equal_nan=True)),
    "gelu_backward": (lambda m, x: _gelu_grad(m, x, "none")),
    "gelu_backward_tanh": (lambda m, x: _gelu_grad(m, x, "tanh")),
}


def _exact_gelu(case):
    """The exact value of a GELU case at a finite float (mpmath, 40 digits): torch's float64
    GELU underflows to 0 below about -20 (1 + erf cancels) where ember's does not."""
    import mpmath as mp
    mp.mp.dps = 40
    k, c = mp.sqrt(2 / mp.pi), mp.mpf(0.044715)

    def tanh_form(x):  # 1 + tanh u = 2 / (1 + exp(-2u)), without 1 + t's cancellation
        p = 2 / (1 + mp.exp(-2 * k * (x + c * x ** 3)))
        return p, 0.5 * x * p

    def fn(x):
        x = mp.mpf(x)
        if case == "gelu":
            return x * mp.ncdf(x)
        if case == "gelu_tanh":
            return tanh_form(x)[1]
        if case == "gelu_backward":
            return 0.75 * (mp.ncdf(x) + x * mp.npdf(x))
        p, _ = tanh_form(x)  # 1 - t^2 = (1 + t)(1 - t) = p (2 - p)
        return 0.75 * (0.5 * p + 0.5 * x * p * (2 - p) * k * (1 + 3 * c * x * x))
    return fn


def _gelu_grad(m, x, approximate):
    g = m.ones_like(x) * 0.75
    if m is torch:
        return torch.ops.aten.gelu_backward(g, x, approximate=approximate)
    return OPS["gelu_backward"](g, x, approximate)


def _edges(lib, dt):
    a = np.array(EDGES, np.float64)
    grid = np.stack([a, np.roll(a, 3)])  # (2, n): pairs of edge values for binary ops
    if lib is torch:
        return torch.tensor(grid).to(getattr(torch, dt))
    return ember.tensor(grid).to(getattr(ember, dt))


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(NEW))
def test_new_definitions_on_edge_values(case, dt):
    """Against torch in ``dt``, or torch in float64 rounded to ``dt`` (torch's float32 GELU
    loses digits below zero that ember's keeps, and its float32 tanh-GELU derivative is NaN
    where x^3 overflows)."""
    fn = NEW[case]
    wants = [fn(torch, _edges(torch, dt)).double().numpy(),
             fn(torch, _edges(torch, "float64")).to(getattr(torch, dt)).double().numpy()]
    if case.startswith("gelu"):
        exact = _exact_gelu(case)
        xs = _edges(ember, "float64").numpy().astype(dt)
        wants.append(np.array([float(exact(float(v))) if np.isfinite(v) else np.nan
                               for v in xs.reshape(-1)]).astype(dt).reshape(xs.shape))
    eager = fn(ember, _edges(ember, dt))
    reset()
    compiled = ember.compile(lambda x: fn(ember, x))(_edges(ember, dt))
    for label, got in (("eager", eager), ("compiled", compiled)):
        g = got.double().numpy()
        ok = np.zeros(g.shape, bool)
        for want in wants:
            # values within a few ulp of torch's; the special ones exactly, signed zeros too
            same = (g == want) & (np.signbit(g) == np.signbit(want)) | \
                (np.isnan(g) & np.isnan(want))
            with np.errstate(invalid="ignore"):  # (inf - inf: "same" decides those)
                close = np.isfinite(want) & (want != 0) & \
                    (np.abs(g - want) <= 4e-6 * np.abs(want) + 1e-37)
            ok |= same | close
        assert ok.all(), (case, dt, label, g[~ok], wants[0][~ok], wants[1][~ok],
                          _edges(ember, "float64").numpy()[~ok])
