"""ember's Triton batch-norm kernels (wrappers: ``channels.py``).

Imported on the first call of a wrapper, never by ``import ember`` (this module imports
Triton). The data is NCHW-contiguous, seen as ``(N, C, HW)``; operands are widened to the
compute type ``ACC`` (float32, or float64 for float64 data) and rounded once at the store.

Per-channel reductions take two levels. ``*_partial`` kernels: one program per (channel,
chunk), a chunk being one [BLOCK_N, BLOCK_HW] tile of that channel's (n, hw) elements, held
in registers; the statistics kernels (``bn_stats``, ``bn_grad_stats``): one program per
channel combining its chunks. Forward chunks store (count, mean, M2) from two passes over
the tile in registers, combined with Chan's pairwise formula, so no sum of squares cancels.
The pointwise kernels (``bn_apply``, ``bn_dx``) take a [BLOCK_R, BLOCK_HW] tile of rows
``r = n * C + c`` with per-row channel factors computed by the statistics kernels.
"""

import triton
import triton.language as tl


@triton.jit
def _chunk(C, HW, N, chunks, hw_chunks, BLOCK_N: tl.constexpr, BLOCK_HW: tl.constexpr):
    """This program's channel and chunk, its tile's element offsets and mask, and how many
    elements the tile holds."""
    pid = tl.program_id(0)
    c = pid // chunks
    k = pid % chunks
    n0 = (k // hw_chunks) * BLOCK_N
    h0 = (k % hw_chunks) * BLOCK_HW
    n = n0 + tl.arange(0, BLOCK_N)[:, None]
    h = h0 + tl.arange(0, BLOCK_HW)[None, :]
    mask = (n < N) & (h < HW)
    off = (n.to(tl.int64) * C + c) * HW + h
    count = tl.minimum(N - n0, BLOCK_N) * tl.minimum(HW - h0, BLOCK_HW)
    return pid, c, off, mask, count


@triton.jit
def bn_partial(x_ptr, cnt_ptr, mean_ptr, m2_ptr, C, HW, N, chunks, hw_chunks,
               ACC: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_HW: tl.constexpr):
    """One chunk's (count, mean, sum of squared deviations) at ``pid`` (layout (C, chunks))."""
    pid, c, off, mask, count = _chunk(C, HW, N, chunks, hw_chunks, BLOCK_N, BLOCK_HW)
    x = tl.load(x_ptr + off, mask=mask, other=0.0).to(ACC)
    cnt = count.to(ACC)
    mean = tl.sum(tl.sum(x, 1), 0) / cnt
    d = tl.where(mask, x - mean, 0.0)
    tl.store(cnt_ptr + pid, cnt)
    tl.store(mean_ptr + pid, mean)
    tl.store(m2_ptr + pid, tl.sum(tl.sum(d * d, 1), 0))


@triton.jit
def bn_stats(cnt_ptr, mean_ptr, m2_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, smean_ptr, sinv_ptr,
             scale_ptr, shift_ptr, chunks, eps_hi, eps_lo, mom_hi, mom_lo, unb_hi, unb_lo,
             TRAINING: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
             HAS_RM: tl.constexpr, HAS_RV: tl.constexpr, ACC: tl.constexpr,
             BLOCK_P: tl.constexpr):
    """Channel ``c``'s statistics: in training the batch mean and biased variance from the
    chunks (running_mean / running_var updated in place with momentum, the variance made
    unbiased by the factor ``unb``), else the running ones. Stores the saved mean and
    invstd = 1 / sqrt(var + eps), and y = x * scale + shift's factors (ACC). Floats that
    must be exact in float64 arrive as two float32 halves (hi + lo)."""
    c = tl.program_id(0)
    eps = tl.cast(eps_hi, ACC) + tl.cast(eps_lo, ACC)
    if TRAINING:
        p = tl.arange(0, BLOCK_P)
        zero = tl.sum(tl.zeros([BLOCK_P], ACC), 0)
        n_acc = zero
        mean = zero
        m2 = zero
        base = c.to(tl.int64) * chunks
        for start in range(0, chunks, BLOCK_P):
            q = start + p
            live = q < chunks
            nb = tl.load(cnt_ptr + base + q, mask=live, other=0.0).to(ACC)
            mb = tl.load(mean_ptr + base + q, mask=live, other=0.0).to(ACC)
            qb = tl.load(m2_ptr + base + q, mask=live, other=0.0).to(ACC)
            n_blk = tl.sum(nb, 0)
            m_blk = tl.sum(nb * mb, 0) / n_blk
            dev = mb - m_blk
            q_blk = tl.sum(qb, 0) + tl.sum(nb * dev * dev, 0)
            n_new = n_acc + n_blk
            delta = m_blk - mean
            mean = mean + delta * (n_blk / n_new)
            m2 = m2 + q_blk + delta * delta * (n_acc * n_blk / n_new)
            n_acc = n_new
        var = m2 / n_acc
        mom = tl.cast(mom_hi, ACC) + tl.cast(mom_lo, ACC)
        if HAS_RM:
            rm = tl.load(rm_ptr + c).to(ACC)
            tl.store(rm_ptr + c, (rm * (1.0 - mom) + mom * mean).to(rm_ptr.dtype.element_ty))
        if HAS_RV:
            unb = tl.cast(unb_hi, ACC) + tl.cast(unb_lo, ACC)
            rv = tl.load(rv_ptr + c).to(ACC)
            tl.store(rv_ptr + c,
                     (rv * (1.0 - mom) + mom * (var * unb)).to(rv_ptr.dtype.element_ty))
    else:
        mean = tl.load(rm_ptr + c).to(ACC)
        var = tl.load(rv_ptr + c).to(ACC)
    invstd = 1.0 / tl.sqrt(var + eps)
    scale = invstd
    if HAS_W:
        scale = invstd * tl.load(w_ptr + c).to(ACC)
    shift = -mean * scale
    if HAS_B:
        shift = tl.load(b_ptr + c).to(ACC) - mean * scale
    tl.store(smean_ptr + c, mean.to(smean_ptr.dtype.element_ty))
    tl.store(sinv_ptr + c, invstd.to(sinv_ptr.dtype.element_ty))
    tl.store(scale_ptr + c, scale)
    tl.store(shift_ptr + c, shift)


@triton.jit
def _rows_tile(C, HW, rows, hw_blocks, BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr):
    """A [BLOCK_R, BLOCK_HW] tile of rows n * C + c: offsets, mask, each row's channel and
    whether the row exists."""
    pid = tl.program_id(0)
    r = (pid // hw_blocks) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    h = (pid % hw_blocks) * BLOCK_HW + tl.arange(0, BLOCK_HW)[None, :]
    live = r < rows
    return r.to(tl.int64) * HW + h, live & (h < HW), r % C, live


@triton.jit
def bn_apply(x_ptr, y_ptr, scale_ptr, shift_ptr, C, HW, rows, hw_blocks, ACC: tl.constexpr,
             BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr):
    """y = x * scale[c] + shift[c]."""
    off, mask, c, live = _rows_tile(C, HW, rows, hw_blocks, BLOCK_R, BLOCK_HW)
    s = tl.load(scale_ptr + c, mask=live, other=0.0)
    t = tl.load(shift_ptr + c, mask=live, other=0.0)
    x = tl.load(x_ptr + off, mask=mask, other=0.0).to(ACC)
    tl.store(y_ptr + off, (x * s + t).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def bn_grad_partial(g_ptr, x_ptr, mean_ptr, inv_ptr, sg_ptr, sgx_ptr, C, HW, N, chunks,
                    hw_chunks, ACC: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_HW: tl.constexpr):
    """One chunk's sums of g and of g * x̂, x̂ = (x - mean[c]) * invstd[c]."""
    pid, c, off, mask, count = _chunk(C, HW, N, chunks, hw_chunks, BLOCK_N, BLOCK_HW)
    mean = tl.load(mean_ptr + c).to(ACC)
    inv = tl.load(inv_ptr + c).to(ACC)
    g = tl.load(g_ptr + off, mask=mask, other=0.0).to(ACC)
    x = tl.load(x_ptr + off, mask=mask, other=0.0).to(ACC)
    xhat = tl.where(mask, (x - mean) * inv, 0.0)
    tl.store(sg_ptr + pid, tl.sum(tl.sum(g, 1), 0))
    tl.store(sgx_ptr + pid, tl.sum(tl.sum(g * xhat, 1), 0))


@triton.jit
def bn_grad_stats(sg_ptr, sgx_ptr, w_ptr, inv_ptr, dw_ptr, db_ptr, k1_ptr, k2_ptr, k3_ptr,
                  chunks, count, HAS_W: tl.constexpr, NEED_X: tl.constexpr,
                  NEED_W: tl.constexpr, NEED_B: tl.constexpr, ACC: tl.constexpr,
                  BLOCK_P: tl.constexpr):
    """Channel ``c``'s sums: grad_weight = sum(g x̂), grad_bias = sum(g), and the factors of
    dx = k1 g + k2 (x - mean) + k3 = w invstd (g - sum(g) / n - x̂ sum(g x̂) / n)."""
    c = tl.program_id(0)
    p = tl.arange(0, BLOCK_P)
    sg = tl.zeros([BLOCK_P], ACC)
    sgx = tl.zeros([BLOCK_P], ACC)
    base = c.to(tl.int64) * chunks
    for start in range(0, chunks, BLOCK_P):
        q = start + p
        live = q < chunks
        sg += tl.load(sg_ptr + base + q, mask=live, other=0.0).to(ACC)
        sgx += tl.load(sgx_ptr + base + q, mask=live, other=0.0).to(ACC)
    s_g = tl.sum(sg, 0)
    s_gx = tl.sum(sgx, 0)
    if NEED_W:
        tl.store(dw_ptr + c, s_gx.to(dw_ptr.dtype.element_ty))
    if NEED_B:
        tl.store(db_ptr + c, s_g.to(db_ptr.dtype.element_ty))
    if NEED_X:
        inv = tl.load(inv_ptr + c).to(ACC)
        k1 = inv
        if HAS_W:
            k1 = inv * tl.load(w_ptr + c).to(ACC)
        tl.store(k1_ptr + c, k1)
        tl.store(k2_ptr + c, -k1 * inv * (s_gx / count))
        tl.store(k3_ptr + c, -k1 * (s_g / count))


@triton.jit
def bn_dx(g_ptr, x_ptr, mean_ptr, k1_ptr, k2_ptr, k3_ptr, dx_ptr, C, HW, rows, hw_blocks,
          ACC: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr):
    """dx = k1[c] g + k2[c] (x - mean[c]) + k3[c]."""
    off, mask, c, live = _rows_tile(C, HW, rows, hw_blocks, BLOCK_R, BLOCK_HW)
    mean = tl.load(mean_ptr + c, mask=live, other=0.0).to(ACC)
    k1 = tl.load(k1_ptr + c, mask=live, other=0.0)
    k2 = tl.load(k2_ptr + c, mask=live, other=0.0)
    k3 = tl.load(k3_ptr + c, mask=live, other=0.0)
    g = tl.load(g_ptr + off, mask=mask, other=0.0).to(ACC)
    x = tl.load(x_ptr + off, mask=mask, other=0.0).to(ACC)
    dx = k1 * g + k2 * (x - mean) + k3
    tl.store(dx_ptr + off, dx.to(dx_ptr.dtype.element_ty), mask=mask)
