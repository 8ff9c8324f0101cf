"""ember's Triton kernels of the fused recurrent cells (wrappers: ``rnn_cells.py``; the ops
and their workspace layouts: ops/rnn_cells.py).

Imported on the first call of a wrapper, never by ``import ember`` (this module imports
Triton). Each kernel is elementwise over the (B, H) cells of one step: a program owns
``BLOCK`` consecutive cells of the flattened (B, H) index and reads the gate columns
``j + k * H`` of their rows. Gate arrays are (B, G) with a row stride and unit column
stride; state arrays (cx, hx, outputs) are contiguous (B, H). Loads widen to the compute type
``ACC`` (float32, or float64 for float64 data); stores round once to the output's dtype.
"""

import triton
import triton.language as tl

from . import triton_adapter as adapter

libdevice = adapter.libdevice()


@triton.jit
def _cells(n, hidden, BLOCK: tl.constexpr):
    """This program's cells: (flat index, row, column, mask), int64."""
    k = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return k, k // hidden, k % hidden, k < n


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _load(ptr, mask, ACC: tl.constexpr):
    return tl.load(ptr, mask=mask, other=0.0).to(ACC)


@triton.jit
def lstm_fwd(ig_ptr, hg_ptr, cx_ptr, bi_ptr, bh_ptr, hy_ptr, cy_ptr, ws_ptr, n, hidden,
             s_ig, s_hg, HAS_BIAS: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    """hy, cy and the workspace [i, f, g, o] (activated) of one LSTM step."""
    OUT = hy_ptr.dtype.element_ty
    k, row, col, mask = _cells(n, hidden, BLOCK)
    ig = ig_ptr + row * s_ig + col
    hg = hg_ptr + row * s_hg + col
    ws = ws_ptr + row * (4 * hidden) + col
    i = _load(ig, mask, ACC) + _load(hg, mask, ACC)
    f = _load(ig + hidden, mask, ACC) + _load(hg + hidden, mask, ACC)
    g = _load(ig + 2 * hidden, mask, ACC) + _load(hg + 2 * hidden, mask, ACC)
    o = _load(ig + 3 * hidden, mask, ACC) + _load(hg + 3 * hidden, mask, ACC)
    if HAS_BIAS:
        i += _load(bi_ptr + col, mask, ACC) + _load(bh_ptr + col, mask, ACC)
        f += _load(bi_ptr + hidden + col, mask, ACC) + _load(bh_ptr + hidden + col, mask, ACC)
        g += _load(bi_ptr + 2 * hidden + col, mask, ACC) + \
            _load(bh_ptr + 2 * hidden + col, mask, ACC)
        o += _load(bi_ptr + 3 * hidden + col, mask, ACC) + \
            _load(bh_ptr + 3 * hidden + col, mask, ACC)
    i = _sigmoid(i)
    f = _sigmoid(f)
    g = libdevice.tanh(g)
    o = _sigmoid(o)
    # the workspace is rounded to the data's dtype, and so is what the backward reads back;
    # the outputs come from the unrounded gates, as PyTorch computes them
    tl.store(ws, i.to(OUT), mask=mask)
    tl.store(ws + hidden, f.to(OUT), mask=mask)
    tl.store(ws + 2 * hidden, g.to(OUT), mask=mask)
    tl.store(ws + 3 * hidden, o.to(OUT), mask=mask)
    cy = f * _load(cx_ptr + k, mask, ACC) + i * g
    tl.store(cy_ptr + k, cy.to(OUT), mask=mask)
    tl.store(hy_ptr + k, (o * libdevice.tanh(cy)).to(OUT), mask=mask)


@triton.jit
def lstm_bwd(go_ptr, ghy_ptr, gcy_ptr, cx_ptr, cy_ptr, ws_ptr, gates_ptr, gcx_ptr, n, hidden,
             HAS_GO: tl.constexpr, HAS_GH: tl.constexpr, HAS_GC: tl.constexpr,
             ACC: tl.constexpr, BLOCK: tl.constexpr):
    """The gates' gradient (B, 4H) and cx's from hy's gradient (``go`` + ``ghy``, where
    given) and cy's. ``gcx`` may be ``gcy`` itself (each cell is read before it is written):
    the layer's backward carries c's gradient in one buffer."""
    OUT = gates_ptr.dtype.element_ty
    k, row, col, mask = _cells(n, hidden, BLOCK)
    ws = ws_ptr + row * (4 * hidden) + col
    i = _load(ws, mask, ACC)
    f = _load(ws + hidden, mask, ACC)
    g = _load(ws + 2 * hidden, mask, ACC)
    o = _load(ws + 3 * hidden, mask, ACC)
    gc = tl.zeros([BLOCK], ACC)
    go = tl.zeros([BLOCK], ACC)
    if HAS_GC:
        gc = _load(gcy_ptr + k, mask, ACC)
    if HAS_GO or HAS_GH:
        gh = tl.zeros([BLOCK], ACC)
        if HAS_GO:
            gh += _load(go_ptr + k, mask, ACC)
        if HAS_GH:
            gh += _load(ghy_ptr + k, mask, ACC)
        t = libdevice.tanh(_load(cy_ptr + k, mask, ACC))
        go = gh * t * o * (1.0 - o)
        gc += gh * o * (1.0 - t * t)
    out = gates_ptr + row * (4 * hidden) + col
    tl.store(out, (gc * g * i * (1.0 - i)).to(OUT), mask=mask)
    tl.store(out + hidden, (gc * _load(cx_ptr + k, mask, ACC) * f * (1.0 - f)).to(OUT),
             mask=mask)
    tl.store(out + 2 * hidden, (gc * i * (1.0 - g * g)).to(OUT), mask=mask)
    tl.store(out + 3 * hidden, go.to(OUT), mask=mask)
    tl.store(gcx_ptr + k, (gc * f).to(OUT), mask=mask)


@triton.jit
def gru_fwd(ig_ptr, hg_ptr, hx_ptr, bi_ptr, bh_ptr, hy_ptr, ws_ptr, n, hidden, s_ig, s_hg,
            HAS_BIAS: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    """hy and the workspace [r, z, n, hx, hn] of one GRU step."""
    OUT = hy_ptr.dtype.element_ty
    k, row, col, mask = _cells(n, hidden, BLOCK)
    ig = ig_ptr + row * s_ig + col
    hg = hg_ptr + row * s_hg + col
    xr = _load(ig, mask, ACC)
    xz = _load(ig + hidden, mask, ACC)
    xn = _load(ig + 2 * hidden, mask, ACC)
    hr = _load(hg, mask, ACC)
    hz = _load(hg + hidden, mask, ACC)
    hn = _load(hg + 2 * hidden, mask, ACC)
    if HAS_BIAS:
        xr += _load(bi_ptr + col, mask, ACC)
        xz += _load(bi_ptr + hidden + col, mask, ACC)
        xn += _load(bi_ptr + 2 * hidden + col, mask, ACC)
        hr += _load(bh_ptr + col, mask, ACC)
        hz += _load(bh_ptr + hidden + col, mask, ACC)
        hn += _load(bh_ptr + 2 * hidden + col, mask, ACC)
    r = _sigmoid(xr + hr)
    z = _sigmoid(xz + hz)
    nn = libdevice.tanh(xn + r * hn)
    prev = _load(hx_ptr + k, mask, ACC)
    ws = ws_ptr + row * (5 * hidden) + col
    tl.store(ws, r.to(OUT), mask=mask)
    tl.store(ws + hidden, z.to(OUT), mask=mask)
    tl.store(ws + 2 * hidden, nn.to(OUT), mask=mask)
    tl.store(ws + 3 * hidden, prev.to(OUT), mask=mask)
    tl.store(ws + 4 * hidden, hn.to(OUT), mask=mask)
    tl.store(hy_ptr + k, (nn + z * (prev - nn)).to(OUT), mask=mask)


@triton.jit
def gru_bwd(ghy_ptr, ws_ptr, gi_ptr, gh_ptr, ghx_ptr, n, hidden, ACC: tl.constexpr,
            BLOCK: tl.constexpr):
    """The input gates', hidden gates' and hx's gradients from hy's."""
    OUT = gi_ptr.dtype.element_ty
    k, row, col, mask = _cells(n, hidden, BLOCK)
    ws = ws_ptr + row * (5 * hidden) + col
    r = _load(ws, mask, ACC)
    z = _load(ws + hidden, mask, ACC)
    nn = _load(ws + 2 * hidden, mask, ACC)
    prev = _load(ws + 3 * hidden, mask, ACC)
    hn = _load(ws + 4 * hidden, mask, ACC)
    g = _load(ghy_ptr + k, mask, ACC)
    gn = g * (1.0 - z) * (1.0 - nn * nn)
    gr = gn * hn * r * (1.0 - r)
    gz = g * (prev - nn) * z * (1.0 - z)
    gi = gi_ptr + row * (3 * hidden) + col
    gh = gh_ptr + row * (3 * hidden) + col
    tl.store(gi, gr.to(OUT), mask=mask)
    tl.store(gi + hidden, gz.to(OUT), mask=mask)
    tl.store(gi + 2 * hidden, gn.to(OUT), mask=mask)
    tl.store(gh, gr.to(OUT), mask=mask)
    tl.store(gh + hidden, gz.to(OUT), mask=mask)
    tl.store(gh + 2 * hidden, (gn * r).to(OUT), mask=mask)
    tl.store(ghx_ptr + k, (g * z).to(OUT), mask=mask)
