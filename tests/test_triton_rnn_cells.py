"""ember's Triton kernels of the fused LSTM / GRU cells (backends/cuda/rnn_cell_kernels.py,
wrappers rnn_cells.py) through Triton's interpreter on CPU, against PyTorch's cell formulas on
CPU (tests/test_rnn_cells.py's references): first the wrappers on numpy arrays (float32,
float64, bfloat16, float16; with and without biases; gates read through a row stride; cells
split over many programs), then nn.LSTM / nn.GRU / the cells through ember's ops with the CPU
backend's "kernel" overrides swapped for these kernels (restored after), values and
gradients against torch.nn. Last, the kernels compile for sm_90 (no GPU needed).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_rnn_cells import data, inputs, ref_gru, ref_lstm
from triton_util import INTERPRETED, compile_for_sm90, cpu_overrides
from ember.backends import cpu
from ember.backends.cuda import rnn_cells
from ember.ops.registry import OPS

torch = pytest.importorskip("torch")

pytestmark = INTERPRETED

FLOATS = ["float32", "float64", "bfloat16", "float16"]
TOL = {"float64": 1e-12, "float32": 3e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


@pytest.fixture(params=["one_block", "many_blocks"])
def blocks(request, monkeypatch):
    """Cells in one program (the default block) or split over many (16 cells a block)."""
    if request.param == "many_blocks":
        monkeypatch.setattr(rnn_cells, "BLOCK", 16)
    return request.param


def np_of(arrays, dtype):
    dt = getattr(ember, dtype).np
    return [None if a is None else a.astype(dt) for a in arrays]


def close(got, want, dtype, scale=1.0):
    """A numpy result in ``dtype`` against a float64 torch tensor."""
    assert got.dtype == getattr(ember, dtype).np
    assert got.shape == tuple(want.shape)
    t = TOL[dtype] * scale
    np.testing.assert_allclose(got.astype(np.float64), want.detach().numpy(), rtol=t, atol=t)


def strided(a):
    """``a`` (2-D) as a column slice of a wider array: rows a stride apart, not contiguous."""
    wide = np.zeros((a.shape[0], a.shape[1] + 3), a.dtype)
    wide[:, 1:-2] = a
    return wide[:, 1:-2]


# ---------------------------------------------------------------------- wrappers
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bias", [True, False])
def test_lstm_wrappers_match_torch(dtype, bias, blocks):
    rows, hidden = 3, 7
    arrays = inputs("lstm", rows, hidden, dtype, bias)
    ig, hg, cx, bi, bh = np_of(arrays, dtype)
    before = rnn_cells.STATS["launches"]
    hy, cy, ws = rnn_cells.OVERRIDES["_thnn_fused_lstm_cell"](strided(ig), hg, cx, bi, bh)
    t = [None if a is None else torch.tensor(a) for a in arrays]
    rhy, rcy, rws = ref_lstm(*t)
    close(hy, rhy, dtype)
    close(cy, rcy, dtype)
    close(ws, rws, dtype)
    gh, gc = np_of([data((rows, hidden), dtype, 20), data((rows, hidden), dtype, 21)], dtype)
    back = rnn_cells.OVERRIDES["_thnn_fused_lstm_cell_backward_impl"]
    for g_hy, g_cy in ((gh, gc), (gh, None), (None, gc)):
        gates, gcx, gb = back(g_hy, g_cy, cx, cy, ws, True)
        # torch's formulas from the saved workspace (as its backward reads it)
        w = torch.tensor(ws.astype(np.float64))
        i, f, g, o = w.chunk(4, 1)
        c = torch.tensor(cy.astype(np.float64))
        th = c.tanh()
        ghy = torch.zeros_like(c) if g_hy is None else torch.tensor(g_hy.astype(np.float64))
        gcy = torch.zeros_like(c) if g_cy is None else torch.tensor(g_cy.astype(np.float64))
        gct = ghy * o * (1 - th * th) + gcy
        want = torch.cat([gct * g * i * (1 - i), gct * torch.tensor(cx.astype(np.float64)) *
                          f * (1 - f), gct * i * (1 - g * g), ghy * th * o * (1 - o)], 1)
        close(gates, want, dtype)
        close(gcx, gct * f, dtype)
        close(gb, want.sum(0), dtype, scale=rows)
    assert rnn_cells.STATS["launches"] - before == 4
    assert back(None, None, cx, cy, ws, True) is None  # the impl's all-None answer


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bias", [True, False])
def test_gru_wrappers_match_torch(dtype, bias, blocks):
    rows, hidden = 4, 5
    arrays = inputs("gru", rows, hidden, dtype, bias, seed=3)
    ig, hg, hx, bi, bh = np_of(arrays, dtype)
    before = rnn_cells.STATS["launches"]
    hy, ws = rnn_cells.OVERRIDES["_thnn_fused_gru_cell"](ig, strided(hg), hx, bi, bh)
    t = [None if a is None else torch.tensor(a) for a in arrays]
    rhy, rws = ref_gru(*t)
    close(hy, rhy, dtype)
    close(ws, rws, dtype)
    g = np_of([data((rows, hidden), dtype, 30)], dtype)[0]
    gi, gh, ghx, gib, ghb = rnn_cells.OVERRIDES["_thnn_fused_gru_cell_backward"](g, ws, True)
    w = torch.tensor(ws.astype(np.float64))
    r, z, n, prev, hn = w.chunk(5, 1)
    gt = torch.tensor(g.astype(np.float64))
    gn = gt * (1 - z) * (1 - n * n)
    gr = gn * hn * r * (1 - r)
    gz = gt * (prev - n) * z * (1 - z)
    close(gi, torch.cat([gr, gz, gn], 1), dtype)
    close(gh, torch.cat([gr, gz, gn * r], 1), dtype)
    close(ghx, gt * z, dtype)
    close(gib, torch.cat([gr, gz, gn], 1).sum(0), dtype, scale=rows)
    close(ghb, torch.cat([gr, gz, gn * r], 1).sum(0), dtype, scale=rows)
    assert rnn_cells.STATS["launches"] - before == 2


def test_wrappers_leave_bad_operands_to_the_impl():
    """None (the generic impl then raises PyTorch's error) for what the kernels do not take."""
    f = np.zeros((2, 8), np.float32)
    c = np.zeros((2, 2), np.float32)
    lstm = rnn_cells.OVERRIDES["_thnn_fused_lstm_cell"]
    assert lstm(f, np.zeros((2, 4), np.float32), c) is None  # shapes differ
    assert lstm(f, f, np.zeros((2, 3), np.float32)) is None  # cx's size
    assert lstm(f.astype(np.int64), f.astype(np.int64), c.astype(np.int64)) is None
    assert lstm(f, f.astype(np.float64), c) is None  # mixed dtypes
    assert lstm(f, f, c, np.zeros(8, np.float32), None) is None  # one bias only
    assert lstm(f[:0], f[:0], c[:0]) is None  # empty
    gru = rnn_cells.OVERRIDES["_thnn_fused_gru_cell"]
    assert gru(np.zeros((2, 7), np.float32), np.zeros((2, 7), np.float32), c) is None


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_layer_wrappers_match_the_impl(dtype, reverse, blocks):
    """The layer's forward and backward (every combination of the outputs' gradients) against
    the generic impl on numpy, which tests/test_rnn_cells.py compares with torch."""
    from ember.ops.rnn_layers import _lstm_layer, _lstm_layer_backward
    t_len, rows, hidden = 4, 3, 5
    ig, hx, cx, w = np_of([data((t_len, rows, 4 * hidden), dtype, 70),
                           data((rows, hidden), dtype, 71), data((rows, hidden), dtype, 72),
                           data((4 * hidden, hidden), dtype, 73) * 0.25], dtype)
    before = rnn_cells.STATS["launches"]
    got = rnn_cells.OVERRIDES["_lstm_layer"](ig, hx, cx, w, reverse)
    want = _lstm_layer.impl(np, ig, hx, cx, w, reverse)
    # bfloat16: the kernels round each step's product to bfloat16, the impl keeps float32
    scale = 1 if dtype != "bfloat16" else 2
    for a, b in zip(got, want):
        close(a, torch.tensor(b.astype(np.float64)), dtype, scale)
    go, gh, gc = np_of([data((t_len, rows, hidden), dtype, 74), data((rows, hidden), dtype, 75),
                        data((rows, hidden), dtype, 76)], dtype)
    back = rnn_cells.OVERRIDES["_lstm_layer_backward"]
    for grads in ((go, gh, gc), (go, None, None), (None, gh, None), (None, None, gc)):
        res = back(*grads, hx, cx, w, got[0], got[3], got[4], reverse)
        ref = _lstm_layer_backward.impl(np, *grads, hx, cx, w, got[0], got[3], got[4],
                                        reverse)
        for a, b in zip(res, ref):
            close(a, torch.tensor(b.astype(np.float64)), dtype, scale * 4)
    assert rnn_cells.STATS["launches"] - before == 5 * t_len
    assert back(None, None, None, hx, cx, w, got[0], got[3], got[4], reverse) is None
    assert rnn_cells.OVERRIDES["_lstm_layer"](ig, hx, cx[:, :2], w) is None  # bad shapes


# ---------------------------------------------------------------------- through ember's ops
@pytest.fixture
def cpu_cells():
    """The CPU backend's "kernel" overrides of the cell ops set to the Triton kernels (under
    the interpreter, on numpy arrays); put back after. Yields the launch count so far."""
    with cpu_overrides(rnn_cells.OVERRIDES, rnn_cells.STATS) as launched:
        yield launched


def _modules(mode, dtype, **kw):
    torch.manual_seed(0)
    t = getattr(torch.nn, mode)(3, 4, **kw).to(getattr(torch, dtype))
    e = getattr(ember.nn, mode)(3, 4, **kw).to(getattr(ember, dtype))
    e.load_state_dict({k: ember.tensor(v.detach().double().numpy()).to(getattr(ember, dtype))
                       for k, v in t.state_dict().items()})
    return e, t


@pytest.mark.parametrize("mode,kw", [("LSTM", {}), ("LSTM", {"bidirectional": True}),
                                     ("LSTM", {"proj_size": 2, "num_layers": 2}),
                                     ("GRU", {}), ("GRU", {"bias": False, "num_layers": 2})])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sequence_layers_through_the_kernels(cpu_cells, mode, kw, dtype):
    e, t = _modules(mode, dtype, **kw)
    x = data((5, 2, 3), dtype, 40)
    ex = ember.tensor(x).to(getattr(ember, dtype)).requires_grad_()
    tx = torch.tensor(x).to(getattr(torch, dtype)).requires_grad_()
    eo, eh = e(ex)
    to, th = t(tx)
    (eo.sum() + (eh[0].sum() + eh[1].sum() if mode == "LSTM" else eh.sum())).backward()
    (to.sum() + (th[0].sum() + th[1].sum() if mode == "LSTM" else th.sum())).backward()
    tol = 1e-10 if dtype == "float64" else 2e-5
    pairs = [(eo, to), (ex.grad, tx.grad)]
    pairs += [(p.grad, q.grad) for (_, p), (_, q) in zip(e.named_parameters(),
                                                          t.named_parameters())]
    for a, b in pairs:
        np.testing.assert_allclose(a.detach().double().numpy(), b.detach().double().numpy(),
                                   rtol=tol, atol=tol)
    assert cpu_cells() >= 2 * 5  # a forward and a backward launch per step at least


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell"])
def test_cells_through_the_kernels(cpu_cells, cell):
    e, t = _modules(cell, "float32")
    x = data((2, 3), "float32", 41)
    ex, tx = ember.tensor(x).float().requires_grad_(), torch.tensor(x).float().requires_grad_()
    eo, to = e(ex), t(tx)
    if cell == "LSTMCell":
        eo, to = eo[0] * 2 + eo[1], to[0] * 2 + to[1]
    eo.sum().backward()
    to.sum().backward()
    for a, b in [(eo, to), (ex.grad, tx.grad), (e.weight_hh.grad, t.weight_hh.grad),
                 (e.bias_ih.grad, t.bias_ih.grad)]:
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-5,
                                   atol=2e-5)
    assert cpu_cells() == 2


def test_cpu_backend_overrides_restored():
    """The fixture above leaves the CPU backend as it was."""
    for name in rnn_cells.OVERRIDES:
        assert OPS[name]._kernel_overrides.get(cpu.BACKEND) is not rnn_cells.OVERRIDES[name]


# ---------------------------------------------------------------------- compiled for the GPU
COMPILE = r"""
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ember.backends.cuda import rnn_cell_kernels as K

def build(fn, dt, **consts):
    consts["ACC"] = tl.float64 if dt == "fp64" else tl.float32
    consts["BLOCK"] = 256 if dt == "fp64" else 512
    sig = {a: "constexpr" if a in consts else ("*" + dt if a.endswith("_ptr") else "i32")
           for a in fn.arg_names}
    triton.compile(ASTSource(fn, signature=sig, constexprs=consts),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})

for dt in ("fp32", "fp64", "bf16", "fp16"):
    for flag in (True, False):
        build(K.lstm_fwd, dt, HAS_BIAS=flag)
        build(K.lstm_bwd, dt, HAS_GO=flag, HAS_GH=True, HAS_GC=flag)
        build(K.lstm_bwd, dt, HAS_GO=not flag, HAS_GH=flag, HAS_GC=True)
        build(K.gru_fwd, dt, HAS_BIAS=flag)
    build(K.gru_bwd, dt)
print("ok")
"""


def test_kernels_compile_for_sm90():
    """Every kernel (its variants) through Triton's compiler to a Hopper cubin."""
    compile_for_sm90(COMPILE)
