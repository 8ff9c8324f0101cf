"""ember's Triton row kernels: the softmax family and the norms (wrappers: ``rows.py``).

Imported on the first call of a wrapper, never by ``import ember`` (this module imports
Triton). Every kernel loads its operands widened to the compute type ``ACC`` (tl.float32,
or tl.float64 for float64 data), accumulates there and rounds once at the store.

Softmax kernels see their operands as (outer, n, inner) with an element stride per axis
(n: the reduced dim): a program owns one ``outer`` index and ``BLOCK_I`` consecutive ``inner``
indices, a [BLOCK_I, BLOCK_N] tile reduced along its second axis. For the last dim
(inner == 1) the tile is one row, [1, BLOCK_N]. A row longer than one block (``ONE`` false)
takes two passes: the max and the sum online (the sum rescaled as the max grows), then the
results.

Norm kernels see their operands as rows of ``n`` contiguous elements: one program per row
forward; backward, ``progs`` programs each take every ``progs``-th row and keep partial sums
of the weight and bias gradients for the wrapper to add up.
"""

import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))


@triton.jit
def _tile(inner, iblocks, BLOCK_I: tl.constexpr):
    """This program's outer index and [BLOCK_I, 1] inner indices (int64), with which of
    those exist. BLOCK_I == 1 means inner == 1 (the reduced dim is the last): one row per
    program, whose address the compiler then knows to be aligned as the row stride is."""
    pid = tl.program_id(0)
    i = tl.arange(0, BLOCK_I)[:, None]
    if BLOCK_I == 1:
        o = pid.to(tl.int64)
    else:
        o = (pid // iblocks).to(tl.int64)
        i += (pid % iblocks) * BLOCK_I
    return o, i.to(tl.int64), i < inner


@triton.jit
def _softmax_result(z, e, s, finite, KIND: tl.constexpr):
    """The row's results from z = x - max, e = exp(z), s = sum(e) and how many entries
    are not -inf (``finite``, KIND 2 only): KIND 0 softmax, 1 log_softmax, 2 softmax with
    zeros for rows of only -inf (counted: the max ignores NaN on the GPU)."""
    if KIND == 1:
        return z - tl.log(s)
    else:
        r = e * (1.0 / s)  # times the reciprocal, as PyTorch rounds it
        if KIND == 2:
            r = tl.where(finite == 0, 0.0, r)
        return r


@triton.jit
def _not_neg_inf(x):
    """Per row of the tile, how many entries are not -inf."""
    return tl.sum((x != NEG_INF).to(tl.int32), 1, keep_dims=True)


@triton.jit
def softmax_fwd(x_ptr, y_ptr, n, inner, iblocks, xso, xsn, xsi, yso, ysn, ysi,
                KIND: tl.constexpr, ACC: tl.constexpr, BLOCK_I: tl.constexpr,
                BLOCK_N: tl.constexpr, ONE: tl.constexpr):
    """y = softmax-like(x) along n; x is converted to y's dtype first (the ``dtype=``
    argument), then to the compute type."""
    OUT = y_ptr.dtype.element_ty
    o, i, live = _tile(inner, iblocks, BLOCK_I)
    xrow = x_ptr + o * xso + i * xsi
    yrow = y_ptr + o * yso + i * ysi
    cols = tl.arange(0, BLOCK_N)[None, :]
    if ONE:
        mask = live & (cols < n)
        x = tl.load(xrow + cols * xsn, mask=mask, other=NEG_INF).to(OUT).to(ACC)
        m = tl.max(x, 1, keep_dims=True)
        z = x - m  # a row whose max is +-inf gives NaN here, as in PyTorch
        e = tl.exp(z)
        s = tl.sum(e, 1, keep_dims=True)  # padding lanes add exp(-inf) = 0
        finite = 0
        if KIND == 2:
            finite = _not_neg_inf(x)
        r = _softmax_result(z, e, s, finite, KIND)
        tl.store(yrow + cols * ysn, r.to(OUT), mask=mask)
    else:
        m = tl.full([BLOCK_I, 1], NEG_INF, ACC)
        s = tl.zeros([BLOCK_I, 1], ACC)
        finite = tl.zeros([BLOCK_I, 1], tl.int32)
        for start in range(0, n, BLOCK_N):
            c = start + cols
            mask = live & (c < n)
            x = tl.load(xrow + c * xsn, mask=mask, other=NEG_INF).to(OUT).to(ACC)
            if KIND == 2:
                finite += _not_neg_inf(x)
            m_new = tl.maximum(m, tl.max(x, 1, keep_dims=True))
            # while every value seen is -inf the sum stays 0 (no -inf - -inf)
            base = tl.where(m_new == NEG_INF, 0.0, m_new)
            e = tl.where(mask, tl.exp(x - base), 0.0)
            s = s * tl.exp(m - base) + tl.sum(e, 1, keep_dims=True)
            m = m_new
        for start in range(0, n, BLOCK_N):
            c = start + cols
            mask = live & (c < n)
            x = tl.load(xrow + c * xsn, mask=mask, other=NEG_INF).to(OUT).to(ACC)
            z = x - m
            r = _softmax_result(z, tl.exp(z), s, finite, KIND)
            tl.store(yrow + c * ysn, r.to(OUT), mask=mask)


@triton.jit
def _softmax_grad(g, y, s, LOG: tl.constexpr):
    if LOG:
        return g - tl.exp(y) * s
    else:
        return (g - s) * y


@triton.jit
def _softmax_grad_terms(g, y, LOG: tl.constexpr):
    """What the row sums: g for log_softmax, g * y for softmax."""
    if LOG:
        return g
    else:
        return g * y


@triton.jit
def softmax_bwd(g_ptr, y_ptr, r_ptr, n, inner, iblocks, gso, gsn, gsi, yso, ysn, ysi,
                rso, rsn, rsi, LOG: tl.constexpr, ACC: tl.constexpr, BLOCK_I: tl.constexpr,
                BLOCK_N: tl.constexpr, ONE: tl.constexpr):
    """The input gradient from the output y and its gradient g: y * (g - sum(g * y)) for
    softmax, g - exp(y) * sum(g) for log_softmax (LOG)."""
    OUT = r_ptr.dtype.element_ty
    o, i, live = _tile(inner, iblocks, BLOCK_I)
    grow = g_ptr + o * gso + i * gsi
    yrow = y_ptr + o * yso + i * ysi
    rrow = r_ptr + o * rso + i * rsi
    cols = tl.arange(0, BLOCK_N)[None, :]
    if ONE:
        mask = live & (cols < n)
        g = tl.load(grow + cols * gsn, mask=mask, other=0.0).to(ACC)
        y = tl.load(yrow + cols * ysn, mask=mask, other=0.0).to(ACC)
        s = tl.sum(_softmax_grad_terms(g, y, LOG), 1, keep_dims=True)
        tl.store(rrow + cols * rsn, _softmax_grad(g, y, s, LOG).to(OUT), mask=mask)
    else:
        s = tl.zeros([BLOCK_I, 1], ACC)
        for start in range(0, n, BLOCK_N):
            c = start + cols
            mask = live & (c < n)
            g = tl.load(grow + c * gsn, mask=mask, other=0.0).to(ACC)
            y = tl.load(yrow + c * ysn, mask=mask, other=0.0).to(ACC)
            s += tl.sum(_softmax_grad_terms(g, y, LOG), 1, keep_dims=True)
        for start in range(0, n, BLOCK_N):
            c = start + cols
            mask = live & (c < n)
            g = tl.load(grow + c * gsn, mask=mask, other=0.0).to(ACC)
            y = tl.load(yrow + c * ysn, mask=mask, other=0.0).to(ACC)
            tl.store(rrow + c * rsn, _softmax_grad(g, y, s, LOG).to(OUT), mask=mask)


@triton.jit
def _affine(v, w_ptr, b_ptr, c, mask, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
            ACC: tl.constexpr):
    """v * weight + bias over columns ``c``, each where given."""
    if HAS_W:
        v = v * tl.load(w_ptr + c, mask=mask, other=0.0).to(ACC)
    if HAS_B:
        v = v + tl.load(b_ptr + c, mask=mask, other=0.0).to(ACC)
    return v


@triton.jit
def norm_fwd(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n, sx, eps_hi, eps_lo,
             CENTER: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
             ACC: tl.constexpr, BLOCK_N: tl.constexpr, ONE: tl.constexpr):
    """One row of layer norm (CENTER) or RMS norm: y = (x - mean) * rstd * w + b with
    rstd = 1 / sqrt(var + eps) (var: the mean of x^2 without CENTER); the statistics stored
    per row (mean only with CENTER). eps arrives as two float32 halves (eps_hi + eps_lo)."""
    OUT = y_ptr.dtype.element_ty
    row = tl.program_id(0).to(tl.int64)
    xrow = x_ptr + row * sx
    yrow = y_ptr + row * n
    cols = tl.arange(0, BLOCK_N)
    eps = tl.cast(eps_hi, ACC) + tl.cast(eps_lo, ACC)
    if ONE:
        mask = cols < n
        x = tl.load(xrow + cols, mask=mask, other=0.0).to(ACC)
        if CENTER:
            mean = tl.sum(x, 0) / n
            x = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, 0) / n + eps)
        y = _affine(x * rstd, w_ptr, b_ptr, cols, mask, HAS_W, HAS_B, ACC)
        tl.store(yrow + cols, y.to(OUT), mask=mask)
    else:
        acc = tl.zeros([BLOCK_N], ACC)
        if CENTER:
            for start in range(0, n, BLOCK_N):
                c = start + cols
                acc += tl.load(xrow + c, mask=c < n, other=0.0).to(ACC)
            mean = tl.sum(acc, 0) / n
            acc = acc * 0.0
        else:
            mean = 0.0
        for start in range(0, n, BLOCK_N):
            c = start + cols
            mask = c < n
            x = tl.where(mask, tl.load(xrow + c, mask=mask, other=0.0).to(ACC) - mean, 0.0)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / n + eps)
        for start in range(0, n, BLOCK_N):
            c = start + cols
            mask = c < n
            x = tl.load(xrow + c, mask=mask, other=0.0).to(ACC) - mean
            y = _affine(x * rstd, w_ptr, b_ptr, c, mask, HAS_W, HAS_B, ACC)
            tl.store(yrow + c, y.to(OUT), mask=mask)
    if CENTER:
        tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _norm_row_grad(g_ptr, x_ptr, w_ptr, c, mask, mean, rstd, HAS_W: tl.constexpr,
                   ACC: tl.constexpr):
    """(g, x̂, the gradient reaching x̂) over columns ``c`` of one row."""
    g = tl.load(g_ptr + c, mask=mask, other=0.0).to(ACC)
    xhat = (tl.load(x_ptr + c, mask=mask, other=0.0).to(ACC) - mean) * rstd
    gh = g
    if HAS_W:
        gh = g * tl.load(w_ptr + c, mask=mask, other=0.0).to(ACC)
    return g, xhat, gh


@triton.jit
def _row_stats(mean_ptr, rstd_ptr, r, live, ACC: tl.constexpr):
    """Row ``r``'s mean and rstd as 1-element blocks (0 where the row does not exist)."""
    one = tl.arange(0, 1)
    mean = tl.load(mean_ptr + r + one, mask=live & (one == 0), other=0.0).to(ACC)
    return mean, tl.load(rstd_ptr + r + one, mask=live & (one == 0), other=0.0).to(ACC)


@triton.jit
def layer_norm_bwd(g_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr,
                   rows, n, sg, sx, progs, iters, HAS_W: tl.constexpr, NEED_X: tl.constexpr,
                   NEED_W: tl.constexpr, NEED_B: tl.constexpr, ACC: tl.constexpr,
                   BLOCK_N: tl.constexpr, ONE: tl.constexpr):
    """Layer norm's backward over rows pid, pid + progs, ... (``iters`` of them, the last
    ones masked off past ``rows``): dx = rstd * gh - x̂ * c2 - c1 with
    c2 = sum(gh x̂) rstd / n, c1 = mean(gh) rstd (gh = g * w), as the CPU impl forms them;
    this program's partial sums of g * x̂ and g go to row ``pid`` of dw and db."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    part = pid.to(tl.int64) * n
    if ONE:
        dw = tl.zeros([BLOCK_N], ACC)
        db = dw
        for k in range(0, iters):
            row = pid + k * progs
            live = row < rows
            mask = (cols < n) & live
            r = row.to(tl.int64)
            mean, rstd = _row_stats(mean_ptr, rstd_ptr, r, live, ACC)
            g, xhat, gh = _norm_row_grad(g_ptr + r * sg, x_ptr + r * sx, w_ptr, cols, mask,
                                         mean, rstd, HAS_W, ACC)
            if NEED_W:
                dw += g * xhat
            if NEED_B:
                db += g
            if NEED_X:
                c2 = tl.sum(gh * xhat, 0) * (rstd / n)
                c1 = tl.sum(gh, 0) / n * rstd
                dx = gh * rstd - xhat * c2 - c1
                tl.store(dx_ptr + r * n + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        if NEED_W:
            tl.store(dw_ptr + part + cols, dw, mask=cols < n)
        if NEED_B:
            tl.store(db_ptr + part + cols, db, mask=cols < n)
    else:
        for k in range(0, iters):
            row = pid + k * progs
            live = row < rows
            r = row.to(tl.int64)
            mean, rstd = _row_stats(mean_ptr, rstd_ptr, r, live, ACC)
            grow, xrow = g_ptr + r * sg, x_ptr + r * sx
            if NEED_X:
                s1 = tl.zeros([BLOCK_N], ACC)
                s2 = s1
                for start in range(0, n, BLOCK_N):
                    c = start + cols
                    g, xhat, gh = _norm_row_grad(grow, xrow, w_ptr, c, (c < n) & live, mean,
                                                 rstd, HAS_W, ACC)
                    s1 += gh
                    s2 += gh * xhat
                c2 = tl.sum(s2, 0) * (rstd / n)
                c1 = tl.sum(s1, 0) / n * rstd
            for start in range(0, n, BLOCK_N):
                c = start + cols
                mask = (c < n) & live
                g, xhat, gh = _norm_row_grad(grow, xrow, w_ptr, c, mask, mean, rstd, HAS_W,
                                             ACC)
                if NEED_X:
                    dx = gh * rstd - xhat * c2 - c1
                    tl.store(dx_ptr + r * n + c, dx.to(dx_ptr.dtype.element_ty), mask=mask)
                if NEED_W:  # this program's own row of the partial sums: no other writer
                    p = dw_ptr + part + c
                    tl.store(p, tl.load(p, mask=mask, other=0.0) + g * xhat, mask=mask)
                if NEED_B:
                    p = db_ptr + part + c
                    tl.store(p, tl.load(p, mask=mask, other=0.0) + g, mask=mask)


@triton.jit
def partial_sums(dw_ptr, db_ptr, ow_ptr, ob_ptr, rows, n, NEED_W: tl.constexpr,
                 NEED_B: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """The column sums of the backward's [rows, n] partials dw and db (in ACC), each rounded
    once to its output's dtype; a program owns BLOCK_C columns and walks the rows in order,
    so the sums come out the same from run to run."""
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = c < n
    r0 = tl.arange(0, BLOCK_R)
    sw = tl.zeros([BLOCK_R, BLOCK_C], dw_ptr.dtype.element_ty)
    sb = sw
    for start in range(0, rows, BLOCK_R):
        r = start + r0
        off = r.to(tl.int64)[:, None] * n + c[None, :]
        mask = (r < rows)[:, None] & cmask[None, :]
        if NEED_W:
            sw += tl.load(dw_ptr + off, mask=mask, other=0.0)
        if NEED_B:
            sb += tl.load(db_ptr + off, mask=mask, other=0.0)
    if NEED_W:
        tl.store(ow_ptr + c, tl.sum(sw, 0).to(ow_ptr.dtype.element_ty), mask=cmask)
    if NEED_B:
        tl.store(ob_ptr + c, tl.sum(sb, 0).to(ob_ptr.dtype.element_ty), mask=cmask)
