"""C code generation for a Plan: one C function per kernel, plus the Python wrapper source
that allocates buffers, calls kernels through ctypes and runs the eager steps.

``CScalarOps`` (codegen/c/scalar_ops.py) spells each primitive scalar operation as a C
expression over already-named operands; the prelude below defines the helpers it calls.
"""

from __future__ import annotations

import os

from ..backends.special import NCDF_D, NCDF_N
from ..codegen.c.scalar_ops import CTYPE, CScalarOps, cast_expr  # noqa: F401  (re-exported)
from .codegen_c_body import STORAGE, _Body, _index, store_expr, stream_block, streamed
from .codegen_c_body import c_literal  # noqa: F401  (re-exported)
from .codegen_rows import (COLUMNS, KEPT_ROW_MAX, _column_mode, _columns_body, _row_cache,
                           _rows_body)
from .fusion import CatKernel, Kernel, Plan, RowsKernel
from .lower import Expr, Load, contiguous_strides
from .symbolic import wrapper_bindings
from .wrapper import wrapper_source

PRELUDE = """\
#include <math.h>
#include <stdint.h>
#include <string.h>

/* bfloat16 <-> float: the high half of a float32, rounded to nearest even */
static inline float em_bf16_load(uint16_t h) {
    uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t em_bf16_store(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float em_bf16_round(float f) { return em_bf16_load(em_bf16_store(f)); }

/* a hint to bring the line holding p into L1 before it is read; none where the compiler has
   no builtin for it */
#if defined(__GNUC__)
#define EM_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define EM_PREFETCH(p) ((void)0)
#endif

/* float32 exp and tanh written branch-free so loops calling them vectorize (libm's calls do
   not without -ffast-math). Cody-Waite range reduction and Cephes polynomials: within 2 ulp
   of the correctly rounded result; NaN and +-inf behave as in libm. exp reads n from the
   shifter's bits and settles out-of-range x with selects at the end rather than clamping it
   first (1.8x the throughput of the clamped form, the same worst case over every float32:
   1.01 ulp, denormal results included). */
#ifdef __FMA__  /* an explicit fused multiply-add where the target has one: exact, and fast */
#define EM_MLA(a, b, c) fmaf(a, b, c)
static inline float em_sq_err(float a, float p) { return fmaf(a, a, -p); }
#else
#define EM_MLA(a, b, c) ((a) * (b) + (c))
/* a * a - p exactly, p being a * a rounded, without an fma (CPUs before AVX2): Dekker's
   product, a split into 12-bit halves (Veltkamp) so that every partial product is exact.
   Needs |a| < 2^115 (the split's 4097 a must not overflow) and no FP contraction. */
static inline float em_sq_err(float a, float p) {
    float c = 4097.0f * a, ah = c - (c - a), al = a - ah;
    return ((ah * ah - p) + 2.0f * ah * al) + al * al;
}
#endif
static inline float em_expf(float x) {
    /* x = n ln2 + r, |r| <= ln2 / 2: n is t's low bits once the shifter rounds x log2(e) */
    float t = EM_MLA(x, 1.44269504088896341f, 12582912.0f);
    float n = t - 12582912.0f;
    float r = EM_MLA(n, -0.693359375f, x);
    r = EM_MLA(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = EM_MLA(p, r, 1.3981999507e-3f);
    p = EM_MLA(p, r, 8.3334519073e-3f);
    p = EM_MLA(p, r, 4.1665795894e-2f);
    p = EM_MLA(p, r, 1.6666665459e-1f);
    p = EM_MLA(p, r, 5.0000001201e-1f);
    p = EM_MLA(p, r * r, r) + 1.0f;
    uint32_t tb;  /* 2^n as two normal scales, so denormal results round once */
    memcpy(&tb, &t, 4);
    uint32_t n1 = (uint32_t)((int32_t)(tb - 0x4b400000u) >> 1), n2 = tb - 0x4b400000u - n1;
    uint32_t b1 = (n1 + 127u) << 23, b2 = (n2 + 127u) << 23;
    float s1, s2;
    memcpy(&s1, &b1, 4);
    memcpy(&s2, &b2, 4);
    float y = p * s1 * s2;  /* only meaningful on [-104, 89]: outside, the selects decide */
    y = x < -104.0f ? 0.0f : y;
    y = x > 89.0f ? INFINITY : y;
    return x != x ? x : y;
}
static inline float em_tanhf(float x) {
    float ax = x < 0 ? -x : x;
    float z = x * x;
    float q = EM_MLA(-5.70498872745e-3f, z, 2.06390887954e-2f);
    q = EM_MLA(q, z, -5.37397155531e-2f);
    q = EM_MLA(q, z, 1.33314422036e-1f);
    q = EM_MLA(q, z, -3.33332819422e-1f);
    float small = EM_MLA(q * z, x, x);
    float e = em_expf(2.0f * (ax > 20.0f ? 20.0f : ax));
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0 ? -big : big;
    return ax < 0.625f ? small : (x != x ? x : big);
}
/* float32 erf, branch-free like em_expf (libm's erff keeps GELU loops scalar): x P(x^2) below
   1, else 1 - exp(-x^2) Q(x) with Q a polynomial in (x - 2.5) / 1.5 on [1, 4] (erf is 1 in
   float32 beyond); least-squares fits to erf made for ember, within 2.5 ulp. */
static inline float em_erff(float x) {
    float ax = x < 0 ? -x : x;
    float t = x * x;
    float sp = 7.882500358391553e-05f;
    sp = EM_MLA(sp, t, -0.0008018859080038965f);
    sp = EM_MLA(sp, t, 0.005189312621951103f);
    sp = EM_MLA(sp, t, -0.02685432881116867f);
    sp = EM_MLA(sp, t, 0.11283597350120544f);
    sp = EM_MLA(sp, t, -0.3761262595653534f);
    sp = EM_MLA(sp, t, 1.1283791065216064f);
    float small = x * sp;
    float xc = ax < 1.0f ? 1.0f : (ax > 4.0f ? 4.0f : ax);
    float u = (xc - 2.5f) * (1.0f / 1.5f);
    float up = 1.3819321793562267e-05f;
    up = EM_MLA(up, u, -3.692937389132567e-05f);
    up = EM_MLA(up, u, 5.494660581462085e-05f);
    up = EM_MLA(up, u, -0.00014394696336239576f);
    up = EM_MLA(up, u, 0.0004145087441429496f);
    up = EM_MLA(up, u, -0.0010171192698180676f);
    up = EM_MLA(up, u, 0.002401701407507062f);
    up = EM_MLA(up, u, -0.00556733226403594f);
    up = EM_MLA(up, u, 0.012489703483879566f);
    up = EM_MLA(up, u, -0.027005724608898163f);
    up = EM_MLA(up, u, 0.05611047148704529f);
    up = EM_MLA(up, u, -0.11152100563049316f);
    up = EM_MLA(up, u, 0.21080636978149414f);
    float big = 1.0f - em_expf(-xc * xc) * up;
    big = ax > 4.0f ? 1.0f : big;
    big = x < 0 ? -big : big;
    return ax < 1.0f ? small : (x != x ? x : big);
}
/* GELU's normal CDF, Phi(x) = erfc(-x / sqrt 2) / 2, without 1 + erf(x / sqrt 2)'s cancellation
   below zero. With z = |x| / sqrt 2, erfc(z) = exp(-z^2) R(z), R a rational of degrees 4 and 5
   (special.NCDF_N, NCDF_D: minimax relative error 6e-9 on [0, 10.5]; all coefficients
   positive, so Horner in z stays accurate). em_ncdf_parts returns R(z) / 2 and sets *e to
   exp(-x^2 / 2), taken with x^2 as a float plus its exact rounding error (em_sq_err: an fma,
   or Dekker's product where the CPU has no fma) so the lower tail
   keeps its relative precision; past |x| = 20, where erfc is 0 in float32, R's argument is
   clamped and e is 0 (NaN stays). Phi is e R / 2 below zero and 1 - e R / 2 above (em_ncdff,
   the primitive ncdf; GELU is x ncdf(x), ops/activations.py). */
static inline float em_ncdf_parts(float x, float *e) {
    float ax = x < 0 ? -x : x;
    float z = (ax > 20.0f ? 20.0f : ax) * 0.70710678118654752f;
@NCDF_N@
@NCDF_D@
    /* exp(x * x * -0.5f) spelled as GELU's derivative spells its density's exponent, so that
       a kernel computing both (ncdf(x) + x phi(x)) evaluates the exp once (the C compiler
       merges the two inlined copies) */
    float hi = x * x, lo = em_sq_err(x, hi);
    float ex = em_expf(hi * -0.5f);
    *e = ax > 20.0f ? 0.0f : EM_MLA(ex, -0.5f * lo, ex);  /* (0 in float32 beyond) */
    return 0.5f * n / d;
}
static inline float em_ncdff(float x) {  /* the primitive ncdf: Phi(x) */
    float e, h = em_ncdf_parts(x, &e) * e;
    return x < 0 ? h : 1.0f - h;
}
/* float64 Phi: -x / sqrt 2 = zh + zl (zl the product's rounding error, by an fma) and
   erfc(zh + zl) ~ erfc(zh) - zl erfc'(zh), which keeps the lower tail's relative precision
   (erfc(zh) alone is off by ~x^2 / 2 half-ulps there); beyond +-40, Phi is 0 or 1 */
static inline double em_ncdf(double x) {
    double xc = x < -40.0 ? -40.0 : (x > 40.0 ? 40.0 : x);  /* NaN stays */
    double zh = xc * -0.7071067811865476;
    double zl = fma(xc, -0.7071067811865476, -zh) + xc * 4.833646656726457e-17;
    return 0.5 * (erfc(zh) - zl * 1.1283791670955126 * exp(-zh * zh));
}
"""


def _horner_c(name: str, var: str, coefs: tuple) -> str:
    """C statements evaluating ``float name`` = the polynomial (highest degree first) at
    ``var`` by Horner's rule, one fused multiply-add per coefficient."""
    lines = [f"    float {name} = {coefs[0]!r}f;"]
    lines += [f"    {name} = EM_MLA({name}, {var}, {c!r}f);" for c in coefs[1:]]
    return "\n".join(lines)


PRELUDE = PRELUDE.replace("@NCDF_N@", _horner_c("n", "z", NCDF_N)).replace(
    "@NCDF_D@", _horner_c("d", "z", NCDF_D))

# Stores that bypass the cache, for kernels whose outputs are too big for it: a plain store
# first reads the line it writes (so a 16 MB output costs 32 MB of traffic) and evicts what the
# next kernel would read; a non-temporal store does neither. The kernel computes a block of
# output into a buffer that stays in L1, and em_stream writes it out. Added to a translation
# unit only when one of its kernels streams.
STREAM_PRELUDE = """\
#if defined(__SSE2__)
#include <immintrin.h>
#endif
static inline void em_stream(void *restrict dst, const void *restrict src, int64_t nbytes) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
#if defined(__AVX512F__)
    const int64_t w = 64;
#elif defined(__AVX__)
    const int64_t w = 32;
#elif defined(__SSE2__)
    const int64_t w = 16;
#else
    const int64_t w = 1;
#endif
    int64_t i = (int64_t)((w - ((uintptr_t)d & (uintptr_t)(w - 1))) & (uintptr_t)(w - 1));
    if (i > nbytes) i = nbytes;
    memcpy(d, s, (size_t)i);  /* up to the first aligned address */
#if defined(__AVX512F__)
    for (; i + 64 <= nbytes; i += 64)
        _mm512_stream_si512((__m512i *)(d + i), _mm512_loadu_si512((const void *)(s + i)));
#elif defined(__AVX__)
    for (; i + 32 <= nbytes; i += 32)
        _mm256_stream_si256((__m256i *)(d + i), _mm256_loadu_si256((const __m256i *)(s + i)));
#elif defined(__SSE2__)
    for (; i + 16 <= nbytes; i += 16)
        _mm_stream_si128((__m128i *)(d + i), _mm_loadu_si128((const __m128i *)(s + i)));
#endif
    memcpy(d + i, s + i, (size_t)(nbytes - i));
}
/* streamed stores are weakly ordered: each thread fences once, after its last em_stream (a
   fence per call stalls on the write-combining buffers, 1.3x slower measured) */
static inline void em_stream_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
"""
STREAM_MIN_ROW_BYTES = 1024  # shorter rows of output gain nothing from streaming


def _last_level_cache_bytes() -> int:
    """The largest cache's size from sysfs (Linux), else 32 MB."""
    best = 0
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in os.listdir(root):
            with open(f"{root}/{d}/size") as f:
                text = f.read().strip()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            best = max(best, int(text.rstrip("KMG")) * scale)
    except (OSError, ValueError):
        pass
    return best or 32 << 20


# a kernel streams when its outputs take at least half of the last-level cache
STREAM_MIN_BYTES = _last_level_cache_bytes() // 2


def streams(outs, numel, row) -> bool:
    """Whether a kernel writing ``outs`` (``numel`` elements each, in contiguous runs of
    ``row``) uses non-temporal stores: static sizes, outputs past STREAM_MIN_BYTES, runs of
    at least STREAM_MIN_ROW_BYTES."""
    if not isinstance(numel, int) or not isinstance(row, int):
        return False
    sizes = [b.meta.dtype.itemsize for b in outs]
    return sum(sizes) * numel >= STREAM_MIN_BYTES and min(sizes) * row >= STREAM_MIN_ROW_BYTES


# Below this many elements a kernel runs on one thread. Next to numpy's BLAS threads (which
# busy-wait after each call) only big kernels gain from OpenMP's; in a graph on one pool
# (gemm.py) nothing else holds the cores and much smaller kernels do.
OMP_MIN_ELEMENTS = 1 << 20
OMP_MIN_ELEMENTS_ONE_POOL = 1 << 15


def _buffers_of(e: Expr, out: dict, seen: set) -> dict:
    if id(e) in seen:
        return out
    seen.add(id(e))
    if isinstance(e, Load):
        out.setdefault(e.buf.name, e.buf)
    for a in getattr(e, "args", ()):
        _buffers_of(a, out, seen)
    return out


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _loops(dims: list, collapse_ok: bool, parallel: bool, ind: str) -> tuple[list, list, str]:
    """Nested loops over ``dims`` (the outermost OpenMP-parallel when ``parallel``)."""
    lines = []
    nd = len(dims)
    if nd and parallel:
        collapse = f" collapse({nd})" if collapse_ok and nd > 1 else \
            (f" collapse({nd - 1})" if nd > 2 else "")
        cond = f" if({parallel})" if isinstance(parallel, str) else ""  # symbolic size
        lines.append(f"{ind}#pragma omp parallel for{collapse} schedule(static){cond}")
    idx = [f"i{d}" for d in range(nd)]
    for d, n in enumerate(dims):
        lines.append(f"{ind}for (int64_t i{d} = 0; i{d} < {n}; ++i{d}) {{")
        ind += "    "
    return lines, idx, ind


def kernel_source(k: Kernel | RowsKernel | CatKernel, openmp: bool, syms: list | tuple = (),
                  omp_min: int = OMP_MIN_ELEMENTS) -> tuple[str, list[str]]:
    """C source of one kernel and the buffer names of its parameters (inputs, then outputs)."""
    bufs: dict = {}
    for e in k.exprs():
        _buffers_of(e, bufs, set())
    params = {name: f"in{i}" for i, name in enumerate(bufs)}
    outs = k.outs
    params.update({b.name: f"out{i}" for i, b in enumerate(outs)})
    sig = [f"const {STORAGE[b.meta.dtype]} *restrict {params[n]}" for n, b in bufs.items()]
    sig += [f"{STORAGE[b.meta.dtype]} *restrict {params[b.name]}" for b in outs]
    sig += [f"int64_t {s}" for s in syms]  # symbolic sizes (dynamic shapes), by value
    lines = [f"/* {k.kind} kernel {k.name}: {', '.join(str(b.meta) for b in outs)} */",
             f"void {k.name}({', '.join(sig)}) {{"]
    if isinstance(k, CatKernel):
        lines += _cat_body(k, params, openmp, omp_min)
        lines.append("}")
        return "\n".join(lines), list(bufs) + [b.name for b in outs]
    columns = isinstance(k, RowsKernel) and _column_mode(k)
    if isinstance(k, RowsKernel):
        dims = list(k.outer)
        total = _numel(dims) * k.n
        if columns:  # the last kept dim goes in blocks of COLUMNS
            dims[-1] = f"(({dims[-1]} + {COLUMNS - 1}) / {COLUMNS})"
    else:
        dims = list(k.expr.shape)
        total = _numel(dims)
    big = total >= omp_min if isinstance(total, int) else \
        f"{total} >= {omp_min}"  # dynamic shapes: decided at run time
    stream = False
    if isinstance(k, RowsKernel):
        # a row too long to keep a phase's values on the stack (row_cache) keeps them in its
        # output instead: reading them back from the cache beats computing them again
        stream = not columns and bool(k.row_outs) and \
            all(st[-1] == 1 for _, _, st in k.row_outs) and \
            streams([b for b, _, _ in k.row_outs], total, k.n) and \
            (k.n <= KEPT_ROW_MAX or _row_cache(k) is None)
    elif dims:
        stream = streams(outs, total, dims[-1])
        if stream:  # the last dim goes in blocks of STREAM_BLOCK
            full = contiguous_strides(dims)
            n_last, dims[-1] = dims[-1], -(-dims[-1] // stream_block(dims[-1]))
    loops, idx, ind = _loops(dims, isinstance(k, RowsKernel), openmp and big, "    ")
    region = stream and loops[0].lstrip().startswith("#pragma omp parallel for")
    if region:
        # a parallel region around the loop, so each thread fences after its share
        clause = loops[0].split("parallel for", 1)[1]
        cond = clause[clause.index(" if("):] if " if(" in clause else ""
        loops = ["    #pragma omp parallel" + cond, "    {",
                 "    #pragma omp for" + clause[:len(clause) - len(cond)]] + loops[1:]
    lines += loops
    if columns:
        lines += _columns_body(k, params, idx, ind)
    elif isinstance(k, RowsKernel):
        lines += _rows_body(k, params, idx, ind, stream)
    elif stream:
        lines.append(f"{ind}const int64_t lo = {idx[-1]} * {stream_block(n_last)};")
        at = idx[:-1] + ["r"]
        head, tail, ind2 = streamed(outs, [(params[b.name], _index(idx[:-1] + ["lo"], full))
                                           for b in outs], "lo", n_last, ind)
        body = _Body(params, ind2)
        lines += head
        for j, (b, e) in enumerate(zip(outs, k.exprs())):
            v = body.emit(e, at)
            lines += body.lines
            body.lines = []
            lines.append(f"{ind2}t{j}[r - lo] = {store_expr(b.meta.dtype, v)};")
        lines += tail
    else:
        body = _Body(params, ind)
        lin = _index(idx, contiguous_strides(dims))
        for b, e in zip(outs, k.exprs()):
            v = body.emit(e, idx)
            lines += body.lines
            body.lines = []
            lines.append(f"{ind}{params[b.name]}[{lin}] = {store_expr(b.meta.dtype, v)};")
    for _ in dims:
        ind = ind[:-4]
        lines.append(f"{ind}}}")
    if stream:
        lines.append("    em_stream_fence();")
        if region:
            lines.append("    }")
    lines.append("}")
    return "\n".join(lines), list(bufs) + [b.name for b in outs]


def _cat_body(k: CatKernel, params: dict, openmp: bool, omp_min: int) -> list[str]:
    """One loop nest per part, storing into the part's slice of the output."""
    lines: list[str] = []
    st = contiguous_strides(k.out.meta.shape)
    dt = k.out.meta.dtype
    for e, at in k.parts:
        loops, idx, ind = _loops(list(e.shape), False, openmp and _numel(e.shape) >= omp_min,
                                 "    ")
        body = _Body(params, ind)
        v = body.emit(e, idx)
        lin = " + ".join(x for x in (str(at * st[k.dim]) if at else "", _index(idx, st)) if x)
        lines += loops + body.lines
        lines.append(f"{ind}{params[k.out.name]}[{lin}] = {store_expr(dt, v)};")
        for _ in e.shape:
            ind = ind[:-4]
            lines.append(f"{ind}}}")
    return lines


def translation_units(plan: Plan, n: int) -> list[list[str]]:
    """The plan's kernel names in at most ``n`` groups of about equal source size (largest
    first, each to the lightest group), each group one C translation unit; deterministic, so
    a rebuilt graph finds its units in the cache."""
    groups: list[list[str]] = [[] for _ in range(max(1, min(n, len(plan.kernels))))]
    sizes = [0] * len(groups)
    for name, src in sorted(plan.kernel_sources.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        j = sizes.index(min(sizes))
        groups[j].append(name)
        sizes[j] += len(src)
    order = {k.name: i for i, k in enumerate(plan.kernels)}
    return [sorted(g, key=order.__getitem__) for g in groups if g]


def unit_source(plan: Plan, names: list[str]) -> str:
    """One translation unit: the prelude and the named kernels."""
    srcs = [plan.kernel_sources[n] for n in names]
    return "\n\n".join([_prelude(srcs)] + srcs) + "\n"


def _prelude(srcs: list[str]) -> str:
    return PRELUDE + STREAM_PRELUDE if any("em_stream(" in s for s in srcs) else PRELUDE


def generate(plan: Plan, openmp: bool, contiguous_inputs: bool = False,
             one_pool: bool = False) -> tuple[str, str, dict]:
    """``(c_source, wrapper_source, kernel_params)``: the C translation unit, the Python
    wrapper's source, and each kernel's parameter buffer names (inputs, then outputs).
    ``contiguous_inputs``: the wrapper lays each input out as the plan assumed (its buffer's
    strides) first, when it is not already. ``one_pool``: the graph runs with numpy's BLAS
    on one thread, its matrix products call gemm.py's drivers and its kernels go parallel
    from OMP_MIN_ELEMENTS_ONE_POOL."""
    chunks = []
    kparams = {}
    binds = wrapper_bindings([b.meta.shape for b in plan.inputs])  # dynamic shapes' sizes
    plan.symbols = syms = [n for n, _ in binds]
    plan.kernel_sources = {}
    for k in plan.kernels:
        src, params = kernel_source(
            k, openmp, syms, OMP_MIN_ELEMENTS_ONE_POOL if one_pool else OMP_MIN_ELEMENTS)
        chunks.append(src)
        plan.kernel_sources[k.name] = src  # for building in several units
        kparams[k.name] = params
    chunks.insert(0, _prelude(chunks))
    py = wrapper_source(plan, kparams, binds, contiguous_inputs, one_pool)
    return "\n\n".join(chunks) + "\n", py, kparams
