"""ember's Triton reduction kernel (backends/cuda/reduction_kernels.py, wrappers reductions.py)
through Triton's interpreter on CPU, against PyTorch on CPU: sum, prod, mean, amax, amin,
max / min (full and with indices), argmax, argmin, var, std, var_mean, std_mean over rows,
columns, several dims, everything, in every float dtype (sums and products also of integers
and bool); NaN, inf and ties; non-contiguous inputs, with and without a copy; each in one
tile and (with ``reductions.TILE`` made small) in many tiles and split between programs (the
two-launch path). Then through ember's ops with the CPU backend's "kernel" overrides swapped
for these wrappers: values, dtypes, gradients, PyTorch's errors for what they decline, and
half inputs reaching the kernel unwidened. Last, the kernel compiles for sm_90.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import ember
from triton_util import INTERPRETED, compile_for_sm90, cpu_overrides
from ember.backends import cpu
from ember.backends.cuda import reduction_plans as P, reductions as R
from ember.ops.registry import OPS

torch = pytest.importorskip("torch")

pytestmark = INTERPRETED

FLOATS = ["float32", "float64", "float16", "bfloat16"]
DIMS = [((7,), None), ((3, 5), 1), ((3, 5), -2), ((2, 3, 4), (0, 2)), ((2, 3, 4), (1, 2)),
        ((2, 3, 4), (0, 1)), ((4, 300), 0), ((4, 300), -1), ((), None), ((2, 3, 4), ())]
ONE_DIM = [((7,), 0), ((3, 5), 1), ((3, 5), -2), ((2, 3, 4), 1), ((4, 300), 0), ((4, 300), 1),
           ((), 0), ((), -1)]


@pytest.fixture
def split(monkeypatch):
    """16-element tiles of at most 4 columns, and programs that split n (the partials' second
    launch) with the small shapes below."""
    monkeypatch.setattr(P, "TILE", 16)
    monkeypatch.setattr(P, "COLUMNS", 4)
    monkeypatch.setattr(P, "_PLANS", {})  # none of the full-size tiles' plans


def data(shape, dtype, seed=0, scale=3.0):
    """Values exact in ``dtype`` (float64 numpy), as a numpy array of ``dtype``."""
    a = np.random.default_rng(seed).standard_normal(shape) * scale
    if dtype in ("bool", "uint8", "int8", "int16", "int32", "int64"):
        a = np.round(a) if dtype != "bool" else a > 0
        if dtype == "uint8":
            a = np.abs(a)
    return torch.tensor(a).to(getattr(torch, dtype)).numpy() if dtype != "bfloat16" else \
        torch.tensor(a).to(torch.bfloat16).float().numpy().astype(ember.bfloat16.np)


def tt(a):
    """The torch tensor of a numpy array (bfloat16 through float32)."""
    if a.dtype == ember.bfloat16.np:
        return torch.tensor(a.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(a, order="C"))


TOL = {"float64": 1e-12, "float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def close(got, want, dtype=None, scale=1.0):
    """A numpy result against a torch one: dtype, shape, values (sums: relative to the
    largest)."""
    name = str(want.dtype).split(".")[-1]
    assert got.dtype == getattr(ember, "bool_" if name == "bool" else name).np, (got.dtype, name)
    assert got.shape == tuple(want.shape)
    w = want.double().numpy()
    if name in ("float16", "bfloat16", "float32", "float64"):
        t = TOL[dtype or name] * scale
        atol = t * max(1.0, float(np.nanmax(np.abs(w), initial=0)))
        np.testing.assert_allclose(got.astype(np.float64), w, rtol=t, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, w)


def _dims(dim):
    return list(dim) if isinstance(dim, tuple) else dim


# ---------------------------------------------------------------------- wrappers
@pytest.mark.parametrize("case", range(len(DIMS)))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_sum_mean_amax_amin_match_torch(dtype, case):
    (shape, dim), keepdim = DIMS[case], case % 2 == 1
    if case % 3 == 2:
        dtype = {"float32": "float64", "bfloat16": "float16"}[dtype]
    a = data(shape, dtype)
    t = tt(a)
    tdim = _dims(dim) if dim is not None else list(range(len(shape)))
    close(R.OVERRIDES["sum"](a, dim, keepdim), t.sum(tdim, keepdim=keepdim), dtype, 4)
    close(R.OVERRIDES["mean"](a, dim, keepdim), t.mean(tdim, keepdim=keepdim), dtype, 4)
    close(R.OVERRIDES["amax"](a, () if dim is None else dim, keepdim),
          t.amax(tdim, keepdim=keepdim))
    close(R.OVERRIDES["amin"](a, () if dim is None else dim, keepdim),
          t.amin(tdim, keepdim=keepdim))


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8", "bool", "float16"])
@pytest.mark.parametrize("shape,dim", [((3, 5), 1), ((4, 300), 0), ((2, 3, 4), (0, 2)),
                                       ((), None)])
def test_integer_and_bool_sums_are_int64(dtype, shape, dim):
    a = data(shape, dtype)
    t = tt(a)
    tdim = _dims(dim) if dim is not None else list(range(len(shape)))
    close(R.OVERRIDES["sum"](a, dim), t.sum(tdim), dtype if dtype == "float16" else None, 4)
    for out in (ember.float32, ember.int32, ember.float64):
        want = t.sum(tdim, dtype=getattr(torch, str(out).split(".")[-1]))
        close(R.OVERRIDES["sum"](a, dim, dtype=out), want, scale=4)
    if dtype not in ("uint8", "bool", "float16"):
        close(R.OVERRIDES["mean"](a, dim, dtype=ember.float64), t.mean(tdim, dtype=torch.float64))


@pytest.mark.parametrize("shape,size", [((4, 6), (6,)), ((2, 3, 4), (3, 1)), ((5, 3), (1, 3)),
                                        ((2, 3), ())])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_sum_to_size_matches_torch(shape, size, dtype):
    a = data(shape, dtype)
    close(R.OVERRIDES["sum_to_size"](a, size), tt(a).sum_to_size(size), dtype
          if dtype != "int32" else None, 4)
    assert R.OVERRIDES["sum_to_size"](a, shape) is None  # nothing to sum: the impl's copy
    assert R.OVERRIDES["sum_to_size"](a, (7,)) is None  # not expandable: the impl's error


def test_sum_accumulates_halves_in_float32():
    """4096 float16 ones plus 1/2048 each: float16 accumulation would stop at 2048."""
    a = np.full(4096, 1.0, np.float16)
    assert float(R.OVERRIDES["sum"](a, None)) == 4096.0
    b = np.full((5000, 2), 1.0, ember.bfloat16.np)
    assert R.OVERRIDES["sum"](b, 0).astype(np.float32).tolist() == [4992.0, 4992.0]
    assert float(R.OVERRIDES["mean"](a, None)) == 1.0


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bfloat16"])
@pytest.mark.parametrize("shape,dim", [((3, 5), 1), ((3, 5), 0), ((2, 3, 4), None)])
def test_prod_matches_torch(dtype, shape, dim):
    a = data(shape, dtype, scale=1.2)
    t = tt(a)
    got = R.OVERRIDES["prod"](a, dim)
    close(got, t.prod() if dim is None else t.prod(dim), None if "int" in dtype else dtype, 4)
    if dim is not None:
        close(R.OVERRIDES["prod"](a, dim, True), t.prod(dim, keepdim=True),
              None if "int" in dtype else dtype, 4)


@pytest.mark.parametrize("case", range(len(ONE_DIM)))
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_max_min_dim_and_arg_match_torch(dtype, case):
    (shape, dim), keepdim = ONE_DIM[case], case % 2 == 0
    if case % 3 == 1:
        dtype = {"float32": "bfloat16", "int32": "uint8"}[dtype]
    elif case % 3 == 2:
        dtype = {"float32": "float64", "int32": "int64"}[dtype]
    a = data(shape, dtype, scale=1.0 if "int" in dtype else 3.0)  # integers: many ties
    t = tt(a)
    for name in ("max", "min"):
        v, i = R.OVERRIDES[name](a, dim, keepdim)
        want = getattr(t, name)(dim, keepdim=keepdim)
        close(v, want.values)
        close(i, want.indices)
        close(R.OVERRIDES["arg" + name](a, dim, keepdim), getattr(t, "arg" + name)(dim, keepdim))
        close(R.OVERRIDES[name](a), getattr(t, name)())
        close(R.OVERRIDES["arg" + name](a), getattr(t, "arg" + name)())
        close(R.OVERRIDES["arg" + name](a, None, True),
              getattr(t, "arg" + name)(None, keepdim=True))


def test_nan_wins_first_index_and_ties():
    """NaN is the max and the min (its first index); equal values give the first index;
    +-inf order as numbers; sums and means of NaN / inf as PyTorch's."""
    nan, inf = float("nan"), float("inf")
    rows = [[1.0, nan, 3.0, nan, 3.0], [2.0, 2.0, -inf, 2.0, -inf], [-inf] * 5, [inf] * 5,
            [0.0, -0.0, 0.0, 5.0, 5.0], [nan] * 5, [1.0, 2.0, inf, -inf, 0.0]]
    for dtype in ("float32", "bfloat16", "float64"):
        a = np.array(rows, np.float64).astype(getattr(ember, dtype).np)
        t = tt(a)
        for dim in (0, 1):
            for name in ("max", "min"):
                v, i = R.OVERRIDES[name](a, dim)
                want = getattr(t, name)(dim)
                close(v, want.values)
                close(i, want.indices)
                close(R.OVERRIDES["arg" + name](a, dim), getattr(t, "arg" + name)(dim))
                close(R.OVERRIDES["a" + name](a, dim), getattr(t, "a" + name)(dim))
            close(R.OVERRIDES["sum"](a, dim), t.sum(dim))
            close(R.OVERRIDES["mean"](a, dim), t.mean(dim))
        close(R.OVERRIDES["argmax"](a), t.argmax())
        close(R.OVERRIDES["argmin"](a.T), t.T.argmin())
        close(R.OVERRIDES["max"](a), t.max())


VAR_DIMS = DIMS[:-1] + [((2, 1, 5), 1), ((3, 5), ())]


@pytest.mark.parametrize("case", range(len(VAR_DIMS)))
def test_var_std_match_torch(case):
    shape, dim = VAR_DIMS[case]
    dtype, correction = FLOATS[case % 4], [1, 0, 2.5][case % 3]
    a = data(shape, dtype)
    t = tt(a)
    tdim = _dims(dim) if dim is not None else None
    n = int(np.prod([shape[d] for d in (range(len(shape)) if not dim else
                                         np.atleast_1d(dim))]))
    if n - correction <= 0:  # the impl's case: it warns
        assert R.OVERRIDES["var"](a, dim, correction=correction) is None
        return
    for keepdim in (False, True):
        close(R.OVERRIDES["var"](a, dim, keepdim=keepdim, correction=correction),
              t.var(tdim, keepdim=keepdim, correction=correction), dtype, 4)
        close(R.OVERRIDES["std"](a, dim, keepdim=keepdim, correction=correction),
              t.std(tdim, keepdim=keepdim, correction=correction), dtype, 4)
        v, m = R.OVERRIDES["std_mean"](a, dim, keepdim=keepdim, correction=correction)
        ws, wm = torch.std_mean(t, tdim, keepdim=keepdim, correction=correction)
        close(v, ws, dtype, 4)
        close(m, wm, dtype, 4)
    v, m = R.OVERRIDES["var_mean"](a, dim, False)  # the legacy unbiased=False
    wv, wm = torch.var_mean(t, tdim, unbiased=False)
    close(v, wv, dtype, 4)
    if n > 1:
        close(R.OVERRIDES["var"](a, True), t.var(True), dtype, 4)  # var(input, unbiased)


def test_var_is_two_pass_accurate():
    """A large offset with a small spread: the one-pass sum of squares would cancel."""
    a = (1e4 + np.random.default_rng(0).standard_normal(3000)).astype(np.float32)
    close(R.OVERRIDES["var"](a), tt(a).var(), "float32", 20)


SPLIT_CASES = [((300,), None, "float32"), ((100, 6), 0, "bfloat16"), ((3, 90), 1, "float64"),
               ((50, 3, 2), (0, 2), "float16"), ((70, 5), 0, "int32")]


@pytest.mark.parametrize("shape,dim,dtype", SPLIT_CASES)
def test_split_between_programs(split, shape, dim, dtype):
    """Tiles smaller than a row and n split between programs: the partials (with their
    indices) reduced by a second launch, NaN among them."""
    a = data(shape, dtype, scale=1.0 if dtype == "int32" else 3.0)
    if dtype != "int32":
        a.reshape(-1)[[40, 77]] = np.nan
    t = tt(a)
    tdim = _dims(dim) if dim is not None else list(range(len(shape)))
    before = R.STATS["launches"]
    close(R.OVERRIDES["sum"](a, dim), t.sum(tdim), dtype, 8)
    assert R.STATS["launches"] - before == 2  # partials, then their sum
    close(R.OVERRIDES["amax"](a, () if dim is None else dim), t.amax(tdim))
    if not isinstance(dim, tuple):
        v, i = R.OVERRIDES["min"](a, 0 if dim is None else dim)
        want = t.min(0 if dim is None else dim)
        close(v, want.values)
        close(i, want.indices)
        close(R.OVERRIDES["argmax"](a, dim), t.argmax(dim))
    if dtype != "int32":
        b = data(shape, dtype, seed=1)
        tb = tt(b)
        close(R.OVERRIDES["mean"](b, dim), tb.mean(tdim), dtype, 8)
        close(R.OVERRIDES["std"](b, dim), tb.std(tdim), dtype, 8)


LAYOUTS = {
    "transposed": lambda a: a.transpose(2, 0, 1),
    "strided": lambda a: a[:, ::2, 1:],
    "flipped": lambda a: a[::-1],
    "expanded": lambda a: np.broadcast_to(a[:1], a.shape),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dim", [0, 1, 2, (0, 2), (1, 2), None])
def test_non_contiguous_inputs(layout, dim):
    a = LAYOUTS[layout](data((3, 6, 5), "float32"))
    t = tt(a)
    tdim = _dims(dim) if dim is not None else list(range(3))
    close(R.OVERRIDES["sum"](a, dim), t.sum(tdim), scale=4)
    close(R.OVERRIDES["amax"](a, dim if dim is not None else ()), t.amax(tdim))
    close(R.OVERRIDES["var"](a, dim), t.var(tdim), scale=4)
    if not isinstance(dim, tuple):
        close(R.OVERRIDES["argmax"](a, dim), t.argmax(dim))
        if dim is not None:
            close(R.OVERRIDES["min"](a, dim)[1], t.min(dim).indices)


def test_layouts_view_or_copy():
    """A run of reduced dims merges in place; kept dims that merge only when moved in front
    are a view too; the rest is copied."""
    shape, st = (2, 3, 4), (12, 4, 1)
    assert P.layout(shape, st, (1, 2)) == (None, (2, 12, 1), (12, 1, 0))
    assert P.layout(shape, st, (0,)) == (None, (1, 2, 12), (0, 12, 1))
    # transposed to (3, 2, 4); reduce dims 0 and 2 -> kept dim 1, stride 12
    perm, sizes, _ = P.layout((3, 2, 4), (4, 12, 1), (0, 2))
    assert perm is None and sizes == (2, 12, 1)
    assert P.layout(shape, st, (0, 2)) == ((1, 0, 2), (3, 8, 1), (8, 1, 0))
    assert P.layout((), (), ()) == (None, (1, 1, 1), (0, 0, 0))


def test_split_plan_for_columns_and_full_sums(monkeypatch):
    """The bias-gradient shape and a full sum are split between programs on a large GPU."""
    monkeypatch.setattr(P, "_want", lambda: 528)
    bi, bn, iblocks, splits, chunk = P.tiles(1, 16384, 768, 1, False)
    assert (bi, bn, iblocks) == (256, 16, 3) and splits > 100 and chunk * splits >= 16384
    # their partials: one launch, narrower column blocks
    assert P.tiles(1, splits, 768, 1, False, split=False)[:4] == (32, 128, 24, 1)
    bi, bn, iblocks, splits, chunk = P.tiles(1, 1 << 24, 1, 0, False)
    assert (bi, bn, iblocks) == (1, 4096, 1) and 256 <= splits <= 528
    assert P.tiles(16384, 768, 1, 0, False)[3] == 1  # many rows: no split
    assert P.tiles(1, 768, 16384, 768, False)[:4] == (4, 1024, 4096, 1)  # 4 rows a program


def test_zero_dim_and_declined_cases():
    s = np.array(2.5, np.float32)
    assert R.OVERRIDES["sum"](s, None).shape == () and float(R.OVERRIDES["sum"](s, 0)) == 2.5
    v, i = R.OVERRIDES["max"](s, 0)
    assert v.shape == i.shape == () and float(v) == 2.5 and int(i) == 0
    assert R.OVERRIDES["argmax"](s, None, True).shape == ()
    assert R.OVERRIDES["sum"](np.array(3, np.int32), None).dtype == np.int64
    e = np.zeros((0, 3), np.float32)
    for name in ("sum", "mean", "amax", "max", "argmax", "var", "prod"):
        assert R.OVERRIDES[name](e) is None  # empty: the impl (its errors, its identities)
    x = np.ones((2, 3), np.float32)
    assert R.OVERRIDES["sum"](x, (0, 0)) is None  # repeated dim
    assert R.OVERRIDES["sum"](x, 2) is None  # out of range
    assert R.OVERRIDES["sum"](x, 1.0) is None
    assert R.OVERRIDES["sum"](x.astype(np.complex64)) is None
    assert R.OVERRIDES["amax"](x > 0) is None  # extrema of bool
    assert R.OVERRIDES["argmax"](x > 0) is None
    assert R.OVERRIDES["mean"](x.astype(np.int32)) is None  # no dtype: the impl's error
    assert R.OVERRIDES["max"](x, None, True) is None
    assert R.OVERRIDES["max"](x, (0,)) is None
    assert R.OVERRIDES["var"](x, 0, correction=2) is None  # dof <= 0: the impl warns
    assert R.OVERRIDES["var"](x, 0, True, correction=1) is None  # both


# ---------------------------------------------------------------------- through ember's ops
@pytest.fixture
def cpu_reduce():
    """The CPU backend's "kernel" overrides of the reductions swapped for the Triton ones
    (under the interpreter, on numpy arrays); the previous ones put back after."""
    with cpu_overrides(R.OVERRIDES, R.STATS) as launched:
        yield launched


def pair(shape, dtype, seed=0):
    a = data(shape, dtype, seed)
    e = ember.tensor(a.astype(np.float64)).to(getattr(ember, dtype))
    t = tt(a)
    if dtype in FLOATS:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def close_t(e, t, scale=1.0):
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    close(e.detach().numpy() if e.dtype != ember.bfloat16 else
          e.detach().float().numpy().astype(ember.bfloat16.np), t.detach(), scale=scale)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_ember_ops_values_and_grads_through_the_kernels(cpu_reduce, dtype):
    e, t = pair((4, 6), dtype)
    cases = [
        lambda m, x: x.sum(1), lambda m, x: x.sum(), lambda m, x: x.mean((0, 1), keepdim=True),
        lambda m, x: x.amax(0), lambda m, x: x.amin(-1, keepdim=True),
        lambda m, x: x.max(1).values, lambda m, x: x.min(0)[0], lambda m, x: x.max(),
        lambda m, x: x.var(1), lambda m, x: x.std(0, correction=0), lambda m, x: x.prod(1),
        lambda m, x: m.var_mean(x, 1)[0] + m.var_mean(x, 1)[1],
        lambda m, x: m.std_mean(x, None)[0] * 2 + m.std_mean(x, None)[1],
    ]
    for f in cases:
        ye, yt = f(ember, e), f(torch, t)
        close_t(ye, yt, scale=4)
        ge, = ember.autograd.grad(ye.sum(), e)
        gt, = torch.autograd.grad(yt.sum(), t)
        close_t(ge, gt, scale=8)
    for name in ("max", "min"):
        ve, ie = getattr(e, name)(1)
        vt, it = getattr(t, name)(1)
        assert ie.dtype == ember.int64 and ie.tolist() == it.tolist()
        assert getattr(e, "arg" + name)().item() == getattr(t, "arg" + name)().item()
    assert cpu_reduce() >= 20


def test_broadcast_gradients_sum_through_the_kernels(cpu_reduce):
    """A bias added over rows: its gradient is autograd's sum_to_size over the rows."""
    e, t = pair((5, 6), "float32")
    be, bt = pair((6,), "float32", seed=1)
    before = cpu_reduce()
    (ge,) = ember.autograd.grad((e.detach() * be).sum(), be)
    (gt,) = torch.autograd.grad((t.detach() * bt).sum(), bt)
    close_t(ge, gt, scale=4)
    assert cpu_reduce() >= before + 2


def test_ember_int_sums_errors_and_empties_through_the_kernels(cpu_reduce):
    x = ember.tensor([[1, 2, 3], [4, 5, 6]], dtype=ember.int32)
    assert x.sum().dtype == ember.int64 and x.sum().item() == 21
    assert x.sum(0, dtype=ember.float32).tolist() == [5.0, 7.0, 9.0]
    assert (x > 2).sum(1).tolist() == [1, 3] and (x > 2).sum().dtype == ember.int64
    assert x.prod(1).tolist() == [6, 120] and x.mean(1, dtype=ember.float64).tolist() == [2, 5]
    assert cpu_reduce() >= 5
    e, te = ember.zeros(0, 3), torch.zeros(0, 3)
    assert e.sum(0).tolist() == te.sum(0).tolist() and e.sum().item() == 0.0
    assert e.prod(0).tolist() == [1.0] * 3 and np.isnan(e.mean().item())
    for f in (lambda m, v: v.amax(), lambda m, v: v.amax(0), lambda m, v: v.max(0),
              lambda m, v: v.argmax(), lambda m, v: v.max()):
        with pytest.raises((RuntimeError, IndexError)) as want:
            f(torch, te)
        with pytest.raises(type(want.value), match=re.escape(str(want.value)[:30])):
            f(ember, e)
    assert e.amax(1).shape == (0,)
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        x.mean()
    with pytest.raises(IndexError):
        x.sum(2)
    with pytest.raises(RuntimeError, match="argmax"):
        (x > 0).argmax()


def test_half_inputs_reach_the_kernel_unwidened(cpu_reduce):
    """amax / max / argmax / var of bfloat16 (ops that widen halves for their impl): the
    kernel gets the bfloat16 array itself, and the results keep bfloat16."""
    seen = []
    spy = OPS["amax"]._kernel_overrides[cpu.BACKEND]

    def watch(a, *args, **kwargs):
        seen.append(a.dtype)
        return spy(a, *args, **kwargs)
    watch.widens_half = True
    OPS["amax"]._kernel_overrides[cpu.BACKEND] = watch
    x = ember.tensor([[1.0, 3.0], [2.0, -1.0]], dtype=ember.bfloat16)
    assert x.amax(1).dtype == ember.bfloat16 and x.amax(1).tolist() == [3.0, 2.0]
    assert seen == [ember.bfloat16.np] * 2
    assert x.max(0).values.dtype == ember.bfloat16 and x.var().dtype == ember.bfloat16


def test_cpu_backend_overrides_restored():
    for name in R.OVERRIDES:
        assert OPS[name]._kernel_overrides.get(cpu.BACKEND) is not R.OVERRIDES[name]


# ---------------------------------------------------------------------- compiled for the GPU
COMPILE = r"""
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ember.backends.cuda import reduction_kernels as K

def build(types, **consts):
    fn = K.reduce
    sig = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    triton.compile(ASTSource(fn, signature=sig, constexprs=consts),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})

cases = [("bf16", tl.bfloat16, tl.float32, "fp32"), ("fp64", tl.float64, tl.float64, "fp32"),
         ("i32", tl.int32, tl.int64, "i64"), ("i1", tl.int1, tl.int64, "i32")]
for op in range(7):
    for i, (src, pre, acc, ident) in enumerate(cases):
        if op == 6 and acc == tl.int64 or (op in (2, 3, 4, 5) and src == "i1"):
            continue
        bi, bn, idx = [(1, 4096, False), (256, 16, True)][(op + i) % 2]
        t = {"x_ptr": "*" + src, "xi_ptr": "*i64", "mean_ptr": "*fp32", "y_ptr": "*" + src,
             "yi_ptr": "*i64", "ident": ident, "div_hi": "fp32", "div_lo": "fp32",
             "xso": "i64"}
        fin = 2 if op == 6 else 1 if acc != tl.int64 and op == 0 else 0
        build(t, OP=op, PRE=pre, ACC=acc, IDX_IN=idx, FIN=fin, BLOCK_I=bi, BLOCK_N=bn)
print("ok")
"""


def test_kernel_compiles_for_sm90():
    """The kernel (each op, a sample of dtypes and tiles) through Triton's compiler to a
    Hopper cubin."""
    compile_for_sm90(COMPILE)
