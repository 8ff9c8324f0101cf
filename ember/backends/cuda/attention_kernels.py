"""Flash attention in Triton: the forward (online softmax over key blocks) and the backward
(dK/dV per key block, dQ per query block: two kernels, no atomics, deterministic).

Imported lazily by ``attention.py`` on the first fused call (it imports Triton). Shapes:
query (B, H, L, E), key (B, Hk, S, E), value (B, Hk, S, Ev), H a multiple of Hk (query head h
reads key/value head h // (H / Hk)); strides are element strides with the last dimension
contiguous. Scores are computed in the base-2 domain (``qk_scale`` is scale * log2(e), a
float mask is multiplied by log2(e)); the saved log-sum-exp is natural-log, +inf for a row
with no visible key (its probabilities recompute as 0).

Masks: MASK_KIND 0 none, 1 boolean (True takes part), 2 additive float; broadcast by zero
strides. CAUSAL is PyTorch's top-left alignment: query i sees keys j <= i. Blocks of keys
entirely below the diagonal run without the causal compare (the ``DIAG`` flag).

Half-precision inputs go into tl.dot as they are (products accumulate in float32); the
probabilities are rounded to the input dtype before their product with V or Q/K, as in
every flash attention. Accumulators and statistics are float32; each output rounds once.
"""

from __future__ import annotations

import triton.language as tl

from .triton_adapter import jit

LOG2E = 1.4426950408889634
LN2 = tl.constexpr(0.6931471805599453)


@jit
def _load(ptrs, rows_ok, cols_ok, CHECK_ROWS: tl.constexpr, CHECK_COLS: tl.constexpr,
          other: tl.constexpr):
    """A 2-D block load whose bounds checks are compiled in only where a block can overhang."""
    if CHECK_ROWS and CHECK_COLS:
        return tl.load(ptrs, mask=rows_ok[:, None] & cols_ok[None, :], other=other)
    elif CHECK_ROWS:
        return tl.load(ptrs, mask=rows_ok[:, None], other=other)
    elif CHECK_COLS:
        return tl.load(ptrs, mask=cols_ok[None, :], other=other)
    else:
        return tl.load(ptrs)


@jit
def _scores(q, kt, offs_m, cols, mask_rows, smn, L, S, qk_scale,
            MASK_KIND: tl.constexpr, DIAG: tl.constexpr, EVEN_M: tl.constexpr,
            EVEN_N: tl.constexpr, PRECISION: tl.constexpr):
    """(BLOCK_M, BLOCK_N) scores q k^T in the base-2 domain, masked positions -inf."""
    s = tl.dot(q, kt, input_precision=PRECISION) * qk_scale
    if MASK_KIND != 0:
        mk = _load(mask_rows + cols[None, :] * smn, offs_m < L, cols < S, not EVEN_M,
                   not EVEN_N, 0)
        if MASK_KIND == 1:
            s = tl.where(mk != 0, s, float("-inf"))
        else:
            s = s + mk.to(tl.float32) * 1.4426950408889634
    if DIAG:
        s = tl.where(offs_m[:, None] >= cols[None, :], s, float("-inf"))
    if not EVEN_N:
        s = tl.where((cols < S)[None, :], s, float("-inf"))
    return s


@jit
def _fwd_blocks(acc, l_i, m_i, q, k_ptrs, v_ptrs, mask_rows, offs_m, offs_n, offs_e, offs_ev,
                skn, svn, smn, lo, hi, L, S, qk_scale,
                HEAD_E: tl.constexpr, HEAD_EV: tl.constexpr, BLOCK_N: tl.constexpr,
                MASK_KIND: tl.constexpr, DIAG: tl.constexpr, EVEN_M: tl.constexpr,
                EVEN_N: tl.constexpr, EVEN_E: tl.constexpr, EVEN_EV: tl.constexpr,
                PRECISION: tl.constexpr):
    """Fold key blocks [lo, hi) into the running (acc, l, m) of one query block."""
    for start in range(lo, hi, BLOCK_N):
        cols = start + offs_n
        kt = _load(k_ptrs + start * skn, offs_e < HEAD_E, cols < S, not EVEN_E, not EVEN_N, 0.0)
        s = _scores(q, kt, offs_m, cols, mask_rows, smn, L, S, qk_scale, MASK_KIND, DIAG,
                    EVEN_M, EVEN_N, PRECISION)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        if MASK_KIND != 0:  # a row with no visible key yet: keep exp2 away from -inf - -inf
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_use = m_new
        p = tl.math.exp2(s - m_use[:, None])
        alpha = tl.math.exp2(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _load(v_ptrs + start * svn, cols < S, offs_ev < HEAD_EV, not EVEN_N, not EVEN_EV,
                  0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@jit
def attn_fwd(Q, K, V, Mask, Out, Lse,
             sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, smb, smh, smm, smn, sob, soh, som,
             H, GROUP, L, S, qk_scale,
             HEAD_E: tl.constexpr, HEAD_EV: tl.constexpr, BLOCK_E: tl.constexpr,
             BLOCK_EV: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             CAUSAL: tl.constexpr, MASK_KIND: tl.constexpr, EVEN_M: tl.constexpr,
             EVEN_N: tl.constexpr, PRECISION: tl.constexpr):
    """One (query block, batch * head) program: out = softmax(q k^T * scale + mask) v."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    EVEN_E: tl.constexpr = HEAD_E == BLOCK_E
    EVEN_EV: tl.constexpr = HEAD_EV == BLOCK_EV
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_e = tl.arange(0, BLOCK_E)
    offs_ev = tl.arange(0, BLOCK_EV)
    q = _load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_e[None, :], offs_m < L,
              offs_e < HEAD_E, not EVEN_M, not EVEN_E, 0.0)
    k_ptrs = K + b * skb + hk * skh + offs_e[:, None] + offs_n[None, :] * skn
    v_ptrs = V + b * svb + hk * svh + offs_n[:, None] * svn + offs_ev[None, :]
    mask_rows = Mask + b * smb + h * smh + offs_m[:, None] * smm
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_EV], tl.float32)
    if CAUSAL:  # keys before the block's first query are seen by all its rows
        below = tl.minimum(pid_m * BLOCK_M, S)
        acc, l_i, m_i = _fwd_blocks(acc, l_i, m_i, q, k_ptrs, v_ptrs, mask_rows, offs_m, offs_n,
                                    offs_e, offs_ev, skn, svn, smn, 0, below, L, S, qk_scale,
                                    HEAD_E, HEAD_EV, BLOCK_N, MASK_KIND, False, EVEN_M, EVEN_N,
                                    EVEN_E, EVEN_EV, PRECISION)
        acc, l_i, m_i = _fwd_blocks(acc, l_i, m_i, q, k_ptrs, v_ptrs, mask_rows, offs_m, offs_n,
                                    offs_e, offs_ev, skn, svn, smn, below,
                                    tl.minimum((pid_m + 1) * BLOCK_M, S), L, S, qk_scale,
                                    HEAD_E, HEAD_EV, BLOCK_N, MASK_KIND, True, EVEN_M, EVEN_N,
                                    EVEN_E, EVEN_EV, PRECISION)
    else:
        acc, l_i, m_i = _fwd_blocks(acc, l_i, m_i, q, k_ptrs, v_ptrs, mask_rows, offs_m, offs_n,
                                    offs_e, offs_ev, skn, svn, smn, 0, S, L, S, qk_scale,
                                    HEAD_E, HEAD_EV, BLOCK_N, MASK_KIND, False, EVEN_M, EVEN_N,
                                    EVEN_E, EVEN_EV, PRECISION)
    empty = l_i == 0.0  # no visible key: output 0, log-sum-exp +inf
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse = tl.where(empty, float("inf"), (m_i + tl.math.log2(tl.where(empty, 1.0, l_i))) * LN2)
    o_ptrs = Out + b * sob + h * soh + offs_m[:, None] * som + offs_ev[None, :]
    if EVEN_M and EVEN_EV:
        tl.store(o_ptrs, out.to(Out.dtype.element_ty))
    else:
        tl.store(o_ptrs, out.to(Out.dtype.element_ty),
                 mask=(offs_m < L)[:, None] & (offs_ev < HEAD_EV)[None, :])
    if EVEN_M:
        tl.store(Lse + bh * L + offs_m, lse)
    else:
        tl.store(Lse + bh * L + offs_m, lse, mask=offs_m < L)


@jit
def attn_bwd_delta(Out, dOut, Delta, sob, soh, som, sdb, sdh, sdm, H, L,
                   HEAD_EV: tl.constexpr, BLOCK_EV: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta = rowsum(dO * O) in float32, (B * H, L): the softmax backward's row term."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_ev = tl.arange(0, BLOCK_EV)
    ok = (offs_m < L)[:, None] & (offs_ev < HEAD_EV)[None, :]
    o = tl.load(Out + b * sob + h * soh + offs_m[:, None] * som + offs_ev[None, :], mask=ok,
                other=0.0)
    do = tl.load(dOut + b * sdb + h * sdh + offs_m[:, None] * sdm + offs_ev[None, :], mask=ok,
                 other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(Delta + bh * L + offs_m, delta, mask=offs_m < L)


@jit
def _dkdv_blocks(dk, dv, k, v, q_ptrs, do_ptrs, mask_cols, lse_ptr, delta_ptr, offs_m, cols,
                 offs_e, offs_ev, sqm, sdm, smm, lo, hi, L, S, qk_scale,
                 HEAD_E: tl.constexpr, HEAD_EV: tl.constexpr, BLOCK_M: tl.constexpr,
                 MASK_KIND: tl.constexpr, DIAG: tl.constexpr, EVEN_M: tl.constexpr,
                 EVEN_N: tl.constexpr, EVEN_E: tl.constexpr, EVEN_EV: tl.constexpr,
                 PRECISION: tl.constexpr):
    """Fold query blocks [lo, hi) into one key block's dK (unscaled) and dV, transposed
    (keys are rows)."""
    for start in range(lo, hi, BLOCK_M):
        rows = start + offs_m
        q = _load(q_ptrs + start * sqm, rows < L, offs_e < HEAD_E, not EVEN_M, not EVEN_E, 0.0)
        do = _load(do_ptrs + start * sdm, rows < L, offs_ev < HEAD_EV, not EVEN_M, not EVEN_EV,
                   0.0)
        if EVEN_M:
            lse = tl.load(lse_ptr + rows)
            delta = tl.load(delta_ptr + rows)
        else:
            lse = tl.load(lse_ptr + rows, mask=rows < L, other=float("inf"))
            delta = tl.load(delta_ptr + rows, mask=rows < L, other=0.0)
        # s^T: (BLOCK_N, BLOCK_M); the key-major layout of the same scores
        st = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale
        if MASK_KIND != 0:
            mk = _load(mask_cols + rows[None, :] * smm, cols < S, rows < L, not EVEN_N,
                       not EVEN_M, 0)
            if MASK_KIND == 1:
                st = tl.where(mk != 0, st, float("-inf"))
            else:
                st = st + mk.to(tl.float32) * 1.4426950408889634
        if DIAG:
            st = tl.where(rows[None, :] >= cols[:, None], st, float("-inf"))
        pt = tl.math.exp2(st - (lse * 1.4426950408889634)[None, :])
        dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=PRECISION)
        dpt = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        dst = pt * (dpt - delta[None, :])
        dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=PRECISION)
    return dk, dv


@jit
def attn_bwd_dkdv(Q, K, V, Mask, dOut, Lse, Delta, dK, dV,
                  sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, smb, smh, smm, smn,
                  sdb, sdh, sdm, sdkb, sdkh, sdkn, sdvb, sdvh, sdvn,
                  H, GROUP, L, S, qk_scale, scale,
                  HEAD_E: tl.constexpr, HEAD_EV: tl.constexpr, BLOCK_E: tl.constexpr,
                  BLOCK_EV: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr, MASK_KIND: tl.constexpr, EVEN_M: tl.constexpr,
                  EVEN_N: tl.constexpr, PRECISION: tl.constexpr):
    """One (key block, batch * key head) program: dK and dV summed over the GROUP query heads
    that read this key head (no atomics: each key block has one writer)."""
    pid_n = tl.program_id(0)
    bhk = tl.program_id(1)
    Hk = H // GROUP
    b = bhk // Hk
    hk = bhk % Hk
    EVEN_E: tl.constexpr = HEAD_E == BLOCK_E
    EVEN_EV: tl.constexpr = HEAD_EV == BLOCK_EV
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_e = tl.arange(0, BLOCK_E)
    offs_ev = tl.arange(0, BLOCK_EV)
    k = _load(K + b * skb + hk * skh + cols[:, None] * skn + offs_e[None, :], cols < S,
              offs_e < HEAD_E, not EVEN_N, not EVEN_E, 0.0)
    v = _load(V + b * svb + hk * svh + cols[:, None] * svn + offs_ev[None, :], cols < S,
              offs_ev < HEAD_EV, not EVEN_N, not EVEN_EV, 0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_E], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_EV], tl.float32)
    # causal: queries before this block's first key see none of it; the query blocks that
    # straddle the diagonal take the causal compare, the ones after it do not
    lo = 0
    mid = 0
    if CAUSAL:
        lo = (pid_n * BLOCK_N) // BLOCK_M * BLOCK_M
        mid = tl.minimum(tl.cdiv((pid_n + 1) * BLOCK_N, BLOCK_M) * BLOCK_M, L)
    for g in range(0, GROUP):
        h = hk * GROUP + g
        q_ptrs = Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_e[None, :]
        do_ptrs = dOut + b * sdb + h * sdh + offs_m[:, None] * sdm + offs_ev[None, :]
        mask_cols = Mask + b * smb + h * smh + cols[:, None] * smn
        lse_ptr = Lse + (b * H + h) * L
        delta_ptr = Delta + (b * H + h) * L
        if CAUSAL:
            dk, dv = _dkdv_blocks(dk, dv, k, v, q_ptrs, do_ptrs, mask_cols, lse_ptr, delta_ptr,
                                  offs_m, cols, offs_e, offs_ev, sqm, sdm, smm, lo, mid, L, S,
                                  qk_scale, HEAD_E, HEAD_EV, BLOCK_M, MASK_KIND, True, EVEN_M,
                                  EVEN_N, EVEN_E, EVEN_EV, PRECISION)
        dk, dv = _dkdv_blocks(dk, dv, k, v, q_ptrs, do_ptrs, mask_cols, lse_ptr, delta_ptr,
                              offs_m, cols, offs_e, offs_ev, sqm, sdm, smm, mid, L, L, S,
                              qk_scale, HEAD_E, HEAD_EV, BLOCK_M, MASK_KIND, False, EVEN_M,
                              EVEN_N, EVEN_E, EVEN_EV, PRECISION)
    dk = dk * scale
    dk_ptrs = dK + b * sdkb + hk * sdkh + cols[:, None] * sdkn + offs_e[None, :]
    dv_ptrs = dV + b * sdvb + hk * sdvh + cols[:, None] * sdvn + offs_ev[None, :]
    tl.store(dk_ptrs, dk.to(dK.dtype.element_ty),
             mask=(cols < S)[:, None] & (offs_e < HEAD_E)[None, :])
    tl.store(dv_ptrs, dv.to(dV.dtype.element_ty),
             mask=(cols < S)[:, None] & (offs_ev < HEAD_EV)[None, :])


@jit
def _dq_blocks(dq, q, do, lse2, delta, k_ptrs, v_ptrs, mask_rows, offs_m, offs_n, offs_e,
               offs_ev, skn, svn, smn, lo, hi, L, S, qk_scale,
               HEAD_E: tl.constexpr, HEAD_EV: tl.constexpr, BLOCK_N: tl.constexpr,
               MASK_KIND: tl.constexpr, DIAG: tl.constexpr, EVEN_M: tl.constexpr,
               EVEN_N: tl.constexpr, EVEN_E: tl.constexpr, EVEN_EV: tl.constexpr,
               PRECISION: tl.constexpr):
    """Fold key blocks [lo, hi) into one query block's dQ (unscaled)."""
    for start in range(lo, hi, BLOCK_N):
        cols = start + offs_n
        kt = _load(k_ptrs + start * skn, offs_e < HEAD_E, cols < S, not EVEN_E, not EVEN_N, 0.0)
        vt = _load(v_ptrs + start * svn, offs_ev < HEAD_EV, cols < S, not EVEN_EV, not EVEN_N,
                   0.0)
        s = _scores(q, kt, offs_m, cols, mask_rows, smn, L, S, qk_scale, MASK_KIND, DIAG,
                    EVEN_M, EVEN_N, PRECISION)
        p = tl.math.exp2(s - lse2[:, None])
        dp = tl.dot(do, vt, input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(kt.dtype), tl.trans(kt), dq, input_precision=PRECISION)
    return dq


@jit
def attn_bwd_dq(Q, K, V, Mask, dOut, Lse, Delta, dQ,
                sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, smb, smh, smm, smn,
                sdb, sdh, sdm, sdqb, sdqh, sdqm,
                H, GROUP, L, S, qk_scale, scale,
                HEAD_E: tl.constexpr, HEAD_EV: tl.constexpr, BLOCK_E: tl.constexpr,
                BLOCK_EV: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                CAUSAL: tl.constexpr, MASK_KIND: tl.constexpr, EVEN_M: tl.constexpr,
                EVEN_N: tl.constexpr, PRECISION: tl.constexpr):
    """One (query block, batch * head) program: dQ = (P * (dP - delta)) K * scale."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    EVEN_E: tl.constexpr = HEAD_E == BLOCK_E
    EVEN_EV: tl.constexpr = HEAD_EV == BLOCK_EV
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_e = tl.arange(0, BLOCK_E)
    offs_ev = tl.arange(0, BLOCK_EV)
    q = _load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_e[None, :], offs_m < L,
              offs_e < HEAD_E, not EVEN_M, not EVEN_E, 0.0)
    do = _load(dOut + b * sdb + h * sdh + offs_m[:, None] * sdm + offs_ev[None, :], offs_m < L,
               offs_ev < HEAD_EV, not EVEN_M, not EVEN_EV, 0.0)
    if EVEN_M:
        lse = tl.load(Lse + bh * L + offs_m)
        delta = tl.load(Delta + bh * L + offs_m)
    else:
        lse = tl.load(Lse + bh * L + offs_m, mask=offs_m < L, other=float("inf"))
        delta = tl.load(Delta + bh * L + offs_m, mask=offs_m < L, other=0.0)
    lse2 = lse * 1.4426950408889634
    k_ptrs = K + b * skb + hk * skh + offs_e[:, None] + offs_n[None, :] * skn
    v_ptrs = V + b * svb + hk * svh + offs_ev[:, None] + offs_n[None, :] * svn
    mask_rows = Mask + b * smb + h * smh + offs_m[:, None] * smm
    dq = tl.zeros([BLOCK_M, BLOCK_E], tl.float32)
    if CAUSAL:
        below = tl.minimum(pid_m * BLOCK_M, S)
        dq = _dq_blocks(dq, q, do, lse2, delta, k_ptrs, v_ptrs, mask_rows, offs_m, offs_n,
                        offs_e, offs_ev, skn, svn, smn, 0, below, L, S, qk_scale, HEAD_E,
                        HEAD_EV, BLOCK_N, MASK_KIND, False, EVEN_M, EVEN_N, EVEN_E, EVEN_EV,
                        PRECISION)
        dq = _dq_blocks(dq, q, do, lse2, delta, k_ptrs, v_ptrs, mask_rows, offs_m, offs_n,
                        offs_e, offs_ev, skn, svn, smn, below,
                        tl.minimum((pid_m + 1) * BLOCK_M, S), L, S, qk_scale, HEAD_E, HEAD_EV,
                        BLOCK_N, MASK_KIND, True, EVEN_M, EVEN_N, EVEN_E, EVEN_EV, PRECISION)
    else:
        dq = _dq_blocks(dq, q, do, lse2, delta, k_ptrs, v_ptrs, mask_rows, offs_m, offs_n,
                        offs_e, offs_ev, skn, svn, smn, 0, S, L, S, qk_scale, HEAD_E, HEAD_EV,
                        BLOCK_N, MASK_KIND, False, EVEN_M, EVEN_N, EVEN_E, EVEN_EV, PRECISION)
    dq = dq * scale
    dq_ptrs = dQ + b * sdqb + h * sdqh + offs_m[:, None] * sdqm + offs_e[None, :]
    tl.store(dq_ptrs, dq.to(dQ.dtype.element_ty),
             mask=(offs_m < L)[:, None] & (offs_e < HEAD_E)[None, :])
