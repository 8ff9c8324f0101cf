"""The fused LSTM / GRU cells on the GPU (backends/cuda/rnn_cells.py) against PyTorch's CUDA
results (the GPU tier: ``-m cuda``): the ops against ``torch.ops.aten._thnn_fused_*`` (outputs,
workspaces, backward ops) in float32, float16, bfloat16 and float64, and nn.LSTM / nn.GRU /
the cells against torch.nn on CUDA (cuDNN): outputs, h_n, c_n and the gradients of the input,
the states and every weight, over layers, directions, batch_first and LSTM projections. Each
test also checks that the fused kernels ran.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")

pytestmark = GPU_TIER

FLOATS = ["float32", "float16", "bfloat16", "float64"]
TOL = {"float32": 2e-5, "float64": 1e-10, "float16": 4e-3, "bfloat16": 3e-2}
aten = torch.ops.aten


@pytest.fixture(autouse=True)
def ieee_torch(monkeypatch):
    """Both libraries' RNNs and products in IEEE float32 (both use TF32 by default, following
    cudnn.allow_tf32: ember's whole-layer products as PyTorch's cuDNN RNNs)."""
    monkeypatch.setattr(ember.backends.cudnn, "allow_tf32", False)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    # (torch's test utilities, which other files import, freeze cuDNN's global flags: the
    # context manager is what they leave open)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        yield
    torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.fixture
def launched():
    """How many cell kernels ran since the test began."""
    from ember.backends.cuda import rnn_cells
    before = rnn_cells.STATS["launches"]
    return lambda: rnn_cells.STATS["launches"] - before


def pair(shape, dtype, seed=0, grad=False, scale=2.0):
    """The same values (exact in ``dtype``) as an ember and a torch tensor on the GPU."""
    a = np.random.default_rng(seed).standard_normal(shape) * scale
    t = torch.tensor(a).to(getattr(torch, dtype))
    e = ember.tensor(t.double().numpy()).to(getattr(ember, dtype)).cuda()
    t = t.cuda()
    if grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def same(e, t, dtype, scale=1.0):
    assert e.is_cuda, f"result is on {e.device}"
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    tol = TOL[dtype] * scale
    np.testing.assert_allclose(e.detach().double().cpu().numpy(),
                               t.detach().double().cpu().numpy(), rtol=tol, atol=tol)


# ---------------------------------------------------------------------- the ops
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rows,hidden", [(3, 5), (64, 512), (7, 1000)])
def test_lstm_cell_op_matches_torch(launched, dtype, bias, rows, hidden):
    from ember.ops.rnn_cells import (_thnn_fused_lstm_cell as cell,
                                     _thnn_fused_lstm_cell_backward_impl as back)
    g = 4 * hidden
    ins = [pair((rows, g), dtype, 0), pair((rows, g), dtype, 1), pair((rows, hidden), dtype, 2)]
    if bias:
        ins += [pair((g,), dtype, 3), pair((g,), dtype, 4)]
    e_out = cell(*[p[0] for p in ins])
    t_out = aten._thnn_fused_lstm_cell(*[p[1] for p in ins])
    for a, b in zip(e_out, t_out):
        same(a, b, dtype)
    gh, gc = pair((rows, hidden), dtype, 5), pair((rows, hidden), dtype, 6)
    for use_h, use_c in ((True, True), (True, False), (False, True)):
        e_args = [gh[0] if use_h else None, gc[0] if use_c else None, ins[2][0], e_out[1],
                  e_out[2], bias]
        t_args = [gh[1] if use_h else None, gc[1] if use_c else None, ins[2][1], t_out[1],
                  t_out[2], bias]
        e_b, t_b = back(*e_args), aten._thnn_fused_lstm_cell_backward_impl(*t_args)
        for a, b in zip(e_b, t_b):
            if a is None or b is None:
                assert a is None and b is None
                continue
            same(a, b, dtype, scale=rows if a.ndim == 1 else 1)
    assert launched() == 4


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rows,hidden", [(3, 5), (64, 512)])
def test_gru_cell_op_matches_torch(launched, dtype, bias, rows, hidden):
    from ember.ops.rnn_cells import (_thnn_fused_gru_cell as cell,
                                     _thnn_fused_gru_cell_backward as back)
    g = 3 * hidden
    ins = [pair((rows, g), dtype, 0), pair((rows, g), dtype, 1), pair((rows, hidden), dtype, 2)]
    if bias:
        ins += [pair((g,), dtype, 3), pair((g,), dtype, 4)]
    e_out = cell(*[p[0] for p in ins])
    t_out = aten._thnn_fused_gru_cell(*[p[1] for p in ins])
    for a, b in zip(e_out, t_out):
        same(a, b, dtype)
    gh = pair((rows, hidden), dtype, 5)
    e_b = back(gh[0], e_out[1], bias)
    t_b = aten._thnn_fused_gru_cell_backward(gh[1], t_out[1], bias)
    for a, b in zip(e_b, t_b):
        if a is None or b is None:
            assert a is None and b is None and not bias
            continue
        same(a, b, dtype, scale=rows if a.ndim == 1 else 1)
    assert launched() == 2


def test_cell_op_errors_match_torch():
    from ember.ops.rnn_cells import _thnn_fused_lstm_cell as cell
    e1, t1 = pair((2, 8), "float32")
    e2, t2 = pair((2, 4), "float32", 1)
    e3, t3 = pair((2, 2), "float32", 2)
    with pytest.raises(RuntimeError) as want:
        aten._thnn_fused_lstm_cell(t1, t2, t3)
    with pytest.raises(RuntimeError) as got:
        cell(e1, e2, e3)
    assert str(got.value) == str(want.value).split("\n")[0]


# ---------------------------------------------------------------------- the modules
def _modules(mode, dtype, size=(6, 8), **kw):
    torch.manual_seed(0)
    t = getattr(torch.nn, mode)(*size, **kw).to(getattr(torch, dtype)).cuda()
    e = getattr(ember.nn, mode)(*size, **kw).to(getattr(ember, dtype))
    e.load_state_dict({k: ember.tensor(v.detach().double().cpu().numpy())
                       .to(getattr(ember, dtype)) for k, v in t.state_dict().items()})
    return e.cuda(), t


MODULE_CASES = [("LSTM", {}), ("LSTM", {"num_layers": 2, "bidirectional": True}),
                ("LSTM", {"batch_first": True, "bias": False}),
                ("LSTM", {"proj_size": 3, "num_layers": 2}),
                ("LSTM", {"proj_size": 3, "bidirectional": True, "batch_first": True}),
                ("GRU", {}), ("GRU", {"num_layers": 2, "bidirectional": True}),
                ("GRU", {"batch_first": True, "bias": False})]


@pytest.mark.parametrize("mode,kw", MODULE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("states", [False, True])
def test_sequence_modules_match_torch(launched, mode, kw, dtype, states):
    e, t = _modules(mode, dtype, **kw)
    seq, batch = 7, 5
    shape = (batch, seq, 6) if kw.get("batch_first") else (seq, batch, 6)
    ex, tx = pair(shape, dtype, 10, grad=True)
    dirs = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    out_size = kw.get("proj_size") or 8
    e_args, t_args = [ex], [tx]
    pairs = []
    if states:
        h0 = pair((layers * dirs, batch, out_size), dtype, 11, grad=True)
        pairs.append(h0)
        if mode == "LSTM":
            c0 = pair((layers * dirs, batch, 8), dtype, 12, grad=True)
            pairs.append(c0)
            e_args.append((h0[0], c0[0]))
            t_args.append((h0[1], c0[1]))
        else:
            e_args.append(h0[0])
            t_args.append(h0[1])
    eo, eh = e(*e_args)
    to, th = t(*t_args)
    e_states = list(eh) if mode == "LSTM" else [eh]
    t_states = list(th) if mode == "LSTM" else [th]
    tol = 5 if dtype == "float32" else 1e4  # cuDNN's float64 sums round differently
    same(eo, to, dtype, tol)
    for a, b in zip(e_states, t_states):
        same(a, b, dtype, tol)
    w = pair(tuple(to.shape), dtype, 13)
    (eo * w[0]).sum().add(sum(s.sum() * (k + 2) for k, s in enumerate(e_states))).backward()
    (to * w[1]).sum().add(sum(s.sum() * (k + 2) for k, s in enumerate(t_states))).backward()
    same(ex.grad, tx.grad, dtype, 10 * tol)
    for a, b in pairs:
        same(a.grad, b.grad, dtype, 10 * tol)
    for (name, p), (_, q) in zip(e.named_parameters(), t.named_parameters()):
        same(p.grad, q.grad, dtype, 20 * tol)
    # one forward and one backward cell launch per step, layer and direction (LSTM without
    # projections: the _lstm_layer op's loops; else the fused cell ops)
    assert launched() == 2 * seq * layers * dirs


def test_lstm_layer_op_on_cuda_matches_its_generic_impl():
    """The CUDA loops (prepared launchers) against the generic impl run on the same GPU
    arrays through CuPy, forward and every combination of the outputs' gradients."""
    from ember.ops import rnn_layers
    from ember.backends.cuda import rnn_cells
    from ember.backends.cuda.backend import BACKEND
    xp = BACKEND.xp
    t_len, rows, hidden = 9, 5, 24
    ig, hx, cx = (pair(s, "float32", k)[0]._data for k, s in
                  enumerate([(t_len, rows, 4 * hidden), (rows, hidden), (rows, hidden)]))
    w = pair((4 * hidden, hidden), "float32", 3, scale=0.2)[0]._data
    for reverse in (False, True):
        got = rnn_cells.OVERRIDES["_lstm_layer"](ig, hx, cx, w, reverse)
        want = rnn_layers._lstm_layer.impl(xp, ig, hx, cx, w, reverse)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.get(), b.get(), rtol=1e-5, atol=1e-5)
        go, gh, gc = (pair(s, "float32", 10 + k)[0]._data for k, s in
                      enumerate([(t_len, rows, hidden), (rows, hidden), (rows, hidden)]))
        for grads in ((go, gh, gc), (go, None, None), (None, gh, None), (None, None, gc)):
            res = rnn_cells.OVERRIDES["_lstm_layer_backward"](*grads, hx, cx, w, got[0], got[3],
                                                             got[4], reverse)
            ref = rnn_layers._lstm_layer_backward.impl(xp, *grads, hx, cx, w, got[0], got[3],
                                                       got[4], reverse)
            for a, b in zip(res, ref):
                np.testing.assert_allclose(a.get(), b.get(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cells_match_torch(launched, cell, dtype):
    e, t = _modules(cell, dtype)
    ex, tx = pair((4, 6), dtype, 20, grad=True)
    eo, to = e(ex), t(tx)
    if cell == "LSTMCell":
        eo, to = eo[0] * 2 + eo[1], to[0] * 2 + to[1]
    same(eo, to, dtype, 2)
    eo.sum().backward()
    to.sum().backward()
    same(ex.grad, tx.grad, dtype, 4)
    for (name, p), (_, q) in zip(e.named_parameters(), t.named_parameters()):
        same(p.grad, q.grad, dtype, 8)
    assert launched() == 2


def test_double_backward_on_cuda():
    """create_graph=True runs the cells' backward in ember ops: second derivatives agree with
    torch's."""
    e, t = _modules("LSTM", "float64", size=(3, 4))
    ex, tx = pair((4, 2, 3), "float64", 30, grad=True)
    (ge,) = ember.autograd.grad(e(ex)[0].pow(2).sum(), ex, create_graph=True)
    with torch.backends.cudnn.flags(enabled=False):  # cuDNN's RNN has no double backward
        (gt,) = torch.autograd.grad(t(tx)[0].pow(2).sum(), tx, create_graph=True)
    same(ge, gt, "float64", 1e4)
    ge.pow(2).sum().backward()
    gt.pow(2).sum().backward()
    same(ex.grad, tx.grad, "float64", 1e4)


def test_lstm_layer_follows_cudnn_allow_tf32(monkeypatch):
    """nn.LSTM's recurrent products run in TF32 while ``ember.backends.cudnn.allow_tf32``
    (default True) is set, as PyTorch's cuDNN LSTM: with the flag on both libraries agree
    to TF32's precision and ember's result moves off its IEEE one; with it off, IEEE."""
    seq, batch, hidden = 16, 8, 64
    e, t = _modules("LSTM", "float32", size=(6, hidden))
    ex, tx = pair((seq, batch, 6), "float32", 3)
    ieee = e(ex)[0].detach().cpu().numpy()
    monkeypatch.setattr(ember.backends.cudnn, "allow_tf32", True)
    tf32 = e(ex)[0].detach().cpu().numpy()
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
        want = t(tx)[0].detach().cpu().numpy()
    np.testing.assert_allclose(tf32, want, rtol=5e-3, atol=5e-3)
    assert np.abs(tf32 - ieee).max() > 1e-6  # TF32's rounding shows
