"""ember's Triton scan kernel: cumsum, cumprod, cummax, cummin, logcumsumexp (wrappers:
``scans.py``).

Imported on the first call of a wrapper, never by ``import ember`` (this module imports
Triton). One kernel, ``scan``, specialised on the operation ``OP``:

    SUM        running sum                 PROD       running product
    MAX        running maximum and index   MIN        running minimum and index
    LOGSUMEXP  running log(sum(exp(x)))

The operand is seen as (outer, n, inner) with one element stride per axis and scanned along
n; the results are contiguous in the operand's shape. One program owns one (outer, inner)
row and walks it in chunks of ``BLOCK`` elements: each chunk is scanned on its own
(``tl.cumsum`` / ``tl.cumprod`` / ``tl.associative_scan``), combined with the ``carry`` of
the chunks before it (the row's running result at the end of the previous chunk, which
starts as the operation's identity ``IDENT``) and stored; the chunk's last result becomes
the carry.

Elements are read, converted to the output's dtype first (what a ``dtype=`` argument asks
for), then widened to the accumulator type ``ACC`` (float32 for half types, float64 for
float64, int64 for integers and bool) and rounded once at the store.

Running extrema follow PyTorch: equal values move the index to the later element, NaN
propagates and its index is the latest NaN's. logcumsumexp combines two partial results as
max + log1p(exp(-|a - b|)), exact where either is -inf. NaN is handled by explicit
comparisons, so the interpreter and the GPU agree.
"""

import triton
import triton.language as tl

from . import triton_adapter as adapter

libdevice = adapter.libdevice()

SUM = tl.constexpr(0)
PROD = tl.constexpr(1)
MAX = tl.constexpr(2)
MIN = tl.constexpr(3)
LOGSUMEXP = tl.constexpr(4)


@triton.jit
def _log_add_exp(a, b):
    """log(exp(a) + exp(b)) without overflow: two equal values (also two infinities of one
    sign) give a + log(2); NaN in either gives NaN."""
    big = tl.where(a > b, a, b)
    gap = tl.where(a == b, 0.0, -tl.abs(a - b))
    return big + libdevice.log1p(tl.exp(gap))


@triton.jit
def _later_max(a, ia, b, ib):
    """Of two (value, index) candidates, the maximum: NaN beats numbers, and equal values
    (or two NaNs) go to the larger index, PyTorch's rule for cummax."""
    na = a != a
    nb = b != b
    take = (nb & (~na | (ib > ia))) | (~na & ~nb & ((b > a) | ((b == a) & (ib > ia))))
    return tl.where(take, b, a), tl.where(take, ib, ia)


@triton.jit
def _later_min(a, ia, b, ib):
    """Of two (value, index) candidates, the minimum, as ``_later_max``."""
    na = a != a
    nb = b != b
    take = (nb & (~na | (ib > ia))) | (~na & ~nb & ((b < a) | ((b == a) & (ib > ia))))
    return tl.where(take, b, a), tl.where(take, ib, ia)


@triton.jit
def _last(a, ia, la, b, ib, lb):
    """Of two (value, index, lane) triples, the one of the later lane."""
    take = lb > la
    return tl.where(take, b, a), tl.where(take, ib, ia), tl.where(take, lb, la)


@triton.jit
def scan(x_ptr, y_ptr, yi_ptr, n, inner, xso, xsn, xsi, OP: tl.constexpr,
         ACC: tl.constexpr, IDENT: tl.constexpr, BLOCK: tl.constexpr):
    """y[o, k, i] = OP over x[o, :k + 1, i] (and yi, for MAX / MIN, the index it came
    from), for the row of this program."""
    OUT = y_ptr.dtype.element_ty
    pid = tl.program_id(0).to(tl.int64)
    o = pid // inner
    i = pid - o * inner
    xrow = x_ptr + o * xso + i * xsi
    yrow = o * n * inner + i
    lanes = tl.arange(0, BLOCK)
    carry = tl.full([1], IDENT, ACC)
    carry_i = tl.full([1], -1, tl.int64)
    for start in range(0, n, BLOCK):
        k = start + lanes.to(tl.int64)
        mask = k < n
        x = tl.load(xrow + k * xsn, mask=mask, other=0).to(OUT).to(ACC)
        if OP == SUM:
            r = carry + tl.cumsum(x, 0)
            ri = k
        elif OP == PROD:
            r = carry * tl.cumprod(x, 0)
            ri = k
        elif OP == LOGSUMEXP:
            r = _log_add_exp(carry, tl.associative_scan(x, 0, _log_add_exp))
            ri = k
        elif OP == MAX:
            v, vi = tl.associative_scan((x, k), 0, _later_max)
            r, ri = _later_max(carry, carry_i, v, vi)
        else:
            v, vi = tl.associative_scan((x, k), 0, _later_min)
            r, ri = _later_min(carry, carry_i, v, vi)
        out = yrow + k * inner
        tl.store(y_ptr + out, r.to(OUT), mask=mask)
        if OP == MAX or OP == MIN:
            tl.store(yi_ptr + out, ri, mask=mask)
        carry, carry_i, _ = tl.reduce((r, ri, lanes), 0, _last, keep_dims=True)
