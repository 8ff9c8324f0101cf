"""ember's Triton optimizer steps: Adam / AdamW and SGD over many parameters in one launch
(wrappers: ``optim.py``).

Imported on the first step, never by ``import ember`` (this module imports Triton).

A launch updates every parameter of one list: ``table`` is an int64 array holding, per
parameter ``k``, a row of ``COLS`` entries, its element count then the addresses of its
arrays (param, grad, then the state: Adam's exp_avg, exp_avg_sq and max_exp_avg_sq; SGD's
momentum buffer), and from ``progs`` on, per program, the parameter it works on and which
``CHUNK``-element chunk of it (``CHUNK = BLOCK * ITERS``). The hyperparameters are float64
values in ``hyper`` (a device array), each rounded to the compute type ``ACC`` as the CPU
backend rounds a Python float to the parameter's dtype. Loads widen to ``ACC`` (float32, or
float64 for float64 parameters); stores round once to the parameter's dtype ``DT``.

The arithmetic is optim/adam.py's ``_fused_update`` (and optim/sgd.py's op-by-op step) one
operation at a time, with IEEE division and square root (Triton's ``/`` and ``tl.sqrt`` are
approximate on float32); launched without floating-point contraction, so a float32 Adam step
gives the CPU's bits. SGD's ``add(..., alpha=)`` steps are fused multiply-adds, as the CPU
backend's axpy computes them.
"""

import triton
import triton.language as tl

COLS = tl.constexpr(8)  # n, param, grad, then up to three state arrays, padding


@triton.jit
def _chunk(table, progs, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """This program's parameter row (its int64 entries' address) and first element."""
    pid = tl.program_id(0).to(tl.int64)
    k = tl.load(table + progs + 2 * pid)
    start = tl.load(table + progs + 2 * pid + 1) * (BLOCK * ITERS)
    return table + k * COLS, start


@triton.jit
def _ptr(row, col, DT: tl.constexpr):
    """Column ``col`` of a parameter's row as a pointer to ``DT``, 16-byte aligned (the
    wrapper takes only such arrays)."""
    return tl.multiple_of(tl.load(row + col).to(tl.pointer_type(DT)), 16)


@triton.jit
def _hyper(hyper, i, ACC: tl.constexpr):
    return tl.load(hyper + i).to(ACC)


@triton.jit
def _adam_block(pp, gp, mp, vp, wp, offs, n, decay, wd, one_b1, b2, one_b2, bc2_sqrt, eps,
                step, DT: tl.constexpr, ACC: tl.constexpr, MAXIMIZE: tl.constexpr,
                WD_MODE: tl.constexpr, AMSGRAD: tl.constexpr, MASKED: tl.constexpr):
    if MASKED:
        mask = offs < n
        p = tl.load(pp + offs, mask=mask, other=0.0).to(ACC)
        g = tl.load(gp + offs, mask=mask, other=0.0).to(ACC)
        m = tl.load(mp + offs, mask=mask, other=0.0).to(ACC)
        v = tl.load(vp + offs, mask=mask, other=0.0).to(ACC)
    else:
        p = tl.load(pp + offs).to(ACC)
        g = tl.load(gp + offs).to(ACC)
        m = tl.load(mp + offs).to(ACC)
        v = tl.load(vp + offs).to(ACC)
    if MAXIMIZE:
        g = -g
    if WD_MODE == 1:  # decoupled: p *= 1 - lr * wd
        p = p * decay
    elif WD_MODE == 2:  # L2: g += wd * p
        g = g + wd * p
    m = m + one_b1 * (g - m)  # lerp(m, g, 1 - beta1)
    v = v * b2
    v = v + one_b2 * (g * g)
    if AMSGRAD:
        if MASKED:
            w = tl.load(wp + offs, mask=mask, other=0.0).to(ACC)
        else:
            w = tl.load(wp + offs).to(ACC)
        w = tl.maximum(w, v, propagate_nan=tl.PropagateNan.ALL)
        if MASKED:
            tl.store(wp + offs, w.to(DT), mask=mask)
        else:
            tl.store(wp + offs, w.to(DT))
        root = tl.sqrt_rn(w) if ACC == tl.float32 else tl.sqrt(w)
    else:
        root = tl.sqrt_rn(v) if ACC == tl.float32 else tl.sqrt(v)
    if ACC == tl.float32:
        denom = tl.math.div_rn(root, bc2_sqrt) + eps
        p = p + tl.math.div_rn(m, denom) * step
    else:
        denom = root / bc2_sqrt + eps
        p = p + m / denom * step
    if MASKED:
        tl.store(mp + offs, m.to(DT), mask=mask)
        tl.store(vp + offs, v.to(DT), mask=mask)
        tl.store(pp + offs, p.to(DT), mask=mask)
    else:
        tl.store(mp + offs, m.to(DT))
        tl.store(vp + offs, v.to(DT))
        tl.store(pp + offs, p.to(DT))


@triton.jit
def adam(table, progs, hyper, DT: tl.constexpr, ACC: tl.constexpr, MAXIMIZE: tl.constexpr,
         WD_MODE: tl.constexpr, AMSGRAD: tl.constexpr, BLOCK: tl.constexpr,
         ITERS: tl.constexpr):
    """One Adam step of a chunk of one parameter. ``hyper``: decay (1 - lr wd), wd,
    1 - beta1, beta2, 1 - beta2, sqrt(bias correction 2), eps, -lr / bias correction 1.
    WD_MODE 0: no weight decay, 1: decoupled, 2: L2."""
    row, start = _chunk(table, progs, BLOCK, ITERS)
    n = tl.load(row)
    pp, gp = _ptr(row, 1, DT), _ptr(row, 2, DT)
    mp, vp = _ptr(row, 3, DT), _ptr(row, 4, DT)
    wp = _ptr(row, 5, DT) if AMSGRAD else mp
    decay, wd = _hyper(hyper, 0, ACC), _hyper(hyper, 1, ACC)
    one_b1, b2, one_b2 = _hyper(hyper, 2, ACC), _hyper(hyper, 3, ACC), _hyper(hyper, 4, ACC)
    bc2_sqrt, eps, step = _hyper(hyper, 5, ACC), _hyper(hyper, 6, ACC), _hyper(hyper, 7, ACC)
    for i in range(ITERS):
        offs = start + i * BLOCK + tl.arange(0, BLOCK)
        if start + (i + 1) * BLOCK <= n:
            _adam_block(pp, gp, mp, vp, wp, offs, n, decay, wd, one_b1, b2, one_b2, bc2_sqrt,
                        eps, step, DT, ACC, MAXIMIZE, WD_MODE, AMSGRAD, False)
        elif start + i * BLOCK < n:
            _adam_block(pp, gp, mp, vp, wp, offs, n, decay, wd, one_b1, b2, one_b2, bc2_sqrt,
                        eps, step, DT, ACC, MAXIMIZE, WD_MODE, AMSGRAD, True)


@triton.jit
def _sgd_block(pp, gp, bp, offs, n, wd, mom, one_damp, neg_lr, DT: tl.constexpr,
               ACC: tl.constexpr, MAXIMIZE: tl.constexpr, WD: tl.constexpr, MOMENTUM: tl.constexpr,
               FIRST: tl.constexpr, NESTEROV: tl.constexpr, MASKED: tl.constexpr):
    if MASKED:
        mask = offs < n
        p = tl.load(pp + offs, mask=mask, other=0.0).to(ACC)
        d = tl.load(gp + offs, mask=mask, other=0.0).to(ACC)
    else:
        p = tl.load(pp + offs).to(ACC)
        d = tl.load(gp + offs).to(ACC)
    if MAXIMIZE:
        d = -d
    if WD:
        d = tl.fma(wd, p, d)  # d.add(p, alpha=wd)
    if MOMENTUM:
        if FIRST:  # the buffer starts as the gradient
            b = d
        else:
            if MASKED:
                b = tl.load(bp + offs, mask=mask, other=0.0).to(ACC)
            else:
                b = tl.load(bp + offs).to(ACC)
            b = b * mom  # buf.mul_(momentum).add_(d, alpha=1 - dampening)
            b = tl.fma(one_damp, d, b)
        if MASKED:
            tl.store(bp + offs, b.to(DT), mask=mask)
        else:
            tl.store(bp + offs, b.to(DT))
        if NESTEROV:
            d = tl.fma(mom, b, d)  # d.add(buf, alpha=momentum)
        else:
            d = b
    p = tl.fma(neg_lr, d, p)  # p.add_(d, alpha=-lr)
    if MASKED:
        tl.store(pp + offs, p.to(DT), mask=mask)
    else:
        tl.store(pp + offs, p.to(DT))


@triton.jit
def sgd(table, progs, hyper, DT: tl.constexpr, ACC: tl.constexpr, MAXIMIZE: tl.constexpr,
        WD: tl.constexpr, MOMENTUM: tl.constexpr, FIRST: tl.constexpr,
        NESTEROV: tl.constexpr, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """One SGD step of a chunk of one parameter. ``hyper``: wd, momentum, 1 - dampening,
    -lr. FIRST: the momentum buffer is created this step (it becomes the gradient)."""
    row, start = _chunk(table, progs, BLOCK, ITERS)
    n = tl.load(row)
    pp, gp = _ptr(row, 1, DT), _ptr(row, 2, DT)
    bp = _ptr(row, 3, DT) if MOMENTUM else pp
    wd, mom = _hyper(hyper, 0, ACC), _hyper(hyper, 1, ACC)
    one_damp, neg_lr = _hyper(hyper, 2, ACC), _hyper(hyper, 3, ACC)
    for i in range(ITERS):
        offs = start + i * BLOCK + tl.arange(0, BLOCK)
        if start + (i + 1) * BLOCK <= n:
            _sgd_block(pp, gp, bp, offs, n, wd, mom, one_damp, neg_lr, DT, ACC, MAXIMIZE, WD,
                       MOMENTUM, FIRST, NESTEROV, False)
        elif start + i * BLOCK < n:
            _sgd_block(pp, gp, bp, offs, n, wd, mom, one_damp, neg_lr, DT, ACC, MAXIMIZE, WD,
                       MOMENTUM, FIRST, NESTEROV, True)
