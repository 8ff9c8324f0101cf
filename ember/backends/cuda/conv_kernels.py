"""ember's Triton convolution kernels: implicit GEMM over 2-D data (wrappers: ``conv.py``).

Imported on the first call of a wrapper, never by ``import ember`` (this module imports
Triton). No im2col buffer exists: each program gathers its tiles of the windows straight from
the input through element strides (any layout), multiplies them with ``tl.dot`` into a float32
accumulator and rounds once at the store. ``PRECISION`` is ``tl.dot``'s input precision for
float32 operands ("tf32" or "ieee"); half operands multiply exactly either way.

Geometry (one group ``g`` per program along grid axis 2, ``CG`` input and ``OG`` output
channels per group): input x (N, C, H, W), weight w (O, CG, KH, KW), output y (N, O, OH, OW),
``y[n, o, oh, ow] = sum w[o, c, kh, kw] x[n, c, oh*sth - ph + kh*dh, ow*stw - pw + kw*dw]``.

- ``conv_fwd``: y. M = N*OH*OW rows (flat n, oh, ow), O columns, K = CG*KH*KW. The reduction
  runs tap by tap (kh, kw) over channel blocks, so a tile's addresses and bounds are one row
  vector plus one channel vector. With ``FLAT`` (few input channels) K runs flat over
  (c, kh, kw) in the weight's own order instead, so 3 channels do not fill a 16-wide block.
- ``conv_dgrad``: the adjoint in x (the transposed convolution). The output positions split
  into ``sth * stw`` phases (h mod sth, w mod stw); in one phase only the taps with
  ``kh*dh = h + ph (mod sth)`` land, every ``sth / gcd(sth, dh)``-th from the first, and each
  reads y shifted by a whole number of rows: no masked-away products at stride 2.
- ``conv_wgrad``: the adjoint in w. Per (tap, channel block) program, M = OG, N = CG (with
  ``FLAT``, N = CG*KH*KW in one run, as the forward's) and the long K = N*OH*OW is split
  over grid axis 2 into ``SPLIT`` chunks, each storing float32 partials; ``sum_splits``
  adds them in a fixed order (deterministic) and rounds once.

Row bases are 64-bit (a tensor may pass 2**31 elements); offsets within one sample are 32-bit
(the wrapper falls back beyond that).
"""

import triton
import triton.language as tl


@triton.jit
def conv_fwd(x_ptr, w_ptr, b_ptr, y_ptr,
             H, W, OH, OW, M, CG, OG,
             sxn, sxc, sxh, sxw, swo, swc, swh, sww, sb, syn, syo, syh, syw,
             sth, stw, ph, pw, dh, dw,
             KH: tl.constexpr, KW: tl.constexpr, FLAT: tl.constexpr, HAS_BIAS: tl.constexpr,
             PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    g = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = offs_m < M
    ow = offs_m % OW
    t = offs_m // OW
    oh = t % OH
    n = (t // OH).to(tl.int64)
    ih0 = oh * sth - ph
    iw0 = ow * stw - pw
    x_rows = x_ptr + n * sxn + (g * CG).to(tl.int64) * sxc
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < OG
    o = g * OG + offs_n
    w_cols = w_ptr + o.to(tl.int64) * swo
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    if FLAT:
        K = CG * KH * KW
        for k0 in range(0, K, BLOCK_K):
            k = k0 + rk
            k_ok = k < K
            c = k // (KH * KW)
            r = k % (KH * KW)
            kh = r // KW
            kw = r % KW
            ih = ih0[:, None] + (kh * dh)[None, :]
            iw = iw0[:, None] + (kw * dw)[None, :]
            ok = (m_ok[:, None] & k_ok[None, :] & (ih >= 0) & (ih < H) & (iw >= 0)
                  & (iw < W))
            a = tl.load(x_rows[:, None] + (c * sxc)[None, :] + ih * sxh + iw * sxw, mask=ok,
                        other=0.0)
            b = tl.load(w_cols[None, :] + (c * swc + kh * swh + kw * sww)[:, None],
                        mask=k_ok[:, None] & n_ok[None, :], other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
    else:
        cb = tl.cdiv(CG, BLOCK_K)
        for i in range(0, KH * KW * cb):
            r = i // cb
            c = (i % cb) * BLOCK_K + rk
            kh = r // KW
            kw = r % KW
            ih = ih0 + kh * dh
            iw = iw0 + kw * dw
            row_ok = m_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            c_ok = c < CG
            a = tl.load((x_rows + ih * sxh + iw * sxw)[:, None] + (c * sxc)[None, :],
                        mask=row_ok[:, None] & c_ok[None, :], other=0.0)
            b = tl.load((w_cols + kh * swh + kw * sww)[None, :] + (c * swc)[:, None],
                        mask=c_ok[:, None] & n_ok[None, :], other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(b_ptr + o * sb, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    y = y_ptr + (n * syn + oh * syh + ow * syw)[:, None] + (o.to(tl.int64) * syo)[None, :]
    tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _first_tap(target, s, d, step, K: tl.constexpr):
    """The least tap k < ``step`` with k*d = target (mod s), and how many taps below K
    follow it ``step`` apart (0 when none matches)."""
    k0 = target * 0 + K
    for j in range(0, step):
        k0 = tl.where(((j * d) % s == target) & (k0 == K), j, k0)
    return k0, tl.where(k0 < K, (K - k0 + step - 1) // step, 0)


@triton.jit
def conv_dgrad(y_ptr, w_ptr, b_ptr, x_ptr,
               H, W, OH, OW, HQ, WQ, MQ, CG, OG,
               syn, syo, syh, syw, swo, swc, swh, sww, sb, sxn, sxc, sxh, sxw,
               sth, stw, ph, pw, dh, dw, steph, stepw,
               KH: tl.constexpr, KW: tl.constexpr, HAS_BIAS: tl.constexpr,
               PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr):
    """x[n, c, h, w] = sum over o and the taps landing on (h, w) of y[n, o, oh, ow] w[o, c,
    kh, kw], for the phase and group of grid axis 2; rows (n, i, j) are positions
    (h, w) = (phase_h + i*sth, phase_w + j*stw)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    z = tl.program_id(2)
    phases = sth * stw
    g = z // phases
    phase = z % phases
    qh_base = phase // stw + ph  # h + ph - kh*dh, less i*sth
    qw_base = phase % stw + pw
    kh0, nh = _first_tap(qh_base % sth, sth, dh, steph, KH)
    kw0, nw = _first_tap(qw_base % stw, stw, dw, stepw, KW)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    j = offs_m % WQ
    t = offs_m // WQ
    i = t % HQ
    n = (t // HQ).to(tl.int64)
    h = phase // stw + i * sth
    w = phase % stw + j * stw
    m_ok = (offs_m < MQ) & (h < H) & (w < W)
    y_rows = y_ptr + n * syn + (g * OG).to(tl.int64) * syo
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < CG
    c = g * CG + offs_n
    w_cols = w_ptr + (g * OG).to(tl.int64) * swo + offs_n * swc
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    cb = tl.cdiv(OG, BLOCK_K)
    for it in range(0, nh * nw * cb):
        tap = it // cb
        o = (it % cb) * BLOCK_K + rk
        kh = kh0 + (tap // nw) * steph
        kw = kw0 + (tap % nw) * stepw
        oh = i + (qh_base - kh * dh) // sth  # an exact quotient
        ow = j + (qw_base - kw * dw) // stw
        row_ok = m_ok & (oh >= 0) & (oh < OH) & (ow >= 0) & (ow < OW)
        o_ok = o < OG
        a = tl.load((y_rows + oh * syh + ow * syw)[:, None] + (o * syo)[None, :],
                    mask=row_ok[:, None] & o_ok[None, :], other=0.0)
        b = tl.load((w_cols + kh * swh + kw * sww)[None, :] + (o * swo)[:, None],
                    mask=o_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(b_ptr + c * sb, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    x = x_ptr + (n * sxn + h * sxh + w * sxw)[:, None] + (c.to(tl.int64) * sxc)[None, :]
    tl.store(x, acc.to(x_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def conv_wgrad(x_ptr, g_ptr, p_ptr,
               H, W, OH, OW, KTOT, CG, OG, OC, CHUNK, SPLIT,
               sxn, sxc, sxh, sxw, sgn, sgo, sgh, sgw,
               sth, stw, ph, pw, dh, dw,
               KH: tl.constexpr, KW: tl.constexpr, FLAT: tl.constexpr,
               PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr):
    """p[split, o, c, kh, kw] = sum over this split's (n, oh, ow) of g[n, o, oh, ow]
    x[n, c, ih, iw], p contiguous (SPLIT, O, CG, KH, KW). Along grid axis 1: one tap and
    block of channels per program, or with ``FLAT`` blocks of the flat (c, kh, kw) columns
    (few channels: 3 channels times 9 taps fill one block)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    z = tl.program_id(2)
    g = z // SPLIT
    split = z % SPLIT
    if FLAT:
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < CG * KH * KW
        c = cols // (KH * KW)
        r = cols % (KH * KW)
    else:
        cbn = tl.cdiv(CG, BLOCK_N)
        r = pid_n // cbn
        c = (pid_n % cbn) * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = c < CG
        cols = c * (KH * KW) + r
    dkh = (r // KW) * dh - ph
    dkw = (r % KW) * dw - pw
    offs_o = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    o_ok = offs_o < OG
    o = g * OG + offs_o
    g_rows = g_ptr + o.to(tl.int64) * sgo
    x_cols = x_ptr + (g * CG + c).to(tl.int64) * sxc
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    lo = split * CHUNK
    hi = tl.minimum(lo + CHUNK, KTOT)
    for k0 in range(lo, hi, BLOCK_K):
        k = k0 + rk
        k_ok = k < hi
        ow = k % OW
        t = k // OW
        oh = t % OH
        n = (t // OH).to(tl.int64)
        a = tl.load(g_rows[:, None] + (n * sgn + oh * sgh + ow * sgw)[None, :],
                    mask=o_ok[:, None] & k_ok[None, :], other=0.0)
        if FLAT:
            ih = (oh * sth)[:, None] + dkh[None, :]
            iw = (ow * stw)[:, None] + dkw[None, :]
            x_ok = (k_ok[:, None] & col_ok[None, :] & (ih >= 0) & (ih < H) & (iw >= 0)
                    & (iw < W))
            b = tl.load(x_cols[None, :] + (n * sxn)[:, None] + ih * sxh + iw * sxw, mask=x_ok,
                        other=0.0)
        else:
            ih = oh * sth + dkh
            iw = ow * stw + dkw
            x_ok = k_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            b = tl.load(x_cols[None, :] + (n * sxn + ih * sxh + iw * sxw)[:, None],
                        mask=x_ok[:, None] & col_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    p = (p_ptr + split.to(tl.int64) * OC * CG * KH * KW
         + ((o * CG).to(tl.int64) * KH * KW)[:, None] + cols[None, :])
    tl.store(p, acc.to(p_ptr.dtype.element_ty), mask=o_ok[:, None] & col_ok[None, :])


@triton.jit
def sum_splits(p_ptr, out_ptr, total, SPLIT, BLOCK: tl.constexpr):
    """out[i] = sum over s of p[s, i], added in order of s, rounded once."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = i < total
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(0, SPLIT):
        acc += tl.load(p_ptr + s * total + i, mask=ok, other=0.0)
    tl.store(out_ptr + i, acc.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def pack4(src_ptr, out_ptr, D1, D2, D3, s0, s1, s2, s3, total, BLOCK: tl.constexpr):
    """out (contiguous, shape (D0, D1, D2, D3))[i] = src at the element strides s0..s3: the
    weight copied into the layout a kernel reads best."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = i < total
    i3 = i % D3
    t = i // D3
    i2 = t % D2
    t = t // D2
    src = src_ptr + (t // D1) * s0 + (t % D1) * s1 + i2 * s2 + i3 * s3
    tl.store(out_ptr + i, tl.load(src, mask=ok), mask=ok)
