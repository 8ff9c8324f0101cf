"""ember's Triton kernel for data-dependent argument checks (wrapper: ``checks.py``).

Imported on the first check, never by ``import ember`` (this module imports Triton).

``check`` reads ``n`` elements of a contiguous array and, where one of them is bad, records
the first failure into the device's error flag, an int64 array of four words:

    [0] the check's code (0: no error recorded)   [1] the bad value (or its position)
    [2] the lower bound                           [3] the upper bound

A program finding a bad element in its block takes the flag only if it is clear
(compare-and-swap of word 0 from 0 to ``code``), so the first failure stays recorded until the
host reads and clears the flag; the program that wins writes its block's first bad element.
Nothing is read back to the host here.

``KIND``: 0 integers in ``[lo, hi)`` (elements equal to ``ignore`` pass when ``HAS_IGNORE``;
the value is recorded); 1 probabilities: not negative, not NaN, not infinite (the position is
recorded); 2 totals: greater than zero (the position is recorded); 3 values in [0, 1], NaN
failing (the position is recorded).
"""

import triton
import triton.language as tl


@triton.jit
def check(x_ptr, n, lo, hi, ignore, flag_ptr, code, KIND: tl.constexpr,
          HAS_IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    if KIND == 0:
        x = tl.load(x_ptr + offs, mask=inside, other=0).to(tl.int64)
        bad = (x < lo) | (x >= hi)
        if HAS_IGNORE:
            bad = bad & (x != ignore)
    elif KIND == 1:
        x = tl.load(x_ptr + offs, mask=inside, other=0)
        bad = (x < 0) | (x != x) | (x == float("inf"))
    elif KIND == 2:
        x = tl.load(x_ptr + offs, mask=inside, other=1)
        bad = (x <= 0) | (x != x)
    else:
        x = tl.load(x_ptr + offs, mask=inside, other=0)
        bad = ~((x >= 0) & (x <= 1))
    bad = bad & inside
    first = tl.min(tl.where(bad, offs, n + tl.zeros_like(offs)), axis=0)
    if first < n:
        tag = tl.zeros([], tl.int64) + code
        old = tl.atomic_cas(flag_ptr, tl.zeros([], tl.int64), tag)
        if old == 0:
            if KIND == 0:
                tl.store(flag_ptr + 1, tl.load(x_ptr + first).to(tl.int64))
            else:
                tl.store(flag_ptr + 1, first)
            tl.store(flag_ptr + 2, tl.zeros([], tl.int64) + lo)
            tl.store(flag_ptr + 3, tl.zeros([], tl.int64) + hi)
