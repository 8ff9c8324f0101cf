"""Special functions numpy lacks (erf, erfc, erfinv, lgamma, digamma, polygamma), vectorised.

Each function takes a floating array and returns an array of the same dtype. Inputs narrower
than float64 are evaluated in float64 and rounded once (so float32 results are correctly
rounded in practice), except float32 erf, which has its own float32 kernel (``erf32``, within
3 ulp: GELU's hot path); float64 results are within a few ulps, except next to the zeros of
lgamma, digamma and polygamma on the negative axis, where the reflection formula cancels
(absolute error ~1e-16 times the terms). Every evaluation is whole-array numpy over blocks of
16384 elements: no Python loop runs over elements (the loops below run over blocks, series
terms or a bounded number of recurrence steps).

They run inside the op kernels, where numpy's floating-point errors are already ignored
(backends/cpu.quiet_enter, for the caller's thread; ember's pool threads are quiet for good):
the inf, NaN and overflow they compute on purpose raise no warning, and they set no error
state of their own.

Edge values follow PyTorch: lgamma = +inf at the poles and at -inf; digamma(+-0) = -+inf and
NaN at negative integers and -inf; polygamma(n >= 1) = (-1)^(n+1) inf at the poles (and at
-inf for n >= 2), NaN at -inf for n = 1, and at +inf 0 for n = 1, NaN for n >= 2 (PyTorch's
Hurwitz zeta). One deliberate difference: at the negative integers trigamma is +inf, where
PyTorch returns pi^2 / sin^2(pi x) evaluated with sin(pi x) rounded away from zero (huge,
meaningless finite numbers).

erf, erfc   W. J. Cody's rational Chebyshev approximations (Math. Comp. 23, 1969) on the
            ranges |x| < 0.46875, [0.46875, 4] and > 4; exp(-x^2) is evaluated in two factors
            so erfc keeps its relative accuracy far into the tail.
lgamma      x >= 10: Stirling's series. Otherwise shift to 2 + w with |w| <= 1/2 and sum the
            Taylor series lgamma(2 + w) = (1 - gamma) w + sum_k (-1)^k (zeta(k) - 1) w^k / k,
            which is exact near the zeros at 1 and 2. x < -1/2: the reflection formula.
digamma     The same layout: asymptotic series for x >= 10, the Taylor series of psi(2 + w)
            plus the recurrence below, a Taylor series centred on the positive zero
            (x0 = 1.46163...) held in double-double, and reflection for x < -1/2.
polygamma   psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x): Hurwitz zeta by a recurrence shift and
            the Euler-Maclaurin tail; reflection (derivatives of pi cot(pi x)) for x < 0.
erfinv      M. Giles' approximation (2010) as the starting point, then two Halley steps
            on erf(x) - y (on (1 - y) - erfc(x) near |y| = 1, so the tail stays accurate).
ncdf        the normal CDF Phi(x) (GELU's; the primitive ncdf on numpy arrays) through a
            rational fit of erfcx (``normal_cdf_parts``, float32) or erfc with the argument's
            rounding corrected (float64), so that neither cancels below zero.

Every constant that is not a published approximation coefficient (Bernoulli numbers, zeta
values, Taylor coefficients) is computed at import from its definition.
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .cpu import parallel_rows

_F64 = np.dtype(np.float64)
_BLOCK = 16384  # elements per pass: the dozens of temporaries of a block stay in cache

# Another backend's array type -> {function: kernel}: the special functions on arrays that are
# not numpy's (the CUDA backend registers CuPy's here), so they never come to the host.
LIBRARIES: dict[type, dict] = {}


def _library(name: str, x):
    """The registered kernel ``name`` for ``x``'s array type, or None for numpy arrays."""
    if type(x) is np.ndarray:
        return None
    lib = LIBRARIES.get(type(x))
    if lib is None:
        return None  # a Python number or numpy scalar: the host kernel
    if name not in lib:
        raise NotImplementedError(f"{name}: no kernel for {type(x).__module__} arrays")
    return lib[name]


def _elementwise(kernel):
    """Wrap ``kernel(x, precise) -> y`` (1-d float64 in and out) as a function of any float
    array: it runs block by block and the result is rounded once to the input's dtype.
    ``precise`` is False when the result will be rounded to a narrower type, so a kernel may
    skip refinements only float64 can see."""
    def apply(x, *args):
        other = _library(kernel.__name__.lstrip("_"), x)
        if other is not None:
            return other(x, *args)
        x = np.asarray(x)
        dt = x.dtype if x.dtype.kind == "f" else _F64
        flat = x.reshape(-1)
        out = np.empty(flat.shape, dt)
        precise = dt == _F64
        for i in range(0, flat.size, _BLOCK):
            blk = flat[i:i + _BLOCK]
            out[i:i + _BLOCK] = kernel(blk if precise else blk.astype(np.float64), precise,
                                        *args)
        return out.reshape(x.shape)
    apply.__doc__ = kernel.__doc__
    apply.__name__ = kernel.__name__
    return apply


def _poly(coefs, t):
    """Horner's rule; ``coefs`` highest degree first."""
    r = coefs[0] * t
    r += coefs[1]
    for c in coefs[2:]:
        r *= t
        r += c
    return r


def _on(mask, fn, x, out):
    """``out[mask] = fn(x[mask])``, skipping the work when the mask is empty."""
    if mask.all():
        out[...] = fn(x)
    elif mask.any():
        out[mask] = fn(x[mask])


def _split_at_10(x, big_fn, mid_fn):
    """``big_fn`` (an asymptotic series) where x >= 10, ``mid_fn`` elsewhere."""
    out = np.empty_like(x)
    big = x >= 10.0
    _on(big, big_fn, x, out)
    _on(~big, mid_fn, x, out)
    return out


def sigmoid(x):
    # 1 / (1 + exp(-x)) is exact enough and saturates correctly at both ends
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


# ---------------------------------------------------------------------- constants from math
def _bernoulli(m: int) -> list[Fraction]:
    """B_0 .. B_m from sum_{j<=k} C(k+1, j) B_j = 0."""
    b = [Fraction(1)]
    for k in range(1, m + 1):
        b.append(-sum(math.comb(k + 1, j) * b[j] for j in range(k)) / (k + 1))
    return b


_B = _bernoulli(40)
_EULER = 0.57721566490153286061
_LOG_PI = math.log(math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_SQRT_PI = math.sqrt(math.pi)


@lru_cache(maxsize=None)
def _zeta_tail_coefs(s: int, terms: int = 12) -> tuple:
    """Euler-Maclaurin correction terms of zeta(s, y): B_2k / (2k)! * s (s+1) ... (s+2k-2),
    highest power first, for evaluation in u^2 (u = 1/y)."""
    c = []
    for k in range(1, terms + 1):
        rising = math.prod(range(s, s + 2 * k - 1))
        c.append(float(_B[2 * k] * rising / math.factorial(2 * k)))
    return tuple(reversed(c))


def _hurwitz(s: int, q: np.ndarray) -> np.ndarray:
    """zeta(s, q) = sum_{j>=0} (q + j)^-s for integer s >= 2 and finite q > 0.

    The direct sum runs over the same number of terms for every element (enough to bring the
    smallest q past the threshold where Euler-Maclaurin with 12 terms is exact); the identity
    zeta(s, q) = sum_{j<M} (q + j)^-s + zeta(s, q + M) holds for any M, so larger q lose nothing.
    It is summed smallest term first.
    """
    thresh = 10.0 + s
    shift = int(max(0.0, math.ceil(thresh - float(q.min())))) if q.size else 0
    y = q + shift
    u = 1.0 / y
    inner = _poly(_zeta_tail_coefs(s), u * u)
    inner *= u
    inner += 0.5
    inner *= u
    inner += 1.0 / (s - 1)
    acc = inner * u ** (s - 1)
    for j in range(shift - 1, -1, -1):
        acc += (q + j) ** -s
    return acc


# lgamma(2 + w) and psi(2 + w) around w = 0: coefficients (zeta(k) - 1) = zeta(k, 2)
_NSER = 30
_ZM1 = [0.0, 0.0] + [float(_hurwitz(k, np.array([2.0]))[0]) for k in range(2, _NSER + 2)]
# lgamma(2 + w) = sum_{k>=1} s_k w^k, s_1 = 1 - gamma, s_k = (-1)^k (zeta(k) - 1) / k
_LG2 = tuple([(-1) ** k * _ZM1[k] / k for k in range(_NSER, 1, -1)] + [1 - _EULER, 0.0])
# psi(2 + w) = (1 - gamma) + sum_{k>=2} (-1)^k (zeta(k) - 1) w^(k-1)
_PSI2 = tuple([(-1) ** k * _ZM1[k] for k in range(_NSER, 1, -1)] + [1 - _EULER])
# Stirling: lgamma(x) ~ (x - 1/2) log x - x + log(2 pi)/2 + sum B_2k / (2k (2k-1) x^(2k-1))
_STIRLING = tuple(float(_B[2 * k] / (2 * k * (2 * k - 1))) for k in range(10, 0, -1))
# psi(x) ~ log x - 1/(2x) - sum B_2k / (2k x^2k)
_PSI_ASYM = tuple(float(_B[2 * k] / (2 * k)) for k in range(10, 0, -1))
# the positive zero of psi, as a double-double
_X0 = "1.46163214496836234126265954232572132846819620400644635129598840859878644035380181"
_X0_HI = float(_X0)
_X0_LO = float(Fraction(_X0) - Fraction(_X0_HI))
# Taylor series around x0 (|h| < 0.2 needs 24 terms), from psi^(k)(x0) / k! =
# (-1)^(k+1) zeta(k+1, x0): psi(x0 + h) = sum_{k>=1} (-1)^(k+1) zeta(k+1, x0) h^k and
# lgamma(x0 + h) = lgamma(x0) + sum_{k>=2} (-1)^k zeta(k, x0) h^k / k  (psi(x0) = 0)
_ZX0 = [0.0, 0.0] + [float(_hurwitz(k, np.array([_X0_HI]))[0]) for k in range(2, 27)]
_PSI_ROOT = tuple([(-1) ** (k + 1) * _ZX0[k + 1] for k in range(25, 0, -1)] + [0.0])
_LG_MIN = tuple([(-1) ** k * _ZX0[k] / k for k in range(26, 1, -1)] + [0.0, 0.0])
# the minimum value lgamma(x0) (the low part of x0 moves it by < 1e-33)
_LG_X0 = float("-0.12148629053584960809551455717769158215135617312999903886372")
_NEAR_X0 = 0.2


def _cotpi(x):
    """cot(pi x), reduced exactly first; near half-integers as tan(pi (1/2 - |r|)), whose small
    argument is exact (cot(pi r) via tan near pi/2 would amplify the rounding of pi r)."""
    r = x - np.round(x)
    ar = np.abs(r)
    return np.where(ar > 0.25, np.copysign(np.tan(np.pi * (0.5 - ar)), r),
                    1.0 / np.tan(np.pi * r))


def _sinpi_abs(x):
    """|sin(pi x)| with the argument reduced exactly first (pi x would lose x's low bits)."""
    r = x - np.round(x)
    return np.abs(np.sin(np.pi * r))


# ---------------------------------------------------------------------- erf, erfc
# Cody (1969), |x| < 0.46875: erf(x) = x P(x^2) / Q(x^2), evaluated as x + x (P - Q) / Q
# (P / Q is near 2/sqrt(pi) ~ 1, so the correction's rounding error shrinks eightfold); the
# differences are formed exactly from the published decimal coefficients.
_ERF_P = ("1.85777706184603153e-1", "3.16112374387056560e00", "1.13864154151050156e02",
          "3.77485237685302021e02", "3.20937758913846947e03")
_ERF_Q = ("1", "2.36012909523441209e01", "2.44024637934444173e02", "1.28261652607737228e03",
          "2.84423683343917062e03")
_ERF_PMQ = tuple(float(Fraction(p) - Fraction(q)) for p, q in zip(_ERF_P, _ERF_Q))
_ERF_Q = tuple(float(q) for q in _ERF_Q)
# 0.46875 <= x <= 4: erfc(x) = exp(-x^2) P(x) / Q(x)
_ERFC_P = (2.15311535474403846e-8, 5.64188496988670089e-1, 8.88314979438837594e00,
           6.61191906371416295e01, 2.98635138197400131e02, 8.81952221241769090e02,
           1.71204761263407058e03, 2.05107837782607147e03, 1.23033935479799725e03)
_ERFC_Q = (1.0, 1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
           1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
           3.43936767414372164e03, 1.23033935480374942e03)
# x > 4: erfc(x) = exp(-x^2) / x (1/sqrt(pi) + z P(z) / Q(z)), z = 1/x^2
_ERFC_TP = (1.63153871373020978e-2, 3.05326634961232344e-1, 3.60344899949804439e-1,
            1.25781726111229246e-1, 1.60837851487422766e-2, 6.58749161529837803e-4)
_ERFC_TQ = (1.0, 2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1,
            6.05183413124413191e-2, 2.33520497626869185e-3)
_SMALL = 0.46875


def _erf_small_minus_x(x):
    t = x * x
    r = _poly(_ERF_PMQ, t)
    r /= _poly(_ERF_Q, t)
    r *= x
    return r


def _erf_small(x):
    r = _erf_small_minus_x(x)
    r += x
    return r


def _exp_neg_sq(y, precise):
    if not precise:
        return np.exp(-(y * y))
    # exp(-y^2) as exp(-h^2) exp(-(y - h)(y + h)), h = y rounded down to 1/16: h^2 is exact,
    # so rounding y^2 (relative error y^2 ulps in the result) never happens
    h = y * 16.0
    np.trunc(h, out=h)
    h *= 0.0625
    d = y - h
    d *= y + h
    h *= h
    np.negative(h, out=h)
    np.exp(h, out=h)
    np.negative(d, out=d)
    np.exp(d, out=d)
    h *= d
    return h


def _erfc_mid(y, precise):
    r = _poly(_ERFC_P, y)
    r /= _poly(_ERFC_Q, y)
    r *= _exp_neg_sq(y, precise)
    return r


def _erfc_tail(y, precise):
    y = np.minimum(y, 28.0)  # erfc(28) is below the smallest subnormal
    z = 1.0 / (y * y)
    r = _poly(_ERFC_TP, z)
    r /= _poly(_ERFC_TQ, z)
    r *= z
    np.subtract(1.0 / _SQRT_PI, r, out=r)
    r /= y
    r *= _exp_neg_sq(y, precise)
    r[y == 28.0] = 0.0
    return r


def _erfc_pos(y, precise):
    """erfc(y) for y >= 0.46875 (or NaN)."""
    out = np.empty_like(y)
    mid = y <= 4.0
    _on(mid, lambda v: _erfc_mid(v, precise), y, out)
    _on(~mid, lambda v: _erfc_tail(v, precise), y, out)
    return out


def _erf(x, precise):
    """The error function."""
    if not precise:
        # rounded to float32 or narrower, erf is +-1 past |x| = 4 (erfc(4) < 2^-25); both
        # formulas over the whole block then cost less than gathering and scattering halves
        a = np.minimum(np.abs(x), 4.0)
        big = 1.0 - _erfc_mid(a, False)
        a = np.copysign(a, x)
        return np.where(np.abs(x) < _SMALL, _erf_small(a), np.copysign(big, x, out=big))
    out = np.empty_like(x)
    small = np.abs(x) < _SMALL
    _on(small, _erf_small, x, out)
    # past |x| = 6, erfc < 2^-54 and erf rounds to +-1: clamping keeps inf and huge x cheap
    _on(~small, lambda v: np.copysign(
        1.0 - _erfc_pos(np.minimum(np.abs(v), 6.0), precise), v), x, out)
    return out


def _erfc(x, precise):
    """The complementary error function 1 - erf(x), accurate in the upper tail."""
    out = np.empty_like(x)
    small = np.abs(x) < _SMALL
    _on(small, lambda v: 1.0 - _erf_small(v), x, out)

    def large(v):
        r = _erfc_pos(np.abs(v), precise)
        return np.where(v < 0, 2.0 - r, r)
    _on(~small, large, x, out)
    return out


_erf_f64 = _elementwise(_erf)
erfc = _elementwise(_erfc)


# float32 erf without float64: erf(x) = sign(x) sqrt(1 - exp(-t R(t))), t = x^2 (|x| clamped at
# 4.25, where the formula rounds to exactly 1), with R(t) = -log(1 - erf^2) / t = 4/pi +
# t N(t) / D(t). The rational is a minimax fit of ours (relative error 4e-8 for |x| <= 4.25,
# D >= 1 there; fitted by iteratively reweighted linearised least squares); the form keeps
# the result accurate at both ends: near 0, -expm1(-tR) ~ tR carries the relative precision,
# and near 1 the result is sqrt(1 - tiny) rounded once. Against the correctly rounded erf:
# max error 3 ulp, 99.9% of float32 inputs exact or 1 ulp off (PyTorch's own float32 erf is
# within 1 ulp). Below |x| = 2^-12, erf(x) = (2/sqrt(pi)) x to float32 precision (t would lose
# bits or underflow there). About 28 in-place passes over cache-sized blocks, no masks or
# gathers (the tiny-x fix-up runs only when a block has such an element).
_F32 = np.dtype(np.float32)
# -N / D = M / D', with M = N / n4 monic (one pass fewer) and D' = -D / n4 (N negated: the
# evaluation ends with -t R(t))
_ERF32_N4 = 1.2195130693726242e-05
_ERF32_N = tuple(np.float32(c / _ERF32_N4) for c in (
    -0.000322041567414999, -0.0033873242791742086, -0.024355921894311905,
    -0.03825534135103226))
_ERF32_D = tuple(np.float32(-c / _ERF32_N4) for c in (
    -4.5992965169716626e-05, 0.0009133449639193714, 0.021291211247444153,
    0.15449538826942444, 0.725136935710907, 1.0))
_ERF32_C0 = np.float32(-4 / math.pi)
_ERF32_TINY = np.float32(2.0 ** -24)  # on t = x^2
_ERF32_SLOPE = np.float32(2 / math.sqrt(math.pi))
_ERF32_BLOCK = 1 << 16  # elements per pass: a block's five temporaries stay in L2


def _horner32(coefs, t, out, monic=False):
    """``out`` = the polynomial at ``t`` (highest degree first; ``monic``: a leading 1 left
    out of ``coefs``), in place."""
    if monic:
        np.add(t, coefs[0], out=out)
    else:
        np.multiply(t, coefs[0], out=out)
        out += coefs[1]
    for c in coefs[1 if monic else 2:]:
        out *= t
        out += c
    return out


def _erf32_block(x, out, xc, t, d, sign):
    # x's sign first: ``out`` may be ``x`` itself
    np.bitwise_and(x.view(np.int32), np.int32(-2 ** 31), out=sign)
    np.clip(x, np.float32(-4.25), np.float32(4.25), out=xc)  # NaN stays NaN, inf -> 4.25
    np.multiply(xc, xc, out=t)
    _horner32(_ERF32_N, t, out, monic=True)  # N negated: out ends as -t R(t)
    out /= _horner32(_ERF32_D, t, d)
    out *= t
    out += _ERF32_C0
    out *= t
    np.expm1(out, out=out)
    np.negative(out, out=out)
    np.sqrt(out, out=out)  # >= +0 (or NaN)
    if t.size and not t.min() >= _ERF32_TINY:  # (a NaN in the block also takes this path)
        tiny = t < _ERF32_TINY
        out[tiny] = np.abs(xc[tiny]) * _ERF32_SLOPE
    # the sign by bits (masked ufuncs and copysign cost far more): -0.0 gives -0.0
    bits = out.view(np.int32)
    np.bitwise_or(bits, sign, out=bits)


_SCRATCH = threading.local()


def _erf32_scratch():
    """This thread's block temporaries, reused across calls (fresh ones cost page faults)."""
    bufs = getattr(_SCRATCH, "erf32", None)
    if bufs is None:
        n = _ERF32_BLOCK
        bufs = _SCRATCH.erf32 = (*(np.empty(n, _F32) for _ in range(3)), np.empty(n, np.int32))
    return bufs


def erf32_serial(x: np.ndarray, out: np.ndarray) -> None:
    """erf of a contiguous 1-d float32 array into ``out`` (may be ``x``), on this thread."""
    scratch = _erf32_scratch()
    for i in range(0, x.size, _ERF32_BLOCK):
        j = min(i + _ERF32_BLOCK, x.size)
        _erf32_block(x[i:j], out[i:j], *(b[:j - i] for b in scratch))


def _erf32_rows(x, out):
    erf32_serial(x.reshape(-1), out.reshape(-1))


def erf32(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """erf of a float32 array, computed in float32 (see above); large arrays are split over
    the CPU threads. ``out`` (contiguous, float32) may be ``x`` itself."""
    flat = x.reshape(-1)
    res = np.empty(flat.shape, _F32) if out is None else out.reshape(-1)
    parallel_rows(_erf32_rows, flat[:, None], res[:, None])
    return res.reshape(x.shape)


def erf(x):
    """The error function; float32 arrays take the float32 kernel ``erf32``."""
    other = _library("erf", x)
    if other is not None:
        return other(x)
    x = np.asarray(x)
    if x.dtype == _F32:
        return erf32(x)
    return _erf_f64(x)


# ---------------------------------------------------------------------- normal CDF (GELU)
# GELU's Phi(x) = erfc(-x / sqrt 2) / 2 without the cancellation of 1 + erf(x / sqrt 2) below
# zero (which loses every digit by x = -5). With z = |x| / sqrt 2, erfc(z) = exp(-z^2) R(z),
# and R (erfcx) ~ N(z) / D(z), a rational of degrees 4 and 5 fitted for ember: minimax in
# relative error on [0, 10.5] (6e-9), by iteratively reweighted linearised least squares. All
# coefficients are positive, so Horner's rule in z loses nothing to cancellation. The generated
# C (compiler/codegen_c.py, em_ncdf_parts) evaluates the same rational.
NCDF_N = (0.03313824161887169, 0.2308431714773178, 0.7350074648857117, 1.2416542768478394,
          1.0)  # highest degree first
NCDF_D = (0.05873535946011543, 0.4091837406158447, 1.331722378730774, 2.409294605255127,
          2.3700339794158936, 1.0)
_SQRT1_2 = math.sqrt(0.5)


def normal_cdf_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(r, e) of a float32 array, e = exp(-x^2 / 2) and r e = erfc(|x| / sqrt 2) / 2: the
    normal CDF Phi(x) is r e below zero and 1 - r e above, and e is sqrt(2 pi) times the
    density. The rational above (the generated C's formula), e from x^2 squared exactly in
    float64."""
    f = np.float32
    z = np.minimum(np.abs(x), f(20))  # erfc is 0 in float32 beyond; NaN stays
    z *= f(_SQRT1_2)
    r = _horner32(tuple(map(f, NCDF_N)), z, np.empty_like(z))
    r *= f(0.5)
    r /= _horner32(tuple(map(f, NCDF_D)), z, np.empty_like(z))
    sq = x.astype(_F64)
    sq *= sq
    sq *= -0.5
    return r, np.exp(sq).astype(f)


# 1 / sqrt 2 as a float64 and the rest of it: -x / sqrt 2 = zh + zl with zh = x * -_K_HI
# rounded and zl its error, so that Phi(x) = erfc(zh + zl) / 2 ~ (erfc(zh) - zl erfc'(zh)) / 2
# keeps the lower tail's relative precision (erfc(zh) alone is off by ~x^2 / 2 half-ulps there)
_K_HI = 0.7071067811865476
_K_LO = -4.833646656726457e-17
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's split of a float64 into 26-bit halves


def _exact_product_error(x: np.ndarray, k: float, p: np.ndarray) -> np.ndarray:
    """x k - p exactly (p the rounded product; Dekker's algorithm, |x| well below 2^996)."""
    c = x * _SPLIT
    xh = c - (c - x)
    xl = x - xh
    ck = k * _SPLIT
    kh = ck - (ck - k)
    kl = k - kh
    return ((xh * kh - p) + xh * kl + xl * kh) + xl * kl


def ncdf(x):
    """The standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2 of a float32 or float64 array,
    relatively accurate in the lower tail: float32 through the rational of
    ``normal_cdf_parts`` (the generated C's), float64 through erfc with the argument's
    rounding error corrected to first order."""
    other = _library("ncdf", x)
    if other is not None:
        return other(x)
    x = np.asarray(x)
    if x.dtype == _F32:
        r, e = normal_cdf_parts(x)
        r *= e
        return np.where(x < 0, r, np.float32(1) - r)
    xc = np.clip(x.astype(_F64), -40.0, 40.0)  # Phi is 0 or 1 in float64 beyond; NaN stays
    zh = xc * -_K_HI
    zl = _exact_product_error(xc, -_K_HI, zh) + xc * -_K_LO
    out = erfc(zh)
    out -= zl * _TWO_OVER_SQRT_PI * np.exp(-zh * zh)
    out *= 0.5
    return out.astype(x.dtype) if x.dtype.kind == "f" else out



# ---------------------------------------------------------------------- erfinv
# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2010), single precision
_GILES_C = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
            -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_T = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
            -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erfinv(y, precise):
    """The inverse error function on [-1, 1] (NaN outside, +-inf at +-1)."""
    a = np.abs(y)
    one_minus = 1.0 - a  # exact where it matters (a >= 1/2)
    w = -np.log(one_minus * (1.0 + a))
    x = np.where(w < 5.0, _poly(_GILES_C, w - 2.5), _poly(_GILES_T, np.sqrt(w) - 3.0)) * a
    far = w >= 16.0  # past Giles' single-precision range: erfc(x) = 1 - a asymptotically
    if far.any():
        lz = -np.log(one_minus[far])
        t = np.sqrt(lz)
        for _ in range(2):  # x^2 = -log(1 - a) - log(x sqrt(pi)) + log(1 - 1/(2x^2))
            t = np.sqrt(lz - np.log(t * _SQRT_PI) + np.log1p(-0.5 / (t * t)))
        x[far] = t
    # The residual f(x) = erf(x) - a limits the accuracy: below a = 1/2 (x < 0.477) it is
    # (x - a) + (erf(x) - x) with x - a exact; above, (1 - a) - erfc(x) with 1 - a exact.
    small = a < 0.5
    for _ in range(2):
        # f' = 2/sqrt(pi) exp(-x^2), f'' = -2x f'
        f = np.where(small, (x - a) + _erf_small_minus_x(x), one_minus - _erfc(x, True))
        u = f / (2.0 / _SQRT_PI * np.exp(-x * x))
        x = x - u / (1.0 + x * u)  # Halley's step: u / (1 - f f'' / (2 f'^2))
    x[a == 1.0] = np.inf
    x[a > 1.0] = np.nan
    return np.copysign(x, y)


erfinv = _elementwise(_erfinv)


# ---------------------------------------------------------------------- lgamma
def _lgamma_stirling(x):
    t = 1.0 / x
    r = (x - 0.5) * np.log(x) - x + _HALF_LOG_2PI + t * _poly(_STIRLING, t * t)
    r[np.isposinf(x)] = np.inf
    return r


def _lgamma_mid(x):
    """lgamma on [-1/2, 10) (and NaN): anchor a = round(x), w = x - a exact."""
    a = np.floor(x + 0.5)
    w = x - a
    s = _poly(_LG2, w)
    # a >= 3: lgamma(x) = lgamma(2 + w) + log((x - 1)(x - 2) ... (x - a + 2))
    prod = np.ones_like(x)
    for j in range(1, 9):
        np.multiply(prod, x - j, out=prod, where=a >= j + 2)
    low = a <= 1
    # a = 1: lgamma(1 + w) = lgamma(2 + w) - log1p(w); a = 0 also divides by |x|
    corr = np.where(low, -np.log1p(w), np.log(prod))
    corr -= np.where(a == 0, np.log(np.abs(x)), 0.0)
    s += corr
    # around the minimum the shifted series cancels (lgamma(2 + w) against log1p(w))
    h = (x - _X0_HI) - _X0_LO
    near = np.abs(h) < _NEAR_X0
    if near.any():
        s[near] = _LG_X0 + _poly(_LG_MIN, h[near])
    return s


def _lgamma_pos(x):
    """lgamma for x >= -1/2 (or NaN)."""
    return _split_at_10(x, _lgamma_stirling, _lgamma_mid)


def _lgamma_reflect(x):
    # log|Gamma(x)| = log(pi / |sin(pi x)|) - lgamma(1 - x); poles (and -inf) are +inf
    r = _LOG_PI - np.log(_sinpi_abs(x)) - _lgamma_pos(1.0 - x)
    r[x == np.floor(x)] = np.inf
    return r


def _lgamma(x, precise):
    """log |Gamma(x)|; +inf at the poles (0, negative integers) and at +-inf."""
    out = np.empty_like(x)
    refl = x < -0.5
    _on(refl, _lgamma_reflect, x, out)
    _on(~refl, _lgamma_pos, x, out)
    return out


lgamma = _elementwise(_lgamma)


# ---------------------------------------------------------------------- digamma
def _digamma_asym(x):
    t = 1.0 / x
    t2 = t * t
    return np.log(x) - 0.5 * t - t2 * _poly(_PSI_ASYM, t2)


def _digamma_mid(x):
    """psi on [-1/2, 10) (and NaN): psi(2 + w) and the recurrence psi(x + 1) = psi(x) + 1/x."""
    a = np.floor(x + 0.5)
    w = x - a
    r = _poly(_PSI2, w)
    acc = np.zeros_like(x)
    for j in range(1, 9):  # a >= 3: + sum_{j=1}^{a-2} 1 / (x - j), smallest first
        np.add(acc, 1.0 / (x - j), out=acc, where=a >= j + 2)
    acc -= np.where(a <= 1, 1.0 / x, 0.0)
    acc -= np.where(a == 0, 1.0 / (x + 1.0), 0.0)
    r += acc
    # near the positive zero the recurrence cancels: use the series centred on it instead
    h = (x - _X0_HI) - _X0_LO
    near = np.abs(h) < _NEAR_X0
    if near.any():
        r[near] = _poly(_PSI_ROOT, h[near])
    return r


def _digamma_pos(x):
    """digamma for x >= -1/2 (or NaN)."""
    return _split_at_10(x, _digamma_asym, _digamma_mid)


def _digamma_reflect(x):
    # psi(x) = psi(1 - x) - pi cot(pi x); NaN at the poles and at -inf
    res = _digamma_pos(1.0 - x) - np.pi * _cotpi(x)
    res[x == np.floor(x)] = np.nan
    return res


def _digamma(x, precise):
    """psi(x) = d/dx lgamma(x); psi(+0) = -inf, psi(-0) = +inf, NaN at negative integers."""
    out = np.empty_like(x)
    refl = x < -0.5
    _on(refl, _digamma_reflect, x, out)
    _on(~refl, _digamma_pos, x, out)
    return out


digamma = _elementwise(_digamma)


# ---------------------------------------------------------------------- polygamma
@lru_cache(maxsize=None)
def _cot_derivative(n: int) -> tuple:
    """Q_n with d^n/dx^n [pi cot(pi x)] = pi^(n+1) Q_n(cot(pi x)), highest power first.

    Q_0(c) = c and Q_{k+1} = -(1 + c^2) Q_k', from d/dx cot(pi x) = -pi (1 + cot^2(pi x)).
    """
    q = [0, 1]  # lowest power first
    for _ in range(n):
        d = [i * q[i] for i in range(1, len(q))]
        nxt = [0] * (len(d) + 2)
        for i, c in enumerate(d):
            nxt[i] -= c
            nxt[i + 2] -= c
        q = nxt
    return tuple(float(c) for c in reversed(q))


def _polygamma_pos(n, x):
    r = (-1) ** (n + 1) * math.factorial(n) * _hurwitz(n + 1, x)
    return r


def _polygamma(x, precise, n):
    sign = (-1.0) ** (n + 1)
    out = np.empty_like(x)
    pos = (x > 0) & (x < np.inf)
    _on(pos, lambda v: _polygamma_pos(n, v), x, out)
    neg = (x < 0) & (x > -np.inf) & (x != np.floor(x))
    if neg.any():
        v = x[neg]
        # psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) Q_n(cot(pi x))
        out[neg] = (-1.0) ** n * _polygamma_pos(n, 1.0 - v) - math.pi ** (n + 1) * _poly(
            _cot_derivative(n), _cotpi(v))
    out[(x <= 0) & (x == np.floor(x))] = sign * np.inf  # 0, negative integers (and -inf)
    if n == 1:
        out[np.isneginf(x)] = np.nan
    # the limit at +inf is 0; PyTorch's Hurwitz zeta returns NaN there for n >= 2 and
    # ember matches it
    out[np.isposinf(x)] = 0.0 if n == 1 else np.nan
    out[np.isnan(x)] = np.nan
    return out


_polygamma_ew = _elementwise(_polygamma)


def polygamma(n: int, x):
    """The n-th derivative of digamma (n >= 0); +-inf at the poles with the sign of
    (-1)^(n+1)."""
    if n == 0:
        return digamma(x)
    return _polygamma_ew(x, n)
