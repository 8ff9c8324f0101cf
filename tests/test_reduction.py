"""Reductions, scans, sorting and searching against PyTorch (forward, backward, errors)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember
from oracle import assert_same, check, rand, raises_like, to_torch

NAN, INF = math.nan, math.inf
FLOATS = [ember.float32, ember.float64]
HALVES = [ember.float16, ember.bfloat16]
INTS = [ember.uint8, ember.int8, ember.int32, ember.int64]
SHAPE = (2, 3, 4)
DIMS = [None, 0, -1, (0, 2), (-1, 0)]
ONE_DIMS = [0, 1, -1]


def leaf(data, dtype=ember.float64, requires_grad=True):
    return ember.tensor(data, dtype=dtype, requires_grad=requires_grad)


def make(shape, dtype, noncontig=False, requires_grad=False, seed=0, **kw):
    """A random input. ``noncontig`` "permuted" gives a permuted view (reversed strides),
    "sliced" a view taking every other element of a wider last dimension."""
    if noncontig and len(shape) >= 2:
        if noncontig == "permuted":
            base = rand(*reversed(shape), dtype=dtype, seed=seed, **kw)
            x = base.permute(tuple(reversed(range(len(shape)))))
        else:
            x = rand(*shape, dtype=dtype, seed=seed, noncontig=True, **kw)
        assert not x.is_contiguous() and tuple(x.shape) == tuple(shape)
        if requires_grad:
            x = x.detach().requires_grad_()  # a leaf that is still a strided view
        return x
    return rand(*shape, dtype=dtype, seed=seed, requires_grad=requires_grad, **kw)


NONCONTIG = [False, "permuted", "sliced"]


# ---------------------------------------------------------------------- dim reductions
# name -> fn(m, x, dim, keepdim); dim None means every dimension
DIM_REDUCTIONS = {
    "sum": lambda m, x, d, k: m.sum(x, dim=d, keepdim=k),
    "nansum": lambda m, x, d, k: x.nansum(dim=d, keepdim=k),
    "mean": lambda m, x, d, k: m.mean(x, dim=d, keepdim=k),
    "nanmean": lambda m, x, d, k: x.nanmean(dim=d, keepdim=k),
    "amax": lambda m, x, d, k: m.amax(x, dim=() if d is None else d, keepdim=k),
    "amin": lambda m, x, d, k: x.amin(dim=() if d is None else d, keepdim=k),
    "var": lambda m, x, d, k: x.var(dim=d, keepdim=k),
    "std": lambda m, x, d, k: m.std(x, dim=d, keepdim=k),
    "var_correction0": lambda m, x, d, k: m.var(x, dim=d, correction=0, keepdim=k),
    "std_correction2.5": lambda m, x, d, k: x.std(dim=d, correction=2.5, keepdim=k),
    "std_legacy_unbiased": lambda m, x, d, k: x.std(d, False, k),
    "var_mean": lambda m, x, d, k: m.var_mean(x, dim=d, keepdim=k),
    "std_mean": lambda m, x, d, k: m.std_mean(x, dim=d, correction=0, keepdim=k),
    "norm": lambda m, x, d, k: x.norm(dim=d, keepdim=k),
    "norm_fro": lambda m, x, d, k: m.norm(x, "fro", d, k),
    "norm1": lambda m, x, d, k: x.norm(1, d, k),
    "norm3": lambda m, x, d, k: m.norm(x, 3, d, k),
    "norm0.5": lambda m, x, d, k: x.norm(0.5, d, k),
    "norm-2": lambda m, x, d, k: x.norm(-2, d, k),
    "norm0": lambda m, x, d, k: x.norm(0, d, k),
    "norm_inf": lambda m, x, d, k: x.norm(INF, d, k),
    "norm_-inf": lambda m, x, d, k: m.norm(x, -INF, d, k),
}


@pytest.mark.parametrize("noncontig", NONCONTIG)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", list(DIM_REDUCTIONS))
def test_dim_reductions(name, dtype, dim, keepdim, noncontig):
    x = make(SHAPE, dtype, noncontig, requires_grad=True)
    check(DIM_REDUCTIONS[name], None, x, dim, keepdim)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("name", list(DIM_REDUCTIONS))
def test_dim_reductions_half(name, dtype):
    x = make(SHAPE, dtype, low=0.5, high=2.0)
    check(DIM_REDUCTIONS[name], None, x, (0, 2), False, grad=False)


# integer and bool inputs: forward only (and the int64 accumulation rule)
INT_REDUCTIONS = {
    "sum": lambda m, x: (m.sum(x), x.sum(1), x.sum((0, 2), keepdim=True)),
    "sum_dtype": lambda m, x: m.sum(x, 0, dtype=m.float64),
    "nansum": lambda m, x: (x.nansum(), x.nansum(-1)),
    "prod": lambda m, x: (x.prod(), m.prod(x, 1, keepdim=True)),
    "prod_dtype": lambda m, x: x.prod(2, dtype=m.float32),
    "mean_dtype": lambda m, x: m.mean(x, 1, dtype=m.float64),
    "amax": lambda m, x: (x.amax(), x.amax((0, 1))),
    "amin": lambda m, x: (m.amin(x, -1, True),),
    "max": lambda m, x: (x.max(), x.max(1)),
    "min": lambda m, x: (m.min(x), m.min(x, 0, True)),
    "all": lambda m, x: (x.all(), x.all(1), m.all(x, (0, 2), keepdim=True), x.all(())),
    "any": lambda m, x: (x.any(), m.any(x, -1, True), x.any(())),
    "count_nonzero": lambda m, x: (x.count_nonzero(), m.count_nonzero(x, (0, 1)),
                                   x.count_nonzero(())),
}


@pytest.mark.parametrize("dtype", INTS + [ember.bool], ids=str)
@pytest.mark.parametrize("name", list(INT_REDUCTIONS))
def test_int_reductions(name, dtype):
    check(INT_REDUCTIONS[name], None, make(SHAPE, dtype), grad=False)


@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_int_arg_reductions(name, dtype):
    x = make(SHAPE, dtype)
    check(lambda m, x: (getattr(m, name)(x, 1), getattr(x, name)(), getattr(x, name)(-1, True)),
          None, x, grad=False)


# ---------------------------------------------------------------------- extrema with dim
@pytest.mark.parametrize("noncontig", NONCONTIG)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", ONE_DIMS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin", "median", "nanmedian",
                                  "mode", "kthvalue", "aminmax", "prod"])
def test_one_dim_reductions(name, dtype, dim, keepdim, noncontig):
    x = make(SHAPE, dtype, noncontig, requires_grad=True)
    fns = {
        "max": lambda m, x: m.max(x, dim, keepdim),
        "min": lambda m, x: x.min(dim, keepdim=keepdim),
        "argmax": lambda m, x: m.argmax(x, dim, keepdim),
        "argmin": lambda m, x: x.argmin(dim=dim, keepdim=keepdim),
        "median": lambda m, x: x.median(dim, keepdim),
        "nanmedian": lambda m, x: m.nanmedian(x, dim, keepdim=keepdim),
        "mode": lambda m, x: m.mode(x.round(), dim, keepdim),  # rounding makes repeats
        "kthvalue": lambda m, x: x.kthvalue(2, dim, keepdim),
        "aminmax": lambda m, x: m.aminmax(x, dim=dim, keepdim=keepdim),
        "prod": lambda m, x: x.prod(dim, keepdim),
    }
    check(fns[name], None, x)


@pytest.mark.parametrize("dtype", FLOATS + HALVES, ids=str)
def test_full_reductions(dtype):
    x = make(SHAPE, dtype, requires_grad=dtype in FLOATS)
    check(lambda m, x: (x.max(), m.min(x), x.argmax(), m.argmin(x), x.median(), x.nanmedian(),
                        m.aminmax(x), x.prod(), x.amax(), x.var()), None, x)


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_int_order_statistics(dtype):
    # small integers repeat: which of several equal elements median/kthvalue index is
    # unspecified, so only their values are compared (mode's index is the last occurrence)
    x = make(SHAPE, dtype)
    check(lambda m, x: (x.median(), x.median(1)[0], x.nanmedian(-1)[0], m.kthvalue(x, 3, 2)[0],
                        x.mode(1), m.aminmax(x), x.aminmax(dim=0)), None, x, grad=False)


def test_max_min_binary_form():
    x = make((3, 4), ember.float64, requires_grad=True)
    y = make((4,), ember.float64, requires_grad=True, seed=1)
    check(lambda m, x, y: (m.max(x, y), x.min(y), m.max(x, other=y), m.min(y, x)), None, x, y)


# ---------------------------------------------------------------------- documented ties
TIE_CASES = {
    "amax_split": (lambda m, x: x.amax(), [1.0, 3.0, 3.0, 2.0]),
    "amax_dim_split": (lambda m, x: m.amax(x, 1, True), [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]),
    "amin_split": (lambda m, x: m.amin(x, (0, 1)), [[1.0, 3.0], [1.0, 1.0]]),
    "max_full_split": (lambda m, x: x.max(), [[5.0, 1.0], [5.0, 5.0]]),
    "min_full_split": (lambda m, x: m.min(x), [0.0, 0.0, 1.0]),
    "aminmax_split": (lambda m, x: m.aminmax(x), [1.0, 3.0, 3.0, 1.0]),
    "aminmax_dim_split": (lambda m, x: x.aminmax(dim=1), [[1.0, 3.0, 3.0, 1.0]]),
    "median_full_split": (lambda m, x: x.median(), [1.0, 2.0, 2.0, 3.0]),
    "norm_inf_split": (lambda m, x: x.norm(INF), [-3.0, 3.0, 1.0]),
    "norm_-inf_split": (lambda m, x: x.norm(-INF), [-1.0, 3.0, 1.0]),
    "max_dim_first": (lambda m, x: x.max(1), [[1.0, 3.0, 3.0, 1.0], [2.0, 2.0, 0.0, 2.0]]),
    "min_dim_first": (lambda m, x: m.min(x, 0), [[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]),
    "argmax_first": (lambda m, x: (x.argmax(), x.argmax(0)), [[1.0, 3.0], [3.0, 3.0]]),
    "cummax_last": (lambda m, x: x.cummax(0), [1.0, 1.0, 0.0, 2.0, 2.0, 1.0]),
    "cummin_last": (lambda m, x: m.cummin(x, 0), [1.0, 1.0, 2.0, 0.0, 0.0, 3.0]),
    "sort_stable": (lambda m, x: m.sort(x, stable=True), [1.0, 0.0, 1.0, 0.0, 1.0]),
    "sort_stable_desc": (lambda m, x: x.sort(stable=True, dim=0, descending=True),
                         [1.0, 0.0, 1.0, 0.0, 1.0]),
    "mode_smallest_last": (lambda m, x: x.mode(), [2.0, 1.0, 1.0, 2.0, 3.0, 5.0, 5.0]),
    "mode_rows": (lambda m, x: x.mode(1), [[3.0, 1.0, 3.0, 1.0, 2.0], [1.0, 2.0, 2.0, 7.0, 7.0]]),
}


@pytest.mark.parametrize("name", list(TIE_CASES))
def test_documented_ties(name):
    fn, data = TIE_CASES[name]
    check(fn, None, leaf(data))


# ---------------------------------------------------------------------- prod and zeros
@pytest.mark.parametrize("data", [[2.0, 0.0, 3.0], [2.0, 0.0, 3.0, 0.0], [0.0], [1.5, -2.0, 4.0],
                                  [[0.0, 2.0, 3.0], [4.0, 0.0, 0.0]]], ids=str)
def test_prod_with_zeros(data):
    x = leaf(data)
    check(lambda m, x: x.prod(), None, x)
    check(lambda m, x: m.prod(x, -1, True), None, x)
    check_double(lambda m, x: x.prod(-1), x)


@pytest.mark.parametrize("data", [[2.0, 0.0, 3.0, 0.0, 4.0], [0.0, 2.0, 3.0], [1.5, -2.0, 0.5],
                                  [[0.0, 2.0, 3.0], [4.0, 5.0, 0.0]]], ids=str)
def test_cumprod_with_zeros(data):
    x = leaf(data)
    check(lambda m, x: x.cumprod(-1), None, x)
    check_double(lambda m, x: x.cumprod(-1), x)


def check_double(fn, x):
    """Second derivatives, as gradgradcheck does: differentiate ``grad(fn(x), x, gy) . v`` with
    respect to both ``x`` and the incoming gradient ``gy``."""
    rng = np.random.default_rng(1)
    gy_np = None
    res = []
    for m in (ember, torch):
        xm = x if m is ember else to_torch(x)
        y = fn(m, xm)
        if gy_np is None:
            gy_np = rng.standard_normal(tuple(y.shape))
        gy = m.tensor(gy_np, dtype=y.dtype, requires_grad=True)
        (gx,) = m.autograd.grad(y, xm, gy, create_graph=True)
        v = m.tensor(np.linspace(-1, 1, x.numel()).reshape(tuple(x.shape)), dtype=xm.dtype)
        res.append(m.autograd.grad((gx * v).sum(), (xm, gy), allow_unused=True))
    for k, (a, b) in enumerate(zip(*res)):
        if b is None:
            assert a is None or not np.any(a.detach().numpy()), f"grad[{k}]"
        elif a is None:
            assert not np.any(b.detach().numpy()), f"grad[{k}]: ember has none"
        else:
            assert_same(a, b, path=f"grad[{k}]")


DOUBLE = {
    "var": lambda m, x: x.var(1),
    "std": lambda m, x: m.std(x, 0),
    "norm": lambda m, x: x.norm(dim=1),
    "norm3": lambda m, x: x.norm(3),
    "amax": lambda m, x: x.amax(1),
    "max_dim": lambda m, x: x.max(0)[0],
    "mean": lambda m, x: x.mean(0),
    "nansum": lambda m, x: x.nansum(1),
    "cumsum": lambda m, x: x.cumsum(1),
    "logcumsumexp": lambda m, x: x.logcumsumexp(1),
    "sort": lambda m, x: m.sort(x, 1)[0],
    "topk": lambda m, x: x.topk(2)[0],
    "cummax": lambda m, x: x.cummax(1)[0],
    "median": lambda m, x: x.median(1)[0],
}


@pytest.mark.parametrize("name", list(DOUBLE))
def test_double_backward(name):
    check_double(DOUBLE[name], make((3, 4), ember.float64, requires_grad=True, seed=3))


# ---------------------------------------------------------------------- scans
SCANS = {
    "cumsum": lambda m, x, d: m.cumsum(x, d),
    "cumsum_method": lambda m, x, d: x.cumsum(dim=d),
    "cumsum_dtype": lambda m, x, d: x.cumsum(d, dtype=m.float64),
    "cumprod": lambda m, x, d: m.cumprod(x, d),
    "cummax": lambda m, x, d: m.cummax(x, d),
    "cummin": lambda m, x, d: x.cummin(d),
    "logcumsumexp": lambda m, x, d: x.logcumsumexp(d),
}


@pytest.mark.parametrize("noncontig", NONCONTIG)
@pytest.mark.parametrize("dim", ONE_DIMS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", list(SCANS))
def test_scans(name, dtype, dim, noncontig):
    check(SCANS[name], None, make(SHAPE, dtype, noncontig, requires_grad=True), dim)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("name", list(SCANS))
def test_scans_half(name, dtype):
    check(SCANS[name], None, make((3, 5), dtype, low=0.5, high=1.5), 1, grad=False)


@pytest.mark.parametrize("dtype", INTS + [ember.bool], ids=str)
@pytest.mark.parametrize("name", ["cumsum", "cumsum_dtype", "cumprod", "cummax", "cummin"])
def test_int_scans(name, dtype):
    check(SCANS[name], None, make((3, 5), dtype, low=-0.4, high=0.4), 1, grad=False)


def test_inplace_scans():
    x = make((3, 4), ember.float64)

    def fn(m, x):
        a, b = x.clone(), x.clone()
        assert a.cumsum_(1) is a and b.cumprod_(0) is b
        return a, b

    check(fn, None, x, grad=False)


def test_norm_nuclear():
    x = make((3, 4), ember.float64, requires_grad=True)
    check(lambda m, x: (x.norm("nuc"), m.norm(x, "nuc", keepdim=True)), None, x)


def test_bindings_match_torch():
    names = ["sum", "nansum", "mean", "nanmean", "prod", "max", "min", "amax", "amin", "aminmax",
             "argmax", "argmin", "var", "std", "var_mean", "std_mean", "norm", "all", "any",
             "count_nonzero", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "median",
             "nanmedian", "mode", "kthvalue", "topk", "sort", "argsort", "msort", "unique",
             "unique_consecutive", "bincount", "histc", "searchsorted", "bucketize", "cumsum_",
             "cumprod_"]
    for n in names:
        assert hasattr(ember.Tensor, n) == hasattr(torch.Tensor, n), n
        assert hasattr(ember, n) == hasattr(torch, n), n


def test_cumsum_dtype_wraps():
    x = ember.tensor([100, 100, 100], dtype=ember.int8)
    check(lambda m, x: x.cumsum(0, dtype=m.int8), None, x)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_scan_dtype_converts_the_elements_first(name, dtype):
    """dtype= converts before accumulating: floats truncate to the integer type, and a half
    result's running value starts from the half-rounded elements (accumulated in float32)."""
    x = ember.tensor((np.random.default_rng(5).standard_normal((3, 40)) * 3).astype(np.float32))
    check(lambda m, x: getattr(x, name)(1, dtype=getattr(m, dtype)), None, x)


def test_logcumsumexp_stable():
    x = leaf([[-1000.0, 0.0, 1000.0, 999.0], [5.0, -INF, 2.0, 700.0]])
    check(lambda m, x: x.logcumsumexp(1), None, x)


def test_complex_scans_and_reductions():
    x = ember.tensor(np.array([[1 + 1j, 2 - 1j, 0.5j], [-1 + 0j, 3 + 2j, 1 - 1j]]),
                     dtype=ember.complex128, requires_grad=True)
    check(lambda m, x: (x.sum(1), x.mean(), x.prod(1), x.cumsum(1), x.cumprod(1),
                        x.var(1), x.std(), x.norm(), x.norm(1, 1), x.logcumsumexp(1)), None, x)


# ---------------------------------------------------------------------- sorting
@pytest.mark.parametrize("noncontig", NONCONTIG)
@pytest.mark.parametrize("dim", ONE_DIMS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", ["sort", "sort_desc", "argsort", "argsort_desc", "topk",
                                  "topk_smallest", "topk_unsorted_values", "msort"])
def test_sorting(name, dtype, dim, noncontig):
    fns = {
        "sort": lambda m, x: m.sort(x, dim),
        "sort_desc": lambda m, x: x.sort(dim=dim, descending=True),
        "argsort": lambda m, x: m.argsort(x, dim),
        "argsort_desc": lambda m, x: x.argsort(dim, True),
        "topk": lambda m, x: x.topk(2, dim),
        "topk_smallest": lambda m, x: m.topk(x, 2, dim, largest=False),
        # unsorted order is unspecified: compare the sorted values
        "topk_unsorted_values": lambda m, x: x.topk(2, dim, sorted=False)[0].sort(dim)[0],
        "msort": lambda m, x: m.msort(x.transpose(0, dim)),
    }
    check(fns[name], None, make(SHAPE, dtype, noncontig, requires_grad=True))


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, 1])
def test_topk_few_of_many(dim, largest):
    # k much smaller than the dimension takes the partition path
    x = make((40, 60), ember.float64, requires_grad=True, seed=4)
    check(lambda m, x: x.topk(5, dim, largest), None, x)
    y = ember.tensor(np.where(np.arange(60) % 7 == 3, np.nan, np.linspace(-1, 1, 60)))
    check(lambda m, y: (y.topk(3, largest=largest)[0], m.topk(y, 12, 0, largest)[0]), None, y,
          grad=False)


@pytest.mark.parametrize("dtype", INTS + HALVES + [ember.bool], ids=str)
def test_sorting_other_dtypes(dtype):
    x = make((4, 6), dtype)
    fn = (lambda m, x: (x.sort(1), m.sort(x, stable=True, dim=0, descending=True),
                        x.argsort(dim=1, stable=True), m.msort(x)))
    if dtype in HALVES:
        x = make((4, 6), dtype, seed=5, low=-100, high=100)  # distinct values after rounding
    if dtype is not ember.bool:
        # which of several equal integers topk/kthvalue pick is unspecified: values only
        idx = dtype in HALVES
        fn2 = fn
        fn = (lambda m, x: fn2(m, x) + (x.topk(3)[idx], m.topk(x, 2, 0, False)[idx],
                                         x.kthvalue(2, 1)[idx]))
    check(fn, None, x, grad=False)


# ---------------------------------------------------------------------- NaN and inf
NAN_DATA = [[1.0, NAN, 3.0, -INF], [2.0, 0.5, INF, -1.0], [NAN, NAN, 0.0, 4.0]]
NAN_CASES = {
    "max": lambda m, x: (x.max(), m.max(x, 1), x.min(0)),
    "amax": lambda m, x: (x.amax(1), m.amin(x, 0)),
    "argmax": lambda m, x: (x.argmax(1), m.argmin(x, 1), x.argmax()),
    "sort": lambda m, x: (x.sort(1), m.sort(x, 1, descending=True), x.argsort(0)),
    # rows with one NaN: the order of tied NaNs in topk is unspecified
    "topk": lambda m, x: (x.topk(2, 1)[0], m.topk(x, 2, 1, largest=False),
                          x.transpose(0, 1).topk(2, 0)[0]),
    # which of two NaNs kthvalue(4) picks in the last row is unspecified: values only there
    "kthvalue": lambda m, x: (x.kthvalue(4, 1)[0], m.kthvalue(x, 2, 1), x.kthvalue(1, 0)),
    "median": lambda m, x: (x.median(), m.median(x, 1), x.median(0)),
    "nanmedian": lambda m, x: (x.nanmedian(), m.nanmedian(x, 1), x.nanmedian(0)),
    "nansum": lambda m, x: (x.nansum(), m.nansum(x, 1)),
    "nanmean": lambda m, x: (x.nanmean(1), x.nanmean(0)),
    "sums": lambda m, x: (x.sum(1), x.prod(0), m.mean(x, 1), x.var(1), x.norm(dim=1)),
    "cummax": lambda m, x: (x.cummax(1), m.cummin(x, 1)),
    "cumsum": lambda m, x: (x.cumsum(1), x.cumprod(1)),
    "logcumsumexp": lambda m, x: x.logcumsumexp(1),
    "aminmax": lambda m, x: m.aminmax(x, dim=1),
    "all": lambda m, x: (x.all(1), x.any(), x.count_nonzero(1)),
}


@pytest.mark.parametrize("name", list(NAN_CASES))
def test_nan_inf_forward(name):
    check(NAN_CASES[name], None, ember.tensor(NAN_DATA), grad=False)


NAN_GRAD = {  # gradients where torch's rule for NaN is defined
    "max_full": (lambda m, x: x.max(), [1.0, NAN, 3.0, NAN]),
    "amax_nan": (lambda m, x: x.amax(), [1.0, NAN, 3.0, NAN]),
    "max_dim": (lambda m, x: m.max(x, 1), [[1.0, NAN, 3.0, NAN], [0.0, 1.0, 2.0, 3.0]]),
    "median_full": (lambda m, x: x.median(), [1.0, NAN, 3.0, 2.0]),
    "nanmedian_full": (lambda m, x: x.nanmedian(), [1.0, NAN, 3.0, 2.0]),
    "nanmedian_all_nan": (lambda m, x: m.nanmedian(x), [NAN, NAN]),
    "median_dim": (lambda m, x: x.median(1), [[1.0, NAN, 3.0, NAN], [4.0, 1.0, 2.0, 3.0]]),
    "nansum": (lambda m, x: x.nansum(), [1.0, NAN, 1.0]),
    "nanmean": (lambda m, x: x.nanmean(), [1.0, NAN, 1.0]),
    "sort": (lambda m, x: x.sort(descending=True), [1.0, NAN, 0.0, -INF, NAN]),
    "cummax": (lambda m, x: m.cummax(x, 0), [1.0, 1.0, 0.0, 2.0, NAN, 3.0, NAN, 5.0]),
    "cummin": (lambda m, x: x.cummin(0), [1.0, 1.0, 0.0, 2.0, NAN, 3.0, NAN, 5.0]),
}


@pytest.mark.parametrize("name", list(NAN_GRAD))
def test_nan_gradients(name):
    fn, data = NAN_GRAD[name]
    check(fn, None, leaf(data))


ZERO_GRAD = {  # masked gradients at zero (std of a constant, norms of zero vectors)
    "std_const": (lambda m, x: x.std(), [1.0, 1.0, 1.0]),
    "std_single": (lambda m, x: x.std(), [2.0]),
    "var_single": (lambda m, x: m.var(x), [2.0]),
    "norm2_zero": (lambda m, x: x.norm(), [0.0, 0.0]),
    "norm1_zero": (lambda m, x: x.norm(1), [0.0, 2.0]),
    "norm3_zero": (lambda m, x: m.norm(x, 3), [0.0, 0.0]),
    "norm0.5_zero": (lambda m, x: x.norm(0.5), [0.0, 1.0]),
    "norm-1_zero": (lambda m, x: x.norm(-1), [0.0, 3.0, 1.0]),
    "norm_inf_zero": (lambda m, x: x.norm(INF), [0.0, 0.0]),
    "norm0": (lambda m, x: x.norm(0), [0.0, 1.0, -2.0]),
}


@pytest.mark.parametrize("name", list(ZERO_GRAD))
def test_zero_gradients(name):
    fn, data = ZERO_GRAD[name]
    check(fn, None, leaf(data))


# ---------------------------------------------------------------------- empty and 0-dim
EMPTY_CASES = {
    "sum": lambda m, x: (x.sum(), x.sum(0), x.sum(1), m.sum(x, (0, 1), keepdim=True)),
    "prod": lambda m, x: (x.prod(), x.prod(0), x.prod(1)),
    "mean": lambda m, x: (x.mean(), x.mean(0), x.mean(1)),
    "nansum": lambda m, x: (x.nansum(), x.nansum(0)),
    "var": lambda m, x: (x.var(1), x.std(1), x.var(0)),
    "norm": lambda m, x: (x.norm(), x.norm(dim=0), x.norm(1, 1), x.norm(INF, 1)),
    "amax": lambda m, x: (x.amax(1), x.amin(1, True)),
    "max_dim": lambda m, x: (x.max(1), m.min(x, 1), x.argmax(1), m.aminmax(x, dim=1)),
    "logical": lambda m, x: (x.all(), x.any(), x.all(0), x.any(1), x.count_nonzero(0)),
    "scans": lambda m, x: (x.cumsum(0), x.cumprod(1), x.cummax(0), m.cummin(x, 1),
                           x.logcumsumexp(0)),
    "sorting": lambda m, x: (x.sort(0), x.sort(1), m.argsort(x, 0), x.topk(0, 0),
                             x.msort(), x.median(), x.nanmedian()),
    "by_dim_1": lambda m, x: (x.mode(1), x.median(1), x.nanmedian(1), x.max(1),
                              x.kthvalue(1, 1), x.topk(2, 1)),
    "unique": lambda m, x: (m.unique(x, return_inverse=True, return_counts=True),
                            m.unique_consecutive(x, return_counts=True)),
}


@pytest.mark.parametrize("name", list(EMPTY_CASES))
def test_empty(name):
    x = ember.zeros(0, 3, requires_grad=True)
    check(EMPTY_CASES[name], None, x, grad=name != "unique")


SCALAR_CASES = {
    "sums": lambda m, x: (x.sum(), x.sum(0), m.sum(x, -1, True), x.mean(0), x.nansum(),
                          x.prod(0), x.prod()),
    "extrema": lambda m, x: (x.max(), x.max(0), m.min(x, -1, True), x.amax(), x.amin(0),
                             x.argmax(0), x.argmin(), m.aminmax(x), x.aminmax(dim=0)),
    "stats": lambda m, x: (x.var(), x.std(0, correction=0), m.var_mean(x), x.norm(),
                           x.norm(3, 0)),
    "order": lambda m, x: (x.median(), x.median(0), x.nanmedian(), x.mode(), x.kthvalue(1),
                           x.topk(1), x.sort(), m.argsort(x), m.msort(x)),
    "scans": lambda m, x: (x.cumsum(0), x.cumprod(-1), x.cummax(0), x.cummin(0),
                           x.logcumsumexp(0)),
    "logical": lambda m, x: (x.all(), x.any(0), x.count_nonzero(), x.count_nonzero(0)),
}


@pytest.mark.parametrize("name", list(SCALAR_CASES))
def test_zero_dim(name):
    check(SCALAR_CASES[name], None, leaf(-1.5))


def test_zero_dim_unique_and_histc():
    x = ember.tensor(3.0)
    check(lambda m, x: (m.unique(x, return_inverse=True), m.unique_consecutive(x),
                        m.histc(x, bins=3)), None, x, grad=False)


# ---------------------------------------------------------------------- uniqueness
UNIQUE_CASES = {
    "plain": lambda m, x: m.unique(x),
    "all": lambda m, x: m.unique(x, return_inverse=True, return_counts=True),
    "unsorted": lambda m, x: m.unique(x, sorted=False, return_counts=True),
    "method": lambda m, x: x.unique(return_inverse=True),
    "dim0": lambda m, x: m.unique(x, dim=0, return_inverse=True, return_counts=True),
    "dim1": lambda m, x: m.unique(x, dim=1, return_inverse=True, return_counts=True),
    "consecutive": lambda m, x: m.unique_consecutive(x, return_inverse=True, return_counts=True),
    "consecutive_dim": lambda m, x: x.unique_consecutive(return_counts=True, dim=0),
    "consecutive_dim1": lambda m, x: m.unique_consecutive(x, True, True, dim=1),
}


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.int64, ember.uint8,
                                   ember.bool, ember.float16], ids=str)
@pytest.mark.parametrize("name", list(UNIQUE_CASES))
def test_unique(name, dtype):
    x = ember.tensor([[3, 1, 3, 0], [3, 1, 3, 0], [2, 2, 1, 1], [2, 2, 1, 1], [3, 1, 3, 0]],
                     dtype=dtype)
    check(UNIQUE_CASES[name], None, x, grad=False)


def test_unique_nan_and_grad():
    x = ember.tensor([NAN, 1.0, NAN, 1.0], requires_grad=True)
    out = check(lambda m, x: (m.unique(x), m.unique_consecutive(x)), None, x, grad=False)[0]
    assert out[0].requires_grad  # like torch: recorded, but without a derivative
    raises_like(lambda: out[0].sum().backward(),
                lambda: torch.unique(to_torch(x)).sum().backward(), "derivative")


# ---------------------------------------------------------------------- counting and searching
def test_bincount():
    x = ember.tensor([1, 1, 4, 0, 1])
    w32 = ember.tensor([0.5, 1.0, 2.0, 3.0, 4.0])
    w16 = ember.tensor([0.5, 1.0, 2.0, 3.0, 4.0], dtype=ember.float16)
    wint = ember.tensor([1, 2, 3, 4, 5])
    check(lambda m, x, a, b, c: (m.bincount(x), x.bincount(minlength=8), m.bincount(x, a),
                                 m.bincount(x, b, 2), x.bincount(weights=c),
                                 m.bincount(x.to(m.uint8)),
                                 m.bincount(m.tensor([], dtype=m.int64), minlength=3)),
          None, x, w32, w16, wint, grad=False)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16], ids=str)
def test_histc(dtype):
    x = make((5, 7), dtype, seed=2)
    edge = ember.tensor([0.0, 0.1, 0.2, 0.3, 0.7, 1.0, 1.5, -0.2], dtype=dtype)
    check(lambda m, x, e: (m.histc(x), x.histc(bins=7), m.histc(x, 5, -1, 1), m.histc(e, 10, 0, 1),
                           m.histc(m.tensor([1.0, 1.0], dtype=e.dtype), 4),
                           m.histc(m.tensor([1.0, NAN], dtype=e.dtype), 4, 0, 2),
                           m.histc(m.tensor([], dtype=e.dtype), 4)),
          None, x, edge, grad=False)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.int64, ember.int32],
                         ids=str)
def test_searchsorted(dtype):
    seq = ember.tensor([-3, -1, 0, 0, 2, 5, 7], dtype=dtype)
    q = ember.tensor([[-4, 0, 3], [7, 8, -1]], dtype=dtype)
    seq2 = ember.tensor([[1, 2, 3, 4], [2, 4, 6, 8]], dtype=dtype)
    q2 = ember.tensor([[2, 5, 0], [3, 8, 9]], dtype=dtype)
    sorter_seq = ember.tensor([5, -1, 0, 7, -3, 2, 0], dtype=dtype)
    sorter = ember.tensor([4, 1, 2, 6, 5, 0, 3])
    check(lambda m, s, q, s2, q2, ss, so: (
        m.searchsorted(s, q), m.searchsorted(s, q, right=True), m.searchsorted(s, q, side="right"),
        m.searchsorted(s, q, side="left", out_int32=True), m.searchsorted(s, 2),
        m.searchsorted(s2, q2), m.searchsorted(s2, q2, right=True),
        m.searchsorted(ss, q, sorter=so), m.searchsorted(ss, q, sorter=so, side="right"),
        m.searchsorted(s, q.to(m.float64)), m.searchsorted(s, q.reshape(-1)),
        m.bucketize(q, s), m.bucketize(q, s, right=True), m.bucketize(3, s, out_int32=True)),
        None, seq, q, seq2, q2, sorter_seq, sorter, grad=False)


def test_searchsorted_nan_and_empty():
    seq = ember.tensor([1.0, 2.0, 3.0])
    q = ember.tensor([NAN, 2.0, 0.0, 5.0, INF, -INF])
    seqnan = ember.tensor([1.0, 2.0, NAN])
    check(lambda m, s, q, sn: (m.searchsorted(s, q), m.searchsorted(s, q, right=True),
                               m.searchsorted(sn, q), m.searchsorted(sn, q, right=True),
                               m.searchsorted(m.zeros(0), q), m.bucketize(q, s)),
          None, seq, q, seqnan, grad=False)


# ---------------------------------------------------------------------- dtype rules and out=
DTYPE_RULES = {
    "sum_int32": (lambda m, x: x.sum(), ember.int32),
    "sum_uint8": (lambda m, x: x.sum(0), ember.uint8),
    "sum_bool": (lambda m, x: m.sum(x), ember.bool),
    "prod_int8": (lambda m, x: x.prod(), ember.int8),
    "prod_bool": (lambda m, x: x.prod(1), ember.bool),
    "cumsum_int16": (lambda m, x: x.cumsum(1), ember.int16),
    "cumprod_bool": (lambda m, x: x.cumprod(0), ember.bool),
    "amax_int32": (lambda m, x: x.amax(1), ember.int32),
    "all_uint8": (lambda m, x: (x.all(), x.any(1), m.all(x, 0, keepdim=True)), ember.uint8),
    "all_float": (lambda m, x: (x.all(), x.any(1)), ember.float32),
    "count_nonzero_float": (lambda m, x: x.count_nonzero(0), ember.float64),
    "sum_half": (lambda m, x: (x.sum(), x.mean(1), x.prod(0)), ember.float16),
    "sum_bf16": (lambda m, x: (x.sum(), x.mean(1), x.nansum()), ember.bfloat16),
    "norm_dtype": (lambda m, x: x.norm(dtype=m.float64), ember.float32),
    "norm_half": (lambda m, x: (x.norm(), x.norm(1, 0)), ember.float16),
}


@pytest.mark.parametrize("name", list(DTYPE_RULES))
def test_dtype_rules(name):
    fn, dtype = DTYPE_RULES[name]
    check(fn, None, make((3, 4), dtype, low=-0.2, high=0.4), grad=False)


def test_out_arguments():
    x = make((3, 4), ember.float32)

    def fn(m, x):
        v, i = m.empty(0), m.empty(0, dtype=m.int64)
        r = m.max(x, 1, out=(v, i))
        assert r[0] is v and r[1] is i
        s = m.empty(0)
        assert m.sum(x, 0, out=s) is s
        sv, si = m.empty(0), m.empty(0, dtype=m.int64)
        m.sort(x, 0, out=(sv, si))
        c = m.empty(0)
        m.cumsum(x, 1, out=c)
        full = m.empty(0)
        m.max(x, out=full)
        mx = m.empty(0)
        m.max(x, x * 2, out=mx)
        am = m.empty(0, dtype=m.int64)
        m.argmax(x, 1, out=am)
        return v, i, s, sv, si, c, full, mx, am

    check(fn, None, x, grad=False)


def test_return_types():
    x = make((3, 4), ember.float32)
    r = x.max(1)
    assert type(r) is ember.return_types.max and r.values is r[0] and r.indices is r[1]
    assert r._fields == ("values", "indices")
    assert type(ember.aminmax(x)) is ember.return_types.aminmax
    assert ember.aminmax(x)._fields == ("min", "max")
    for name, res in [("sort", x.sort()), ("topk", x.topk(1)), ("kthvalue", x.kthvalue(1)),
                      ("median", x.median(0)), ("nanmedian", x.nanmedian(0)),
                      ("mode", x.mode()), ("cummax", x.cummax(0)), ("cummin", x.cummin(0)),
                      ("min", x.min(0))]:
        assert type(res) is getattr(ember.return_types, name), name
        assert "return_types." + name in repr(res)
    assert type(ember.var_mean(x)) is tuple
    assert not r.indices.requires_grad
    y = make((3, 4), ember.float32, requires_grad=True)
    assert y.max(1).values.requires_grad and not y.max(1).indices.requires_grad
    assert not y.argmax().requires_grad and not y.argsort().requires_grad


def test_var_degrees_of_freedom_warns():
    with pytest.warns(UserWarning, match="degrees of freedom"):
        ember.tensor([1.0]).var()


# ---------------------------------------------------------------------- bad inputs
def _t(m, data, dtype=None):
    return m.tensor(data, dtype=getattr(m, dtype) if dtype else None)


ERRORS = {
    "max_empty": (lambda m: m.zeros(0).max(), "max(): Expected reduction dim to be specified"),
    "min_empty": (lambda m: m.min(m.zeros(0)), "numel() == 0"),
    "amax_empty": (lambda m: m.zeros(0, 3).amax(), "Specify the reduction dim"),
    "amax_empty_dim": (lambda m: m.zeros(0, 3).amax(0), "dim 0 to have non-zero size"),
    "max_empty_dim": (lambda m: m.zeros(0, 3).max(0), "dim 0 to have non-zero size"),
    "argmax_empty": (lambda m: m.zeros(0).argmax(), "argmax(): Expected reduction dim"),
    "argmin_empty_dim": (lambda m: m.zeros(0, 3).argmin(0), "non-zero size"),
    "aminmax_empty": (lambda m: m.zeros(0).aminmax(), "aminmax"),
    "aminmax_empty_dim": (lambda m: m.zeros(0, 3).aminmax(dim=0), "non-zero size"),
    "median_empty_dim": (lambda m: m.zeros(0, 3).median(0), "non-zero size"),
    "mode_empty_dim": (lambda m: m.zeros(0, 3).mode(0), "non-zero size"),
    "kthvalue_empty_dim": (lambda m: m.zeros(0, 3).kthvalue(1, 0), "non-zero size"),
    "kthvalue_k_big": (lambda m: m.zeros(2, 3).kthvalue(4, 1), "out of range"),
    "kthvalue_k_zero": (lambda m: m.zeros(2, 3).kthvalue(0), "out of range"),
    "kthvalue_k_float": (lambda m: m.zeros(2, 3).kthvalue(1.5), "k"),
    "topk_k_big": (lambda m: m.zeros(2, 3).topk(4), "selected index k out of range"),
    "topk_k_neg": (lambda m: m.zeros(2, 3).topk(-1), "out of range"),
    "topk_bool": (lambda m: _t(m, [True, False]).topk(1), "bool"),
    "sum_bad_dim": (lambda m: m.ones(2, 3).sum(2), "Dimension out of range"),
    "sum_dup_dim": (lambda m: m.ones(2, 3).sum((0, -2)), "appears multiple times"),
    "amax_float_dim": (lambda m: m.ones(2, 3).amax(1.5), "dim"),
    "max_bad_dim": (lambda m: m.ones(2, 3).max(-3), "Dimension out of range"),
    "max_scalar_other": (lambda m: m.max(m.ones(2), 2), "Dimension out of range"),
    "max_keepdim_no_dim": (lambda m: m.ones(2).max(keepdim=True), None),
    "max_0d_bad_dim": (lambda m: m.tensor(3.0).max(1), "Dimension out of range"),
    "sort_bad_dim": (lambda m: m.ones(2, 3).sort(2), "Dimension out of range"),
    "sort_complex": (lambda m: m.ones(2, dtype=m.complex64).sort(), "complex"),
    "cumsum_bad_dim": (lambda m: m.ones(2, 3).cumsum(-3), "Dimension out of range"),
    "cumsum_no_dim": (lambda m: m.ones(2, 3).cumsum(), None),
    "var_dup_dim": (lambda m: m.ones(2, 2).var((0, 0)), "appears multiple times"),
    "mean_int": (lambda m: _t(m, [1, 2]).mean(), "mean(): could not infer output dtype"),
    "nanmean_int": (lambda m: _t(m, [1, 2]).nanmean(), "nanmean(): expected input"),
    "var_int": (lambda m: _t(m, [1, 2]).var(), "std and var only support"),
    "std_bool": (lambda m: _t(m, [True]).std(), "std and var only support"),
    "var_both_corrections": (lambda m: m.ones(3).var(0, unbiased=False, correction=0), None),
    "norm_int": (lambda m: _t(m, [1, 2]).norm(), "Expected a floating point or complex"),
    "norm_bad_order": (lambda m: m.ones(2, 2).norm("abc"), "not supported"),
    "norm_fro_3dims": (lambda m: m.ones(2, 2, 2).norm("fro", (0, 1, 2)), "2-tuple"),
    "norm_inf_empty": (lambda m: m.zeros(0).norm(INF), "inf norm"),
    "argmax_bool": (lambda m: _t(m, [True]).argmax(), "does not support bool"),
    "argmax_complex": (lambda m: m.ones(2, dtype=m.complex64).argmax(), "complex"),
    "max_complex": (lambda m: m.ones(2, dtype=m.complex64).max(), "not implemented"),
    "max_dim_complex": (lambda m: m.ones(2, dtype=m.complex64).max(0), "complex"),
    "amax_complex": (lambda m: m.ones(2, dtype=m.complex64).amax(), "not implemented"),
    "cummax_complex": (lambda m: m.ones(2, dtype=m.complex64).cummax(0), "not implemented"),
    "median_bool": (lambda m: _t(m, [True]).median(), "not implemented for 'Bool'"),
    "kthvalue_bool": (lambda m: _t(m, [True]).kthvalue(1), "not implemented for 'Bool'"),
    "median_keepdim_no_dim": (lambda m: m.ones(3).median(keepdim=True), None),
    "nansum_complex": (lambda m: m.ones(2, dtype=m.complex64).nansum(), "complex"),
    "logcumsumexp_int": (lambda m: _t(m, [1, 2]).logcumsumexp(0), "not implemented for 'Long'"),
    "aminmax_tuple_dim": (lambda m: m.ones(2, 2).aminmax(dim=(0, 1)), "dim"),
    "prod_tuple_dim": (lambda m: m.ones(2, 2).prod((0, 1)), None),
    "unique_dim_0d": (lambda m: m.unique(m.tensor(3.0), dim=0), "no dimensions"),
    "unique_dim_zero_sized": (lambda m: m.unique(m.zeros(2, 0), dim=0), "0 sized dimensions"),
    "bincount_neg": (lambda m: m.bincount(_t(m, [-1, 2])), "non-negative"),
    "bincount_2d": (lambda m: m.bincount(_t(m, [[1]])), "1-d non-negative"),
    "bincount_float": (lambda m: m.bincount(_t(m, [1.0])), "not implemented for 'Float'"),
    "bincount_bool": (lambda m: m.bincount(_t(m, [True])), "not implemented for 'Bool'"),
    "bincount_weights_len": (lambda m: m.bincount(_t(m, [1, 1]), _t(m, [1.0])), "same length"),
    "bincount_minlength": (lambda m: m.bincount(_t(m, [1]), minlength=-1), "minlength"),
    "histc_int": (lambda m: m.histc(_t(m, [1, 2])), "not implemented for 'Long'"),
    "histc_bins0": (lambda m: m.histc(_t(m, [1.0]), bins=0), "bins must be > 0"),
    "histc_min_gt_max": (lambda m: m.histc(_t(m, [1.0]), 4, 3, 1), "max must be larger"),
    "histc_inf": (lambda m: m.histc(_t(m, [1.0, INF]), 4), "is not finite"),
    "searchsorted_0d": (lambda m: m.searchsorted(m.tensor(1), _t(m, [2])), "positive dimension"),
    "searchsorted_side": (lambda m: m.searchsorted(_t(m, [1, 2]), 1, side="x"), "side can only"),
    "searchsorted_conflict": (lambda m: m.searchsorted(_t(m, [1, 2]), 1, side="left", right=True),
                              "can't be set to opposites"),
    "searchsorted_shape": (lambda m: m.searchsorted(_t(m, [[1, 2, 3], [2, 4, 6]]),
                                                    _t(m, [[2, 5]])), "first N-1 dimensions"),
    "searchsorted_sorter_size": (lambda m: m.searchsorted(_t(m, [3, 1, 2]), _t(m, [2]),
                                                          sorter=_t(m, [1, 2])), "same size"),
    "searchsorted_sorter_range": (lambda m: m.searchsorted(_t(m, [3, 1, 2]), _t(m, [2]),
                                                           sorter=_t(m, [1, 2, 5])),
                                  "sorter index out of range"),
    "searchsorted_bool": (lambda m: m.searchsorted(_t(m, [False, True]), _t(m, [True])),
                          "not implemented for 'Bool'"),
    "bucketize_2d": (lambda m: m.bucketize(_t(m, [1]), _t(m, [[1, 3]])), "1 dimension"),
    "argsort_no_out": (lambda m: m.argsort(m.ones(3), out=m.empty(0, dtype=m.int64)), "out"),
    "unique_no_out": (lambda m: m.unique(m.ones(3), out=m.empty(0)), "out"),
    "var_mean_no_out": (lambda m: m.var_mean(m.ones(3), out=(m.empty(0), m.empty(0))), "out"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors(name):
    fn, match = ERRORS[name]
    raises_like(lambda: fn(ember), lambda: fn(torch), match)


def test_out_with_grad_refused():
    x = make((3,), ember.float32, requires_grad=True)
    raises_like(lambda: ember.sum(x, 0, out=ember.empty(0)),
                lambda: torch.sum(to_torch(x), 0, out=torch.empty(0)), "out=")
