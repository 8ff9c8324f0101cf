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

# A product whose matrices are at most this small (each dim, and k * n) runs in the driver's
# own loop: OpenBLAS spends ~10 us per call on set-up, more than a 64x32x64 product costs.
SMALL_DIM, SMALL_KN = 128, 1 << 14

_HEADER = """\
#include <math.h>
#include <stdint.h>
#include <omp.h>

typedef EM_BLASINT blasint;
#define EM_ROW_MAJOR 101
#define EM_NO_TRANS 111
#define EM_TRANS 112
"""

# {T}: the C type, {F}: its fused multiply-add (BLAS's kernels contract too)
_DRIVER = """
typedef void (*em_{T}_gemm_t)(int, int, int, blasint, blasint, blasint, {T}, const {T} *,
                              blasint, const {T} *, blasint, {T}, {T} *, blasint);

/* c (m x n, contiguous) = a @ b for small matrices, in tiles of 4 rows x 16 columns held in
   registers; a transposed b is first copied row-major into ``scratch`` (k x n). */
static void em_small_{T}(int64_t m, int64_t n, int64_t k, const {T} *a, int64_t ta,
                         int64_t lda, const {T} *b, int64_t tb, int64_t ldb, {T} *c,
                         {T} *scratch) {{
    if (tb) {{
        for (int64_t p = 0; p < k; ++p)
            for (int64_t j = 0; j < n; ++j) scratch[p * n + j] = b[j * ldb + p];
        b = scratch;
        ldb = n;
    }}
    for (int64_t i0 = 0; i0 < m; i0 += 4) {{
        int64_t mi = m - i0 < 4 ? m - i0 : 4;
        for (int64_t j0 = 0; j0 < n; j0 += 16) {{
            int64_t nj = n - j0 < 16 ? n - j0 : 16;
            {T} acc[4][16] = {{{{0}}}};
            if (mi == 4 && nj == 16) {{
                for (int64_t p = 0; p < k; ++p) {{
                    const {T} *bp = b + p * ldb + j0;
                    for (int r = 0; r < 4; ++r) {{
                        const {T} av = ta ? a[p * lda + i0 + r] : a[(i0 + r) * lda + p];
                        #pragma omp simd
                        for (int jj = 0; jj < 16; ++jj) acc[r][jj] = {F}(av, bp[jj], acc[r][jj]);
                    }}
                }}
            }} else {{
                for (int64_t p = 0; p < k; ++p) {{
                    const {T} *bp = b + p * ldb + j0;
                    for (int r = 0; r < mi; ++r) {{
                        const {T} av = ta ? a[p * lda + i0 + r] : a[(i0 + r) * lda + p];
                        for (int jj = 0; jj < nj; ++jj) acc[r][jj] = {F}(av, bp[jj], acc[r][jj]);
                    }}
                }}
            }}
            for (int r = 0; r < mi; ++r)
                for (int jj = 0; jj < nj; ++jj) c[(i0 + r) * n + j0 + jj] = acc[r][jj];
        }}
    }}
}}

/* c[i] = a[i] @ b[i] for i < batch (c contiguous, batch-major). A matrix is (rows, cols) with
   one unit stride: ``ta`` says it is stored transposed, ``lda`` is its other stride; ``sa``
   is the stride between matrices of the batch (0: one matrix shared by all). Work is split
   into one piece per thread: whole matrices when the batch has enough, else blocks of rows;
   each piece is one BLAS call (BLAS is single-threaded while a graph runs), or the small-
   matrix loop above. */
void em_gemm_{T}(void *fn, int64_t parallel, int64_t batch, int64_t m, int64_t n, int64_t k,
                 const {T} *a, int64_t sa, int64_t ta, int64_t lda,
                 const {T} *b, int64_t sb, int64_t tb, int64_t ldb, {T} *c) {{
    em_{T}_gemm_t gemm = (em_{T}_gemm_t)fn;
    int nt = parallel ? omp_get_max_threads() : 1;
    int64_t splits = batch >= nt ? 1 : (nt + batch - 1) / batch;
    if (splits > m) splits = m > 0 ? m : 1;
    int64_t pieces = batch * splits;
    int small = m <= {SD} && n <= {SD} && k <= {SD} && k * n <= {SKN};
    #pragma omp parallel if(nt > 1 && pieces > 1)
    {{
        {T} scratch[small && tb ? k * n : 1];
        #pragma omp for schedule(static)
        for (int64_t p = 0; p < pieces; ++p) {{
            int64_t i = p / splits, s = p % splits;
            int64_t lo = m * s / splits, hi = m * (s + 1) / splits;
            const {T} *ai = a + i * sa + lo * (ta ? 1 : lda);
            if (hi <= lo)
                continue;
            if (small)
                em_small_{T}(hi - lo, n, k, ai, ta, lda, b + i * sb, tb, ldb,
                             c + (i * m + lo) * n, scratch);
            else
                gemm(EM_ROW_MAJOR, ta ? EM_TRANS : EM_NO_TRANS, tb ? EM_TRANS : EM_NO_TRANS,
                     hi - lo, n, k, ({T})1, ai, lda, b + i * sb, ldb, ({T})0,
                     c + (i * m + lo) * n, n);
        }}
    }}
}}
"""


def _source(int64: bool) -> str:
    """The drivers' C source for float32 and float64, for this BLAS's integer width."""
    drivers = [_DRIVER.format(T=t, F=f, SD=SMALL_DIM, SKN=SMALL_KN)
               for t, f in (("float", "fmaf"), ("double", "fma"))]
    return f"#define EM_BLASINT {'int64_t' if int64 else 'int32_t'}\n" + _HEADER + \
        "".join(drivers)


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
        for dt, name in ((np.float32, "em_gemm_float"), (np.float64, "em_gemm_double")):
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
    try:
        lib = build(_source(int64))
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


def _batch_stride(shape: tuple, strides: list) -> int | None:
    """The element stride between consecutive matrices when dims ``shape`` (with element
    ``strides``) are seen as one batch dim, or None when they do not collapse to one."""
    inner = prev = None  # the innermost dim's stride; the last (stride, size) seen
    for n, st in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if prev is None:
            inner = st
        elif st != prev[0] * prev[1]:
            return None
        prev = (st, n)
    return 0 if inner is None else inner


def _layout(a: np.ndarray, batch: tuple) -> tuple | None:
    """(batch stride, transposed, leading stride) of ``a`` read as ``batch`` + its matrix
    (missing or size-1 batch dims broadcast), or None when BLAS cannot read it in place."""
    isz = a.itemsize
    st = [s // isz for s in a.strides]
    if any(s < 0 for s in st) or any(s % isz for s in a.strides):
        return None
    nb = a.ndim - 2
    lead = len(batch) - nb
    bst = [0] * lead + [0 if (n == 1 and b != 1) else s
                        for s, n, b in zip(st[:nb], a.shape[:nb], batch[lead:])]
    sb = _batch_stride(batch, bst)
    if sb is None:
        return None
    m = _matrix(st[-2], st[-1], a.shape[-2], a.shape[-1])
    return None if m is None else (sb, *m)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b)``, computed by the one-pool drivers when both operands are float32
    or float64 matrices (batched, broadcast) BLAS can read in place; ~5 us of Python a call."""
    p = _POOL[0] if _POOL else pool()
    driver = None if p is None else p.drivers.get(a.dtype)
    if driver is None or a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype:
        return np.asarray(np.matmul(a, b))  # vector . vector: numpy's scalar as a 0-d array
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    if k != k2 or not (m and n and k):
        return np.matmul(a, b)  # numpy's error or its empty result
    if b.ndim == 2 and a.ndim > 2 and a.strides[-1] == a.itemsize and \
            _batch_stride(a.shape[:-1], [s // a.itemsize for s in a.strides[:-1]]) is not None:
        # a stack of row-major matrices times one matrix: one product of all their rows
        out = np.empty(a.shape[:-1] + (n,), a.dtype)
        a = a.reshape(-1, k)
        batch, bshape = 1, ()
    else:
        bshape = a.shape[:-2] if a.shape[:-2] == b.shape[:-2] else \
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        out = np.empty(bshape + (m, n), a.dtype)
        batch = math.prod(bshape)
    la, lb = _layout(a, bshape), _layout(b, bshape)
    if la is None:
        a = np.ascontiguousarray(np.broadcast_to(a, bshape + a.shape[-2:]))
        la = _layout(a, bshape)
    if lb is None:
        b = np.ascontiguousarray(np.broadcast_to(b, bshape + b.shape[-2:]))
        lb = _layout(b, bshape)
    m = a.shape[-2]
    driver(p.fns[a.dtype], batch * m * n * k >= PARALLEL_MIN_FLOPS, batch, m, n, k,
           a.ctypes.data, *la, b.ctypes.data, *lb, out.ctypes.data)
    return out
