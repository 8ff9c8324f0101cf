"""Native C kernels for eager ops on CPU, which the CPU backend's overrides call
(backends/cpu_kernels.py).

Some eager ops cost many numpy passes where one loop would do (GELU's erf, softmax's max /
exp / sum / divide). For large inputs the overrides ask ``kernel(...)`` for a native kernel: a
callable on numpy arrays, or None when the fast path is off (``EMBER_EAGER_KERNELS=0``) or no
generator is registered. The generator lives above this layer: ``ember.compiler`` registers
one (``compiler/eager_kernels.py``) that builds each kernel from a one-op graph with the
compiler's code generator, and answers None where it cannot (no C compiler, a failed build,
a call while the compiler traces or while a native kernel runs on this thread). Eager use
never warns: the numpy path is always there and gives the same results within rounding.

Three kernels are written by hand instead: ``axpy`` (an optimizer's
``p.add_(d, alpha=-lr)``), ``adam`` (one Adam step) and ``rows_add`` (embedding's weight
gradient), see below.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np

# Below this many elements the numpy kernels win or tie (the generated wrapper's fixed cost,
# and OpenMP start-up, are a few tens of microseconds). Measured crossovers: GELU below 4k
# elements, softmax over rows of 128 near 4k-16k.
MIN_ELEMENTS = 1 << 13

_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))  # what the kernels take
# ``generate(name, dtype, rank, options) -> kernel or None``, once a layer above registers it
_GENERATOR: list[Callable] = []


def enabled() -> bool:
    """False when ``EMBER_EAGER_KERNELS=0`` (read per call so tests and users can flip it)."""
    return os.environ.get("EMBER_EAGER_KERNELS", "1") != "0"


def rows_shape(shape: tuple, axis: int) -> tuple:
    """``shape`` seen as (outer, n) or, with trailing dims after ``axis``, (outer, n, inner):
    the shapes the row kernels (reducing dim 1) are built for."""
    outer = math.prod(shape[:axis])
    inner = math.prod(shape[axis + 1:])
    return (outer, shape[axis]) if inner == 1 else (outer, shape[axis], inner)


def worth(size: int, dtype) -> bool:
    """Whether arrays of this size and dtype should try the native path at all."""
    return size >= MIN_ELEMENTS and dtype in _DTYPES


def usable(*arrays: np.ndarray) -> bool:
    """``worth`` for arrays of one shape and dtype."""
    a = arrays[0]
    return type(a) is np.ndarray and worth(a.size, a.dtype) and \
        all(b.dtype == a.dtype and b.shape == a.shape for b in arrays[1:])


def register_generator(generate: Callable) -> None:
    """Install the function that makes ``kernel``'s kernels (the compiler calls this)."""
    _GENERATOR[:] = [generate]


def kernel(name: str, dtype: np.dtype, rank: int, **options) -> Callable | None:
    """The native kernel ``f(*arrays) -> array`` for op ``name`` on ``rank``-d contiguous or
    strided arrays of ``dtype`` (all inputs of one shape), or None (see the module
    docstring)."""
    if not _GENERATOR or not enabled():
        return None
    return _GENERATOR[0](name, dtype, rank, options)


# ---------------------------------------------------------------------- written by hand
# Three kernels are written by hand rather than traced, built together on first use:
#
# axpy, y += a * x in place: an optimizer's ``p.add_(d, alpha=-lr)``. ``a`` is a runtime
# scalar (a learning rate changes every step; a traced kernel would bake it in) and the result
# goes into y. One pass over memory on OpenMP's threads, the pool compiled graphs run on
# (numpy's BLAS ?axpy would wake BLAS threads that then spin against the next graph), each
# element rounded once by fma, as torch's fused add kernel does.
#
# adam, one Adam / AdamW step over every parameter of a group in one call, one pass over each
# parameter, its gradient and both moments (numpy makes ~12 passes with temporaries: 2.4 ms
# against 1.0 for 0.8M parameters in 52 tensors), with the arithmetic of optim.adam's numpy
# path operation for operation, each constant rounded to the parameter's dtype first as numpy
# does a Python float: the same bits.
#
# rows_add, out[idx[i]] += src[i] for each row i in order: embedding's weight gradient (a
# scatter of rows; numpy needs a sort and a segmented sum, ~200 us for 1024 rows of 128). One
# thread, each row of out summing its terms in index order (numpy's segmented sum may group
# them otherwise: the two agree within rounding, not bit for bit).
_HAND_SOURCE = """\
#include <math.h>
#include <stdint.h>
/* x may be y itself: no restrict */
void em_axpy_float(int64_t n, float a, const float *x, float *y) {
    #pragma omp parallel for schedule(static) if(n >= (1 << 16))
    for (int64_t i = 0; i < n; ++i)
        y[i] = fmaf(a, x[i], y[i]);
}
void em_axpy_double(int64_t n, double a, const double *x, double *y) {
    #pragma omp parallel for schedule(static) if(n >= (1 << 16))
    for (int64_t i = 0; i < n; ++i)
        y[i] = fma(a, x[i], y[i]);
}
/* Parameters k < count, of n[k] elements each, in one parallel region: every thread takes
   its share of each parameter in turn, without a barrier between them. wd_mode: 0 none,
   1 decoupled (p *= 1 - lr wd), 2 L2 (g += wd p). */
#define EM_ADAM(T, SQRT)                                                                    \
void em_adam_##T(int64_t count, const int64_t *n, T *const *ps, const T *const *gs,        \
                 T *const *ms, T *const *vs, int64_t maximize, int64_t wd_mode,             \
                 double decay_, double wd_, double one_b1_, double b2_, double one_b2_,     \
                 double bc2_sqrt_, double eps_, double step_) {                            \
    const T decay = (T)decay_, wd = (T)wd_, one_b1 = (T)one_b1_, b2 = (T)b2_;              \
    const T one_b2 = (T)one_b2_, bc2_sqrt = (T)bc2_sqrt_, eps = (T)eps_, step = (T)step_;  \
    _Pragma("omp parallel")                                                                \
    for (int64_t k = 0; k < count; ++k) {                                                  \
        T *restrict p = ps[k], *restrict m = ms[k], *restrict v = vs[k];                   \
        const T *restrict g = gs[k];                                                       \
        _Pragma("omp for schedule(static) nowait")                                         \
        for (int64_t i = 0; i < n[k]; ++i) {                                               \
            T gi = maximize ? -g[i] : g[i], pi = p[i];                                     \
            if (wd_mode == 1)                                                              \
                pi = pi * decay;                                                           \
            else if (wd_mode == 2)                                                         \
                gi = gi + wd * pi;                                                         \
            T mi = m[i] + one_b1 * (gi - m[i]);                                            \
            T vi = v[i] * b2;                                                              \
            vi = vi + one_b2 * (gi * gi);                                                  \
            T denom = SQRT(vi) / bc2_sqrt + eps;                                           \
            m[i] = mi;                                                                     \
            v[i] = vi;                                                                     \
            p[i] = pi + mi / denom * step;                                                 \
        }                                                                                  \
    }                                                                                      \
}
EM_ADAM(float, sqrtf)
EM_ADAM(double, sqrt)
void em_rows_add_float(int64_t n, int64_t d, const int64_t *idx, const float *src,
                       float *restrict out) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j)
            out[idx[i] * d + j] += src[i * d + j];
}
void em_rows_add_double(int64_t n, int64_t d, const int64_t *idx, const double *src,
                        double *restrict out) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j)
            out[idx[i] * d + j] += src[i * d + j];
}
"""
AXPY_MIN = 1 << 14  # elements below which numpy's two passes cost less than the call
_HAND: list = []  # [{(name, dtype): C function} | None] once built


def _hand_kernels() -> dict | None:
    if not _HAND:
        import ctypes

        from ..codegen.c.runtime import build
        kernels = None
        try:
            lib = build(_HAND_SOURCE)
            kernels = {}
            for dt, ct in ((np.float32, ctypes.c_float), (np.float64, ctypes.c_double)):
                c = ct.__name__[2:]
                f = getattr(lib, f"em_axpy_{c}")
                f.argtypes = [ctypes.c_int64, ct, ctypes.c_void_p, ctypes.c_void_p]
                g = getattr(lib, f"em_rows_add_{c}")
                g.argtypes = [ctypes.c_int64, ctypes.c_int64] + [ctypes.c_void_p] * 3
                h = getattr(lib, f"em_adam_{c}")
                h.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 5 + \
                    [ctypes.c_int64] * 2 + [ctypes.c_double] * 8
                f.restype = g.restype = h.restype = None
                kernels["axpy", np.dtype(dt)], kernels["rows_add", np.dtype(dt)] = f, g
                kernels["adam", np.dtype(dt)] = h
        except Exception:  # noqa: BLE001  (no compiler, a failed build: numpy's path)
            kernels = None
        _HAND.append(kernels)
    return _HAND[0]


def axpy_fits(y, x) -> bool:
    """Whether ``axpy`` takes these operands: float32 / float64 arrays of one dtype, shape and
    layout (C- or F-contiguous) of at least AXPY_MIN elements, with the fast path on."""
    return isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and \
        y.size >= AXPY_MIN and y.dtype in _DTYPES and x.dtype == y.dtype and \
        x.shape == y.shape and x.strides == y.strides and \
        (y.flags.c_contiguous or y.flags.f_contiguous) and enabled()


def axpy(y: np.ndarray, x: np.ndarray, alpha) -> bool:
    """``y += alpha * x`` in one pass, each element rounded once, where ``axpy_fits`` and y
    is writeable; False, with y untouched, otherwise (or without a C compiler)."""
    if not (y.flags.writeable and axpy_fits(y, x)):
        return False
    kernels = _hand_kernels()
    if kernels is None:
        return False
    kernels["axpy", y.dtype](y.size, float(alpha), x.ctypes.data, y.ctypes.data)
    return True


def rows_add(out: np.ndarray, idx: np.ndarray, src: np.ndarray) -> bool:
    """``out[idx[i]] += src[i]`` for each row i in order (indices already checked to lie in
    range), where out and src are C-contiguous 2-D float32 / float64 arrays of one dtype and
    the fast path is on; False, with out untouched, otherwise."""
    if not (out.dtype in _DTYPES and src.dtype == out.dtype and out.ndim == src.ndim == 2 and
            out.shape[1] == src.shape[1] and idx.shape == src.shape[:1] and
            out.flags.c_contiguous and out.flags.writeable and src.flags.c_contiguous and
            enabled()):
        return False
    kernels = _hand_kernels()
    if kernels is None:
        return False
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    kernels["rows_add", out.dtype](src.shape[0], src.shape[1], idx.ctypes.data,
                                   src.ctypes.data, out.ctypes.data)
    return True


def adam_fits(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray) -> bool:
    """Whether ``adam`` takes this parameter: all four arrays C-contiguous float32 / float64
    of one dtype and shape, p, m and v writeable, none overlapping, the fast path on and the
    kernels built."""
    arrays = (p, g, m, v)
    return p.dtype in _DTYPES and \
        all(a.dtype == p.dtype and a.shape == p.shape and a.flags.c_contiguous
            for a in arrays) and all(a.flags.writeable for a in (p, m, v)) and enabled() and \
        not any(np.may_share_memory(a, b) for i, a in enumerate(arrays)
                for b in arrays[i + 1:]) and _hand_kernels() is not None


def adam(params: list, maximize: bool, wd_mode: int, decay: float, wd: float, beta1: float,
         beta2: float, bc2_sqrt: float, eps: float, step: float) -> None:
    """One Adam step in place over ``params``, (p, g, m, v) arrays of one dtype that each
    passed ``adam_fits`` (see the kernel's comment above; ``wd_mode`` 0: no weight decay,
    1: decoupled, ``p *= decay``, 2: L2, ``g += wd * p``; ``step`` = -lr / bias correction
    1): one call for all of them."""
    table = np.array([[a.ctypes.data for a in q] for q in params], dtype=np.int64)
    sizes = np.array([q[0].size for q in params], dtype=np.int64)
    ptrs = [np.ascontiguousarray(table[:, j]) for j in range(4)]
    _hand_kernels()["adam", params[0][0].dtype](
        len(params), sizes.ctypes.data, *(c.ctypes.data for c in ptrs), int(maximize),
        wd_mode, decay, wd, 1 - beta1, beta2, 1 - beta2, bc2_sqrt, eps, step)
