"""Indexing against PyTorch: ``x[key]``, ``x[key] = v`` and the index op family (gather/scatter,
index_*, masked_*, take, nonzero), forward and backward, views, version counters and errors."""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from oracle import assert_same, check, rand, raises_like, to_torch

warnings.filterwarnings("ignore", message=".*non-tuple sequence.*")
warnings.filterwarnings("ignore", message=".*uint8 is now deprecated.*")

FLOATS = [ember.float32, ember.float64]


def T(data, dtype=ember.int64):
    return ember.tensor(data, dtype=dtype)


def mask(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).random(shape) > 0.4)


# ---------------------------------------------------------------------- __getitem__
# (input shape, key). Keys may hold ember tensors; check() hands torch the converted key.
GETITEM = [
    ((3, 4, 5), 0), ((3, 4, 5), -1), ((3, 4, 5), (1, 2)), ((3, 4, 5), (1, 2, 3)),
    ((3, 4, 5), (-1, -4, -5)), ((3, 4, 5), slice(1, None)), ((3, 4, 5), (slice(None), slice(1, 3))),
    ((3, 4, 5), slice(None, None, 2)), ((3, 4, 5), (slice(None), slice(None, None, 3), 1)),
    ((3, 4, 5), (Ellipsis, 0)), ((3, 4, 5), (1, Ellipsis, 2)), ((3, 4, 5), None),
    ((3, 4, 5), (0, None, slice(None))), ((3, 4, 5), (Ellipsis, None)), ((3, 4, 5), ()),
    ((3, 4, 5), Ellipsis), ((3, 4, 5), slice(5, 10)), ((3, 4, 5), (slice(None), slice(3, 1))),
    ((3, 4, 5), (slice(-100, 100), slice(-2, None))), ((3, 4, 5), (Ellipsis, Ellipsis)),
    ((3, 4, 5), (slice(T(1), T(3)),)),
    # advanced
    ((3, 4, 5), [0, 2]), ((3, 4, 5), [2, 0, 2, 2]), ((3, 4, 5), ([0, 2],)),
    ((3, 4, 5), (slice(1, None), [0, 2])), ((3, 4, 5), (slice(None), None, T([1, 0, 1]))),
    ((3, 4, 5), (T([0, 2]), slice(None), T([1, 3]))),
    ((3, 4, 5), (T([[0], [2]]), slice(None), T([1, 3, 4]))),
    ((3, 4, 5), (slice(None), T([0, 1]), T([1, 2]))), ((3, 4, 5), (0, slice(None), [1, 2])),
    ((3, 4, 5), ([0, 1], 1, [0, 1])), ((3, 4, 5), (slice(None), 1, [0, 1])),
    ((3, 4, 5), ([0, 1], None, [0, 1])), ((3, 4, 5), (Ellipsis, None, [1, 2])),
    ((3, 4, 5), (Ellipsis, [0, 0, 4])), ((3, 4, 5), ([[0, 1], [2, 0]],)),
    ((3, 4, 5), (slice(None), slice(None), T([[0, 1], [2, 3]]))),
    ((3, 4, 5), T([2, 1], ember.int32)), ((3, 4, 5), T(1)), ((3, 4, 5), (T(0), slice(None), T(1))),
    ((3, 4, 5), ([-1, -3],)), ((3, 4, 5), []), ((3, 4, 5), (slice(None), [])),
    ((3, 4, 5), (T([], ember.int64), slice(None), T([], ember.int64))),
    # bool masks
    ((3, 4, 5), mask(3, 4, 5)), ((3, 4, 5), mask(3, 4)), ((3, 4, 5), (slice(None), mask(4, 5))),
    ((3, 4, 5), (0, mask(4))), ((3, 4, 5), (mask(3), T([1, 2]))),
    ((3, 4, 5), (mask(3), slice(None), [0, 4])), ((3, 4, 5), [True, False, True]),
    ((3, 4, 5), T([1, 0, 1], ember.uint8)), ((3, 4, 5), ember.zeros(3, 4, dtype=ember.bool)),
    ((3, 4, 5), True), ((3, 4, 5), False), ((3, 4, 5), (slice(None), True)),
    ((3, 4, 5), (T(True, ember.bool),)), ((3, 4, 5), ([0, 1], True, [0, 1])),
    # combinations from the brief
    ((4, 3), (slice(1, None), [0, 2])), ((4, 3), (slice(None), None, T([2, 0]))),
    ((4, 3, 2), (T([0, 3]), slice(None), T([1, 0]))), ((2, 3, 4), (Ellipsis, 0)),
    # 0-dim, 1-dim, empty inputs
    ((), ()), ((), None), ((), Ellipsis), ((), True), ((), False), ((), (None, None)),
    ((), T(True, ember.bool)), ((5,), [1, -1]), ((5,), slice(None, None, 3)), ((5,), 4),
    ((0, 3), slice(None)), ((0, 3), (slice(None), 1)), ((0, 3), []), ((2, 0), (1,)),
    ((2, 0), (slice(None), [])), ((0, 1, 0), (Ellipsis, [], [0])),
    ((2, 0), ([5],)),  # an empty result reads nothing: torch checks no bounds
]


def _gid(c):
    return f"{c[0]}-{c[1]!r}"[:60]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,key", GETITEM, ids=[_gid(c) for c in GETITEM])
def test_getitem(shape, key, dtype):
    x = rand(*shape, dtype=dtype, requires_grad=True)
    check(lambda m, x, k: x[k], None, x, key)


@pytest.mark.parametrize("dtype", [ember.int64, ember.bool, ember.float16, ember.bfloat16,
                                   ember.uint8, ember.complex64])
@pytest.mark.parametrize("key", [(slice(1, None), [0, 2]), (Ellipsis, 0), mask(3, 4),
                                 (T([0, 2]), slice(None), T([1, 3])), (None, 1, slice(None, 3))],
                         ids=str)
def test_getitem_dtypes(dtype, key):
    check(lambda m, x, k: x[k], None, rand(3, 4, 5, dtype=dtype), key)


@pytest.mark.parametrize("key", [(0,), (slice(None), [0, 2]), (Ellipsis, T([1, 1, 0])),
                                 (mask(3, 4),)], ids=str)
def test_getitem_noncontiguous(key):
    x = rand(3, 4, 5, noncontig=True, requires_grad=True)
    check(lambda m, x, k: x[k], None, x, key)
    xt = rand(5, 4, 3, requires_grad=True).transpose(0, 2)
    check(lambda m, x, k: x[k], None, xt, key)


@pytest.mark.parametrize("key", [np.array([2, 0, 2]), np.array([2, 0], dtype=np.uint64),
                                 np.array([True, False, True]),
                                 (slice(None), np.array([[0, 3], [1, 1]], dtype=np.int32))],
                         ids=str)
def test_getitem_numpy_array_keys(key):
    # a numpy array in a key is host data: it becomes an index tensor (uint64 as int64)
    x = rand(3, 4, dtype=ember.float64, requires_grad=True)
    tkey = tuple(torch.from_numpy(k.astype(np.int64) if k.dtype == np.uint64 else k)
                 if isinstance(k, np.ndarray) else k
                 for k in (key if isinstance(key, tuple) else (key,)))
    check(lambda x: x[key], lambda x: x[tkey], x)


def test_getitem_nan_inf_pass_through():
    x = ember.tensor([[np.nan, np.inf], [-np.inf, 1.0]])
    check(lambda m, x: x[[1, 0], [0, 1]], None, x)
    check(lambda m, x: x[x.isnan() | x.isinf()], None, x)


def test_double_backward_through_indexing():
    x = rand(4, 5, dtype=ember.float64, requires_grad=True)
    idx = T([0, 3, 3])

    def run(m, x, idx):
        y = (x[idx, 1:] ** 2).sum() + (x[:, 0] ** 3).sum()
        (g,) = m.autograd.grad(y, x, create_graph=True)
        return (g * g).sum()

    check(run, None, x, idx)


# ---------------------------------------------------------------------- views
def test_basic_index_is_a_view():
    x = ember.arange(24.0).reshape(4, 6)
    base = x._base if x._base is not None else x
    for key in [1, (slice(1, 3), 2), (Ellipsis, None), (slice(None), slice(None, None, 2)), ()]:
        v = x[key]
        assert v._base is base and np.shares_memory(v._data, x._data)
    v = x[1:3, ::2]
    before = x._version
    v[0, 1] = 100.0
    assert x[1, 2].item() == 100.0
    assert x._version == v._version == before + 1
    v.mul_(2)
    assert x[2, 4].item() == 2 * 16.0 and x._version == before + 2
    x[0] = -1.0  # writing the base shows through the view too
    assert x._version == v._version == before + 3
    assert x[[0, 1]]._base is None  # advanced indexing copies
    w = x[[0, 1]]
    w[0, 0] = 7.0
    assert x[0, 0].item() == -1.0


def test_view_strides_match_torch():
    x = rand(4, 5, 6)
    for key in [(1,), (slice(1, 3), 2), (Ellipsis, slice(None, None, 2)), (0, 0),
                (2, slice(1, None))]:
        e, t = x[key], to_torch(x)[key]
        assert e.stride() == t.stride() and e.storage_offset() == t.storage_offset(), key


def test_saved_tensor_modified_through_index_raises():
    x = rand(3, 4, requires_grad=True)
    y = x.clone()
    z = y.exp()  # exp saves its output
    z[0] = 0.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


# ---------------------------------------------------------------------- __setitem__
# (shape, key, value: a shape tuple for a tensor value or a Python number)
SETITEM = [
    ((3, 4), 0, 5.0), ((3, 4), 0, (4,)), ((3, 4), 0, (1, 4)), ((3, 4), (slice(None), 1), (3,)),
    ((3, 4), (slice(1, None), slice(None, None, 2)), (2, 2)), ((3, 4), (Ellipsis, 1), 2.5),
    ((3, 4), (None, 1), (1, 4)), ((3, 4), (), (3, 4)), ((3, 4), slice(None), (4,)),
    ((3, 4), (1, 2), ()), ((3, 4), [0, 2], (2, 4)), ((3, 4), [0, 2], 3.0),
    ((3, 4), (slice(None), [0, 3]), (3, 1)), ((3, 4), ([0, 1], [1, 2]), (2,)),
    ((3, 4), (T([[0], [2]]), T([1, 3])), (2, 2)), ((3, 4), mask(3, 4), -1.0),
    ((3, 4), mask(3, 4, seed=1), ()), ((3, 4), (mask(3), slice(1, 3)), (2,)),
    ((3, 4, 5), (slice(1, None), [0, 2]), (2, 2, 5)), ((3, 4, 5), (0, slice(None), [1, 2]), (4, 2)),
    ((3, 4, 5), ([0, 1], slice(None), [0, 1]), (2, 4)), ((3, 4, 5), (Ellipsis, [4, 0]), (1, 2)),
    ((3, 4), ([0, 1], [1, 2]), (1, 1, 2)), ((3, 4), True, (4,)), ((3, 4), [], 1.0),
    ((), (), ()), ((), None, 3.0), ((), Ellipsis, (1,)), ((4,), slice(None, None, 3), (2,)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,key,value", SETITEM, ids=[f"{c[0]}-{c[1]!r}-{c[2]}"[:60]
                                                          for c in SETITEM])
def test_setitem_autograd(shape, key, value, dtype):
    x = rand(*shape, dtype=dtype, requires_grad=True)
    v = value if not isinstance(value, tuple) else rand(*value, dtype=dtype, requires_grad=True,
                                                          seed=7)

    def run(m, x, k, v):
        y = x.clone()
        y[k] = v
        return y * 2

    check(run, None, x, key, v)


@pytest.mark.parametrize("shape,key,value", SETITEM, ids=[f"{c[0]}-{c[1]!r}-{c[2]}"[:60]
                                                          for c in SETITEM])
def test_setitem_no_grad(shape, key, value):
    x = rand(*shape, dtype=ember.float64)
    v = value if not isinstance(value, tuple) else rand(*value, dtype=ember.float32, seed=7)
    xt = to_torch(x)
    before = x._version
    x[key] = v  # ember casts a tensor value to x's dtype on every path
    xt[to_torch(key)] = to_torch(v.double() if isinstance(v, ember.Tensor) else v)
    assert_same(x, xt)
    assert x._version == before + 1


@pytest.mark.parametrize("dtype", [ember.int64, ember.uint8, ember.bool, ember.float16,
                                   ember.bfloat16, ember.complex64])
def test_setitem_dtypes(dtype):
    x = rand(3, 4, dtype=dtype)
    xt = to_torch(x)
    for key, v in [((0, 1), 1), ((slice(None), [1, 3]), rand(3, 1, dtype=dtype, seed=3)),
                   (mask(3, 4), True), ((1,), rand(4, dtype=ember.float64, seed=4))]:
        x[key] = v
        xt[to_torch(key)] = to_torch(v)
    assert_same(x, xt)


def test_setitem_value_flows_to_base_through_nested_views():
    x = rand(3, 4, 5, requires_grad=True)
    v = rand(5, requires_grad=True, seed=2)

    def run(m, x, v):
        y = x.clone()
        row = y[1]
        row[2] = v * 3
        row[0, [1, 1, 4]] = 0.5
        return y.sin()

    check(run, None, x, v)


@pytest.mark.parametrize("key", [1, (slice(None), [0, 2]), mask(3, 4), (Ellipsis, None, 2)],
                         ids=str)
def test_setitem_only_value_requires_grad(key):
    v = rand(1, requires_grad=True, dtype=ember.float64)

    def run(m, v, k):
        y = m.zeros(3, 4, dtype=m.float64)
        y[k] = v * 2
        return y.exp()

    check(run, None, v, key)


def test_setitem_overlapping_self_copy():
    x = ember.arange(6.0)
    xt = torch.arange(6.0)
    x[1:] = x[:-1].clone()
    xt[1:] = xt[:-1].clone()
    assert_same(x, xt)


def test_inplace_op_on_view_uses_copyslices():
    x = rand(4, 5, requires_grad=True)

    def run(m, x):
        y = x * 1
        y[1:3].mul_(y[0].clone())
        y[:, 2].exp_()
        return y

    check(run, None, x)


def test_copyslices_create_graph():
    x = rand(3, 4, dtype=ember.float64, requires_grad=True)

    def run(m, x):
        y = x * x
        y[1:, ::2] = x[:2, :2] ** 3
        (g,) = m.autograd.grad(y.sum(), x, create_graph=True)
        return g

    check(run, None, x)


# ---------------------------------------------------------------------- the op family
def _ix(data):
    return T(data)


IDX0 = _ix([[0, 1, 2, 0], [2, 0, 1, 1]])  # dim 0 index into (3, 4), repeated positions
PERM0 = _ix([[2, 0, 1, 0], [0, 2, 0, 1]])  # no position hit twice within a column
IDX1 = _ix([[1, 3], [0, 0], [3, 2]])

# (id, fn, args): fn(m, *args); float args listed as shapes get random tensors requiring grad
OPS_CASES = [
    ("gather0", lambda m, x: m.gather(x, 0, _to(m, IDX0)), [(3, 4)]),
    ("gather1", lambda m, x: x.gather(1, _to(m, IDX1)), [(3, 4)]),
    ("gather_neg_dim", lambda m, x: x.gather(-1, _to(m, IDX1[:2, :1])), [(3, 4)]),
    ("gather_0d", lambda m, x: x.gather(0, _to(m, T(0))), [()]),
    ("gather_empty", lambda m, x: x.gather(0, _to(m, T(np.zeros((0, 4), np.int64)))), [(3, 4)]),
    ("scatter_src", lambda m, x, s: x.scatter(0, _to(m, PERM0[:, :3]), s), [(3, 4), (2, 3)]),
    ("scatter_value", lambda m, x: m.scatter(x, 1, _to(m, IDX1[:, :1]), 2.5), [(3, 4)]),
    ("scatter_kw_value", lambda m, x: m.scatter(x, 1, _to(m, IDX1), value=-1), [(3, 4)]),
    ("scatter_add", lambda m, x, s: x.scatter_add(0, _to(m, IDX0), s), [(3, 4), (2, 4)]),
    ("scatter_add_dim1", lambda m, x, s: m.scatter_add(x, 1, _to(m, IDX1), s), [(3, 4), (3, 2)]),
    ("index_select0", lambda m, x: x.index_select(0, _to(m, T([2, 0, 2]))), [(3, 4)]),
    ("index_select1", lambda m, x: m.index_select(x, -1, _to(m, T([3, 1], ember.int32))),
     [(3, 4)]),
    ("index_select_0d_index", lambda m, x: x.index_select(1, _to(m, T(2))), [(3, 4)]),
    ("index_select_0d", lambda m, x: x.index_select(0, _to(m, T([0]))), [()]),
    ("index_add", lambda m, x, s: x.index_add(0, _to(m, T([0, 2, 0])), s), [(3, 4), (3, 4)]),
    ("index_add_alpha", lambda m, x, s: m.index_add(x, 1, _to(m, T([1, 1])), s, alpha=-2.5),
     [(3, 4), (3, 2)]),
    ("index_add_0d", lambda m, x, s: x.index_add(0, _to(m, T([0])), s), [(), ()]),
    ("index_copy", lambda m, x, s: x.index_copy(1, _to(m, T([3, 0])), s), [(3, 4), (3, 2)]),
    ("index_fill", lambda m, x: x.index_fill(1, _to(m, T([3, 0])), -1.5), [(3, 4)]),
    ("index_fill_tensor", lambda m, x, v: x.index_fill(0, _to(m, T([2, 2])), v), [(3, 4), ()]),
    ("index_put", lambda m, x, v: x.index_put((_to(m, T([0, 2])), _to(m, T([1, 1]))), v),
     [(3, 4), (2,)]),
    ("index_put_acc", lambda m, x, v: m.index_put(x, (_to(m, T([0, 0, 2])),), v, True),
     [(3, 4), (3, 4)]),
    ("index_put_bcast", lambda m, x, v: x.index_put((_to(m, T([[1], [2]])),), v, accumulate=True),
     [(3, 4), (1, 4)]),
    ("index_put_mask", lambda m, x, v: x.index_put((_to(m, mask(3, 4)),), v), [(3, 4), ()]),
    ("masked_fill", lambda m, x: x.masked_fill(_to(m, mask(3, 4)), 0.25), [(3, 4)]),
    ("masked_fill_tensor", lambda m, x, v: m.masked_fill(x, _to(m, mask(4)), v), [(3, 4), ()]),
    ("masked_fill_bcast_out", lambda m, x: x.masked_fill(_to(m, mask(2, 3, 4)), 7.0),
     [(3, 4)]),
    ("masked_select", lambda m, x: x.masked_select(_to(m, mask(3, 4))), [(3, 4)]),
    ("masked_select_bcast", lambda m, x: m.masked_select(x, _to(m, mask(2, 1, 4))), [(3, 1)]),
    ("masked_scatter", lambda m, x, s: x.masked_scatter(_to(m, mask(3, 4)), s), [(3, 4), (4, 4)]),
    ("masked_scatter_bcast", lambda m, x, s: x.masked_scatter(_to(m, mask(2, 4)), s),
     [(4,), (9,)]),
    ("take", lambda m, x: x.take(_to(m, T([[0, -1], [5, 5]]))), [(3, 4)]),
    ("take_0d", lambda m, x: m.take(x, _to(m, T([0, 0]))), [()]),
    ("take_along_dim", lambda m, x: m.take_along_dim(x, _to(m, T([[0], [3], [-1]])), 1),
     [(3, 4)]),
    ("take_along_dim_bcast", lambda m, x: x.take_along_dim(_to(m, T([[0, 2, 1]])), 0),
     [(3, 1)]),
    ("take_along_dim_flat", lambda m, x: m.take_along_dim(x, _to(m, T([11, 0, 4]))), [(3, 4)]),
]


def _to(m, t):
    return t if m is ember else to_torch(t)


def _mk_args(specs, dtype, noncontig=False):
    return [rand(*s, dtype=dtype, requires_grad=True, seed=i, noncontig=noncontig)
            for i, s in enumerate(specs)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,fn,specs", OPS_CASES, ids=[c[0] for c in OPS_CASES])
def test_op(name, fn, specs, dtype):
    check(fn, None, *_mk_args(specs, dtype))


@pytest.mark.parametrize("name,fn,specs", OPS_CASES[::3], ids=[c[0] for c in OPS_CASES[::3]])
def test_op_noncontiguous(name, fn, specs):
    check(fn, None, *_mk_args(specs, ember.float32, noncontig=True))


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16, ember.int64, ember.int32])
@pytest.mark.parametrize("name,fn,specs", OPS_CASES[::2], ids=[c[0] for c in OPS_CASES[::2]])
def test_op_other_dtypes(name, fn, specs, dtype):
    args = [rand(*s, dtype=dtype, seed=i) for i, s in enumerate(specs)]
    check(fn, None, *args, grad=False)


@pytest.mark.parametrize("op", ["scatter", "scatter_add", "sum", "prod", "mean", "amax"])
def test_src_larger_than_index(op):
    # only src's leading corner is read; torch's own backward rejects such a src, so the
    # gradient is compared with torch's for the corner, zero-padded
    x = rand(3, 4, dtype=ember.float64, requires_grad=True)
    s = rand(4, 6, dtype=ember.float64, requires_grad=True, seed=1)
    idx = PERM0[:, :3]

    def run(m, x, s):
        if op == "scatter":
            return x.scatter(0, _to(m, idx), s)
        if op == "scatter_add":
            return x.scatter_add(0, _to(m, idx), s)
        return x.scatter_reduce(0, _to(m, idx), s, op)

    ye = run(ember, x, s)
    xt, st_ = to_torch(x), to_torch(s)
    assert_same(ye, run(torch, xt, st_[:2, :3]))
    g = rand(3, 4, dtype=ember.float64, seed=9)
    gx, gs = ember.autograd.grad(ye, (x, s), g)
    tx, ts = torch.autograd.grad(run(torch, xt, st_[:2, :3]), (xt, st_), to_torch(g))
    assert_same(gx, tx)
    assert_same(gs, ts)


def test_setitem_through_expanded_view():
    x, xt = ember.zeros(3, 4), torch.zeros(3, 4)
    y, yt = x.expand(2, 3, 4), xt.expand(2, 3, 4)
    y[0, 1] = 5.0  # no element of the written region aliases another
    yt[0, 1] = 5.0
    assert_same(x, xt)


def test_op_bool_inputs():
    b = rand(3, 4, dtype=ember.bool)
    check(lambda m, b: b.gather(0, _to(m, IDX0)), None, b)
    check(lambda m, b: b.masked_fill(_to(m, mask(3, 4)), True), None, b)
    check(lambda m, b: b.index_select(1, _to(m, T([0, 0]))), None, b)
    check(lambda m, b: b.scatter(0, _to(m, PERM0), False), None, b)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_scatter_reduce(reduce, include_self, dtype):
    # integer-valued inputs make ties (amax/amin) and zeros (prod) likely
    x = ember.tensor(np.random.default_rng(1).integers(-2, 3, (4, 5)), dtype=dtype)
    s = ember.tensor(np.random.default_rng(2).integers(-2, 3, (3, 5)), dtype=dtype)
    if not include_self and reduce in ("amax", "amin"):
        # torch counts an excluded self that equals the result when sharing the gradient
        # (test_scatter_reduce_excluded_self_tie); keep self off the src values here
        x = x + 0.5
    x.requires_grad_()
    s.requires_grad_()
    idx = ember.tensor(np.random.default_rng(3).integers(0, 4, (3, 5)))
    check(lambda m, x, s, i: x.scatter_reduce(0, i, s, reduce, include_self=include_self),
          None, x, s, idx)
    idx1 = ember.tensor(np.random.default_rng(4).integers(0, 5, (3, 4)))
    check(lambda m, x, s, i: m.scatter_reduce(x[:3], 1, i, s[:, :4], reduce,
                                              include_self=include_self), None, x, s, idx1)


def test_scatter_reduce_excluded_self_tie():
    # self (3.0) is excluded and merely equal to the max of its two src values: the gradient
    # is shared by the two src elements only (PyTorch would also count the excluded self, so
    # its gradients would not add up to the output's gradient)
    x = ember.tensor([3.0, 1.0], requires_grad=True)
    s = ember.tensor([3.0, 3.0, 2.0], requires_grad=True)
    y = x.scatter_reduce(0, T([0, 0, 1]), s, "amax", include_self=False)
    y.backward(ember.tensor([1.0, 1.0]))
    assert x.grad.tolist() == [0.0, 0.0] and s.grad.tolist() == [0.5, 0.5, 1.0]


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [ember.int64, ember.float16, ember.bfloat16])
def test_scatter_reduce_dtypes(reduce, dtype):
    x = ember.tensor(np.random.default_rng(1).integers(-7, 8, (4, 5)), dtype=dtype)
    s = ember.tensor(np.random.default_rng(2).integers(-7, 8, (3, 5)), dtype=dtype)
    idx = ember.tensor(np.random.default_rng(3).integers(0, 4, (3, 5)))
    for incl in (True, False):
        check(lambda m, x, s, i: x.scatter_reduce(0, i, s, reduce, include_self=incl), None,
              x, s, idx, grad=False)


def test_scatter_reduce_nan():
    x = ember.tensor([1.0, np.nan, 3.0])
    s = ember.tensor([np.nan, 2.0, 5.0, -1.0])
    idx = T([0, 1, 2, 2])
    for red in ("amax", "amin", "sum", "prod", "mean"):
        check(lambda m, x, s, i: x.scatter_reduce(0, i, s, red), None, x, s, idx, grad=False)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_reduce(reduce):
    x, s = rand(3, 4, seed=1), rand(2, 4, seed=2)
    check(lambda m, x, s: x.scatter(0, _to(m, IDX0), s, reduce=reduce), None, x, s, grad=False)
    check(lambda m, x: x.scatter(1, _to(m, IDX1), 1.5, reduce=reduce), None, x, grad=False)
    xg = rand(3, 4, requires_grad=True)
    y = xg.scatter(0, IDX0, s, reduce=reduce)
    with pytest.raises(RuntimeError, match="not implemented"):
        y.sum().backward()


INPLACE = [
    ("scatter_", lambda m, y, s: y.scatter_(0, _to(m, PERM0[:, :3]), s[:, :3]), (2, 4)),
    ("scatter_add_", lambda m, y, s: y.scatter_add_(1, _to(m, IDX1), s[:, :2]), (3, 4)),
    ("scatter_reduce_", lambda m, y, s: y.scatter_reduce_(0, _to(m, IDX0), s, "amax"), (2, 4)),
    ("index_add_", lambda m, y, s: y.index_add_(0, _to(m, T([1, 1])), s, alpha=2), (2, 4)),
    ("index_copy_", lambda m, y, s: y.index_copy_(0, _to(m, T([2, 0])), s), (2, 4)),
    ("index_fill_", lambda m, y, s: y.index_fill_(1, _to(m, T([0, 2])), s[0, 0]), (2, 4)),
    ("index_put_", lambda m, y, s: y.index_put_((_to(m, T([0, 2])),), s, accumulate=True),
     (2, 4)),
    ("masked_fill_", lambda m, y, s: y.masked_fill_(_to(m, mask(3, 4)), s[1, 1]), (2, 4)),
    ("masked_scatter_", lambda m, y, s: y.masked_scatter_(_to(m, mask(4)), s), (2, 4)),
    ("fn_index_put_", lambda m, y, s: m.index_put_(y, (_to(m, T([1])),), s[0]), (2, 4)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,fn,sshape", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_variants(name, fn, sshape, dtype):
    x = rand(3, 4, dtype=dtype, requires_grad=True)
    s = rand(*sshape, dtype=dtype, requires_grad=True, seed=5)

    def run(m, x, s):
        y = x * 1
        v = y._version
        r = fn(m, y, s)
        assert r is y and y._version > v
        return y

    check(run, None, x, s)


def test_inplace_on_view_of_base():
    x = rand(4, 4, requires_grad=True)
    s = rand(2, 4, requires_grad=True, seed=1)

    def run(m, x, s):
        y = x * 1
        y[1:3].index_add_(1, _to(m, T([0, 0, 3, 1])), s)
        y[:, 0].masked_fill_(_to(m, mask(4)), 9.0)
        return y

    check(run, None, x, s)


def test_double_backward_ops():
    x = rand(3, 4, dtype=ember.float64, requires_grad=True)
    s = rand(3, 4, dtype=ember.float64, requires_grad=True, seed=1)

    def run(m, x, s):
        i = _to(m, IDX0)
        y = (x.gather(0, i) ** 2).sum() + (x.scatter_add(0, i, s[:2] ** 2) ** 2).sum()
        y = y + (x.masked_select(_to(m, mask(3, 4))) ** 3).sum()
        y = y + (x.index_select(1, _to(m, T([1, 1]))) ** 2).sum()
        y = y + (x.scatter_reduce(0, i, s[:2], "mean") ** 2).sum()
        y = y + (x.index_put((_to(m, T([0, 0])),), s[0] ** 2, accumulate=True) ** 2).sum()
        y = y + (x.take(_to(m, T([1, 1, 5]))) ** 2).sum()
        gx, gs = m.autograd.grad(y, (x, s), create_graph=True)
        return (gx ** 2).sum() + (gs * x).sum()

    check(run, None, x, s)


def test_nonzero_argwhere():
    for x in [rand(3, 4, dtype=ember.int64, low=-0.3, high=0.3), ember.tensor(0.0),
              ember.tensor(2.0), ember.zeros(0, 3), rand(2, 3, dtype=ember.bool),
              ember.tensor([np.nan, 0.0, -0.0, 1.0])]:
        check(lambda m, x: m.nonzero(x), None, x)
        check(lambda m, x: x.nonzero(as_tuple=True), None, x)
        check(lambda m, x: m.argwhere(x), None, x)
        check(lambda m, x: x.argwhere(), None, x)


def test_large_accumulate_is_vectorised():
    # an embedding-style backward: many repeated rows in one accumulate
    w = rand(1000, 64, requires_grad=True)
    idx = ember.tensor(np.random.default_rng(0).integers(0, 1000, 20000))
    check(lambda m, w, i: w[i] * 2, None, w, idx, grad_rtol=1e-4, grad_atol=1e-5)


# ---------------------------------------------------------------------- errors
ERRORS = [
    (lambda m, x: x[::-1], "step must be greater than zero"),
    (lambda m, x: x[::0], "slice step cannot be zero"),
    (lambda m, x: x[5], "index 5 is out of bounds for dimension 0 with size 3"),
    (lambda m, x: x[:, -5], "index -5 is out of bounds for dimension 1 with size 4"),
    (lambda m, x: x[[5]], "index 5 is out of bounds for dimension 0 with size 3"),
    (lambda m, x: x[[0], :, [9]], "index 9 is out of bounds for dimension 1 with size 5"),
    (lambda m, x: x[:, [0], [7]], "index 7 is out of bounds for dimension 1 with size 5"),
    (lambda m, x: x[m.tensor([1.0])], "tensors used as indices must be long, int, byte or bool"),
    (lambda m, x: x[m.tensor([1], dtype=m.int16)], "tensors used as indices must be long"),
    (lambda m, x: x[m.ones(2, 2, dtype=m.bool)], "The shape of the mask [2, 2] at index 0"),
    (lambda m, x: x[:, m.ones(5, dtype=m.bool)], "does not match the shape of the indexed"),
    (lambda m, x: x[0, 0, 0, 0], "too many indices for tensor of dimension 3"),
    (lambda m, x: x[1.5], "only integers, slices"),
    (lambda m, x: x[{1: 2}], "only integers, slices"),
    (lambda m, x: x["a"], None),
    (lambda m, x: x[[0, 1], [0, 1, 2]], "shape mismatch: indexing tensors could not be broadcast"),
    (lambda m, x: x[0][0][0][0], "invalid index of a 0-dim tensor"),
    (lambda m, x: x[0, 0, 0][:], "slice() cannot be applied to a 0-dim tensor"),
    (lambda m, x: x[0, 0, 0][[0]], "too many indices for tensor of dimension 0"),
    (lambda m, x: x[0, 0, 0][None, 0], "invalid index of a 0-dim tensor"),
    (lambda m, x: x.__setitem__(slice(0, 2), m.ones(3)), "The expanded size of the tensor (5)"),
    (lambda m, x: x.__setitem__([0, 1], m.ones(3)), "shape mismatch: value tensor of shape [3]"),
    (lambda m, x: x.__setitem__(0, m.ones(2, 4, 5)), None),
    (lambda m, x: x.__setitem__(0, "a"), "can't assign a str"),
    (lambda m, x: x.__setitem__(0, [1.0]), "can't assign a list"),
    (lambda m, x: x.__setitem__(0, 1 + 2j), "value cannot be converted to type float"),
    (lambda m, x: x.long().__setitem__(0, float("nan")), "cannot be converted to type int64_t"),
    (lambda m, x: x.byte().__setitem__(0, 300), "cannot be converted to type uint8_t"),
    (lambda m, x: x.byte().__setitem__([0], -256), "without overflow"),
    (lambda m, x: x.expand(2, 3, 4, 5).__setitem__((slice(None), 0), 1.0), "more than one"),
]

OP_ERRORS = [
    (lambda m, x: x.gather(0, m.tensor([[0.0, 1.0]])), "Expected dtype int32/int64 for index"),
    (lambda m, x: x.gather(0, m.tensor([0])), "same number of dimensions as input"),
    (lambda m, x: x.gather(0, m.tensor([[0, 1, 2, 0, 1]])), "Size does not match at dimension 1"),
    (lambda m, x: x.gather(0, m.tensor([[5]])), "index 5 is out of bounds for dimension 0"),
    (lambda m, x: x.gather(0, m.tensor([[-1]])), "index -1 is out of bounds for dimension 0"),
    (lambda m, x: x.gather(2, m.tensor([[0]])), "Dimension out of range"),
    (lambda m, x: x.scatter(0, m.tensor([[0]]).short(), 1.0), "Expected dtype int32/int64 for"),
    (lambda m, x: x.scatter(0, m.tensor([[0]]), x.double()), "Expected self.dtype to be equal"),
    (lambda m, x: x.scatter(0, m.tensor([[0, 1]]), m.ones(1, 1)), "no larger size than src"),
    (lambda m, x: x.scatter(0, m.tensor([0]), x), "same number of dimensions as self"),
    (lambda m, x: x.scatter(0, m.tensor([[7]]), x), "index 7 is out of bounds"),
    (lambda m, x: x.scatter(0, m.tensor([[0]]), 1.0, reduce="foo"), "reduce argument must be"),
    (lambda m, x: x.scatter_add(0, m.tensor([[0]]), x.double()), "Expected self.dtype"),
    (lambda m, x: x.scatter_reduce(0, m.tensor([[0]]), x, "foo"), "sum, prod, mean, amax or"),
    (lambda m, x: x.index_select(0, m.tensor([0.0])), "Expected dtype int32 or int64 for index"),
    (lambda m, x: x.index_select(0, m.tensor([[0]])), "Index is supposed to be a vector"),
    (lambda m, x: x.index_select(0, m.tensor([3])), "index out of range in self"),
    (lambda m, x: x.index_select(0, m.tensor([-1])), "index out of range in self"),
    (lambda m, x: m.tensor(3.0).index_select(0, m.tensor([0, 0])), "Index to scalar can have"),
    (lambda m, x: x.index_add(0, m.tensor([0, 1]), m.ones(2, 3)), "source tensor shape must"),
    (lambda m, x: x.index_add(0, m.tensor([0, 1]), m.ones(3, 4)), "Number of indices (2)"),
    (lambda m, x: x.index_add(0, m.tensor([0, 7]), m.ones(2, 4)), "index 7 is out of bounds"),
    (lambda m, x: x.index_add(0, m.tensor([0, 1]), m.ones(2, 4).double()), "same scalar type"),
    (lambda m, x: x.index_add(0, m.tensor([0.0]), m.ones(1, 4)), "Expected dtype int32/int64"),
    (lambda m, x: x.index_add(0, m.tensor([[0]]), m.ones(1, 4)), "Index is supposed to be a vec"),
    (lambda m, x: x.index_copy(0, m.tensor([0, 1]), m.ones(3, 4)), "Number of indices (2)"),
    (lambda m, x: x.index_copy(0, m.tensor([-1]), m.ones(1, 4)), "index -1 is out of bounds"),
    (lambda m, x: x.index_copy(0, m.tensor([0]).int(), m.ones(1, 4)), "Expected a long tensor"),
    (lambda m, x: x.index_copy(0, m.tensor([0]), m.ones(1, 4).double()), "same dtype"),
    (lambda m, x: x.index_copy(0, m.tensor([[0]]), m.ones(1, 4)), "dimension 1 or 0"),
    (lambda m, x: x.index_copy(0, m.tensor([0]), m.ones(1, 2)), "same slice shapes"),
    (lambda m, x: x.index_copy(0, m.tensor([0]), m.ones(1, 4, 1)), "dimensionality must match"),
    (lambda m, x: x.index_fill(0, m.tensor([7]), 1.0), "index 7 is out of bounds"),
    (lambda m, x: x.index_fill(0, m.tensor([0.0]), 1.0), "Expected dtype int64 for index"),
    (lambda m, x: x.index_fill(0, m.tensor([[0]]), 1.0), "Index has to be a vector/scalar"),
    (lambda m, x: x.index_fill(0, m.tensor([0]), m.ones(2)), "0-dimensional value tensor"),
    (lambda m, x: x.masked_fill(m.tensor([1, 0, 1, 0]), 1.0), "only supports boolean masks"),
    (lambda m, x: x.masked_fill(m.tensor([True, False]), 1.0), "must match the size of tensor"),
    (lambda m, x: x.masked_fill(x > 0, m.ones(2)), "0-dimensional value tensor"),
    (lambda m, x: x.masked_fill(x > 0, m.tensor(2 + 1j)), "cannot be converted to type float"),
    (lambda m, x: x.byte().masked_fill(x > 0, 300), "cannot be converted to type uint8_t"),
    (lambda m, x: m.ones(4).masked_fill_(m.ones(3, 4, dtype=m.bool), 1), "doesn't match the "
                                                                          "broadcast shape"),
    (lambda m, x: x.masked_select(m.ones(3, 4)), "expected BoolTensor for mask"),
    (lambda m, x: x.masked_select(m.ones(2, 4, dtype=m.bool)), "must match the size"),
    (lambda m, x: x.masked_scatter(x > 0, m.ones(3)), "Number of elements of source"),
    (lambda m, x: x.masked_scatter(x > 3, x.double()), "expected self and source to have same"),
    (lambda m, x: x.masked_scatter(m.ones(3, 4), x), "only supports boolean masks"),
    (lambda m, x: x.take(m.tensor([12])), "out of range: tried to access index 12"),
    (lambda m, x: x.take(m.tensor([-13])), "tried to access index -13 on a tensor of 12"),
    (lambda m, x: x.take(m.tensor([1.0])), "Expected a long tensor for index"),
    (lambda m, x: m.take_along_dim(x, m.tensor([0, 1]), 1), "same number of dimensions"),
    (lambda m, x: m.take_along_dim(x, m.tensor([[0.0]]), 1), "dtype of indices should be Long"),
    (lambda m, x: m.take_along_dim(x, m.tensor([[0, 1]] * 2), 1), "must match the size"),
    (lambda m, x: x.index_put((m.tensor([0, 1]),), m.ones(4).double()), "Index put requires"),
    (lambda m, x: x.index_put((m.tensor([0, 5]),), m.ones(1)), "index 5 is out of bounds"),
    (lambda m, x: x.index_put((m.tensor([0, 1]),), m.ones(3)), "shape mismatch: value tensor"),
    (lambda m, x: x.index_put((None, m.tensor([0, 1])), m.ones(1)), None),
]


@pytest.mark.parametrize("fn,match", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_indexing_errors(fn, match):
    x = rand(3, 4, 5)
    raises_like(lambda: fn(ember, x), lambda: fn(torch, to_torch(x)), match)


@pytest.mark.parametrize("fn,match", OP_ERRORS, ids=[str(i) for i in range(len(OP_ERRORS))])
def test_op_errors(fn, match):
    x = rand(3, 4)
    raises_like(lambda: fn(ember, x), lambda: fn(torch, to_torch(x)), match)


def test_inplace_on_leaf_errors():
    for key in [0, [0], (slice(None), mask(4))]:
        x = rand(3, 4, requires_grad=True)
        xt = to_torch(x)

        def fe():
            x[key] = 1.0

        def ft():
            xt[to_torch(key)] = 1.0

        raises_like(fe, ft, "leaf Variable that requires grad")
    x = rand(3, 4, requires_grad=True)
    with ember.no_grad():
        x[0] = 2.0  # allowed without grad mode, like torch
    assert x[0, 0].item() == 2.0


# ---------------------------------------------------------------------- random keys
@st.composite
def index_case(draw):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
    nd = len(shape)
    key, used, ell = [], 0, False
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["int", "slice", "none", "ell", "list", "mask"]))
        left = nd - used
        if kind == "none":
            key.append(None)
        elif kind == "ell" and not ell:
            key.append(Ellipsis)
            ell = True
        elif kind == "int" and left and shape[used] > 0:
            n = shape[used]
            key.append(draw(st.integers(-n, n - 1)))
            used += 1
        elif kind == "slice" and left:
            a = draw(st.one_of(st.none(), st.integers(-6, 6)))
            b = draw(st.one_of(st.none(), st.integers(-6, 6)))
            c = draw(st.one_of(st.none(), st.integers(1, 3)))
            key.append(slice(a, b, c))
            used += 1
        elif kind == "list" and left:
            n = shape[used]
            k = draw(st.integers(0, 3)) if n else 0
            # distinct positions, so that setitem has no write order to depend on
            pos = rng.permutation(n)[:k]
            key.append([int(p - n if rng.random() < 0.5 else p) for p in pos])
            used += 1
        elif kind == "mask" and left:
            k = draw(st.integers(1, left))
            m = rng.random(shape[used:used + k]) > 0.5
            key.append(ember.tensor(m))
            used += k
    return shape, tuple(key)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index_case())
def test_getitem_random(case):
    shape, key = case
    x = rand(*shape, dtype=ember.float64, requires_grad=True)
    try:
        to_torch(x)[to_torch(key)]
    except IndexError:  # index lists that do not broadcast together
        raises_like(lambda: x[key], lambda: to_torch(x)[to_torch(key)])
        return
    check(lambda m, x, k: x[k], None, x, key)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index_case())
def test_setitem_random(case):
    shape, key = case
    x = rand(*shape, dtype=ember.float64)
    xt = to_torch(x)
    try:
        region = tuple(xt[to_torch(key)].shape)
    except IndexError:
        return  # covered by test_getitem_random
    v = rand(*region, dtype=ember.float64, seed=3)
    x[key] = v
    xt[to_torch(key)] = to_torch(v)
    assert_same(x, xt)
