"""Philox 4x32-10 in Triton: the kernels behind ember's random numbers on CUDA (the state and
the launches are in philox.py; this module imports Triton, so only philox.py's wrappers import
it, on first use).

Philox 4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
SC 2011) maps a 128-bit counter and a 64-bit key to 128 random bits through ten rounds of two
32x32->64-bit products. Element ``i`` of a draw uses the counter ``offset + i`` (its low and
high words, then two zero words) under the key ``seed``, so a value depends only on (seed,
offset, i): never on the block size or the grid. Every kernel reads seed and offset from the
generator's device buffer (``state_ptr``: int64 ``[seed, offset]``), and ``advance_kernel``
moves the offset on by the number of counters a draw used, so a captured CUDA graph draws new
numbers on each replay.

Floats from 32-bit words: a uniform value keeps a word's top ``DIGITS`` bits (the significand
of the output dtype: 24 float32, 11 float16, 8 bfloat16), exactly ``k * 2**-DIGITS`` with
``k < 2**DIGITS``, so it lies in [0, 1) even after rounding to the output dtype; float64 takes
53 bits from two words. Normal values come from Box-Muller on two uniforms (float64: four
words), in float32 for every dtype but float64, rounded once at the store.
"""

from __future__ import annotations

import triton
import triton.language as tl

from . import triton_adapter as adapter

libdevice = adapter.libdevice()

# Philox 4x32's multipliers and Weyl key increments (the paper's constants)
PHILOX_M0 = tl.constexpr(0xD2511F53)
PHILOX_M1 = tl.constexpr(0xCD9E8D57)
PHILOX_W0 = tl.constexpr(0x9E3779B9)
PHILOX_W1 = tl.constexpr(0xBB67AE85)
TWO_PI = tl.constexpr(6.283185307179586)


@triton.jit
def philox(seed, counter):
    """The four 32-bit words of Philox 4x32-10 for the int64 ``counter`` block (words: low,
    high, 0, 0) under the int64 key ``seed`` (low, high)."""
    c0 = (counter & 0xFFFFFFFF).to(tl.uint32)
    c1 = ((counter >> 32) & 0xFFFFFFFF).to(tl.uint32)
    c2 = tl.zeros_like(c0)
    c3 = tl.zeros_like(c0)
    k0 = (seed & 0xFFFFFFFF).to(tl.uint32)
    k1 = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
    for _ in tl.static_range(10):
        hi0 = tl.umulhi(c0, PHILOX_M0)
        lo0 = c0 * PHILOX_M0
        hi1 = tl.umulhi(c2, PHILOX_M1)
        lo1 = c2 * PHILOX_M1
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = k0 + PHILOX_W0
        k1 = k1 + PHILOX_W1
    return c0, c1, c2, c3


@triton.jit
def _words(state_ptr, BLOCK: tl.constexpr):
    """This program's element indices and their Philox words: element ``i`` uses the counter
    ``offset + i``. The state is loaded as a block (every lane reads the same two words)."""
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    zero = tl.zeros([BLOCK], tl.int32)
    seed = tl.load(state_ptr + zero)
    offset = tl.load(state_ptr + 1 + zero)
    x0, x1, x2, x3 = philox(seed, offset + idx)
    return idx, x0, x1, x2, x3


@triton.jit
def _unit(a, b, DIGITS: tl.constexpr):
    """[0, 1) at ``DIGITS`` bits: float32 from word ``a`` (DIGITS <= 24), float64 from words
    ``a`` and ``b`` (DIGITS == 53)."""
    if DIGITS == 53:
        k = ((a >> 5).to(tl.uint64) << 26) | (b >> 6).to(tl.uint64)
        u = k.to(tl.float64) * 1.1102230246251565e-16  # 2**-53
    else:
        u = (a >> (32 - DIGITS)).to(tl.float32) * (1.0 / (1 << DIGITS))
    return u


@triton.jit
def _open_unit(a, b, DIGITS: tl.constexpr):
    """(0, 1] at ``DIGITS`` bits (24 or 53): a logarithm's argument."""
    if DIGITS == 53:
        k = ((a >> 5).to(tl.uint64) << 26) | (b >> 6).to(tl.uint64)
        u = (k.to(tl.float64) + 1.0) * 1.1102230246251565e-16
    else:
        u = ((a >> 8).to(tl.float32) + 1.0) * 5.9604644775390625e-08  # 2**-24
    return u


@triton.jit
def _float_arg(hi, lo):
    """The float64 whose bits are ``hi`` (upper word, signed) and ``lo`` (lower word, unsigned):
    Triton passes Python floats as float32, so float64 parameters travel as two ints."""
    bits = (tl.cast(hi, tl.int64) << 32) | (tl.cast(lo, tl.int64) & 0xFFFFFFFF)
    return bits.to(tl.float64, bitcast=True)


@triton.jit
def uniform_kernel(out_ptr, state_ptr, n, lo_hi, lo_lo, width_hi, width_lo,
                   BLOCK: tl.constexpr, DIGITS: tl.constexpr):
    """``out[i] = lo + width * u_i``, ``u_i`` uniform on [0, 1) at ``DIGITS`` bits, computed in
    float32 (float64 when DIGITS is 53)."""
    idx, x0, x1, x2, x3 = _words(state_ptr, BLOCK)
    u = _unit(x0, x1, DIGITS)
    lo = _float_arg(lo_hi, lo_lo).to(u.dtype)
    width = _float_arg(width_hi, width_lo).to(u.dtype)
    tl.store(out_ptr + idx, (u * width + lo).to(out_ptr.dtype.element_ty), mask=idx < n)


@triton.jit
def normal_kernel(out_ptr, state_ptr, n, mean_hi, mean_lo, std_hi, std_lo,
                  BLOCK: tl.constexpr, DIGITS: tl.constexpr):
    """``out[i] = mean + std * z_i``, ``z_i`` standard normal by Box-Muller (float32; float64
    from all four words when DIGITS is 53)."""
    idx, x0, x1, x2, x3 = _words(state_ptr, BLOCK)
    if DIGITS == 53:
        u1 = _open_unit(x0, x1, 53)
        u2 = _unit(x2, x3, 53)
    else:
        u1 = _open_unit(x0, x1, 24)
        u2 = _unit(x1, x2, 24)
    z = tl.sqrt(-2.0 * libdevice.log(u1)) * libdevice.cos(u2 * TWO_PI)
    mean = _float_arg(mean_hi, mean_lo).to(z.dtype)
    std = _float_arg(std_hi, std_lo).to(z.dtype)
    tl.store(out_ptr + idx, (z * std + mean).to(out_ptr.dtype.element_ty), mask=idx < n)


@triton.jit
def _zero_one(hit, out_ptr):
    """0/1 in out's element type, through float32 (the interpreter casts booleans to bfloat16
    by their bits)."""
    return hit.to(tl.float32).to(out_ptr.dtype.element_ty)


@triton.jit
def bernoulli_scalar_kernel(out_ptr, state_ptr, n, threshold, BLOCK: tl.constexpr):
    """``out[i] = 1`` with probability ``threshold / 2**32`` (word 0 below the threshold), else
    0, in out's dtype."""
    idx, x0, x1, x2, x3 = _words(state_ptr, BLOCK)
    hit = x0.to(tl.int64) < tl.cast(threshold, tl.int64)
    tl.store(out_ptr + idx, _zero_one(hit, out_ptr), mask=idx < n)


@triton.jit
def bernoulli_tensor_kernel(out_ptr, p_ptr, state_ptr, n, BLOCK: tl.constexpr,
                            DIGITS: tl.constexpr):
    """``out[i] = 1`` with probability ``p[i]`` (a contiguous array of out's shape; half
    precision widened to float32), comparing with a uniform of DIGITS bits (24; 53 for a
    float64 p)."""
    idx, x0, x1, x2, x3 = _words(state_ptr, BLOCK)
    mask = idx < n
    p = tl.load(p_ptr + idx, mask=mask, other=0.0)
    u = _unit(x0, x1, DIGITS)
    hit = u < p.to(u.dtype)
    tl.store(out_ptr + idx, _zero_one(hit, out_ptr), mask=mask)


@triton.jit
def advance_kernel(state_ptr, n):
    """``offset += n``: the counters a draw of ``n`` values used (one program)."""
    lane = tl.arange(0, 2)
    words = tl.load(state_ptr + lane)
    tl.store(state_ptr + lane, words + tl.where(lane == 1, n, 0).to(tl.int64))
