"""The fused recurrent cell ops (ops/rnn_cells.py) on the CPU: ``_thnn_fused_lstm_cell``,
``_thnn_fused_gru_cell`` and their backward ops against PyTorch's cell formulas composed of
CPU ops (PyTorch has these fused ops on CUDA only; tests/test_cuda_rnn.py compares with them
there): outputs, workspaces, gradients of every input, with and without biases, half dtypes;
gradcheck and gradgradcheck in float64; PyTorch's argument errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops.rnn_cells import (_thnn_fused_gru_cell, _thnn_fused_gru_cell_backward,
                                 _thnn_fused_lstm_cell, _thnn_fused_lstm_cell_backward_impl)

torch = pytest.importorskip("torch")

TOL = {"float64": 1e-12, "float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


# ---------------------------------------------------------------------- references (torch)
def ref_lstm(ig, hg, cx, bi=None, bh=None):
    """(hy, cy, workspace) of torch's fused LSTM cell, from its CPU ops in float64."""
    g = ig.double() + hg.double()
    if bi is not None:
        g = g + bi.double() + bh.double()
    i, f, gg, o = g.chunk(4, 1)
    i, f, gg, o = i.sigmoid(), f.sigmoid(), gg.tanh(), o.sigmoid()
    cy = f * cx.double().reshape(i.shape) + i * gg
    return (o * cy.tanh()).reshape(cx.shape), cy.reshape(cx.shape), torch.cat([i, f, gg, o], 1)


def ref_gru(ig, hg, hx, bi=None, bh=None):
    """(hy, workspace) of torch's fused GRU cell, from its CPU ops in float64."""
    x, y = ig.double(), hg.double()
    if bi is not None:
        x, y = x + bi.double(), y + bh.double()
    xr, xz, xn = x.chunk(3, 1)
    hr, hz, hn = y.chunk(3, 1)
    r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    prev = hx.double().reshape(n.shape)
    return n + z * (prev - n), torch.cat([r, z, n, prev, hn], 1)


def data(shape, dtype, seed):
    """float64 values exact in ``dtype`` (a numpy array)."""
    a = np.random.default_rng(seed).standard_normal(shape) * 2
    return torch.tensor(a).to(getattr(torch, dtype)).double().numpy()


def inputs(kind: str, rows: int, hidden: int, dtype: str, bias: bool, seed=0):
    """(numpy arrays exact in dtype) input_gates, hidden_gates, prev state, biases or None."""
    g = (4 if kind == "lstm" else 3) * hidden
    out = [data((rows, g), dtype, seed), data((rows, g), dtype, seed + 1),
           data((rows, hidden), dtype, seed + 2)]
    out += [data((g,), dtype, seed + 3), data((g,), dtype, seed + 4)] if bias else [None, None]
    return out


def as_ember(arrays, dtype, grad=False):
    out = []
    for a in arrays:
        t = None if a is None else ember.tensor(a).to(getattr(ember, dtype))
        out.append(t.requires_grad_() if grad and t is not None else t)
    return out


def as_torch(arrays, grad=False):
    return [None if a is None else torch.tensor(a).requires_grad_(grad) for a in arrays]


def close(got, want, dtype, scale=1.0):
    """An ember tensor against a float64 torch tensor, in ``dtype``'s rounding."""
    assert str(got.dtype).split(".")[-1] == dtype
    assert tuple(got.shape) == tuple(want.shape)
    t = TOL[dtype] * scale
    np.testing.assert_allclose(got.detach().double().numpy(), want.detach().numpy(), rtol=t,
                               atol=t)


# ---------------------------------------------------------------------- forward and grads
@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell_matches_torch(dtype, bias):
    arrays = inputs("lstm", 3, 5, dtype, bias)
    e = as_ember(arrays, dtype, grad=True)
    t = as_torch(arrays, grad=True)
    hy, cy, ws = _thnn_fused_lstm_cell(*e)
    rhy, rcy, rws = ref_lstm(*t)
    for got, want in ((hy, rhy), (cy, rcy), (ws, rws)):
        close(got, want, dtype)
    assert not ws.requires_grad and ws.grad_fn is None  # the workspace carries no gradient
    w1, w2 = data((3, 5), "float64", 9), data((3, 5), "float64", 10)
    (hy.double() * ember.tensor(w1) + cy.double() * ember.tensor(w2)).sum().backward()
    (rhy * torch.tensor(w1) + rcy * torch.tensor(w2)).sum().backward()
    for a, b in zip(e, t):
        if a is not None:
            close(a.grad, b.grad, dtype, scale=4)


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("bias", [True, False])
def test_gru_cell_matches_torch(dtype, bias):
    arrays = inputs("gru", 4, 3, dtype, bias, seed=5)
    e = as_ember(arrays, dtype, grad=True)
    t = as_torch(arrays, grad=True)
    hy, ws = _thnn_fused_gru_cell(*e)
    rhy, rws = ref_gru(*t)
    close(hy, rhy, dtype)
    close(ws, rws, dtype)
    w = data((4, 3), "float64", 11)
    (hy.double() * ember.tensor(w)).sum().backward()
    (rhy * torch.tensor(w)).sum().backward()
    for a, b in zip(e, t):
        if a is not None:
            close(a.grad, b.grad, dtype, scale=4)


def test_lstm_cell_one_output_used_and_states_of_other_shapes():
    """Only cy reaching the loss (hy's gradient absent); cx of another 2-D shape with B*H
    elements (PyTorch checks its element count only): the outputs take its shape."""
    arrays = inputs("lstm", 2, 3, "float64", True, seed=3)
    arrays[2] = arrays[2].reshape(3, 2)
    e = as_ember(arrays, "float64", grad=True)
    t = as_torch(arrays, grad=True)
    hy, cy, _ = _thnn_fused_lstm_cell(*e)
    assert tuple(hy.shape) == tuple(cy.shape) == (3, 2)
    _, rcy, _ = ref_lstm(*t)
    cy.sum().backward()
    rcy.sum().backward()
    for a, b in zip(e, t):
        close(a.grad, b.grad, "float64")
    assert tuple(e[2].grad.shape) == (3, 2)


def test_backward_ops_direct():
    """The backward ops called alone: no gradients give Nones; bias sums only when asked."""
    arrays = inputs("lstm", 2, 3, "float32", False)
    ig, hg, cx, _, _ = as_ember(arrays, "float32")
    hy, cy, ws = _thnn_fused_lstm_cell(ig, hg, cx)
    assert _thnn_fused_lstm_cell_backward_impl(None, None, cx, cy, ws, True) == (None,) * 3
    gates, gcx, gb = _thnn_fused_lstm_cell_backward_impl(ember.ones_like(hy), None, cx, cy, ws,
                                                         True)
    assert tuple(gates.shape) == (2, 12) and tuple(gcx.shape) == (2, 3)
    np.testing.assert_allclose(gb.numpy(), gates.sum(0).numpy(), rtol=1e-6)
    assert _thnn_fused_lstm_cell_backward_impl(hy, cy, cx, cy, ws, False)[2] is None
    arrays = inputs("gru", 2, 3, "float32", False)
    ig, hg, hx, _, _ = as_ember(arrays, "float32")
    hy, ws = _thnn_fused_gru_cell(ig, hg, hx)
    gi, gh, ghx, gib, ghb = _thnn_fused_gru_cell_backward(ember.ones_like(hy), ws, True)
    np.testing.assert_allclose(gib.numpy(), gi.sum(0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ghb.numpy(), gh.sum(0).numpy(), rtol=1e-6)
    assert _thnn_fused_gru_cell_backward(hy, ws, False)[3:] == (None, None)


# ---------------------------------------------------------------------- gradcheck
@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell_gradcheck_and_gradgradcheck(bias):
    e = [a for a in as_ember(inputs("lstm", 2, 3, "float64", bias, seed=7), "float64",
                             grad=True) if a is not None]

    def fn(*args):
        hy, cy, _ = _thnn_fused_lstm_cell(*args)
        return hy, cy
    assert ember.autograd.gradcheck(fn, tuple(e))
    assert ember.autograd.gradgradcheck(fn, tuple(e))


@pytest.mark.parametrize("bias", [True, False])
def test_gru_cell_gradcheck_and_gradgradcheck(bias):
    e = [a for a in as_ember(inputs("gru", 2, 3, "float64", bias, seed=8), "float64",
                             grad=True) if a is not None]

    def fn(*args):
        return _thnn_fused_gru_cell(*args)[0]
    assert ember.autograd.gradcheck(fn, tuple(e))
    assert ember.autograd.gradgradcheck(fn, tuple(e))


def test_backward_ops_are_not_differentiable():
    assert not _thnn_fused_lstm_cell_backward_impl.differentiable
    assert not _thnn_fused_gru_cell_backward.differentiable


# ---------------------------------------------------------------------- errors
def _t(*shape, dtype=ember.float32):
    return ember.zeros(shape, dtype=dtype)


CHECK = "(while checking arguments for _thnn_fused_lstm_cell_cuda)"


@pytest.mark.parametrize("args,err,match", [
    ((_t(2, 8, 1), _t(2, 8, 1), _t(2, 2)), RuntimeError,
     "Expected 2-dimensional tensor, but got 3-dimensional tensor for argument #1 "
     "'input_gates'"),
    ((_t(2, 8), _t(2, 4), _t(2, 2)), RuntimeError,
     r"Expected tensor for argument #1 'input_gates' to have same size as tensor for argument "
     r"#2 'hidden_gates'; but \[2, 8\] does not equal \[2, 4\]"),
    ((_t(2, 8), _t(2, 8), _t(2, 3)), RuntimeError,
     "Expected tensor for argument #5 'prev_hidden' to have 4 elements; but it actually has "
     "6 elements"),
    ((_t(2, 8), _t(2, 8), _t(2, 2), _t(7), _t(7)), RuntimeError,
     "Expected tensor for argument #3 'input_bias' to have 8 elements"),
    ((_t(2, 8, dtype=ember.int64), _t(2, 8, dtype=ember.int64), _t(2, 2, dtype=ember.int64)),
     NotImplementedError, "\"_thnn_fused_lstm_cell_cuda\" not implemented for 'Long'"),
])
def test_lstm_cell_errors(args, err, match):
    with pytest.raises(err, match=match):
        _thnn_fused_lstm_cell(*args)


def test_gru_cell_errors():
    with pytest.raises(RuntimeError, match="'prev_hidden' to have 4 elements"):
        _thnn_fused_gru_cell(_t(2, 6), _t(2, 6), _t(2, 3))
    with pytest.raises(RuntimeError, match="while checking arguments for "
                                           "_thnn_fused_gru_cell_cuda"):
        _thnn_fused_gru_cell(_t(2, 6), _t(3, 6), _t(2, 2))


# ---------------------------------------------------------------------- a whole LSTM layer
def _layer_ref(ig, hx, cx, w, reverse):
    """(output, hy, cy) of the recurrence with torch's CPU ops."""
    h, c = hx, cx
    outs = [None] * ig.shape[0]
    steps = range(ig.shape[0] - 1, -1, -1) if reverse else range(ig.shape[0])
    for t in steps:
        h, c, _ = ref_lstm(ig[t], h @ w.t(), c)
        outs[t] = h
    return torch.stack(outs), h, c


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_layer_matches_torch(dtype, reverse):
    from ember.ops.rnn_layers import _lstm_layer
    arrays = [data((4, 3, 8), dtype, 50), data((3, 2), dtype, 51), data((3, 2), dtype, 52),
              data((8, 2), dtype, 53)]
    e = as_ember(arrays, dtype, grad=True)
    t = as_torch(arrays, grad=True)
    out, hy, cy, cells, ws = _lstm_layer(*e, reverse)
    assert cells.grad_fn is None and ws.grad_fn is None  # saved for the backward only
    want = _layer_ref(*t, reverse)
    scale = 1 if dtype != "bfloat16" else 4  # the states are rounded each step
    for got, w in zip((out, hy, cy), want):
        close(got, w, dtype, scale)
    ws_out = data(tuple(want[0].shape), "float64", 54)
    (out.double() * ember.tensor(ws_out)).sum().add(hy.double().sum() * 2 +
                                                    cy.double().sum() * 3).backward()
    (want[0] * torch.tensor(ws_out)).sum().add(want[1].sum() * 2 + want[2].sum() * 3).backward()
    for a, b in zip(e, t):
        close(a.grad, b.grad, dtype, scale * 4)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("used", ["out", "hy", "cy"])
def test_lstm_layer_gradcheck_and_gradgradcheck(reverse, used):
    """Each output alone reaching the loss (the others' gradients absent), first and second
    order."""
    from ember.ops.rnn_layers import _lstm_layer
    e = as_ember([data((3, 2, 8), "float64", 60), data((2, 2), "float64", 61),
                  data((2, 2), "float64", 62), data((8, 2), "float64", 63) * 0.5],
                 "float64", grad=True)

    def fn(*args):
        return _lstm_layer(*args, reverse)[("out", "hy", "cy").index(used)]
    assert ember.autograd.gradcheck(fn, tuple(e))
    assert ember.autograd.gradgradcheck(fn, tuple(e))


def test_lstm_layer_errors():
    from ember.ops.rnn_layers import _lstm_layer
    with pytest.raises(RuntimeError, match="sequence length to be larger than 0"):
        _lstm_layer(_t(0, 2, 8), _t(2, 2), _t(2, 2), _t(8, 2))
    with pytest.raises(RuntimeError, match=r"cx must be \[2, 2\], got \[2, 3\]"):
        _lstm_layer(_t(1, 2, 8), _t(2, 2), _t(2, 3), _t(8, 2))
    with pytest.raises(RuntimeError, match="weight_hh has dtype"):
        _lstm_layer(_t(1, 2, 8), _t(2, 2), _t(2, 2), _t(8, 2, dtype=ember.float64))
