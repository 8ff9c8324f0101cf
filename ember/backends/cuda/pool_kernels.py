"""ember's Triton pooling kernels over (planes, H, W) contiguous data (wrappers: ``pool.py``).

Imported on the first call of a wrapper, never by ``import ember`` (this module imports
Triton). Each program takes ``BLOCK`` consecutive elements of its output (flat over planes,
rows and columns); the kernel window's offsets are unrolled (``KH``, ``KW`` are constexpr).
Half data computes in float32, float64 in float64 (``ACC``).

- ``max_pool2d_fwd``: like PyTorch, a window element replaces the running maximum when it is
  greater or NaN (so the last NaN wins) and a window of only -inf keeps the first position
  inside the input; indices are flat within each (H, W) plane.
- ``max_pool_scatter``: the gradient summed at those indices (atomic adds where windows
  overlap; plain stores where each position receives at most one value).
- ``avg_pool2d_fwd`` / ``avg_pool2d_bwd``: the window sum over the divisor (the window's size
  clipped to the padded input, or to the input without ``COUNT_PAD``, or ``divisor``); the
  backward gathers, for each input position, the outputs whose windows cover it (at most
  ``MH`` x ``MW`` of them), so it needs no zero fill and adds in a fixed order.
- ``adaptive_avg2d``: PyTorch's adaptive windows [floor(i H / OH), ceil((i + 1) H / OH)) as a
  [BLOCK_O, BLOCK_K] tile of outputs by window elements (KMAX_W wide per row).
"""

import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))


@triton.jit
def _out_pos(total, OH, OW, BLOCK: tl.constexpr):
    """This program's flat output indices (int64), their plane, row and column, and mask."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ow = i % OW
    t = i // OW
    return i, t // OH, t % OH, ow, i < total


@triton.jit
def max_pool2d_fwd(x_ptr, y_ptr, idx_ptr, H, W, OH, OW, total, sh, sw, ph, pw, dh, dw,
                   KH: tl.constexpr, KW: tl.constexpr, ACC: tl.constexpr,
                   BLOCK: tl.constexpr):
    i, plane, oh, ow, live = _out_pos(total, OH, OW, BLOCK)
    h0 = oh * sh - ph
    w0 = ow * sw - pw
    # the first position inside the input: the index of a window of only -inf
    hf = tl.where(h0 < 0, h0 + ((dh - 1 - h0) // dh) * dh, h0)
    wf = tl.where(w0 < 0, w0 + ((dw - 1 - w0) // dw) * dw, w0)
    idx = hf * W + wf
    best = tl.full([BLOCK], NEG_INF, ACC)
    base = x_ptr + plane * H * W
    for kh in tl.static_range(KH):
        h = h0 + kh * dh
        hin = live & (h >= 0) & (h < H)
        for kw in tl.static_range(KW):
            w = w0 + kw * dw
            valid = hin & (w >= 0) & (w < W)
            v = tl.load(base + h * W + w, mask=valid, other=NEG_INF).to(ACC)
            take = valid & ((v > best) | (v != v))
            best = tl.where(take, v, best)
            idx = tl.where(take, h * W + w, idx)
    tl.store(y_ptr + i, best.to(y_ptr.dtype.element_ty), mask=live)
    tl.store(idx_ptr + i, idx.to(tl.int64), mask=live)


@triton.jit
def max_pool_scatter(g_ptr, idx_ptr, out_ptr, Q, P, total, UNIQUE: tl.constexpr,
                     BLOCK: tl.constexpr):
    """out[l, idx[l, q]] += g[l, q] for the ``total`` = L * Q gradient elements (out: L x P,
    zero-filled, in the accumulation dtype)."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = i < total
    idx = tl.load(idx_ptr + i, mask=live, other=0)
    ok = live & (idx >= 0) & (idx < P)
    g = tl.load(g_ptr + i, mask=ok, other=0.0).to(out_ptr.dtype.element_ty)
    target = out_ptr + (i // Q) * P + idx
    if UNIQUE:
        tl.store(target, g, mask=ok)
    else:
        tl.atomic_add(target, g, mask=ok, sem="relaxed")


@triton.jit
def _avg_divisor(oh, ow, H, W, sh, sw, ph, pw, divisor, KH: tl.constexpr, KW: tl.constexpr,
                 COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, ACC: tl.constexpr):
    """The divisor of output (oh, ow)'s window, and its first row and column."""
    h0 = oh * sh - ph
    w0 = ow * sw - pw
    if HAS_DIV:
        div = tl.zeros_like(h0).to(ACC) + divisor
    else:
        h1 = tl.minimum(h0 + KH, H + ph)
        w1 = tl.minimum(w0 + KW, W + pw)
        if COUNT_PAD:
            div = ((h1 - h0) * (w1 - w0)).to(ACC)
        else:
            n = (tl.minimum(h1, H) - tl.maximum(h0, 0)) * (tl.minimum(w1, W) - tl.maximum(w0, 0))
            div = n.to(ACC)
    return div, h0, w0


@triton.jit
def avg_pool2d_fwd(x_ptr, y_ptr, H, W, OH, OW, total, sh, sw, ph, pw, divisor,
                   KH: tl.constexpr, KW: tl.constexpr, COUNT_PAD: tl.constexpr,
                   HAS_DIV: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    i, plane, oh, ow, live = _out_pos(total, OH, OW, BLOCK)
    div, h0, w0 = _avg_divisor(oh, ow, H, W, sh, sw, ph, pw, divisor, KH, KW, COUNT_PAD,
                               HAS_DIV, ACC)
    acc = tl.zeros([BLOCK], ACC)
    base = x_ptr + plane * H * W
    for kh in tl.static_range(KH):
        h = h0 + kh
        hin = live & (h >= 0) & (h < H)
        for kw in tl.static_range(KW):
            w = w0 + kw
            valid = hin & (w >= 0) & (w < W)
            acc += tl.load(base + h * W + w, mask=valid, other=0.0).to(ACC)
    tl.store(y_ptr + i, (acc / div).to(y_ptr.dtype.element_ty), mask=live)


@triton.jit
def avg_pool2d_bwd(g_ptr, dx_ptr, H, W, OH, OW, total, sh, sw, ph, pw, divisor,
                   KH: tl.constexpr, KW: tl.constexpr, MH: tl.constexpr, MW: tl.constexpr,
                   COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, ACC: tl.constexpr,
                   BLOCK: tl.constexpr):
    """dx[h, w] = sum of g[oh, ow] / divisor over the windows covering (h, w)."""
    i, plane, h, w, live = _out_pos(total, H, W, BLOCK)
    hp = h + ph
    wp = w + pw
    oh_lo = tl.where(hp >= KH, (hp - KH) // sh + 1, 0)
    ow_lo = tl.where(wp >= KW, (wp - KW) // sw + 1, 0)
    oh_hi = tl.minimum(hp // sh, OH - 1)
    ow_hi = tl.minimum(wp // sw, OW - 1)
    acc = tl.zeros([BLOCK], ACC)
    base = g_ptr + plane * OH * OW
    for jh in tl.static_range(MH):
        oh = oh_lo + jh
        hin = live & (oh <= oh_hi)
        for jw in tl.static_range(MW):
            ow = ow_lo + jw
            valid = hin & (ow <= ow_hi)
            div, _h0, _w0 = _avg_divisor(oh, ow, H, W, sh, sw, ph, pw, divisor, KH, KW,
                                         COUNT_PAD, HAS_DIV, ACC)
            g = tl.load(base + oh * OW + ow, mask=valid, other=0.0).to(ACC)
            acc += tl.where(valid, g / div, 0.0)
    tl.store(dx_ptr + i, acc.to(dx_ptr.dtype.element_ty), mask=live)


@triton.jit
def adaptive_avg2d(x_ptr, y_ptr, H, W, OH, OW, total, kmax_w, ksize, ACC: tl.constexpr,
                   BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK_O + tl.arange(0, BLOCK_O)
    live = o < total
    ow = o % OW
    t = o // OW
    oh = t % OH
    plane = t // OH
    h0 = (oh * H) // OH
    h1 = ((oh + 1) * H + OH - 1) // OH
    w0 = (ow * W) // OW
    w1 = ((ow + 1) * W + OW - 1) // OW
    base = (plane * H * W)[:, None]
    acc = tl.zeros([BLOCK_O, BLOCK_K], ACC)
    for start in range(0, ksize, BLOCK_K):
        j = start + tl.arange(0, BLOCK_K)[None, :]
        h = h0[:, None] + j // kmax_w
        w = w0[:, None] + j % kmax_w
        valid = live[:, None] & (j < ksize) & (h < h1[:, None]) & (w < w1[:, None])
        acc += tl.load(x_ptr + base + h * W + w, mask=valid, other=0.0).to(ACC)
    div = ((h1 - h0) * (w1 - w0)).to(ACC)
    tl.store(y_ptr + o, (tl.sum(acc, 1) / div).to(y_ptr.dtype.element_ty), mask=live)
