"""Linear algebra against PyTorch: matmul and the other products, einsum, matrix structure.

Decompositions, solvers and singular matrices are in test_linalg_decomp.py; norms and metadata
in test_linalg_norm.py; shared inputs in linalg_util.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from linalg_util import ALL, FLOAT, E, leaf, same_error, tol, well
from oracle import assert_same, check, rand, to_torch

# ====================================================================== matmul
MATMUL_SHAPES = [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3,)),
    ((3,), (5, 3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)),
    ((5, 1, 2, 3), (4, 3, 2)), ((1, 2, 3), (5, 3, 2)), ((2, 1, 2, 3), (1, 3, 3, 2)),
    ((0, 3), (3, 4)), ((2, 0), (0, 4)), ((2, 3), (3, 0)), ((0, 2, 3), (3, 4)),
    ((3,), (0, 3, 2)), ((0,), (0,)), ((0, 3), (2, 3, 4)), ((2, 3, 0), (0, 4)),
    ((2, 0, 3), (3, 0)),
]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb, dtype):
    a = rand(*sa, dtype=dtype, requires_grad=True, seed=1)
    b = rand(*sb, dtype=dtype, requires_grad=True, seed=2)
    check(lambda m, x, y: m.matmul(x, y), None, a, b, **tol(dtype))
    check(lambda m, x, y: x @ y, None, a, b, **tol(dtype))


@pytest.mark.parametrize("dtype", FLOAT)
def test_matmul_noncontiguous(dtype):
    a = rand(4, 3, dtype=dtype, noncontig=True, requires_grad=True)
    b = rand(5, 3, dtype=dtype, seed=3).t()
    b = leaf(b)
    check(lambda m, x, y: m.matmul(x, y), None, a, b, **tol(dtype))
    c = leaf(rand(2, 3, 4, dtype=dtype, seed=4).transpose(0, 2))  # (4, 3, 2)
    check(lambda m, x, y: m.matmul(x, y), None, c, rand(2, 5, dtype=dtype, noncontig=True),
          **tol(dtype))


def test_matmul_operators_and_out():
    a, b = rand(2, 3, seed=1), rand(3, 4, seed=2)
    assert_same(b.__rmatmul__(a), to_torch(b).__rmatmul__(to_torch(a)))
    out = E.empty(0)
    r = E.matmul(a, b, out=out)
    assert r is out
    assert_same(out, torch.matmul(to_torch(a), to_torch(b)))


def test_out_arguments():
    a, b = well(3, 3).detach(), rand(3, 2, dtype=E.float64)
    ta, tb = to_torch(a), to_torch(b)
    cases = [(lambda m, x, y, o: m.linalg.solve(x, y, out=o), 1),
             (lambda m, x, y, o: m.addmm(y, x, y, out=o), 1),
             (lambda m, x, y, o: m.linalg.qr(x, out=o), 2),
             (lambda m, x, y, o: m.linalg.matrix_power(x, 2, out=o), 1),
             (lambda m, x, y, o: m.tensordot(x, y, 1, out=o), 1),
             (lambda m, x, y, o: m.linalg.vector_norm(y, out=o), 1)]
    for fn, n in cases:
        eo = tuple(E.empty(0, dtype=E.float64) for _ in range(n))
        to = tuple(torch.empty(0, dtype=torch.float64) for _ in range(n))
        r = fn(E, a, b, eo if n > 1 else eo[0])
        fn(torch, ta, tb, to if n > 1 else to[0])
        assert (r[0] if n > 1 else r) is eo[0]
        assert_same(eo, to)


def test_matmul_large_uses_blas():
    # 1024 x 1024 in float32 is one BLAS call; an element loop would not finish in the test
    a = rand(1024, 1024, seed=1)
    b = rand(1024, 1024, seed=2)
    ref = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    np.testing.assert_allclose((a @ b).numpy(), ref, rtol=1e-4, atol=1e-3)
    x = rand(8, 256, 64, seed=3)
    y = rand(8, 64, 128, seed=4)
    np.testing.assert_allclose((x @ y).numpy(), np.matmul(x.numpy(), y.numpy()), rtol=1e-5,
                               atol=1e-4)


LOW_CASES = [
    ("matmul", lambda m, a, b: m.matmul(a, b), (5, 8), (8, 3)),
    ("matmul_batched", lambda m, a, b: m.matmul(a, b), (2, 5, 8), (8, 3)),
    ("mm", lambda m, a, b: m.mm(a, b), (5, 8), (8, 3)),
    ("bmm", lambda m, a, b: m.bmm(a, b), (2, 5, 8), (2, 8, 3)),
    ("dot", lambda m, a, b: m.dot(a, b), (8,), (8,)),
    ("mv", lambda m, a, b: m.mv(a, b), (5, 8), (8,)),
    ("addmm", lambda m, a, b: m.addmm(a[:, :3], a, b, beta=0.5, alpha=2), (8, 8), (8, 3)),
    ("einsum", lambda m, a, b: m.einsum("ij,jk->ik", a, b), (5, 8), (8, 3)),
]


@pytest.mark.parametrize("dtype", [E.float16, E.bfloat16])
@pytest.mark.parametrize("name,fn,sa,sb", LOW_CASES, ids=[c[0] for c in LOW_CASES])
def test_products_low_precision(name, fn, sa, sb, dtype):
    # computed in float32 and rounded once, like PyTorch's CPU kernels
    a, b = rand(*sa, dtype=dtype, seed=1), rand(*sb, dtype=dtype, seed=2)
    check(fn, None, a, b, grad=False)


@pytest.mark.parametrize("dtype", [E.int64, E.int32, E.int16, E.int8, E.uint8])
@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3, 4)), ((2, 3), (3,)),
                                   ((5, 2, 3), (5, 3, 4)), ((3,), (3, 2))])
def test_matmul_integers(sa, sb, dtype):
    a = rand(*sa, dtype=dtype, seed=1, low=0 if dtype is E.uint8 else -2, high=12)
    b = rand(*sb, dtype=dtype, seed=2, low=0 if dtype is E.uint8 else -2, high=12)
    check(lambda m, x, y: m.matmul(x, y), None, a, b, grad=False)  # wraps on overflow like torch


MATMUL_ERRORS = [
    ((2, 3), (4, 5)), ((3,), (4,)), ((3,), (4, 5)), ((2, 3), (4,)), ((2, 2, 3), (3, 4, 5)),
    ((2, 2, 3), (2, 4, 5)), ((7, 2, 2, 3), (6, 3, 5)), ((3,), (2, 4, 5)), ((2, 4, 5), (4,)),
    ((), (4,)), ((4,), ()), ((2, 3, 4), (5, 6)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_ERRORS)
def test_matmul_shape_errors(sa, sb):
    same_error(lambda m, a, b: m.matmul(a, b), rand(*sa), rand(*sb))


@pytest.mark.parametrize("sa,sb", [((3, 3), (3, 3)), ((3,), (3,)), ((3, 3), (3,)),
                                   ((2, 3, 3), (2, 3, 3)), ((3, 4), (2, 4, 6)),
                                   ((2, 3, 4), (4, 6)), ((4,), (2, 4, 6)), ((2, 3, 4), (4,))])
@pytest.mark.parametrize("other", [E.float64, E.int64, E.complex64, E.float16])
def test_matmul_dtype_errors(sa, sb, other):
    same_error(lambda m, a, b: m.matmul(a, b), rand(*sa), rand(*sb, dtype=other))


@pytest.mark.parametrize("sa,sb", [((3, 3), (3, 3)), ((3,), (3,)), ((3, 3), (3,)),
                                   ((2, 3, 3), (2, 3, 3)), ((3,), (3, 3))])
def test_matmul_bool_not_implemented(sa, sb):
    same_error(lambda m, a, b: m.matmul(a, b), rand(*sa, dtype=E.bool),
               rand(*sb, dtype=E.bool))


def test_matmul_int_not_differentiable():
    # integer results have no gradient: the output never requires grad
    a = rand(2, 3, dtype=E.int64)
    assert not E.matmul(a, rand(3, 2, dtype=E.int64)).requires_grad


# ====================================================================== the other products
PRODUCTS = [
    ("mm", lambda m, a, b: m.mm(a, b), [(3, 4), (4, 5)]),
    ("mm_empty", lambda m, a, b: m.mm(a, b), [(0, 4), (4, 5)]),
    ("bmm", lambda m, a, b: m.bmm(a, b), [(2, 3, 4), (2, 4, 5)]),
    ("bmm_empty_batch", lambda m, a, b: m.bmm(a, b), [(0, 3, 4), (0, 4, 5)]),
    ("mv", lambda m, a, b: m.mv(a, b), [(3, 4), (4,)]),
    ("dot", lambda m, a, b: m.dot(a, b), [(4,), (4,)]),
    ("dot_method", lambda m, a, b: a.dot(b), [(4,), (4,)]),
    ("vdot", lambda m, a, b: m.vdot(a, b), [(4,), (4,)]),
    ("inner", lambda m, a, b: m.inner(a, b), [(2, 4), (3, 4)]),
    ("inner_vec", lambda m, a, b: m.inner(a, b), [(4,), (4,)]),
    ("inner_scalar", lambda m, a, b: m.inner(a, b), [(), (3, 4)]),
    ("outer", lambda m, a, b: m.outer(a, b), [(3,), (4,)]),
    ("ger", lambda m, a, b: a.ger(b), [(3,), (4,)]),
    ("addmm", lambda m, i, a, b: m.addmm(i, a, b, beta=0.5, alpha=2), [(3, 5), (3, 4), (4, 5)]),
    ("addmm_bcast", lambda m, i, a, b: m.addmm(i, a, b), [(5,), (3, 4), (4, 5)]),
    ("addmm_beta0", lambda m, i, a, b: m.addmm(i, a, b, beta=0), [(3, 5), (3, 4), (4, 5)]),
    ("addmv", lambda m, i, a, b: m.addmv(i, a, b, beta=0.5, alpha=2), [(3,), (3, 4), (4,)]),
    ("addr", lambda m, i, a, b: m.addr(i, a, b, beta=0.5, alpha=2), [(3, 4), (3,), (4,)]),
    ("addr_bcast", lambda m, i, a, b: m.addr(i, a, b), [(1, 4), (3,), (4,)]),
    ("baddbmm", lambda m, i, a, b: m.baddbmm(i, a, b, beta=0.5, alpha=2),
     [(2, 3, 5), (2, 3, 4), (2, 4, 5)]),
    ("baddbmm_bcast", lambda m, i, a, b: m.baddbmm(i, a, b), [(3, 5), (2, 3, 4), (2, 4, 5)]),
    ("addbmm", lambda m, i, a, b: m.addbmm(i, a, b, beta=0.5, alpha=2),
     [(3, 5), (2, 3, 4), (2, 4, 5)]),
    ("tensordot_int", lambda m, a, b: m.tensordot(a, b, 1), [(2, 3, 4), (4, 5)]),
    ("tensordot_lists", lambda m, a, b: m.tensordot(a, b, dims=([1, 0], [0, 2])),
     [(3, 4, 2), (4, 5, 3)]),
    ("tensordot_zero", lambda m, a, b: m.tensordot(a, b, dims=0), [(2, 3), (4,)]),
    ("tensordot_empty", lambda m, a, b: m.tensordot(a, b, 1), [(2, 0), (0, 3)]),
    ("addbmm_empty", lambda m, i, a, b: m.addbmm(i, a, b), [(0, 5), (2, 0, 4), (2, 4, 5)]),
    ("kron", lambda m, a, b: m.kron(a, b), [(2, 3), (4, 2)]),
    ("kron_ranks", lambda m, a, b: m.kron(a, b), [(2, 3, 2), (4,)]),
    ("multi_dot", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), [(5, 2), (2, 6), (6, 3)]),
    ("multi_dot_vecs", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), [(3,), (3, 4), (4,)]),
    ("multi_dot_4", lambda m, a, b, c, d: m.linalg.multi_dot([a, b, c, d]),
     [(10, 2), (2, 9), (9, 3), (3, 7)]),
    ("linalg_matmul", lambda m, a, b: m.linalg.matmul(a, b), [(2, 3, 4), (4, 2)]),
    ("vecdot", lambda m, a, b: m.linalg.vecdot(a, b), [(2, 3, 4), (3, 4)]),
    ("vecdot_dim", lambda m, a, b: m.linalg.vecdot(a, b, dim=0), [(3, 4), (3, 1)]),
]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name,fn,shapes", PRODUCTS, ids=[p[0] for p in PRODUCTS])
def test_products(name, fn, shapes, dtype):
    args = [rand(*s, dtype=dtype, requires_grad=True, seed=k) for k, s in enumerate(shapes)]
    check(fn, None, *args, **tol(dtype))


def test_chain_matmul():
    a, b, c = (rand(*s, dtype=E.float64, requires_grad=True, seed=k)
               for k, s in enumerate([(2, 3), (3, 4), (4, 2)]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(lambda m, x, y, z: m.chain_matmul(x, y, z), None, a, b, c)


@pytest.mark.parametrize("name", ["addmm", "addmv", "addr", "baddbmm", "addbmm"])
def test_add_family_inplace(name):
    shapes = {"addmm": [(3, 5), (3, 4), (4, 5)], "addmv": [(3,), (3, 4), (4,)],
              "addr": [(3, 4), (3,), (4,)], "baddbmm": [(2, 3, 5), (2, 3, 4), (2, 4, 5)],
              "addbmm": [(3, 5), (2, 3, 4), (2, 4, 5)]}[name]
    args = [rand(*s, dtype=E.float64, seed=k) for k, s in enumerate(shapes)]
    targs = to_torch(args)
    r = getattr(args[0], name + "_")(*args[1:], beta=2, alpha=0.5)
    getattr(targs[0], name + "_")(*targs[1:], beta=2, alpha=0.5)
    assert r is args[0]
    assert_same(args[0], targs[0])


def test_add_family_integers_and_bool():
    i, a, b = (rand(*s, dtype=E.int64, seed=k) for k, s in enumerate([(2, 2), (2, 3), (3, 2)]))
    check(lambda m, x, y, z: m.addmm(x, y, z, beta=1.7, alpha=0.5), None, i, a, b, grad=False)
    check(lambda m, x, y, z: m.addmm(x, y, z, beta=3, alpha=2), None, i, a, b, grad=False)
    bi, bv, bw = rand(2, 3, dtype=E.bool), rand(2, dtype=E.bool, seed=1), rand(3, dtype=E.bool,
                                                                               seed=2)
    check(lambda m, x, y, z: m.addr(x, y, z), None, bi, bv, bw, grad=False)
    check(lambda m, x, y, z: m.addr(x, y, z, beta=0), None, bi, bv, bw, grad=False)
    # addr promotes like a broadcast multiply
    check(lambda m, x, y, z: m.addr(x, y, z), None, rand(2, 3), rand(2, seed=1),
          rand(3, dtype=E.float64, seed=2), grad=False)


def test_addmm_beta_zero_ignores_nan():
    i = E.full((2, 2), float("nan"))
    check(lambda m, x, y, z: m.addmm(x, y, z, beta=0), None, i, rand(2, 3), rand(3, 2),
          grad=False)


PRODUCT_ERRORS = [
    ("mm_vec", lambda m, a, b: m.mm(a, b), [(3,), (3, 3)], {}),
    ("mm_3d", lambda m, a, b: m.mm(a, b), [(3, 3), (3, 3, 1)], {}),
    ("mm_shape", lambda m, a, b: m.mm(a, b), [(2, 3), (4, 5)], {}),
    ("mm_dtype", lambda m, a, b: m.mm(a, b), [(2, 3), (3, 4)], {1: E.float64}),
    ("mm_dtype_int", lambda m, a, b: m.mm(a, b), [(2, 3), (3, 4)], {0: E.int32, 1: E.int64}),
    ("bmm_2d", lambda m, a, b: m.bmm(a, b), [(3, 4), (3, 4, 4)], {}),
    ("bmm_shape", lambda m, a, b: m.bmm(a, b), [(2, 3, 4), (2, 5, 4)], {}),
    ("bmm_batch", lambda m, a, b: m.bmm(a, b), [(2, 3, 4), (3, 4, 4)], {}),
    ("bmm_dtype", lambda m, a, b: m.bmm(a, b), [(2, 3, 4), (2, 4, 4)], {1: E.float64}),
    ("mv_shape", lambda m, a, b: m.mv(a, b), [(3, 4), (3,)], {}),
    ("mv_dims", lambda m, a, b: m.mv(a, b), [(3, 4), (4, 1)], {}),
    ("mv_dtype", lambda m, a, b: m.mv(a, b), [(3, 4), (4,)], {1: E.float64}),
    ("dot_size", lambda m, a, b: m.dot(a, b), [(3,), (4,)], {}),
    ("dot_dims", lambda m, a, b: m.dot(a, b), [(3, 1), (3,)], {}),
    ("dot_dtype", lambda m, a, b: m.dot(a, b), [(3,), (3,)], {1: E.float64}),
    ("dot_bool", lambda m, a, b: m.dot(a, b), [(3,), (3,)], {0: E.bool, 1: E.bool}),
    ("vdot_dims", lambda m, a, b: m.vdot(a, b), [(3,), (3, 2)], {}),
    ("outer_dims", lambda m, a, b: m.outer(a, b), [(4,), (4, 6)], {}),
    ("inner_shape", lambda m, a, b: m.inner(a, b), [(2, 4), (3, 5)], {}),
    ("inner_dtype", lambda m, a, b: m.inner(a, b), [(2, 4), (3, 4)], {1: E.float64}),
    ("tensordot_size", lambda m, a, b: m.tensordot(a, b, 1), [(2, 4), (5, 3)], {}),
    ("tensordot_dtype", lambda m, a, b: m.tensordot(a, b, 1), [(2, 4), (4, 3)], {1: E.float64}),
    ("tensordot_neg", lambda m, a, b: m.tensordot(a, b, -1), [(2, 4), (4, 3)], {}),
    ("tensordot_big", lambda m, a, b: m.tensordot(a, b, 3), [(2, 4), (4, 3)], {}),
    ("tensordot_lists", lambda m, a, b: m.tensordot(a, b, ([1, 0], [0])), [(2, 4), (4, 3)], {}),
    ("tensordot_bool", lambda m, a, b: m.tensordot(a, b, 1), [(2, 4), (4, 3)],
     {0: E.bool, 1: E.bool}),
    ("addmm_dtype", lambda m, i, a, b: m.addmm(i, a, b), [(2, 2), (2, 2), (2, 2)],
     {0: E.float64}),
    ("addmm_expand", lambda m, i, a, b: m.addmm(i, a, b), [(3,), (2, 3), (3, 2)], {}),
    ("addmm_ndim", lambda m, i, a, b: m.addmm(i, a, b), [(2, 2, 2), (2, 3), (3, 2)], {}),
    ("addmv_size", lambda m, i, a, b: m.addmv(i, a, b), [(3,), (2, 3), (3,)], {}),
    ("addmv_dtype", lambda m, i, a, b: m.addmv(i, a, b), [(2,), (2, 3), (3,)], {0: E.float64}),
    ("addr_expand", lambda m, i, a, b: m.addr(i, a, b), [(2, 3), (2,), (4,)], {}),
    ("addr_alpha", lambda m, i, a, b: m.addr(i, a, b, alpha=2.5), [(2, 3), (2,), (3,)],
     {0: E.int64, 1: E.int64, 2: E.int64}),
    ("baddbmm_expand", lambda m, i, a, b: m.baddbmm(i, a, b), [(3, 3, 4), (2, 3, 5), (2, 5, 4)],
     {}),
    ("baddbmm_dtype", lambda m, i, a, b: m.baddbmm(i, a, b), [(2, 3, 4), (2, 3, 5), (2, 5, 4)],
     {0: E.float64}),
    ("addbmm_batches", lambda m, i, a, b: m.addbmm(i, a, b), [(3, 4), (2, 3, 5), (3, 5, 4)], {}),
    ("addbmm_dtype", lambda m, i, a, b: m.addbmm(i, a, b), [(3, 4), (2, 3, 5), (2, 5, 4)],
     {0: E.float64}),
    ("multi_dot_one", lambda m, a: m.linalg.multi_dot([a]), [(2, 2)], {}),
    ("multi_dot_shapes", lambda m, a, b: m.linalg.multi_dot([a, b]), [(2, 3), (4, 5)], {}),
    ("multi_dot_3d", lambda m, a, b: m.linalg.multi_dot([a, b]), [(2, 3, 3), (3, 5)], {}),
    ("multi_dot_mid", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), [(2, 3), (3,), (3, 2)],
     {}),
    ("multi_dot_dtype", lambda m, a, b: m.linalg.multi_dot([a, b]), [(2, 3), (3, 2)],
     {1: E.float64}),
]


@pytest.mark.parametrize("name,fn,shapes,dtypes", PRODUCT_ERRORS,
                         ids=[p[0] for p in PRODUCT_ERRORS])
def test_product_errors(name, fn, shapes, dtypes):
    args = [rand(*s, dtype=dtypes.get(k, E.float32), seed=k) for k, s in enumerate(shapes)]
    same_error(fn, *args)


# ====================================================================== einsum
EINSUM = [
    ("ij,jk->ik", [(2, 4), (4, 3)]),
    ("ij,jk", [(2, 4), (4, 3)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->ij", [(3, 3, 2)]),
    ("ij->ji", [(2, 3)]),
    ("ba", [(2, 3)]),
    ("Ba", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij,k->i", [(3, 3), (2,)]),
    ("i,i", [(3,), (1,)]),
    ("...ij,...jk", [(5, 2, 4), (3, 1, 4, 3)]),
    ("...ij,...jk->...ik", [(2, 4), (3, 4, 5)]),
    ("i...->...", [(2, 3, 4)]),
    ("bn,anm,bm->ba", [(2, 4), (3, 4, 5), (2, 5)]),
    ("i j , j k -> i k", [(2, 4), (4, 3)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("ij,jk->ik", [(0, 4), (4, 3)]),
    ("i,i->", [(0,), (0,)]),
]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("eq,shapes", EINSUM)
def test_einsum(eq, shapes, dtype):
    args = [rand(*s, dtype=dtype, requires_grad=True, seed=k) for k, s in enumerate(shapes)]
    check(lambda m, *a: m.einsum(eq, *a), None, *args, **tol(dtype))


def test_einsum_argument_forms():
    a, b = rand(2, 3, requires_grad=True), rand(3, 4, requires_grad=True, seed=1)
    check(lambda m, x, y: m.einsum("ij,jk", [x, y]), None, a, b)
    check(lambda m, x, y: m.einsum(x, [0, 1], y, [1, 2], [0, 2]), None, a, b)
    check(lambda m, x, y: m.einsum(x, [Ellipsis, 1], y, [1, 2]), None, a, b)
    check(lambda m, x: m.einsum("ij", x), None, rand(2, 3, noncontig=True))


@pytest.mark.parametrize("dtype", [E.int32, E.int64, E.bool, E.float16, E.bfloat16])
@pytest.mark.parametrize("eq,shapes", [("ij->i", [(2, 3)]), ("ij->ji", [(2, 3)]),
                                       ("ij,ij->ij", [(2, 3), (2, 3)]),
                                       ("ij,jk->ik", [(2, 3), (3, 2)])])
def test_einsum_other_dtypes(eq, shapes, dtype):
    args = [rand(*s, dtype=dtype, seed=k) for k, s in enumerate(shapes)]
    if dtype is E.bool and eq == "ij,jk->ik":
        same_error(lambda m, *a: m.einsum(eq, *a), *args)
    else:
        check(lambda m, *a: m.einsum(eq, *a), None, *args, grad=False)


EINSUM_ERRORS = [
    ("ij,jk->ik", [(2, 4), (5, 3)]),
    ("ij,jk->ik", [(2, 4)]),
    ("ij,jk->ik", [(2, 4), (4, 3), (2,)]),
    ("ijk,jk->ik", [(2, 4), (4, 3)]),
    ("ij->iq", [(2, 4)]),
    ("ii->i", [(2, 4)]),
    ("i.j", [(2, 3)]),
    ("i3", [(2, 3)]),
    ("ij->ii", [(2, 3)]),
    ("...ijk", [(2, 3)]),
    ("...i,...i", [(2, 3), (4, 3)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_ERRORS)
def test_einsum_errors(eq, shapes):
    same_error(lambda m, *a: m.einsum(eq, *a), *[rand(*s, seed=k) for k, s in enumerate(shapes)])


def test_einsum_dtype_and_arity_errors():
    same_error(lambda m, a, b: m.einsum("ij,jk", a, b), rand(2, 3), rand(3, 2, dtype=E.float64))
    same_error(lambda m: m.einsum("ij"))


def test_einsum_large_uses_blas():
    a, b = rand(300, 400, seed=1), rand(400, 200, seed=2)
    np.testing.assert_allclose(E.einsum("ij,jk->ik", a, b).numpy(), a.numpy() @ b.numpy(),
                               rtol=1e-4, atol=1e-4)


# ====================================================================== structure
STRUCTURE = [
    ("trace", lambda m, a: m.trace(a), (3, 4)),
    ("trace_empty", lambda m, a: m.trace(a), (0, 3)),
    ("diag_vec", lambda m, a: m.diag(a), (4,)),
    ("diag_vec_neg", lambda m, a: m.diag(a, -2), (4,)),
    ("diag_mat", lambda m, a: m.diag(a), (3, 5)),
    ("diag_mat_pos", lambda m, a: m.diag(a, 2), (3, 5)),
    ("diag_mat_neg", lambda m, a: m.diag(a, -1), (3, 5)),
    ("diag_mat_outside", lambda m, a: m.diag(a, 6), (3, 5)),
    ("diag_embed", lambda m, a: m.diag_embed(a), (2, 3)),
    ("diag_embed_offset_dims", lambda m, a: m.diag_embed(a, 1, 0, 2), (2, 3)),
    ("diag_embed_neg", lambda m, a: m.diag_embed(a, -2, -1, 0), (2, 3)),
    ("diagflat", lambda m, a: m.diagflat(a, -1), (2, 3)),
    ("diagflat_method", lambda m, a: a.diagflat(), (3,)),
    ("linalg_diagonal", lambda m, a: m.linalg.diagonal(a), (2, 3, 4)),
    ("linalg_diagonal_args", lambda m, a: m.linalg.diagonal(a, offset=1, dim1=0, dim2=2),
     (3, 2, 4)),
    ("tril", lambda m, a: m.tril(a), (3, 4)),
    ("tril_offset_batch", lambda m, a: m.tril(a, -1), (2, 3, 4)),
    ("triu", lambda m, a: m.triu(a, 1), (2, 4, 3)),
    ("triu_method", lambda m, a: a.triu(-1), (4, 4)),
]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name,fn,shape", STRUCTURE, ids=[s[0] for s in STRUCTURE])
def test_structure(name, fn, shape, dtype):
    check(fn, None, rand(*shape, dtype=dtype, requires_grad=True), **tol(dtype))


@pytest.mark.parametrize("name,fn,shape", STRUCTURE, ids=[s[0] for s in STRUCTURE])
def test_structure_noncontiguous(name, fn, shape):
    check(fn, None, leaf(rand(*shape, dtype=E.float64, noncontig=True)))


@pytest.mark.parametrize("dtype", [E.int64, E.int32, E.uint8, E.bool, E.float16, E.bfloat16])
@pytest.mark.parametrize("fn", [lambda m, a: m.tril(a, 1), lambda m, a: m.triu(a),
                                lambda m, a: m.diag(a), lambda m, a: m.diag_embed(a),
                                lambda m, a: m.trace(a), lambda m, a: m.diag(a[0], 1)])
def test_structure_dtypes(fn, dtype):
    a = rand(3, 3, dtype=dtype)
    try:
        expected = fn(torch, to_torch(a))
    except NotImplementedError:  # trace on bool
        same_error(fn, a)
        return
    assert_same(fn(E, a), expected)


@pytest.mark.parametrize("name", ["tril", "triu"])
def test_tri_inplace(name):
    a = rand(3, 4, dtype=E.float64)
    t = to_torch(a)
    assert getattr(a, name + "_")(1) is a
    getattr(t, name + "_")(1)
    assert_same(a, t)
    # in-place on a non-leaf keeps the gradient right
    x = rand(3, 3, dtype=E.float64, requires_grad=True)
    check(lambda m, v: getattr(v * 2, name + "_")(-1), None, x)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("sa,sb,dim", [((4, 3), (4, 3), -1), ((3, 4), (3, 4), 0),
                                       ((4, 3), (1, 3), 1), ((2, 1, 3), (1, 5, 3), -1)])
def test_cross(sa, sb, dim, dtype):
    a = rand(*sa, dtype=dtype, requires_grad=True, seed=1)
    b = rand(*sb, dtype=dtype, requires_grad=True, seed=2)
    check(lambda m, x, y: m.linalg.cross(x, y, dim=dim), None, a, b, **tol(dtype))
    check(lambda m, x, y: m.cross(x, y, dim), None, a, b, **tol(dtype))
    check(lambda m, x, y: x.cross(y, dim=dim), None, a, b, **tol(dtype))


def test_cross_default_dim_and_ints():
    a, b = rand(3, 4, seed=1), rand(3, 4, seed=2)
    with pytest.warns(UserWarning, match="without specifying the dim"):
        r = E.cross(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(r, torch.cross(to_torch(a), to_torch(b)))
    check(lambda m, x, y: m.linalg.cross(x, y), None, rand(2, 3, dtype=E.int64),
          rand(2, 3, dtype=E.int64, seed=1), grad=False)
    check(lambda m, x, y: m.linalg.cross(x, y), None, rand(2, 3, dtype=E.float16),
          rand(2, 3, dtype=E.float16, seed=1), grad=False)


STRUCTURE_ERRORS = [
    ("trace_3d", lambda m, a: m.trace(a), [(2, 3, 4)], {}),
    ("trace_bool", lambda m, a: m.trace(a), [(2, 3)], {0: E.bool}),
    ("tril_1d", lambda m, a: m.tril(a), [(3,)], {}),
    ("triu_1d", lambda m, a: m.triu(a), [(3,)], {}),
    ("diag_3d", lambda m, a: m.diag(a), [(2, 3, 4)], {}),
    ("diag_0d", lambda m, a: m.diag(a), [()], {}),
    ("diag_embed_same_dims", lambda m, a: m.diag_embed(a, dim1=0, dim2=0), [(3,)], {}),
    ("diag_embed_0d", lambda m, a: m.diag_embed(a), [()], {}),
    ("diag_embed_dim_range", lambda m, a: m.diag_embed(a, dim1=3), [(2, 3)], {}),
    ("cross_ndim", lambda m, a, b: m.linalg.cross(a, b), [(2, 3), (3,)], {}),
    ("cross_bcast", lambda m, a, b: m.linalg.cross(a, b), [(2, 3), (4, 3)], {}),
    ("cross_len", lambda m, a, b: m.linalg.cross(a, b), [(3, 4), (3, 4)], {}),
    ("cross_dtype", lambda m, a, b: m.linalg.cross(a, b), [(2, 3), (2, 3)], {1: E.float64}),
    ("cross_dim", lambda m, a, b: m.linalg.cross(a, b, dim=2), [(2, 3), (2, 3)], {}),
    ("cross_bool", lambda m, a, b: m.linalg.cross(a, b), [(2, 3), (2, 3)],
     {0: E.bool, 1: E.bool}),
    ("cross_no_size_3", lambda m, a, b: m.cross(a, b), [(4, 4), (4, 4)], {}),
]


@pytest.mark.parametrize("name,fn,shapes,dtypes", STRUCTURE_ERRORS,
                         ids=[p[0] for p in STRUCTURE_ERRORS])
def test_structure_errors(name, fn, shapes, dtypes):
    args = [rand(*s, dtype=dtypes.get(k, E.float32), seed=k) for k, s in enumerate(shapes)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_error(fn, *args)
