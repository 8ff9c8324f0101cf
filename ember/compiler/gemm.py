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

import contextlib
import ctypes
import math
import threading

import numpy as np

from .. import _dtype as D

# Below this many multiply-adds a product runs on the calling thread: a parallel region's
# start-up costs more than it saves.
PARALLEL_MIN_FLOPS = 1 << 18

_HEADER = """\
#include <stdint.h>
#include <omp.h>

typedef EM_BLASINT blasint;
#define EM_ROW_MAJOR 101
#define EM_NO_TRANS 111
#define EM_TRANS 112
"""

# {T}: the C type
_DRIVER = """
typedef void (*em_{T}_gemm_t)(int, int, int, blasint, blasint, blasint, {T}, const {T} *,
                              blasint, const {T} *, blasint, {T}, {T} *, blasint);

/* c[i] = a[i] @ b[i] for i < batch. A matrix is (rows, cols) with one unit stride: ``ta``
   says it is stored transposed, ``lda`` is its other stride (c is never transposed). The
   batch is two nested groups of dims (``inner`` matrices in the inner one) with a stride
   each, ``sa0`` and ``sa1`` (0: shared by the group), so a batch of attention heads viewed
   in a (B, T, H * D) buffer needs no copy, and c can be written in that layout too. Work is
   split into one piece per thread: whole matrices when the batch has enough, else blocks of
   rows of c, or of its columns when a is transposed (a weight gradient, x^T @ g: a block of
   rows would read a strided block of a). Each piece is one BLAS call (BLAS is single-threaded
   while a graph runs). With a ``bias`` (one value per column of c) a piece first fills its
   block of c with it and the call adds the product in (beta = 1): that costs what beta = 0
   does, where BLAS zeroes c before accumulating into it, so linear's bias takes no pass of
   its own. */
void em_gemm_{T}(void *fn, int64_t parallel, int64_t batch, int64_t inner, int64_t m,
                 int64_t n, int64_t k, const {T} *a, int64_t sa0, int64_t sa1, int64_t ta,
                 int64_t lda, const {T} *b, int64_t sb0, int64_t sb1, int64_t tb, int64_t ldb,
                 {T} *c, int64_t sc0, int64_t sc1, int64_t ldc, const {T} *bias) {{
    em_{T}_gemm_t gemm = (em_{T}_gemm_t)fn;
    int nt = parallel ? omp_get_max_threads() : 1;
    int64_t len = ta ? n : m;
    int64_t splits = batch >= nt ? 1 : (nt + batch - 1) / batch;
    if (splits > len) splits = len > 0 ? len : 1;
    int64_t pieces = batch * splits;
    #pragma omp parallel for schedule(static) if(nt > 1 && pieces > 1)
    for (int64_t p = 0; p < pieces; ++p) {{
        int64_t i = p / splits, s = p % splits;
        int64_t lo = len * s / splits, hi = len * (s + 1) / splits;
        const {T} *a_i = a + i / inner * sa0 + i % inner * sa1;
        const {T} *b_i = b + i / inner * sb0 + i % inner * sb1;
        if (hi <= lo)
            continue;
        {T} *c_p = c + i / inner * sc0 + i % inner * sc1 + (ta ? lo : lo * ldc);
        int64_t rows = ta ? m : hi - lo, cols = ta ? hi - lo : n;
        if (bias)
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < cols; ++j)
                    c_p[r * ldc + j] = bias[(ta ? lo : 0) + j];
        {T} beta = bias ? ({T})1 : ({T})0;
        if (ta)
            gemm(EM_ROW_MAJOR, EM_TRANS, tb ? EM_TRANS : EM_NO_TRANS, m, hi - lo, k, ({T})1,
                 a_i, lda, b_i + lo * (tb ? ldb : 1), ldb, beta, c_p, ldc);
        else
            gemm(EM_ROW_MAJOR, EM_NO_TRANS, tb ? EM_TRANS : EM_NO_TRANS, hi - lo, n, k, ({T})1,
                 a_i + lo * lda, lda, b_i, ldb, beta, c_p, ldc);
    }}
}}
"""


# One product's driver arguments after ``parallel``, as a C parameter list ({T}, {i}: its index).
_ARGS = ("int64_t batch{i}, int64_t inner{i}, int64_t m{i}, int64_t n{i}, int64_t k{i}, "
         "const {T} *a{i}, int64_t sa0{i}, int64_t sa1{i}, int64_t ta{i}, int64_t lda{i}, "
         "const {T} *b{i}, int64_t sb0{i}, int64_t sb1{i}, int64_t tb{i}, int64_t ldb{i}, "
         "{T} *c{i}, int64_t sc0{i}, int64_t sc1{i}, int64_t ldc{i}, const {T} *bias{i}")

# Two independent products (a weight's and an input's gradient, both read from one output
# gradient): with two threads, one whole product per thread, each one BLAS call, not each
# product split in two (measured 4-8% faster per pair on the GPT step's shapes); with another
# thread count, one after the other.
_PAIR = """
void em_gemm2_{T}(void *fn, {args1}, {args2}) {{
    if (omp_get_max_threads() == 2) {{
        #pragma omp parallel sections num_threads(2)
        {{
            #pragma omp section
            em_gemm_{T}(fn, 0, {call1});
            #pragma omp section
            em_gemm_{T}(fn, 0, {call2});
        }}
    }} else {{
        em_gemm_{T}(fn, 1, {call1});
        em_gemm_{T}(fn, 1, {call2});
    }}
}}
"""


def _pair_source(t: str) -> str:
    names = [a.split()[-1].lstrip("*").replace("{i}", "") for a in _ARGS.split(", ")]
    args = {f"args{i}": _ARGS.format(T=t, i=i) for i in (1, 2)}
    calls = {f"call{i}": ", ".join(n + str(i) for n in names) for i in (1, 2)}
    return _PAIR.format(T=t, **args, **calls)


def _source(int64: bool) -> str:
    """The drivers' C source for float32 and float64, for this BLAS's integer width."""
    drivers = [_DRIVER.format(T=t) + _pair_source(t) for t in ("float", "double")]
    return f"#define EM_BLASINT {'int64_t' if int64 else 'int32_t'}\n" + _HEADER + \
        "".join(drivers)


_POOL: list = []  # [Pool | None] once probed

# graph ops computed by the drivers: op name -> its two operand parameters (linear's weight is
# read transposed; its bias, when it is one value per output column, fills c first)
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
        self._lock = threading.Lock()
        self._inside, self._restore = 0, 0  # graphs running now; numpy's thread count
        self.drivers, self.pairs = {}, {}  # dtype -> em_gemm_T, em_gemm2_T
        one = [ctypes.c_int64] * 5 + [ctypes.c_void_p] + [ctypes.c_int64] * 4 + \
            [ctypes.c_void_p] + [ctypes.c_int64] * 4 + [ctypes.c_void_p] + \
            [ctypes.c_int64] * 3 + [ctypes.c_void_p]  # _ARGS
        for dt, t in ((np.float32, "float"), (np.float64, "double")):
            f, f2 = getattr(lib, f"em_gemm_{t}"), getattr(lib, f"em_gemm2_{t}")
            f.argtypes = [ctypes.c_void_p, ctypes.c_int64] + one
            f2.argtypes = [ctypes.c_void_p] + one + one
            f.restype = f2.restype = None
            self.drivers[np.dtype(dt)], self.pairs[np.dtype(dt)] = f, f2

    @contextlib.contextmanager
    def serial_blas(self):
        """numpy's BLAS on one thread while the body runs (~1 us). Counted, so graphs run
        from several Python threads at once restore the count only when the last ends."""
        with self._lock:
            if not self._inside:
                self._restore = self._get()
                self._set(1)
            self._inside += 1
        try:
            yield
        finally:
            with self._lock:
                self._inside -= 1
                if not self._inside:
                    self._set(self._restore)


def pool() -> Pool | None:
    """The one-pool matmul drivers, built on first use; None where they cannot work."""
    if not _POOL:
        _POOL.append(_probe())
    return _POOL[0]


def _probe() -> Pool | None:
    from ..codegen.c.runtime import CompileError, CompilerUnavailable, build, compiler_flags, \
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
    a LIBRARY_CALLS op over float32 or float64 tensors of one dtype, with at most a bias of
    one value per output column."""
    from .lower import bound_args
    ops = LIBRARY_CALLS.get(node.target.name)
    if ops is None:
        return False
    a = bound_args(node)
    bias = a.get("bias")
    metas = [getattr(a.get(p), "meta", None) for p in ops] + [node.meta]
    if bias is not None:
        n = node.meta.shape[-1:] if getattr(node.meta, "shape", None) else None
        if getattr(bias, "meta", None) is None or tuple(bias.meta.shape) != tuple(n or ()):
            return False
        metas.append(bias.meta)
    dtypes = {getattr(m, "dtype", None) for m in metas}
    return len(dtypes) == 1 and dtypes.pop() in (D.float32, D.float64)


def library_operands(node) -> list:
    """The graph nodes of a library call's operands, in order: the two matrices, then the
    bias if there is one."""
    from .lower import bound_args
    a = bound_args(node)
    bias = [a["bias"]] if a.get("bias") is not None else []
    return [a[p] for p in LIBRARY_CALLS[node.target.name]] + bias


def calls_numpy_blas(node) -> bool:
    """Whether eager step ``node`` may call numpy's BLAS (its kernel lives in BLAS_MODULES and
    the drivers do not take it)."""
    t = node.target
    return (t.impl.__module__ in BLAS_MODULES or t.name in BLAS_OPS) and not library_call(node)


# each library call's runner (matmul is defined below, so the names are bound late)
RUNNERS = {"matmul": lambda a, b, out=None: matmul(a, b, out=out),
           "mm": lambda a, b, out=None: matmul(a, b, out=out),
           "bmm": lambda a, b, out=None: matmul(a, b, out=out),
           "linear": lambda x, w, b=None: matmul(x, w.T, b)}


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


def _layout(a: np.ndarray, batch: tuple, j: int) -> tuple | None:
    """(outer batch stride, inner batch stride, transposed, leading stride) of ``a`` read as
    ``batch`` + its matrix, the batch dims grouped as ``batch[:j]`` and ``batch[j:]``
    (missing or size-1 dims broadcast); None when BLAS cannot read it so in place."""
    isz = a.itemsize
    st = [s // isz for s in a.strides]
    if any(s < 0 for s in st) or any(s % isz for s in a.strides):
        return None
    nb = a.ndim - 2
    lead = len(batch) - nb
    bst = [0] * lead + [0 if (n == 1 and b != 1) else s
                        for s, n, b in zip(st[:nb], a.shape[:nb], batch[lead:])]
    s0, s1 = _batch_stride(batch[:j], bst[:j]), _batch_stride(batch[j:], bst[j:])
    m = _matrix(st[-2], st[-1], a.shape[-2], a.shape[-1])
    return None if s0 is None or s1 is None or m is None else (s0, s1, *m)


def _out_layout(c: np.ndarray, batch: tuple, j: int) -> tuple | None:
    """(outer batch stride, inner batch stride, leading stride) of output ``c`` written as
    ``batch`` + its matrix (rows with unit stride: the drivers never write c transposed), or
    None."""
    lay = _layout(c, batch, j)
    if lay is None:
        return None
    (m, n), isz = c.shape[-2:], c.itemsize
    rs, cs = c.strides[-2] // isz, c.strides[-1] // isz
    if n > 1 and cs != 1 or m > 1 and rs < n:
        return None
    return lay[0], lay[1], rs if m > 1 else n


def _layouts(a: np.ndarray, b: np.ndarray, c: np.ndarray, batch: tuple) -> tuple | None:
    """(split, a's layout, b's layout, c's, a, b) for the first grouping of the batch dims in
    two that all three operands can be read (written) with, copying an operand when there is
    none; None when output ``c`` cannot be written at that grouping."""
    for j in range(len(batch) + 1):
        la, lb, lc = _layout(a, batch, j), _layout(b, batch, j), _out_layout(c, batch, j)
        if la is not None and lb is not None and lc is not None:
            return j, la, lb, lc, a, b
    lc = _out_layout(c, batch, 0)
    if lc is None:
        return None
    if la is None:
        a = np.ascontiguousarray(np.broadcast_to(a, batch + a.shape[-2:]))
    if lb is None:
        b = np.ascontiguousarray(np.broadcast_to(b, batch + b.shape[-2:]))
    return 0, _layout(a, batch, 0), _layout(b, batch, 0), lc, a, b


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None,
           out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b)`` (plus ``bias``, one value per column, when given), computed by the
    one-pool drivers when both operands are float32 or float64 matrices (batched, broadcast)
    BLAS can read in place; ~5 us of Python a call. ``out``: the array to write (of the
    result's shape and dtype, any layout; the graph's plan picks one its readers want)."""
    p = _POOL[0] if _POOL else pool()
    driver = None if p is None else p.drivers.get(a.dtype)
    if driver is None or a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or \
            bias is not None and (bias.dtype != a.dtype or bias.shape != b.shape[-1:]):
        return _finish(np.asarray(np.matmul(a, b)), bias, out)  # vector . vector: 0-d
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    if k != k2 or not (m and n and k):
        return _finish(np.matmul(a, b), bias, out)  # numpy's error or its empty result
    if b.ndim == 2 and a.ndim > 2 and a.strides[-1] == a.itemsize and \
            _batch_stride(a.shape[:-1], [s // a.itemsize for s in a.strides[:-1]]) is not None \
            and (out is None or out.flags.c_contiguous):
        # a stack of row-major matrices times one matrix: one product of all their rows
        res = np.empty(a.shape[:-1] + (n,), a.dtype) if out is None else out
        a, c = a.reshape(-1, k), res.reshape(-1, n)
        batch, bshape = 1, ()
    else:
        bshape = a.shape[:-2] if a.shape[:-2] == b.shape[:-2] else \
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        res = c = np.empty(bshape + (m, n), a.dtype) if out is None else out
        batch = math.prod(bshape)
        if not batch:
            return res  # an empty batch (the driver would divide by it)
    lay = _layouts(a, b, c, bshape)
    if lay is None:  # an output layout BLAS cannot write: through a contiguous temporary
        return _finish(matmul(a, b, bias), None, out)
    j, la, lb, lc, a, b = lay
    m = a.shape[-2]  # a stack's rows are one matrix
    if bias is not None:
        bias = np.ascontiguousarray(bias)
    driver(p.fns[a.dtype], batch * m * n * k >= PARALLEL_MIN_FLOPS, batch,
           math.prod(bshape[j:]), m, n, k, a.ctypes.data, *la, b.ctypes.data, *lb,
           c.ctypes.data, *lc, None if bias is None else bias.ctypes.data)
    return res


def static_args(a: tuple, b: tuple, c: tuple, dtype) -> tuple | None:
    """The driver's arguments other than the four pointers for ``c = a @ b`` where each
    operand is ``(shape, element strides)`` known when the graph is planned, or None where
    ``matmul`` would copy an operand or fall back to numpy (the wrapper calls it then):
    a compiled graph calls the driver directly, without ~15 us of Python per product."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        return None
    a, b, c = [np.lib.stride_tricks.as_strided(np.empty(1, dtype), sh,
                                               [x * dtype.itemsize for x in st])
               for sh, st in (a, b, c)]  # only shapes and strides are read
    if a.ndim < 2 or b.ndim < 2 or c.shape[-1:] != b.shape[-1:]:
        return None
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    if k != k2 or not (m and n and k):
        return None
    rs = _batch_stride(a.shape[:-1], [x // a.itemsize for x in a.strides[:-1]]) \
        if b.ndim == 2 and a.ndim > 2 and a.strides[-1] == a.itemsize else None
    rows = math.prod(a.shape[:-1])
    if rs is not None and (rs >= k or rows == 1) and c.flags.c_contiguous:
        # a stack times one matrix: all its rows as one matrix, when they lie apart as BLAS
        # reads them (a broadcast stack, rows at stride 0, goes batch by batch)
        m = rows
        a = np.lib.stride_tricks.as_strided(a, (m, k), (max(rs, k) * a.itemsize, a.itemsize))
        c = np.lib.stride_tricks.as_strided(c, (m, n), (n * c.itemsize, c.itemsize))
        bshape = ()
    else:
        bshape = a.shape[:-2] if a.shape[:-2] == b.shape[:-2] else \
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    batch = math.prod(bshape)
    if not batch or c.shape != bshape + (m, n):
        return None
    for j in range(len(bshape) + 1):
        la, lb, lc = _layout(a, bshape, j), _layout(b, bshape, j), _out_layout(c, bshape, j)
        if la is not None and lb is not None and lc is not None:
            return (batch * m * n * k >= PARALLEL_MIN_FLOPS, batch, math.prod(bshape[j:]),
                    m, n, k), la, lb, lc
    return None


def _finish(res: np.ndarray, bias: np.ndarray | None, out: np.ndarray | None) -> np.ndarray:
    """A product the drivers did not compute: the bias added (numpy's promotion), written
    into ``out`` when one is given."""
    if bias is not None:
        res = np.asarray(res + bias)
    if out is None:
        return res
    out[...] = res
    return out
