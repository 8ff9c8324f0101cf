"""Linear algebra against PyTorch: decompositions and solvers, singular matrices, bad input,
second derivatives.

Matrices that get inverted or decomposed are well conditioned (random + n*I, or A A^H + n*I for
positive definite), so both libraries agree to their dtype's tolerance. Singular vectors and
eigenvectors are only defined up to sign (phase), so those tests compare quantities that do not
depend on it.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from linalg_util import ALL, LOOSE, E, gradgrad, leaf, same_error, spd, well
from oracle import check, rand, to_torch


# ====================================================================== decompositions
def _svd_invariants(m, a, full=False):
    U, S, Vh = m.linalg.svd(a, full_matrices=full)
    k = S.shape[-1]
    if full:  # the extra singular vectors are arbitrary: keep the first k
        U, Vh = U[..., :k], Vh[..., :k, :]
    rec = (U * S.to(U.dtype).unsqueeze(-2)) @ Vh
    return m.real(U * U.conj()), S, m.real(Vh * Vh.conj()), rec


def _eigh_invariants(m, a, uplo="L"):
    L, V = m.linalg.eigh(a, UPLO=uplo)
    return L, m.real(V * V.conj()), (V * L.to(V.dtype).unsqueeze(-2)) @ V.mH


DECOMPS = [
    ("det", lambda m, a: m.linalg.det(a), well, (3, 3)),
    ("det_batch", lambda m, a: m.det(a), well, (2, 3, 3)),
    ("det_method", lambda m, a: a.det(), well, (4, 4)),
    ("slogdet", lambda m, a: m.linalg.slogdet(a), well, (2, 3, 3)),
    ("slogdet_torch", lambda m, a: m.slogdet(a), well, (3, 3)),
    ("logdet", lambda m, a: m.logdet(a), spd, (2, 3, 3)),
    ("inv", lambda m, a: m.linalg.inv(a), well, (3, 3)),
    ("inv_batch", lambda m, a: m.inverse(a), well, (2, 1, 3, 3)),
    ("inv_method", lambda m, a: a.inverse(), well, (4, 4)),
    ("cholesky", lambda m, a: m.linalg.cholesky(a), spd, (2, 3, 3)),
    ("cholesky_upper", lambda m, a: m.linalg.cholesky(a, upper=True), spd, (3, 3)),
    ("qr", lambda m, a: m.linalg.qr(a), rand, (4, 3)),
    ("qr_square_batch", lambda m, a: m.linalg.qr(a), rand, (2, 3, 3)),
    ("qr_wide", lambda m, a: m.linalg.qr(a), rand, (3, 5)),
    ("qr_complete_square", lambda m, a: m.linalg.qr(a, mode="complete"), rand, (3, 3)),
    ("qr_complete_wide", lambda m, a: m.linalg.qr(a, mode="complete"), rand, (2, 4)),
    ("svd_tall", _svd_invariants, rand, (2, 4, 3)),
    ("svd_wide", _svd_invariants, rand, (3, 5)),
    ("svd_square", _svd_invariants, rand, (3, 3)),
    ("svd_full", lambda m, a: _svd_invariants(m, a, True), rand, (4, 2)),
    ("svdvals", lambda m, a: m.linalg.svdvals(a), rand, (2, 4, 3)),
    ("eigh", _eigh_invariants, spd, (2, 4, 4)),
    ("eigh_upper", lambda m, a: _eigh_invariants(m, a, "U"), spd, (3, 3)),
    ("eigvalsh", lambda m, a: m.linalg.eigvalsh(a), spd, (2, 4, 4)),
    ("pinv_tall", lambda m, a: m.linalg.pinv(a), rand, (2, 4, 3)),
    ("pinv_wide", lambda m, a: m.linalg.pinv(a), rand, (3, 5)),
    ("pinv_hermitian", lambda m, a: m.linalg.pinv(a, hermitian=True), spd, (3, 3)),
    ("pinv_rtol", lambda m, a: m.linalg.pinv(a, rtol=1e-3), rand, (4, 3)),
    ("pinverse", lambda m, a: m.pinverse(a), rand, (4, 3)),
    ("matrix_power_3", lambda m, a: m.linalg.matrix_power(a, 3), well, (2, 3, 3)),
    ("matrix_power_1", lambda m, a: m.matrix_power(a, 1), well, (3, 3)),
    ("matrix_power_0", lambda m, a: a.matrix_power(0), well, (3, 3)),
    ("matrix_power_neg", lambda m, a: m.linalg.matrix_power(a, -2), well, (3, 3)),
]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name,fn,make,shape", DECOMPS, ids=[d[0] for d in DECOMPS])
def test_decompositions(name, fn, make, shape, dtype):
    a = make(*shape, dtype=dtype, requires_grad=True) if make is rand else \
        make(*shape, dtype=dtype)
    check(fn, None, a, **({"rtol": 1e-3, "atol": 1e-3} if dtype in LOOSE else {}))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("a_shape,b_shape,left", [
    ((3, 3), (3, 2), True), ((3, 3), (3,), True), ((2, 3, 3), (3,), True),
    ((2, 3, 3), (2, 3), True), ((2, 3, 3), (4, 2, 3, 5), True), ((3, 3), (2, 3, 3), True),
    ((3, 3), (2, 5, 3), False), ((2, 3, 3), (2, 4, 3), False), ((0, 3, 3), (3, 1), True),
    ((0, 0), (0, 2), True),
])
def test_solve(a_shape, b_shape, left, dtype):
    A = well(*a_shape, dtype=dtype)
    B = rand(*b_shape, dtype=dtype, requires_grad=True, seed=3)
    check(lambda m, x, y: m.linalg.solve(x, y, left=left), None, A, B,
          **({"rtol": 1e-3, "atol": 1e-3} if dtype in LOOSE else {}))


@pytest.mark.parametrize("name,fn,make,shape", [
    ("det", lambda m, a: m.linalg.det(a), well, (0, 0)),
    ("det_batch0", lambda m, a: m.linalg.det(a), well, (0, 3, 3)),
    ("slogdet", lambda m, a: m.linalg.slogdet(a), well, (2, 0, 0)),
    ("inv", lambda m, a: m.linalg.inv(a), well, (0, 0)),
    ("inv_batch0", lambda m, a: m.linalg.inv(a), well, (0, 2, 2)),
    ("cholesky", lambda m, a: m.linalg.cholesky(a), spd, (0, 3, 3)),
    ("qr", lambda m, a: m.linalg.qr(a), rand, (0, 3, 2)),
    ("svdvals", lambda m, a: m.linalg.svdvals(a), rand, (0, 3, 2)),
    ("eigvalsh", lambda m, a: m.linalg.eigvalsh(a), spd, (0, 2, 2)),
    ("pinv", lambda m, a: m.linalg.pinv(a), rand, (0, 3)),
    ("matrix_power", lambda m, a: m.linalg.matrix_power(a, 2), well, (0, 3, 3)),
])
def test_decompositions_empty(name, fn, make, shape):
    a = make(*shape, dtype=E.float64, requires_grad=True) if make is rand else \
        make(*shape, dtype=E.float64)
    check(fn, None, a)


def test_decompositions_noncontiguous():
    a = leaf(well(3, 3).detach().t())
    for fn in (lambda m, x: m.linalg.det(x), lambda m, x: m.linalg.inv(x),
               lambda m, x: m.linalg.solve(x, x[:, :1] + 1), lambda m, x: m.linalg.qr(x),
               lambda m, x: _svd_invariants(m, x), lambda m, x: m.linalg.pinv(x)):
        check(fn, None, a)
    s = spd(3, 3).detach()
    check(lambda m, x: m.linalg.cholesky(x), None, leaf(s.t()))


def test_eigh_reads_one_triangle():
    a = rand(3, 3, dtype=E.float64)
    s = a + a.t() + E.eye(3, dtype=E.float64) * 4
    junk = s.triu(1) * 7 + s.tril()  # the strict upper triangle is not read with UPLO='L'
    check(lambda m, x: m.linalg.eigvalsh(x), None, junk)
    check(lambda m, x: m.linalg.eigvalsh(x.mT, UPLO="U"), None, junk)
    check(lambda m, x: m.linalg.cholesky(x), None, junk)


def test_pinv_rank_deficient_forward():
    r = rand(4, 2, dtype=E.float64) @ E.tensor([[1.0, 0, 2], [0, 1, 0]], dtype=E.float64)
    check(lambda m, x: m.linalg.pinv(x), None, r, grad=False)
    check(lambda m, x: m.linalg.pinv(x, atol=0.5), None, r, grad=False)


def test_svd_torch_spelling():
    a = rand(4, 3, dtype=E.float64, requires_grad=True)
    check(lambda m, x: (lambda U, S, V: (m.real(U * U), S, V * V))(*m.svd(x)), None, a)
    check(lambda m, x: m.svd(x, compute_uv=False), None, a)
    check(lambda m, x: x.svd()[1], None, a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(lambda m, x: (lambda Q, R: (Q, R))(*m.qr(x)), None, a)
        check(lambda m, x: m.cholesky(x), None, spd(3, 3))
        check(lambda m, x: x.cholesky(upper=True), None, spd(3, 3))


def test_return_types():
    a = well(3, 3)
    r = E.linalg.slogdet(a)
    assert r.sign is r[0] and r.logabsdet is r[1]
    q = E.linalg.qr(a)
    assert q.Q is q[0] and q.R is q[1]
    u = E.linalg.svd(a)
    assert u.U is u[0] and u.S is u[1] and u.Vh is u[2]
    h = E.linalg.eigh(spd(3, 3))
    assert h.eigenvalues is h[0] and h.eigenvectors is h[1]


def test_complex_phase_dependent_loss_raises():
    a = rand(3, 3, dtype=E.complex128, requires_grad=True)
    U = E.linalg.svd(a)[0]
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        E.real(U).sum().backward()
    V = E.linalg.eigh(spd(3, 3, dtype=E.complex128))[1]
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        E.real(V).sum().backward()


def test_qr_not_differentiable_modes():
    for mode, shape in (("r", (3, 3)), ("complete", (4, 3))):
        a = rand(*shape, dtype=E.float64, requires_grad=True)
        t = to_torch(a)
        with pytest.raises(RuntimeError) as te:
            torch.linalg.qr(t, mode=mode)[1].sum().backward()
        with pytest.raises(RuntimeError) as ee:
            E.linalg.qr(a, mode=mode)[1].sum().backward()
        assert str(ee.value) == str(te.value)


# ---------------------------------------------------------------------- singular matrices
# Exactly singular in floating point: every elimination multiplier is a power of two, so LU
# reaches an exact zero pivot whatever the LAPACK's blocking or rounding. ([[1, 2, 3], [4, 5, 6],
# [7, 8, 9]] is singular only in exact arithmetic: whether a float32 LU finds a zero pivot
# depends on the library's rounding, so PyTorch raises on some CPUs and not on others.)
SINGULAR = [
    [[0.0, 0, 0], [0, 0, 0], [0, 0, 0]],
    [[1.0, 2], [2, 4]],
    [[4.0, 2, 1], [2, 1, 3], [8, 4, 2]],
    [[[1.0, 0], [0, 1]], [[0, 0], [0, 0]]],
]


@pytest.mark.parametrize("data", SINGULAR)
def test_inv_singular(data):
    a = E.tensor(data)
    with pytest.raises(torch.linalg.LinAlgError) as te:
        torch.linalg.inv(to_torch(a))
    with pytest.raises(E.linalg.LinAlgError) as ee:
        E.linalg.inv(a)
    assert isinstance(ee.value, RuntimeError)
    assert str(ee.value) == str(te.value)
    with pytest.raises(E.linalg.LinAlgError):
        E.linalg.matrix_power(a, -1)
    with pytest.raises(E.linalg.LinAlgError, match="input matrix is singular"):
        E.linalg.solve(a, E.ones(a.shape[:-1]))


@pytest.mark.parametrize("data", [[[1.0, 2], [2, 4]], [[1.0, 0], [0, 0]],
                                  [[[1.0, 2], [3, 4]], [[0, 0], [1, 0]]]])
def test_det_singular(data):
    a = E.tensor(data, dtype=E.float64, requires_grad=True)
    check(lambda m, x: m.linalg.det(x), None, a, grad=False)
    check(lambda m, x: m.linalg.slogdet(x), None, a, grad=False)
    # d det / dA is the adjugate, nonzero at rank n-1 (PyTorch returns zeros there): check it
    # against finite differences instead
    assert E.autograd.gradcheck(E.linalg.det, (a,))


@pytest.mark.parametrize("data", [[[-1.0, 0], [0, 1]], [[1.0, 2, 3], [4, 5, 6], [7, 8, 9]],
                                  [[[4.0, 0], [0, 1]], [[1, 0], [0, -1]]]])
def test_cholesky_not_positive_definite(data):
    a = E.tensor(data)
    with pytest.raises(torch.linalg.LinAlgError) as te:
        torch.linalg.cholesky(to_torch(a))
    with pytest.raises(E.linalg.LinAlgError) as ee:
        E.linalg.cholesky(a)
    assert str(ee.value) == str(te.value)


# ---------------------------------------------------------------------- bad input
DECOMP_FNS = {
    "det": lambda m, a: m.linalg.det(a), "slogdet": lambda m, a: m.linalg.slogdet(a),
    "logdet": lambda m, a: m.logdet(a), "inv": lambda m, a: m.linalg.inv(a),
    "solve": lambda m, a: m.linalg.solve(a, a), "cholesky": lambda m, a: m.linalg.cholesky(a),
    "qr": lambda m, a: m.linalg.qr(a), "svd": lambda m, a: m.linalg.svd(a),
    "svdvals": lambda m, a: m.linalg.svdvals(a), "eigh": lambda m, a: m.linalg.eigh(a),
    "eigvalsh": lambda m, a: m.linalg.eigvalsh(a), "pinv": lambda m, a: m.linalg.pinv(a),
    "matrix_power": lambda m, a: m.linalg.matrix_power(a, 2),
    "torch_svd": lambda m, a: m.svd(a), "torch_cholesky": lambda m, a: m.cholesky(a),
    "matrix_norm": lambda m, a: m.linalg.matrix_norm(a),
    "matrix_norm_2": lambda m, a: m.linalg.matrix_norm(a, 2),
}


@pytest.mark.parametrize("name", list(DECOMP_FNS))
@pytest.mark.parametrize("shape,dtype", [((3,), E.float32), ((2, 3), E.float32),
                                         ((3, 3), E.int64), ((3, 3), E.bool),
                                         ((3, 3), E.float16), ((3, 3), E.bfloat16)])
def test_decomposition_errors(name, shape, dtype):
    fn = DECOMP_FNS[name]
    a = rand(*shape, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = fn(torch, to_torch(a))
        except Exception:
            same_error(fn, a)
            return
        # it works in both (values are compared elsewhere; svd signs are arbitrary)
        got = fn(E, a)
        meta = lambda r: [(tuple(x.shape), str(x.dtype).split(".")[-1])  # noqa: E731
                          for x in (r if isinstance(r, tuple) else (r,))]
        assert meta(got) == meta(expected)


@pytest.mark.parametrize("fn", [
    lambda m, a, b: m.linalg.solve(a, b[:2]),
    lambda m, a, b: m.linalg.solve(a, b.double()),
    lambda m, a, b: m.linalg.solve(a.expand(2, 3, 3), b.expand(4, 3, 1)),
    lambda m, a, b: m.linalg.solve(a, b.unsqueeze(0).expand(2, 3, 5), left=False),
    lambda m, a, b: m.linalg.eigh(a, UPLO="X"),
    lambda m, a, b: m.linalg.qr(a, mode="foo"),
    lambda m, a, b: m.linalg.matrix_power(a, 2.0),
])
def test_decomposition_argument_errors(fn):
    same_error(fn, well(3, 3, dtype=E.float32).detach(), rand(3, 5))


# ---------------------------------------------------------------------- second derivatives
GRADGRAD = [
    ("mm", lambda a, b: E.mm(a, b), [(3, 3), (3, 2)]),
    ("matmul_bcast", lambda a, b: E.matmul(a, b), [(2, 3, 3), (3, 2)]),
    ("einsum", lambda a, b: E.einsum("ij,jk->ik", a, b), [(3, 3), (3, 2)]),
    ("addmm", lambda a, b: E.addmm(b, a, b, beta=0.5, alpha=2), [(3, 3), (3, 3)]),
    ("det", lambda a: E.linalg.det(a), ["well"]),
    ("slogdet", lambda a: E.linalg.slogdet(a)[1], ["well"]),
    ("inv", lambda a: E.linalg.inv(a), ["well"]),
    ("solve", lambda a, b: E.linalg.solve(a, b), ["well", (3, 2)]),
    ("cholesky", lambda a: E.linalg.cholesky((a + a.mT) / 2), ["spd"]),
    ("eigvalsh", lambda a: E.linalg.eigvalsh((a + a.mT) / 2), ["spd"]),
    ("qr", lambda a: E.linalg.qr(a)[0], [(4, 3)]),
    ("svd", lambda a: (lambda U, S, Vh: (U * U, S, Vh * Vh))(*E.linalg.svd(a, False)), [(4, 3)]),
    ("pinv", lambda a: E.linalg.pinv(a), [(3, 2)]),
    ("trace", lambda a: E.trace(a), [(3, 3)]),
    ("diag", lambda a: E.diag(a, 1), [(3, 4)]),
    ("diag_embed", lambda a: E.diag_embed(a, 1), [(2, 3)]),
    ("cross", lambda a, b: E.linalg.cross(a, b), [(2, 3), (2, 3)]),
    ("vector_norm", lambda a: E.linalg.vector_norm(a, 3, dim=1), [(3, 3)]),
    ("matrix_norm_nuc", lambda a: E.linalg.matrix_norm(a, "nuc"), [(3, 4)]),
    ("matrix_power", lambda a: E.linalg.matrix_power(a, -2), ["well"]),
]


@pytest.mark.parametrize("name,fn,shapes", GRADGRAD, ids=[g[0] for g in GRADGRAD])
def test_gradgradcheck(name, fn, shapes):
    makers = {"well": lambda k: well(3, 3, seed=k), "spd": lambda k: spd(3, 3, seed=k)}
    inputs = tuple(makers[s](k) if isinstance(s, str) else
                   rand(*s, dtype=E.float64, requires_grad=True, seed=k)
                   for k, s in enumerate(shapes))
    gradgrad(fn, inputs)


def test_gradcheck_decompositions_wide_and_upper():
    assert E.autograd.gradcheck(lambda a: E.linalg.qr(a), (rand(3, 5, dtype=E.float64,
                                                                 requires_grad=True),))
    assert E.autograd.gradcheck(lambda a: E.linalg.cholesky((a + a.mT) / 2, upper=True),
                                (spd(3, 3),))
