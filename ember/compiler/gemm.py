"""Matrix products inside compiled graphs on one thread pool.

numpy's BLAS (OpenBLAS) has worker threads of its own, and after each threaded call they
busy-wait for work for a long while (up to ~0.1 s); the generated kernels run on OpenMP's
threads. Two pools on the same cores fight: on 2 cores a matmul (0.75 ms) followed by a
64K-element parallel kernel took 8 ms. PyTorch avoids this by running everything on one pool,
and so does a compiled graph here: while it runs, numpy's BLAS is set to one thread, and the
graph's matrix products call ``cblas_?gemm`` from an OpenMP region of ours, one BLAS call per
block of rows (or per matrix of a batch) on each thread. All of the graph's parallel work then
happens on OpenMP's threads, and its kernels can go parallel at much smaller sizes
(codegen_c.OMP_MIN_ELEMENTS_ONE_POOL).

A graph runs this way when the BLAS numpy loaded is an OpenBLAS whose gemm and thread-count
entry points are found, the C compiler has OpenMP, and none of the graph's eager steps calls
numpy's BLAS itself (``calls_numpy_blas``); otherwise it keeps numpy's matmul and threads.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .. import _dtype as D

# Below this many multiply-adds a product runs on the calling thread: a parallel region's
# start-up costs more than it saves.
PARALLEL_MIN_FLOPS = 1 << 18

_SOURCE = """\
#include <stdint.h>
#include <omp.h>

typedef EM_BLASINT blasint;
#define EM_ROW_MAJOR 101
#define EM_NO_TRANS 111
#define EM_TRANS 112

/* C[b] = A[b] @ B[b] for b < batch (C contiguous, batch-major). A matrix is (rows, cols) with
   one unit stride: ``ta`` says it is stored transposed, ``lda`` is its other stride; ``sa``
   is the stride between matrices of the batch (0: one matrix shared by all). Work is split
   into one piece per thread: whole matrices when the batch has enough, else blocks of rows;
   each piece is one BLAS call (BLAS is single-threaded while a graph runs). */
#define EM_GEMM(NAME, T, TYPE_GEMM)                                                          \\
typedef void (*NAME##_t)(int, int, int, blasint, blasint, blasint, T, const T *, blasint,    \\
                         const T *, blasint, T, T *, blasint);                               \\
void NAME(void *fn, int64_t parallel, int64_t batch, int64_t m, int64_t n, int64_t k,       \\
          const T *a, int64_t sa, int64_t ta, int64_t lda,                                   \\
          const T *b, int64_t sb, int64_t tb, int64_t ldb, T *c) {                           \\
    NAME##_t gemm = (NAME##_t)fn;                                                            \\
    int nt = parallel ? omp_get_max_threads() : 1;                                           \\
    int64_t splits = batch >= nt ? 1 : (nt + batch - 1) / batch;                             \\
    if (splits > m) splits = m > 0 ? m : 1;                                                  \\
    int64_t pieces = batch * splits;                                                         \\
    _Pragma("omp parallel for schedule(static) if(nt > 1 && pieces > 1)")                     \\
    for (int64_t p = 0; p < pieces; ++p) {                                                   \\
        int64_t i = p / splits, s = p % splits;                                              \\
        int64_t lo = m * s / splits, hi = m * (s + 1) / splits;                              \\
        if (hi > lo)                                                                         \\
            gemm(EM_ROW_MAJOR, ta ? EM_TRANS : EM_NO_TRANS, tb ? EM_TRANS : EM_NO_TRANS,     \\
                 hi - lo, n, k, (T)1, a + i * sa + lo * (ta ? 1 : lda), lda, b + i * sb, ldb,\\
                 (T)0, c + (i * m + lo) * n, n);                                             \\
    }                                                                                        \\
}

EM_GEMM(em_gemm_f32, float, s)
EM_GEMM(em_gemm_f64, double, d)
"""

_POOL: list = []  # [Pool | None] once probed

# graph ops computed by the drivers: op name -> its two operand parameters (linear's weight is
# read transposed, its bias is a separate epilogue by then: fusion.bias_epilogue)
LIBRARY_CALLS = {"matmul": ("input", "other"), "mm": ("input", "mat2"),
                 "bmm": ("input", "mat2"), "linear": ("input", "weight")}

# ops whose eager kernels call numpy's BLAS themselves (found by grepping ember/ops for matmul,
# dot and tensordot): every op of these modules, and these ops of others. A graph running one
# of them eagerly keeps numpy's threads (an einsum without optimize= does not call BLAS).
BLAS_MODULES = frozenset(["ember.ops.conv", "ember.ops.linalg", "ember.ops.linalg_decomp",
                          "ember.ops.linalg_einsum"])
BLAS_OPS = frozenset(["linear", "_separable_map", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
                      "adaptive_avg_pool3d"])


class Pool:
    """The BLAS entry points and the built C drivers."""

    def __init__(self, lib: ctypes.CDLL, fns: dict, set_threads, get_threads):
        self.fns, self._set, self._get = fns, set_threads, get_threads
        self.drivers = {}
        for dt, name in ((np.float32, "em_gemm_f32"), (np.float64, "em_gemm_f64")):
            f = getattr(lib, name)
            f.argtypes = [ctypes.c_void_p] + [ctypes.c_int64] * 5 + \
                [ctypes.c_void_p] + [ctypes.c_int64] * 3 + [ctypes.c_void_p] + \
                [ctypes.c_int64] * 3 + [ctypes.c_void_p]
            f.restype = None
            self.drivers[np.dtype(dt)] = f

    def serial_blas(self) -> int:
        """Set numpy's BLAS to one thread; returns the count to restore (0.5 us a pair)."""
        old = self._get()
        self._set(1)
        return old

    def restore_blas(self, old: int) -> None:
        self._set(old)


def pool() -> Pool | None:
    """The one-pool matmul drivers, built on first use; None where they cannot work."""
    if not _POOL:
        _POOL.append(_probe())
    return _POOL[0]


def _probe() -> Pool | None:
    from .runtime import CompileError, CompilerUnavailable, build, compiler_flags, \
        find_c_compiler
    found = _find_blas()
    cc = find_c_compiler()
    if found is None or cc is None or "-fopenmp" not in compiler_flags(cc):
        return None
    fns, set_threads, get_threads, int64 = found
    src = f"#define EM_BLASINT {'int64_t' if int64 else 'int32_t'}\n" + _SOURCE
    try:
        lib = build(src)
    except (CompileError, CompilerUnavailable):
        return None
    return Pool(lib, fns, set_threads, get_threads)


def _find_blas() -> tuple | None:
    """(gemm addresses by dtype, set/get thread count functions, 64-bit ints) of the OpenBLAS
    numpy loaded, or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower() and "/" in ln})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for pre, suf in (("scipy_", "64_"), ("", "64_"), ("scipy_", ""), ("", "")):
            try:
                s, d = (getattr(lib, f"{pre}cblas_{t}gemm{suf}") for t in "sd")
                config = getattr(lib, f"{pre}openblas_get_config{suf}")
                set_threads = getattr(lib, f"{pre}openblas_set_num_threads{suf}")
                get_threads = getattr(lib, f"{pre}openblas_get_num_threads{suf}")
            except AttributeError:
                continue
            config.restype = ctypes.c_char_p
            set_threads.argtypes, set_threads.restype = [ctypes.c_int], None
            get_threads.argtypes, get_threads.restype = [], ctypes.c_int
            int64 = b"USE64BITINT" in (config() or b"")
            addr = (lambda fn: ctypes.cast(fn, ctypes.c_void_p).value)
            return ({np.dtype(np.float32): addr(s), np.dtype(np.float64): addr(d)},
                    set_threads, get_threads, int64)
    return None


def library_call(node) -> bool:
    """Whether graph node ``node`` (run as an eager step) is a product the drivers compute:
    a LIBRARY_CALLS op over float32 or float64 tensors of one dtype, without a bias."""
    from .lower import bound_args
    ops = LIBRARY_CALLS.get(node.target.name)
    if ops is None:
        return False
    a = bound_args(node)
    if a.get("bias") is not None:
        return False
    metas = [getattr(a.get(p), "meta", None) for p in ops] + [node.meta]
    dtypes = {getattr(m, "dtype", None) for m in metas}
    return len(dtypes) == 1 and dtypes.pop() in (D.float32, D.float64)


def library_operands(node) -> list:
    """The graph nodes of a library call's two operands, in order."""
    from .lower import bound_args
    a = bound_args(node)
    return [a[p] for p in LIBRARY_CALLS[node.target.name]]


def calls_numpy_blas(node) -> bool:
    """Whether eager step ``node`` may call numpy's BLAS (its kernel lives in BLAS_MODULES and
    the drivers do not take it)."""
    t = node.target
    return (t.impl.__module__ in BLAS_MODULES or t.name in BLAS_OPS) and not library_call(node)


def linear(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return matmul(x, w.T)


RUNNERS = {"matmul": lambda a, b: matmul(a, b), "mm": lambda a, b: matmul(a, b),
           "bmm": lambda a, b: matmul(a, b), "linear": linear}


def _matrix(rs: int, cs: int, rows: int, cols: int) -> tuple[int, int] | None:
    """(transposed, leading stride) of a (rows, cols) matrix with element strides (rs, cs) as
    BLAS takes it, or None when neither stride is one (a copy is needed)."""
    if cols == 1:
        cs = 1
    elif rows == 1:
        rs = 1
    if cs == 1 and rs >= max(1, cols):
        return 0, rs
    if rs == 1 and cs >= max(1, rows):
        return 1, cs
    if cs == 1 and rows == 1:
        return 0, max(1, cols)
    return None


def _flat_batch(a: np.ndarray, nb: int) -> int | None:
    """The element stride between consecutive matrices of ``a``'s first ``nb`` dims seen as
    one batch dim, or None when they do not collapse to one stride."""
    shape, st = a.shape[:nb], [s // a.itemsize for s in a.strides[:nb]]
    dims = [(n, s) for n, s in zip(shape, st) if n != 1]
    if not dims:
        return 0
    for (n0, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            return None
    return dims[-1][1]


def _operand(a: np.ndarray, nb: int) -> tuple | None:
    """(batch stride, transposed, leading stride) of ``a`` (batch dims first), or None."""
    if any(s % a.itemsize or s < 0 for s in a.strides):
        return None
    sb = _flat_batch(a, nb)
    if sb is None:
        return None
    rows, cols = a.shape[-2:]
    m = _matrix(a.strides[-2] // a.itemsize, a.strides[-1] // a.itemsize, rows, cols)
    return None if m is None else (sb, *m)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b)``, computed by the one-pool drivers when both operands are float32
    or float64 matrices (batched, broadcast) BLAS can read in place."""
    p = pool()
    if p is None or a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or \
            a.dtype not in p.drivers or 0 in a.shape or 0 in b.shape or \
            a.shape[-1] != b.shape[-2]:
        return np.asarray(np.matmul(a, b))  # vector . vector: numpy's scalar as a 0-d array
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.ndim == 2 and _flat_batch(a, a.ndim - 1) is not None and a.strides[-1] == a.itemsize:
        # a stack of row-major matrices times one matrix: one product of all their rows
        out = np.empty(a.shape[:-1] + (n,), a.dtype)
        _run(p, a.reshape(-1, k), b, out.reshape(-1, n), 0)
        return out
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return np.matmul(a, b)  # numpy raises its own error; callers checked shapes already
    a = np.broadcast_to(a, batch + (m, k))
    b = np.broadcast_to(b, batch + (k, n))
    out = np.empty(batch + (m, n), a.dtype)
    if not _run(p, a, b, out, len(batch)):
        return np.matmul(a, b)
    return out


def _run(p: Pool, a: np.ndarray, b: np.ndarray, out: np.ndarray, nb: int) -> bool:
    """``out = a @ b`` over ``nb`` batch dims by the driver; False when an operand's layout
    is not one BLAS reads (the caller falls back)."""
    oa, ob = _operand(a, nb), _operand(b, nb)
    if oa is None:
        a = np.ascontiguousarray(a)
        oa = _operand(a, nb)
    if ob is None:
        b = np.ascontiguousarray(b)
        ob = _operand(b, nb)
    if oa is None or ob is None:
        return False
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = math.prod(a.shape[:nb])
    parallel = batch * m * n * k >= PARALLEL_MIN_FLOPS
    p.drivers[a.dtype](p.fns[a.dtype], parallel, batch, m, n, k,
                       a.ctypes.data, *oa, b.ctypes.data, *ob, out.ctypes.data)
    return True
