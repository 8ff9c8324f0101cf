"""Determinants, inverses, solvers and decompositions: det, slogdet, logdet, inv, solve,
cholesky, qr, svd, svdvals, eigh, eigvalsh, pinv, matrix_power.

Kernels are numpy's LAPACK routines (batched over leading dimensions; numpy works in double
precision internally and returns the input's precision). Backward rules are the standard
matrix-calculus results, written with ember ops so they differentiate again; each assumes
what its decomposition needs to be differentiable (an invertible matrix, distinct
eigenvalues or singular values, full rank for pinv). Singular and non-positive-definite
inputs raise ``LinAlgError`` (a RuntimeError) with PyTorch's message.
"""

from __future__ import annotations

import math
import operator
from collections import namedtuple

import numpy as np

from .. import _dtype as D
from ..autograd.grad_mode import no_grad
from .bind import tensor_method
from .selection import where
from .complex import imag, real
from .creation import eye
from .linalg import _LOW, edtype, is_inexact, matmul, tname, write_out_as
from .linalg_struct import diag_embed
from .padding import pad
from .arguments import takes_tensors
from .arguments import broadcast_error
from .registry import op
from .strided import diagonal, narrow

PUBLIC = ["logdet", "matrix_power", "pinverse", "svd", "qr", "cholesky"]


class LinAlgError(RuntimeError):
    """Raised for singular or non-positive-definite input (``ember.linalg.LinAlgError``)."""


linalg_slogdet = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
linalg_qr = namedtuple("linalg_qr", ["Q", "R"])
linalg_svd = namedtuple("linalg_svd", ["U", "S", "Vh"])
linalg_eigh = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
qr_result = namedtuple("qr", ["Q", "R"])
svd_result = namedtuple("svd", ["U", "S", "V"])


def check_matrix(name: str, A, *, square: bool = True, ints: str | None = None,
                 low: str | None = None) -> None:
    """PyTorch's input checks for a (batch of) matrices. ``ints``/``low`` name the kernel whose
    "not implemented" error integer/bool or float16/bfloat16 input gets instead of the
    generic message."""
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if not is_inexact(A):
        if ints:
            raise NotImplementedError(f"\"{ints}\" not implemented for '{tname(A)}'")
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{tname(A)}")
    if (A.dtype.np if isinstance(A.dtype, D.dtype) else A.dtype) in _LOW:  # array or Tensor
        if low:
            raise NotImplementedError(f"\"{low}\" not implemented for '{tname(A)}'")
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {tname(A)}")


def _batch_prefix(A, b: int) -> str:
    return f"(Batch element {b}): " if A.ndim > 2 else ""


def _zero_pivot(xp, m: np.ndarray) -> int:
    """1-based index of the first zero pivot of LU with partial pivoting (as LAPACK's getrf
    reports it); 0 when there is none. Only run on matrices LAPACK already found singular."""
    m = m.astype(np.complex128 if m.dtype.kind == "c" else np.float64)
    n = m.shape[0]
    for j in range(n):
        p = j + int(xp.argmax(xp.abs(m[j:, j])))
        if m[p, j] == 0:
            return j + 1
        m[[j, p]] = m[[p, j]]
        m[j + 1:, j:] -= xp.outer(m[j + 1:, j] / m[j, j], m[j, j:])
    return 0


def _raise_singular(xp, name: str, A: np.ndarray, tail: str) -> None:
    flat = A.reshape((-1,) + A.shape[-2:])
    for b in range(flat.shape[0]):
        pivot = _zero_pivot(xp, flat[b])
        if pivot:
            raise LinAlgError(f"{name}: {_batch_prefix(A, b)}The diagonal element {pivot} is "
                              f"zero, {tail}")
    raise LinAlgError(f"{name}: The diagonal element {A.shape[-1]} is zero, {tail}")


def _mat(v):
    """One scalar per matrix, (...) -> (..., 1, 1), to scale a batch of matrices."""
    return v.unsqueeze(-1).unsqueeze(-1)


# ---------------------------------------------------------------------- det, slogdet, inv
@op(saves=("A",), save_output=True, grad_name="LinalgDetBackward0")
def det(xp, A: "Tensor"):
    """det(A) -> Tensor: the determinant of each square matrix (also ``linalg.det``)."""
    check_matrix("linalg.det", A, low="lu_cpu")
    return xp.asarray(xp.linalg.det(A))


def _adjugate_h(A):
    """adj(A)^H, singular matrices included, from the SVD: adj(A) = det(U) det(Vh) V diag(p) U^H
    with p_i the product of the other singular values. A constant (no history): the
    gradient it gives is first order only."""
    with no_grad():
        U, S, Vh = linalg_svd(A)
        n = S.shape[-1]
        others = where(eye(n, dtype=D.bool_, device=A.device), 1, S.unsqueeze(-2))
        p = others.prod(-1)
        adj = _mat(det(U) * det(Vh)) * matmul(Vh.mH * p.unsqueeze(-2), U.mH)
        return adj.mH


@det.def_backward
def _(ctx, g):
    A, d = ctx.A, ctx.out
    gd = _mat(g * d.conj())
    singular = d == 0
    if not bool(singular.any()):  # a host read: which formula the batch needs
        return gd * inverse(A).mH
    # d det / dA is the adjugate; where A is singular it is not det * inv(A), so those matrices
    # get the SVD form (a constant: first order only) and the rest go through inv as usual.
    mask = _mat(singular)
    safe = where(mask, eye(A.shape[-1], dtype=A.dtype, device=A.device), A)
    return where(mask, _mat(g) * _adjugate_h(A), gd * inverse(safe).mH)


@op(saves=("A",), save_output=True, returns=linalg_slogdet, grad_name="LinalgSlogdetBackward0")
def slogdet(xp, A: "Tensor"):
    """slogdet(A) -> (sign, logabsdet): the sign (a unit complex number for complex input) and
    the log of the absolute value of the determinant."""
    check_matrix("linalg.slogdet", A)
    sign, logabs = np.linalg.slogdet(A)  # numpy-only: slogdet (CuPy's corner cases differ)
    return xp.asarray(sign), xp.asarray(logabs)


@slogdet.def_backward
def _(ctx, g_sign, g_logabs):
    A = ctx.A
    c = g_logabs
    if A.is_complex():  # only the phase of sign moves: it contributes i * Im(conj(g) sign)
        sign = ctx.out[0]
        c = g_logabs - 1j * imag(g_sign.conj() * sign)
    return _mat(c) * inverse(A).mH


@takes_tensors("input")
def logdet(input):
    """logdet(input) -> Tensor: log(det(input)); NaN where a real determinant is negative."""
    check_matrix("logdet", input)
    sign, logabs = slogdet(input)
    if input.is_complex():
        return logabs.to(sign.dtype) + sign.log()
    return logabs.masked_fill(sign < 0, float("nan"))


@op(save_output=True, grad_name="LinalgInvExBackward0", out_exact=True)
def inverse(xp, A: "Tensor"):
    """inverse(A) -> Tensor: the inverse of each square matrix (also ``linalg.inv``)."""
    check_matrix("linalg.inv", A)
    try:
        return xp.linalg.inv(A)
    except np.linalg.LinAlgError:
        _raise_singular(xp, "linalg.inv", A, "the inversion could not be completed because the "
                        "input matrix is singular.")


@inverse.def_backward
def _(ctx, g):
    inv_h = ctx.out.mH
    return -matmul(matmul(inv_h, g), inv_h)


# ---------------------------------------------------------------------- solve
def _vector_rhs(A, B) -> bool:
    """PyTorch treats B as a (batch of) vector(s) when it is 1-D or A's shape minus one dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


def _solve_shapes(A, B, left: bool) -> tuple[bool, tuple]:
    """linalg.solve's checks; (is B a vector, the result's shape)."""
    check_matrix("linalg.solve", A, low="lu_cpu")
    if edtype(A) is not edtype(B):
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A "
                           f"of type {tname(A)} and B of type {tname(B)} instead")
    n = A.shape[-1]
    vec = _vector_rhs(A, B)
    bshape = tuple(B.shape) + (1,) if vec else tuple(B.shape)
    rows, cols = bshape[-2:]
    if (rows if left else cols) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation {eq} "
                           f"({n}x{n} and {rows}x{cols})")
    msg = broadcast_error([tuple(A.shape[:-2]), bshape[:-2]])
    if msg:
        raise RuntimeError(msg)
    batch = np.broadcast_shapes(tuple(A.shape[:-2]), bshape[:-2])
    return vec, batch + ((n,) if vec else bshape[-2:])


@op(saves=("A",), save_output=True, function=False, method=False,
    grad_name="LinalgSolveExBackward0")
def linalg_solve(xp, A: "Tensor", B: "Tensor", *, left=True):
    """linalg.solve(A, B, *, left=True) -> Tensor: X with AX = B (XA = B when left=False),
    broadcasting batch dimensions."""
    vec, _ = _solve_shapes(A, B, left)
    Bm = B[..., :, None] if vec else B  # a vector is a column (XA = B then fails in the check)
    a = A if left else xp.swapaxes(A, -1, -2)
    b = Bm if left else xp.swapaxes(Bm, -1, -2)
    try:
        x = np.linalg.solve(a, b)  # numpy-only: solve broadcasting batch dims (CuPy's doesn't)
    except np.linalg.LinAlgError:
        raise LinAlgError("torch.linalg.solve: The solver failed because the input matrix is "
                          "singular.") from None
    if not left:
        x = xp.swapaxes(x, -1, -2)
    return x[..., 0] if vec else x


@linalg_solve.def_backward
def _(ctx, g):
    A, X, left = ctx.A, ctx.out, ctx.left
    need_a, _ = ctx.needs_input_grad
    gB = linalg_solve(A.mH, g, left=left)
    if not need_a:
        return None, gB
    if _vector_rhs(A, X):  # (only left=True gets here with vectors)
        gm, xm = gB.unsqueeze(-1), X.unsqueeze(-1)
    else:
        gm, xm = gB, X
    gA = -matmul(gm, xm.mH) if left else -matmul(xm.mH, gm)
    return gA, gB


# ---------------------------------------------------------------------- cholesky
@op(save_output=True, function=False, method=False, grad_name="LinalgCholeskyExBackward0")
def linalg_cholesky(xp, A: "Tensor", *, upper=False):
    """linalg.cholesky(A, *, upper=False) -> Tensor: L with A = L L^H (U = L^H if upper), read
    from the lower triangle of A."""
    check_matrix("linalg.cholesky", A, low="cholesky_cpu")
    return _cholesky_kernel(xp, "linalg.cholesky", A, upper)


def _cholesky_kernel(xp, name, A, upper):
    try:
        L = xp.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        _raise_not_pd(xp, name, A)
    return xp.conj(xp.swapaxes(L, -1, -2)).copy() if upper else L


def _raise_not_pd(xp, name: str, A: np.ndarray) -> None:
    flat = A.reshape((-1,) + A.shape[-2:])
    for b in range(flat.shape[0]):
        m = flat[b]
        try:
            xp.linalg.cholesky(m)
            continue
        except np.linalg.LinAlgError:
            pass
        lo, hi = 1, m.shape[0]  # leading minors stop being PD at one order: bisect for it
        while lo < hi:
            mid = (lo + hi) // 2
            try:
                xp.linalg.cholesky(m[:mid, :mid])
                lo = mid + 1
            except np.linalg.LinAlgError:
                hi = mid
        raise LinAlgError(f"{name}: {_batch_prefix(A, b)}The factorization could not be "
                          f"completed because the input is not positive-definite (the leading "
                          f"minor of order {lo} is not positive-definite).")


@linalg_cholesky.def_backward
def _(ctx, g):
    L, gL = (ctx.out.mH, g.mH) if ctx.upper else (ctx.out, g)
    # A = L L^H: with P = tril(L^H gL), gA = L^-H sym(P) L^-1 where sym keeps P's lower part
    # and mirrors it (halving the diagonal), as only A's Hermitian part is a free variable.
    P = matmul(L.mH, gL).tril()
    S = 0.5 * (P + P.tril(-1).mH)
    L_inv = inverse(L)
    return matmul(matmul(L_inv.mH, S), L_inv)


@takes_tensors("input")
def cholesky(input, upper: bool = False, *, out=None):
    """cholesky(input, upper=False) -> Tensor: deprecated spelling of linalg.cholesky."""
    check_matrix("cholesky", input, ints="cholesky_cpu", low="cholesky_cpu")
    return linalg_cholesky(input, upper=upper, out=out)


# ---------------------------------------------------------------------- qr
def _check_qr(A, mode):
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    check_matrix("linalg.qr", A, square=False, low="geqrf_cpu")



@op(saves=("A",), save_output=True, returns=linalg_qr, function=False, method=False,
    grad_name="LinalgQrBackward0")
def linalg_qr(xp, A: "Tensor", mode="reduced"):
    """linalg.qr(A, mode='reduced') -> (Q, R): A = QR with orthonormal Q and upper-triangular R
    (mode 'complete': square Q; 'r': R only, Q empty)."""
    _check_qr(A, mode)
    if mode == "r":
        return xp.zeros(0, A.dtype), xp.linalg.qr(A, mode="r")
    Q, R = xp.linalg.qr(A, mode=mode)
    return Q, R


def _cols(x, start: int, stop: int):
    return narrow(x, -1, start, stop - start)


def _place_cols(x, start: int, total: int):
    """x (..., k) as columns start..start+k of a (..., total) matrix of zeros."""
    return pad(x, (start, total - start - x.shape[-1]))


def _herm_from_upper(M):
    """The Hermitian matrix with M's strictly upper triangle and M's real diagonal."""
    t = M.triu(1)
    return t + t.mH + diag_embed(real(diagonal(M, 0, -2, -1)))


def _qr_square_grad(Q, R, gQ, gR):
    """A = QR with R square and invertible: gA = (gQ + Q S) R^-H, S = herm(gR R^H - Q^H gQ)."""
    S = _herm_from_upper(matmul(gR, R.mH) - matmul(Q.mH, gQ))
    return linalg_solve(R.mH, gQ + matmul(Q, S), left=False)


@linalg_qr.def_backward
def _(ctx, gQ, gR):
    mode, A = ctx.mode, ctx.A
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when "
                           "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going "
                           "to differentiate through linalg.qr.")
    m, n = A.shape[-2:]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and "
                           "nrows > ncols.")
    Q, R = ctx.out
    if m >= n:
        return _qr_square_grad(Q, R, gQ, gR)
    # wide: A = [X | Y] with X = Q R1 square and Y = Q R2, so R2 = Q^H Y
    R1, R2 = _cols(R, 0, m), _cols(R, m, n)
    gR1, gR2 = _cols(gR, 0, m), _cols(gR, m, n)
    Y = _cols(A, m, n)
    gX = _qr_square_grad(Q, R1, gQ + matmul(Y, gR2.mH), gR1)
    return _place_cols(gX, 0, n) + _place_cols(matmul(Q, gR2), m, n)


def qr(input, some: bool = True, *, out=None):
    """qr(input, some=True) -> (Q, R): deprecated spelling of linalg.qr."""
    r = linalg_qr(input, "reduced" if some else "complete", out=out)
    return qr_result(*r)


# ---------------------------------------------------------------------- svd
_SVD_PHASE = ("svd_backward: The singular vectors in the complex case are specified up to "
              "multiplication by e^{i phi}. The specified loss function depends on this phase "
              "term, making it ill-defined.")
_EIGH_PHASE = ("linalg_eigh_backward: The eigenvectors in the complex case are specified up to "
               "multiplication by e^{i phi}. The specified loss function depends on this "
               "quantity, so it is ill-defined.")


def _check_phase(im_diag, scale, msg: str) -> None:
    """Complex singular/eigen vectors are defined up to a phase per vector; a loss that depends
    on it has no gradient (PyTorch raises)."""
    if not im_diag.numel():
        return
    with no_grad():
        big = scale.abs().amax() if scale.numel() else 0.0
        tol = math.sqrt(D.finfo(im_diag.dtype).eps) * (1 + big)
        bad = im_diag.abs().amax() > tol
    if bool(bad):  # a data-dependent check: one host read
        raise RuntimeError(msg)


@op(save_output=True, returns=linalg_svd, function=False, method=False,
    grad_name="LinalgSvdBackward0")
def linalg_svd(xp, A: "Tensor", full_matrices=True, *, driver=None):
    """linalg.svd(A, full_matrices=True) -> (U, S, Vh): A = U diag(S) Vh, S descending."""
    check_matrix("linalg.svd", A, square=False, low="linalg_svd_cpu")
    U, S, Vh = xp.linalg.svd(A, full_matrices=full_matrices)
    return U, S, Vh


def _off_diag_inverse(E):
    """1 / E off the diagonal, 0 on it (without ever dividing by the zero diagonal)."""
    n = E.shape[-1]
    off = 1 - eye(n, dtype=E.dtype, device=E.device)
    return off / (E + eye(n, dtype=E.dtype, device=E.device))


def svd_grad(U, S, Vh, gU, gS, gVh):
    """Gradient of A = U diag(S) Vh (reduced: U m x k, Vh k x n) for distinct, nonzero S."""
    gA = None
    if gU is None and gVh is None:
        return matmul(U * gS.unsqueeze(-2), Vh)
    m, n, k = U.shape[-2], Vh.shape[-1], S.shape[-1]
    V, gV = Vh.mH, gVh.mH
    J, K = matmul(U.mH, gU), matmul(V.mH, gV)
    if U.is_complex():
        _check_phase(imag(diagonal(J + K, 0, -2, -1)), J, _SVD_PHASE)
    S2 = S * S
    F = _off_diag_inverse(S2.unsqueeze(-2) - S2.unsqueeze(-1))  # 1 / (s_j^2 - s_i^2)
    inner = (F * (J - J.mH)) * S.unsqueeze(-2) + S.unsqueeze(-1) * (F * (K - K.mH))
    inner = inner + diag_embed(gS.to(inner.dtype))
    if U.is_complex():
        inner = inner + diag_embed(imag(diagonal(J - K, 0, -2, -1)) * 0.5j / S)
    gA = matmul(matmul(U, inner), Vh)
    if m > k:  # the part of gU outside span(U)
        gA = gA + matmul((gU - matmul(U, J)) / S.unsqueeze(-2), Vh)
    if n > k:
        gA = gA + matmul(U / S.unsqueeze(-2), gV.mH - matmul(K.mH, Vh))
    return gA


@linalg_svd.def_backward
def _(ctx, gU, gS, gVh):
    U, S, Vh = ctx.out
    m, n, k = U.shape[-2], Vh.shape[-1], S.shape[-1]
    if ctx.full_matrices and m != n:  # the extra singular vectors do not depend on A
        U, gU = _cols(U, 0, k), _cols(gU, 0, k)
        Vh, gVh = narrow(Vh, -2, 0, k), narrow(gVh, -2, 0, k)
    if not bool((gU != 0).any() | (gVh != 0).any()):  # a host read: only S's gradient is used
        gU = gVh = None
    return svd_grad(U, S, Vh, gU, gS, gVh)


@op(saves=("A",), function=False, method=False, grad_name="LinalgSvdBackward0")
def linalg_svdvals(xp, A: "Tensor", *, driver=None):
    """linalg.svdvals(A) -> Tensor: the singular values, in descending order."""
    check_matrix("linalg.svd", A, square=False, low="linalg_svd_cpu")
    return xp.linalg.svd(A, compute_uv=False)


@linalg_svdvals.def_backward
def _(ctx, g):
    U, _, Vh = linalg_svd(ctx.A, full_matrices=False)
    return matmul(U * g.unsqueeze(-2), Vh)


@takes_tensors("input")
def svd(input, some: bool = True, compute_uv: bool = True, *, out=None):
    """svd(input, some=True, compute_uv=True) -> (U, S, V): the older SVD, returning V (not Vh);
    with compute_uv=False, U and V are zero matrices."""
    if input.ndim < 2:
        raise RuntimeError(f"linalg.svd: input should have at least 2 dimensions, but has "
                           f"{input.ndim} dimensions instead")
    if not compute_uv:
        S = linalg_svdvals(input)
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        r = svd_result(input.new_zeros(batch + (m, m)), S, input.new_zeros(batch + (n, n)))
    else:
        U, S, Vh = linalg_svd(input, full_matrices=not some)
        r = svd_result(U, S, Vh.mH)
    return svd_result(*write_out_as("svd", out, r)) if out is not None else r


# ---------------------------------------------------------------------- eigh
def _check_uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


@op(save_output=True, returns=linalg_eigh, function=False, method=False,
    grad_name="LinalgEighBackward0")
def linalg_eigh(xp, A: "Tensor", UPLO="L"):
    """linalg.eigh(A, UPLO='L') -> (eigenvalues, eigenvectors) of a Hermitian matrix, read from
    its lower (or upper) triangle; eigenvalues ascending."""
    check_matrix("linalg.eigh", A, ints="linalg_eigh_cpu", low="linalg_eigh_cpu")
    _check_uplo(UPLO)
    w, V = xp.linalg.eigh(A, UPLO=UPLO)
    return w, V


def eigh_grad(w, V, gw, gV):
    """Gradient of A = V diag(w) V^H for distinct eigenvalues: V (diag(gw) + F o skew(V^H gV))
    V^H with F_ij = 1 / (w_j - w_i); the skew part makes it Hermitian like A's variations."""
    inner = diag_embed(gw.to(V.dtype))
    if gV is not None:
        VhgV = matmul(V.mH, gV)
        if V.is_complex():
            _check_phase(imag(diagonal(VhgV, 0, -2, -1)), VhgV, _EIGH_PHASE)
        skew = (VhgV - VhgV.mH) * 0.5
        inner = inner + _off_diag_inverse(w.unsqueeze(-2) - w.unsqueeze(-1)) * skew
    return matmul(matmul(V, inner), V.mH)


@linalg_eigh.def_backward
def _(ctx, gw, gV):
    w, V = ctx.out
    return eigh_grad(w, V, gw, gV if bool((gV != 0).any()) else None)  # a host read


@op(saves=("A",), function=False, method=False, grad_name="LinalgEighBackward0")
def linalg_eigvalsh(xp, A: "Tensor", UPLO="L"):
    """linalg.eigvalsh(A, UPLO='L') -> Tensor: the eigenvalues of a Hermitian matrix."""
    check_matrix("linalg.eigh", A, ints="linalg_eigh_cpu", low="linalg_eigh_cpu")
    _check_uplo(UPLO)
    return xp.linalg.eigvalsh(A, UPLO=UPLO)


@linalg_eigvalsh.def_backward
def _(ctx, g):
    w, V = linalg_eigh(ctx.A, ctx.UPLO)
    return eigh_grad(w, V, g, None)


# ---------------------------------------------------------------------- pinv
def _tol_value(xp, t):
    return None if t is None else (t._data if hasattr(t, "_data") else xp.asarray(t))


@op(saves=("A",), save_output=True, function=False, method=False,
    grad_name="LinalgPinvBackward0")
def linalg_pinv(xp, A: "Tensor", rcond=None, hermitian=False, *, atol=None, rtol=None):
    """linalg.pinv(A, *, atol=None, rtol=None, hermitian=False) -> Tensor: the Moore-Penrose
    pseudoinverse; singular values below max(atol, rtol * largest) count as zero."""
    if A.ndim < 2 or not is_inexact(A) or A.dtype in _LOW:
        raise RuntimeError(f"linalg.pinv({tname(A)}{{{list(A.shape)}}}): expected a tensor with "
                           "2 or more dimensions of float, double, cfloat or cdouble types")
    if rcond is not None:
        rtol = rcond
    atol_v, rtol_v = _tol_value(xp, atol), _tol_value(xp, rtol)
    if rtol_v is None:
        rtol_v = 0.0 if atol_v is not None and xp.any(atol_v > 0) else \
            np.finfo(A.dtype).eps * max(A.shape[-2:])
    atol_v = 0.0 if atol_v is None else atol_v
    m, n = A.shape[-2:]
    if hermitian:
        check_matrix("linalg.eigh", A)
        w, V = xp.linalg.eigh(A)
        s = xp.abs(w)
    elif 0 in A.shape:
        return xp.zeros(A.shape[:-2] + (n, m), A.dtype)
    else:
        U, s, Vh = xp.linalg.svd(A, full_matrices=False)
    s_max = s.max(-1)[..., None] if s.shape[-1] else xp.zeros(s.shape[:-1] + (1,), s.dtype)
    cutoff = xp.maximum(xp.asarray(atol_v)[..., None], xp.asarray(rtol_v)[..., None] * s_max)
    keep = s > cutoff
    if hermitian:
        w_inv = xp.where(keep, 1 / xp.where(keep, w, 1), 0)
        return ((V * w_inv[..., None, :]) @ xp.conj(xp.swapaxes(V, -1, -2))).astype(A.dtype)
    s_inv = xp.where(keep, 1 / xp.where(keep, s, 1), 0)
    r = (xp.conj(xp.swapaxes(Vh, -1, -2)) * s_inv[..., None, :]) @ xp.conj(xp.swapaxes(U, -1,
                                                                                        -2))
    return r.astype(A.dtype)


@linalg_pinv.def_backward
def _(ctx, g):
    A, P = ctx.A, ctx.out
    m, n = A.shape[-2:]
    Ph = P.mH
    gh = g.mH
    # dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P, transposed term by term
    gA = -matmul(matmul(Ph, g), Ph)
    gA = gA + matmul(matmul(gh - matmul(A, matmul(P, gh)), P), Ph)
    gA = gA + matmul(matmul(Ph, P), gh - matmul(matmul(gh, P), A))
    return gA


def pinverse(input, rcond: float = 1e-15):
    """pinverse(input, rcond=1e-15) -> Tensor: linalg.pinv with relative tolerance rcond."""
    return linalg_pinv(input, rtol=rcond)


# ---------------------------------------------------------------------- metas
# Output shapes without running LAPACK (which would also fail on the all-zero stand-ins that
# the generic meta evaluates: a zero matrix is singular and not positive definite).
def _batch(A) -> tuple:
    return tuple(A.shape[:-2])


def _square_meta(name, **kw):
    def meta(A, *args, **kwargs):
        check_matrix(name, A, **kw)
        return tuple(A.shape), edtype(A)
    return meta


inverse.def_meta(_square_meta("linalg.inv"))
linalg_cholesky.def_meta(_square_meta("linalg.cholesky", low="cholesky_cpu"))


@det.def_meta
def _(A):
    check_matrix("linalg.det", A, low="lu_cpu")
    return _batch(A), edtype(A)


@slogdet.def_meta
def _(A):
    check_matrix("linalg.slogdet", A)
    return (_batch(A), edtype(A)), (_batch(A), edtype(A).to_real())


@linalg_solve.def_meta
def _(A, B, *, left=True):
    return _solve_shapes(A, B, left)[1], edtype(A)


@linalg_qr.def_meta
def _(A, mode="reduced"):
    _check_qr(A, mode)
    m, n = A.shape[-2:]
    rows = m if mode == "complete" else min(m, n)
    q = (0,) if mode == "r" else _batch(A) + (m, rows)
    return (q, edtype(A)), (_batch(A) + (rows, n), edtype(A))


@linalg_svd.def_meta
def _(A, full_matrices=True, *, driver=None):
    check_matrix("linalg.svd", A, square=False, low="linalg_svd_cpu")
    m, n = A.shape[-2:]
    k = min(m, n)
    u, v = (m, n) if full_matrices else (k, k)
    dt = edtype(A)
    return (_batch(A) + (m, u), dt), (_batch(A) + (k,), dt.to_real()), (_batch(A) + (v, n), dt)


@linalg_svdvals.def_meta
def _(A, *, driver=None):
    check_matrix("linalg.svd", A, square=False, low="linalg_svd_cpu")
    return _batch(A) + (min(A.shape[-2:]),), edtype(A).to_real()


@linalg_eigh.def_meta
def _(A, UPLO="L"):
    check_matrix("linalg.eigh", A, ints="linalg_eigh_cpu", low="linalg_eigh_cpu")
    _check_uplo(UPLO)
    return (tuple(A.shape[:-1]), edtype(A).to_real()), (tuple(A.shape), edtype(A))


@linalg_eigvalsh.def_meta
def _(A, UPLO="L"):
    check_matrix("linalg.eigh", A, ints="linalg_eigh_cpu", low="linalg_eigh_cpu")
    _check_uplo(UPLO)
    return tuple(A.shape[:-1]), edtype(A).to_real()


@linalg_pinv.def_meta
def _(A, rcond=None, hermitian=False, *, atol=None, rtol=None):
    if A.ndim < 2 or not is_inexact(A) or edtype(A).np in _LOW:
        raise RuntimeError(f"linalg.pinv({tname(A)}{{{list(A.shape)}}}): expected a tensor with "
                           "2 or more dimensions of float, double, cfloat or cdouble types")
    return _batch(A) + (A.shape[-1], A.shape[-2]), edtype(A)


# ---------------------------------------------------------------------- matrix_power
@takes_tensors("A")
def matrix_power(A, n: int, *, out=None):
    """matrix_power(A, n) -> Tensor: A multiplied by itself n times (n < 0: the inverse's
    power; n = 0: the identity)."""
    return write_out_as("linalg.matrix_power", out, _matrix_power(A, n))


def _matrix_power(A, n):
    if isinstance(n, bool) or not isinstance(n, int):
        try:
            n = operator.index(n)
        except TypeError:
            raise TypeError(f"linalg_matrix_power(): argument 'n' (position 2) must be int, not "
                            f"{type(n).__name__}") from None
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 "
                           "dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {A.shape[-2]} by {A.shape[-1]} matrices")
    if n == 0:  # overwrite a copy of A, so the result is part of A's graph with zero gradient
        return A.clone().copy_(eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(A.shape))
    if n < 0:
        A, n = inverse(A), -n
    result, power = None, A
    while True:  # binary exponentiation: log2(n) squarings
        if n & 1:
            result = power if result is None else matmul(result, power)
        n >>= 1
        if not n:
            break
        power = matmul(power, power)
    return result.clone() if result is A else result


for _name in ("logdet", "matrix_power", "pinverse", "svd", "qr", "cholesky"):
    tensor_method(_name)(globals()[_name])
