"""ember's Triton kernels of the negative log likelihood (wrappers: ``losses.py``).

Imported on the first call of a wrapper, never by ``import ember`` (this module imports
Triton). Rows are the loss's positions: ``x`` is [m, c] log-probabilities with a row stride
``sx`` (its classes contiguous), ``t`` the m class targets (int64), ``w`` the optional c class
weights. A position whose target is ``ignore`` counts neither its loss nor its weight.
Sums run in ``ACC`` (float32, or float64 for float64 data) in a fixed order: ``P`` programs
each take every ``P``-th block of rows and write their partial sums, and one program adds
those up, so the results are the same from run to run.
"""

import triton
import triton.language as tl


@triton.jit
def _weights(t_ptr, w_ptr, r, m, ignore, HAS_W: tl.constexpr, ACC: tl.constexpr):
    """(class, whether counted, weight) of rows ``r`` (class 0 and weight 0 where out of range
    or ignored)."""
    live = r < m
    t = tl.load(t_ptr + r, mask=live, other=0)
    valid = live & (t != ignore)
    cls = tl.where(valid, t, 0)
    if HAS_W:
        w = tl.load(w_ptr + cls, mask=valid, other=0.0).to(ACC)
    else:
        w = valid.to(ACC)
    return cls, valid, w


@triton.jit
def nll_partials(x_ptr, t_ptr, w_ptr, loss_ptr, part_ptr, m, sx, ignore, progs,
                 HAS_X: tl.constexpr, HAS_W: tl.constexpr, EACH: tl.constexpr,
                 ACC: tl.constexpr, BLOCK: tl.constexpr):
    """Program ``pid``'s sums of the losses -w[t] x[r, t] and weights w[t] of its blocks of
    rows, into ``part[0, pid]`` and ``part[1, pid]`` (without ``HAS_X`` the weights alone);
    with ``EACH`` every row's loss into ``loss``."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], ACC)
    tw = tl.zeros([BLOCK], ACC)
    for start in range(pid * BLOCK, m, progs * BLOCK):
        r = start + offs
        cls, valid, w = _weights(t_ptr, w_ptr, r, m, ignore, HAS_W, ACC)
        if HAS_X:
            x = tl.load(x_ptr + r.to(tl.int64) * sx + cls, mask=valid, other=0.0).to(ACC)
            loss = tl.where(valid, -w * x, 0.0)
        else:
            loss = tl.zeros([BLOCK], ACC)
        if EACH:
            tl.store(loss_ptr + r, loss.to(loss_ptr.dtype.element_ty), mask=r < m)
        s += loss
        tw += w
    tl.store(part_ptr + pid, tl.sum(s, 0))
    tl.store(part_ptr + progs + pid, tl.sum(tw, 0))


@triton.jit
def nll_total(part_ptr, sum_ptr, total_ptr, progs, MEAN: tl.constexpr, BLOCK_P: tl.constexpr):
    """The partials added up: the loss (divided by the total weight where ``MEAN``) into
    ``sum``, the total weight into ``total``, each rounded once to its dtype."""
    p = tl.arange(0, BLOCK_P)
    live = p < progs
    s = tl.sum(tl.load(part_ptr + p, mask=live, other=0.0), 0)
    tw = tl.sum(tl.load(part_ptr + progs + p, mask=live, other=0.0), 0)
    if MEAN:
        s = s / tw
    tl.store(sum_ptr, s.to(sum_ptr.dtype.element_ty))
    tl.store(total_ptr, tw.to(total_ptr.dtype.element_ty))


@triton.jit
def nll_grad(g_ptr, t_ptr, w_ptr, total_ptr, out_ptr, m, c, ignore, PER_ROW: tl.constexpr,
             MEAN: tl.constexpr, HAS_W: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    """The input gradient's one value per row, into a zeroed [m, c] ``out``: -w[t] times the
    row's grad (``PER_ROW``) or the one grad, divided by the total weight where ``MEAN``,
    rounded to ``out``'s dtype at [r, t[r]]; an ignored row writes +0 at class 0."""
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = r < m
    cls, valid, w = _weights(t_ptr, w_ptr, r, m, ignore, HAS_W, ACC)
    if PER_ROW:
        g = tl.load(g_ptr + r, mask=live, other=0.0).to(ACC)
    else:
        g = tl.load(g_ptr).to(ACC)
    v = -w * g
    if MEAN:
        v = v / tl.load(total_ptr).to(ACC)
    v = tl.where(valid, v, 0.0)
    tl.store(out_ptr + r.to(tl.int64) * c + cls, v.to(out_ptr.dtype.element_ty), mask=live)
