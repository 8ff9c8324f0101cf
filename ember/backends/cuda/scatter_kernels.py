"""ember's Triton kernel for unbuffered scatter updates, numpy's ``ufunc.at`` (wrapper:
``scatter.py``).

Imported on the first call of the wrapper, never by ``import ember`` (this module imports
Triton). One kernel, ``scatter_at``: element ``(m, j)`` of the values (``n = rows x inner``
of them, contiguous) combines into ``out[index[m] * inner + j]`` with the operation ``OP``:

    ADD   out += v          MUL   out *= v          MAX   max(out, v)      MIN   min(out, v)

Repeated indices all take effect, in an unspecified order (as PyTorch's CUDA scatters).
Sums are ``tl.atomic_add``; integer extrema ``tl.atomic_max`` / ``tl.atomic_min``; products
and floating extrema a compare-and-swap loop over the element's bits (``bits_ptr``: ``out``
seen as integers of its width), where NaN propagates as in numpy's ``maximum`` / ``minimum``.
The loop runs until every lane's swap has gone through; a lane that is done (or out of range)
swaps a value for itself, which never changes memory.
"""

import triton
import triton.language as tl

ADD = tl.constexpr(0)
MUL = tl.constexpr(1)
MAX = tl.constexpr(2)
MIN = tl.constexpr(3)


@triton.jit
def _combine(cur, v, OP: tl.constexpr, FLOAT: tl.constexpr):
    if OP == MUL:
        return cur * v
    if FLOAT:
        nan = (cur != cur) | (v != v)
        if OP == MAX:
            r = tl.where(v > cur, v, cur)
        else:
            r = tl.where(v < cur, v, cur)
        return tl.where(nan, cur + v, r)
    if OP == MAX:
        return tl.where(v > cur, v, cur)
    return tl.where(v < cur, v, cur)


@triton.jit
def scatter_at(out_ptr, bits_ptr, idx_ptr, val_ptr, n, inner, OP: tl.constexpr,
               FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    """out[idx[m] * inner + j] = OP(out[idx[m] * inner + j], val[m * inner + j])."""
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    m = offs // inner
    j = offs - m * inner
    row = tl.load(idx_ptr + m, mask=mask, other=0)
    pos = tl.where(mask, row * inner + j, 0)
    v = tl.load(val_ptr + offs, mask=mask, other=0)
    if OP == ADD:
        tl.atomic_add(out_ptr + pos, v, mask=mask)
    elif (OP == MAX) and (not FLOAT):
        tl.atomic_max(out_ptr + pos, v, mask=mask)
    elif (OP == MIN) and (not FLOAT):
        tl.atomic_min(out_ptr + pos, v, mask=mask)
    else:
        BITS = bits_ptr.dtype.element_ty
        VAL = out_ptr.dtype.element_ty
        ptr = bits_ptr + pos
        old = tl.load(ptr, mask=mask, other=0)
        pending = mask
        while tl.max(pending.to(tl.int32), axis=0) > 0:
            new = _combine(old.to(VAL, bitcast=True), v, OP, FLOAT).to(BITS, bitcast=True)
            new = tl.where(pending, new, old)
            prev = tl.atomic_cas(ptr, old, new)
            pending = pending & (prev != old)
            old = prev
