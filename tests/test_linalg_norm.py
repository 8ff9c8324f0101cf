"""Linear algebra against PyTorch: vector and matrix norms, and op metadata (run_meta) against
eager results."""

from __future__ import annotations

import pytest
from linalg_util import ALL, INF, E, same_error, spd, tol
from oracle import check, rand

# ====================================================================== norms
VECTOR_ORDS = [2, 1, INF, -INF, 0, 3, 0.5, -1, -2.5]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("ord", VECTOR_ORDS)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_vector_norm(ord, dim, keepdim, dtype):
    x = rand(3, 4, 2, dtype=dtype, requires_grad=True, seed=7)
    check(lambda m, a: m.linalg.vector_norm(a, ord, dim, keepdim), None, x, **tol(dtype))


def test_vector_norm_ties_zeros_and_dtype():
    x = E.tensor([[1.0, -3, 3], [0, 0, 0]], dtype=E.float64, requires_grad=True)
    for ord in VECTOR_ORDS:
        if ord > 0:  # torch's negative-order gradients at exact zeros are inf/nan noise
            check(lambda m, a: m.linalg.vector_norm(a, ord, dim=1), None, x)
    check(lambda m, a: m.linalg.vector_norm(a, dtype=m.float64), None,
          rand(3, 4, requires_grad=True))
    check(lambda m, a: m.linalg.vector_norm(a, dtype=m.complex128), None,
          rand(3, 4, dtype=E.complex64, requires_grad=True))
    for dt in (E.float16, E.bfloat16):
        check(lambda m, a: m.linalg.vector_norm(a, 2, 1), None, rand(3, 4, dtype=dt), grad=False)
    check(lambda m, a: m.linalg.vector_norm(a, INF, dim=1), None, rand(0, 3), grad=False)
    check(lambda m, a: m.linalg.vector_norm(a), None, rand(0, 3, requires_grad=True))
    check(lambda m, a: m.linalg.vector_norm(a, 3), None, rand(dtype=E.float64,
                                                              requires_grad=True))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, INF, -INF])
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((0, 2), True), ((2, 0), False)])
def test_matrix_norm(ord, dim, keepdim, dtype):
    x = rand(3, 2, 4, dtype=dtype, requires_grad=True, seed=5)
    check(lambda m, a: m.linalg.matrix_norm(a, ord, dim, keepdim), None, x, **tol(dtype))


@pytest.mark.parametrize("ord,dim,shape", [(None, None, (2, 3, 4)), (None, 1, (2, 3)),
                                           (None, (0, 1), (2, 3)), (3, None, (4,)),
                                           ("fro", None, (2, 3)), ("nuc", None, (3, 3)),
                                           (INF, None, (3, 4)), (-1, (1, 0), (3, 4)),
                                           (0.5, 0, (3, 4))])
def test_linalg_norm(ord, dim, shape):
    x = rand(*shape, dtype=E.float64, requires_grad=True)
    check(lambda m, a: m.linalg.norm(a, ord, dim), None, x)
    check(lambda m, a: m.linalg.norm(a, ord, dim, keepdim=True, dtype=m.float64), None,
          rand(*shape, requires_grad=True))


NORM_ERRORS = [
    lambda m, a: m.linalg.vector_norm(a.long()),
    lambda m, a: m.linalg.vector_norm(a, dtype=m.float16),
    lambda m, a: m.linalg.vector_norm(a.cfloat(), dtype=m.float64),
    lambda m, a: m.linalg.vector_norm(a, ord="fro"),
    lambda m, a: m.linalg.vector_norm(a[:0], ord=INF),
    lambda m, a: m.linalg.vector_norm(a[:0], ord=-1),
    lambda m, a: m.linalg.matrix_norm(a[0], ord=0),
    lambda m, a: m.linalg.matrix_norm(a, ord=3),
    lambda m, a: m.linalg.matrix_norm(a, ord="foo"),
    lambda m, a: m.linalg.matrix_norm(a, dim=(0, 0)),
    lambda m, a: m.linalg.matrix_norm(a.long()),
    lambda m, a: m.linalg.matrix_norm(a.half(), "nuc"),
    lambda m, a: m.linalg.norm(a.unsqueeze(0), ord=2),
    lambda m, a: m.linalg.norm(a[0], ord="fro"),
    lambda m, a: m.linalg.norm(a, ord=3),
    lambda m, a: m.linalg.norm(a.unsqueeze(0), dim=(0, 1, 2)),
]


@pytest.mark.parametrize("fn", NORM_ERRORS)
def test_norm_errors(fn):
    same_error(fn, rand(3, 3))


# ====================================================================== metadata
def _meta_of(r):
    if isinstance(r, tuple):
        return tuple(_meta_of(x) for x in r)
    return tuple(r.shape), r.dtype


META = [
    ("matmul", [(5, 2, 3), (3,)], {}), ("matmul", [(3,), (4, 3, 2)], {}),
    ("mm", [(2, 3), (3, 4)], {}), ("bmm", [(2, 2, 3), (2, 3, 4)], {}),
    ("addmm", [(4,), (2, 3), (3, 4)], {}), ("inverse", [(2, 3, 3)], {}), ("det", [(2, 3, 3)], {}),
    ("slogdet", [(3, 3)], {}), ("linalg_solve", [(2, 3, 3), (3,)], {}),
    ("linalg_solve", [(3, 3), (4, 3, 2)], {}), ("linalg_solve", [(3, 3), (2, 3)], {"left": False}),
    ("linalg_cholesky", [(3, 3)], {}), ("linalg_qr", [(4, 3)], {}),
    ("linalg_qr", [(3, 5)], {"mode": "complete"}), ("linalg_qr", [(3, 5)], {"mode": "r"}),
    ("linalg_svd", [(2, 4, 3)], {}), ("linalg_svd", [(4, 3)], {"full_matrices": False}),
    ("linalg_svdvals", [(3, 5)], {}), ("linalg_eigh", [(3, 3)], {}),
    ("linalg_eigvalsh", [(2, 3, 3)], {}), ("linalg_pinv", [(4, 3)], {}),
    ("linalg_vector_norm", [(2, 3)], {"dim": 1}), ("trace", [(2, 3)], {}),
    ("diag_embed", [(2, 3)], {"offset": 1}), ("linalg_cross", [(2, 3), (1, 3)], {}),
]


@pytest.mark.parametrize("dtype", [E.float32, E.complex128])
@pytest.mark.parametrize("name,shapes,kwargs", META,
                         ids=[f"{m[0]}-{k}" for k, m in enumerate(META)])
def test_meta_matches_eager(name, shapes, kwargs, dtype):
    d = E.ops.registry.OPS[name]
    metas = [E.autograd.engine.TensorMeta(E.zeros(s, dtype=dtype)) for s in shapes]
    square = name in ("inverse", "det", "slogdet", "linalg_solve", "linalg_cholesky")
    args = [spd(*s, dtype=dtype).detach() if square and k == 0 else rand(*s, dtype=dtype, seed=k)
            for k, s in enumerate(shapes)]
    assert d.run_meta(*metas, **kwargs) == _meta_of(d(*args, **kwargs))
