"""ember's Triton reduction kernel (wrappers: ``reductions.py``).

Imported on the first call of a wrapper, never by ``import ember`` (this module imports
Triton). One kernel family, ``reduce``, specialised on the operation ``OP``:

    SUM    sum of the elements                      PROD   product
    MAX    maximum, NaN wins                        MIN    minimum, NaN wins
    ARGMAX maximum and its first index, NaN wins    ARGMIN minimum and its first index
    SQDEV  sum of squared deviations from a given per-output mean (variance's second pass)

The operand is seen as (outer, n, inner) with one element stride per axis and reduced along
n. A program owns one ``outer`` index, ``BLOCK_I`` consecutive ``inner`` indices and one
``chunk`` of n (split ``s`` of ``splits``); it walks its chunk in [BLOCK_I, BLOCK_N] tiles,
keeping a tile-shaped accumulator (each lane combines the elements it meets, in order), and
reduces the tile along n at the end. Results go to ``y`` laid out as (outer, splits, inner),
contiguous: with one split these are the outputs, else partials for a second launch that
reduces the splits (``IDX_IN``: the partial indices come along from ``xi``). Nothing is
accumulated with atomics, so every result is the same from run to run.

Elements are read as ``PRE`` (the dtype a ``dtype=`` argument converts them to first), then
widened to the accumulator type ``ACC`` (float32 for half types, float64 for float64, int64
for integers and bool). Masked lanes hold ``ident`` (0 for sums, 1 for products, the far end
of the range for extrema). ``FIN`` 1 divides the result by ``div_hi + div_lo`` (a mean's
count or a variance's degrees of freedom, as two float32 halves), 2 also takes its square
root. NaN is handled by explicit comparisons, so the interpreter and the GPU agree.
"""

import triton
import triton.language as tl

SUM = tl.constexpr(0)
PROD = tl.constexpr(1)
MAX = tl.constexpr(2)
MIN = tl.constexpr(3)
ARGMAX = tl.constexpr(4)
ARGMIN = tl.constexpr(5)
SQDEV = tl.constexpr(6)
NO_INDEX = tl.constexpr(9223372036854775807)  # the index of a masked lane: loses every tie


@triton.jit
def _max_nan(a, b):
    """The larger of a and b; NaN if either is NaN."""
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _min_nan(a, b):
    """The smaller of a and b; NaN if either is NaN."""
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def _pick_max(a, ia, b, ib):
    """(value, index) of the maximum of two candidates: NaN beats numbers, equal values
    (or two NaNs) go to the smaller index."""
    na = a != a
    nb = b != b
    first = (a > b) | (na & ~nb) | (((a == b) | (na & nb)) & (ia < ib))
    return tl.where(first, a, b), tl.where(first, ia, ib)


@triton.jit
def _pick_min(a, ia, b, ib):
    """(value, index) of the minimum of two candidates, as ``_pick_max``."""
    na = a != a
    nb = b != b
    first = (a < b) | (na & ~nb) | (((a == b) | (na & nb)) & (ia < ib))
    return tl.where(first, a, b), tl.where(first, ia, ib)


@triton.jit
def reduce(x_ptr, xi_ptr, mean_ptr, y_ptr, yi_ptr, n, inner, iblocks, splits, chunk,
           xso, xsn, xsi, ident, div_hi, div_lo, OP: tl.constexpr, PRE: tl.constexpr,
           ACC: tl.constexpr, IDX_IN: tl.constexpr, FIN: tl.constexpr,
           BLOCK_I: tl.constexpr, BLOCK_N: tl.constexpr):
    """y[o, s, i] (and yi, for ARGMAX / ARGMIN) = OP over x[o, k, i] for k in split s."""
    OUT = y_ptr.dtype.element_ty
    pid = tl.program_id(0)
    ib = pid % iblocks
    rest = pid // iblocks
    s = rest % splits
    o = (rest // splits).to(tl.int64)
    i = (ib * BLOCK_I + tl.arange(0, BLOCK_I)[:, None]).to(tl.int64)
    live = i < inner
    cols = tl.arange(0, BLOCK_N)[None, :].to(tl.int64)
    start = s.to(tl.int64) * chunk
    end = tl.minimum(start + chunk, n)
    base = o * xso + i * xsi
    acc = tl.zeros([BLOCK_I, BLOCK_N], ACC) + ident
    if OP == SQDEV:
        m = tl.load(mean_ptr + o * inner + i, mask=live, other=0.0).to(ACC)
    if OP == ARGMAX or OP == ARGMIN:
        idx = tl.full([BLOCK_I, BLOCK_N], NO_INDEX, tl.int64)
    for k in range(start, end, BLOCK_N):
        c = k + cols
        mask = live & (c < end)
        off = base + c * xsn
        x = tl.where(mask, tl.load(x_ptr + off, mask=mask).to(PRE).to(ACC), ident)
        if OP == SUM:
            acc += x
        elif OP == PROD:
            acc *= x
        elif OP == MAX:
            acc = _max_nan(acc, x)
        elif OP == MIN:
            acc = _min_nan(acc, x)
        elif OP == SQDEV:
            d = tl.where(mask, x - m, 0.0)
            acc += d * d
        else:
            if IDX_IN:
                xi = tl.load(xi_ptr + off, mask=mask, other=NO_INDEX)
            else:
                xi = tl.where(mask, c, NO_INDEX)
            if OP == ARGMAX:
                acc, idx = _pick_max(acc, idx, x, xi)
            else:
                acc, idx = _pick_min(acc, idx, x, xi)
    if OP == SUM or OP == SQDEV:
        r = tl.sum(acc, 1, keep_dims=True)
    elif OP == PROD:
        r = tl.reduce(acc, 1, _mul, keep_dims=True)
    else:  # the extremum of the numbers, then NaN (and its first index) where there is one
        nan = acc != acc
        clean = tl.where(nan, ident, acc)
        if OP == MAX or OP == ARGMAX:
            r = tl.max(clean, 1, keep_dims=True)
        else:
            r = tl.min(clean, 1, keep_dims=True)
        if OP == ARGMAX or OP == ARGMIN:
            any_nan = tl.max(nan.to(tl.int32), 1, keep_dims=True) > 0
            hit = tl.where(any_nan, nan, clean == r)
            ri = tl.min(tl.where(hit, idx, NO_INDEX), 1, keep_dims=True)
        r += tl.sum(tl.where(nan, acc, 0), 1, keep_dims=True)  # NaN if any lane is NaN
    if FIN >= 1:
        r = r / (tl.cast(div_hi, ACC) + tl.cast(div_lo, ACC))
        if FIN == 2:
            r = tl.sqrt(r)
    out = (o * splits + s) * inner + i
    tl.store(y_ptr + out, r.to(OUT), mask=live)
    if OP == ARGMAX or OP == ARGMIN:
        tl.store(yi_ptr + out, ri, mask=live)


@triton.jit
def _mul(a, b):
    return a * b
