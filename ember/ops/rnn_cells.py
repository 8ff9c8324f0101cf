"""Fused recurrent cells: one LSTM or GRU time step's gate math as one op (PyTorch's
``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell`` and their backward ops).

The gate pre-activations arrive as two (B, G) arrays, the input's and the hidden state's
projections (G = 4H for LSTM, gates i, f, g, o; G = 3H for GRU, gates r, z, n), plus optional
(G,) biases. The forward saves a workspace for the backward:

    LSTM  workspace (B, 4H) = [sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)]
          cy = f * cx + i * g,  hy = o * tanh(cy)
    GRU   workspace (B, 5H) = [r, z, n, hx, hn]   with hn = hidden's n part + its bias
          r = sigmoid(x_r + h_r), z = sigmoid(x_z + h_z), n = tanh(x_n + r * hn)
          hy = n + z * (hx - n)

The generic impls compute through ``xp`` (numpy on the CPU; the fallback elsewhere); the CUDA
backend overrides them with one Triton kernel each (backends/cuda/rnn_cells.py). float16 and
bfloat16 compute in float32 and round once; float64 in float64.

Autograd: a first-order backward (grad mode off while it runs) calls the backward op, one
kernel; under ``create_graph`` the same formulas run in ember ops from the saved inputs, so
gradients of any order follow. The backward ops themselves are not differentiable.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd.grad_mode import state as _grad_state
from .registry import op
from .pointwise import type_name

_WIDE = (np.dtype(np.float16), D.bfloat16.np)


def _acc(a):
    """``a`` in its compute type: float32 for half types."""
    return a.astype(np.float32) if a.dtype in _WIDE else a


def _sigmoid(xp, x):
    one = x.dtype.type(1)
    return one / (one + xp.exp(-x))


def _sizes(a) -> str:
    return "[" + ", ".join(str(s) for s in a.shape) + "]"


def _check(name: str, input_gates, hidden_gates, input_bias, hidden_bias, factor: int, prev,
           prev_name: str):
    """PyTorch's argument checks of the fused cells (``checkSizes`` in its RNN.cpp)."""
    where = f" (while checking arguments for {name}_cuda)"
    args = [("input_gates", input_gates, 1), ("hidden_gates", hidden_gates, 2),
            ("input_bias", input_bias, 3), ("hidden_bias", hidden_bias, 4),
            (prev_name, prev, 5)]

    def dim(k, n):
        label, a, pos = args[k]
        if a.ndim != n:
            raise RuntimeError(f"Expected {n}-dimensional tensor, but got {a.ndim}-dimensional "
                               f"tensor for argument #{pos} '{label}'{where}")

    def same(k, j):
        (la, a, pa), (lb, b, pb) = args[k], args[j]
        if a.shape != b.shape:
            raise RuntimeError(f"Expected tensor for argument #{pa} '{la}' to have same size as "
                               f"tensor for argument #{pb} '{lb}'; but {_sizes(a)} does not "
                               f"equal {_sizes(b)}{where}")

    def numel(k, n):
        label, a, pos = args[k]
        if a.size != n:
            raise RuntimeError(f"Expected tensor for argument #{pos} '{label}' to have {n} "
                               f"elements; but it actually has {a.size} elements{where}")

    dim(0, 2)
    same(0, 1)
    gates = input_gates.shape[1]
    if input_bias is not None:
        dim(2, 1)
        numel(2, gates)
        if hidden_bias is None:
            raise RuntimeError(f"Expected hidden_bias to be defined as input_bias is{where}")
        same(2, 3)
    if gates % factor:
        raise RuntimeError(f"{name}: the gates' size {gates} is not a multiple of {factor}")
    dim(4, 2)
    numel(4, input_gates.shape[0] * gates // factor)
    dts = {a.dtype for _, a, _ in args if a is not None}
    if len(dts) > 1:
        raise RuntimeError(f"{name}: expected all tensors to have the same dtype, but got "
                           f"{', '.join(sorted(str(D.from_np(t)) for t in dts))}")
    dtype = D.from_np(input_gates.dtype)
    if not dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}_cuda\" not implemented for "
                                  f"'{type_name(input_gates)}'")


def _batch_sum(a):
    """The batch sum of gates already rounded to their dtype, accumulated in the compute
    type (as the kernels' wrappers sum them)."""
    return _acc(a).sum(axis=0).astype(a.dtype, copy=False)


def _gates(input_gates, hidden_gates, input_bias, hidden_bias):
    """The summed pre-activations in the compute type."""
    g = _acc(input_gates) + _acc(hidden_gates)
    if input_bias is not None:
        g += _acc(input_bias)
        g += _acc(hidden_bias)
    return g


# ---------------------------------------------------------------------- LSTM
@op(saves=("input_gates", "hidden_gates", "cx", "input_bias", "hidden_bias"),
    save_output=True, function=False, method=False, nondiff_outputs=(2,))
def _thnn_fused_lstm_cell(xp, input_gates: "Tensor", hidden_gates: "Tensor", cx: "Tensor",
                          input_bias: "Tensor?" = None, hidden_bias: "Tensor?" = None):
    """_thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None)
    -> (hy, cy, workspace): one LSTM step from its gate pre-activations (gates i, f, g, o)."""
    _check("_thnn_fused_lstm_cell", input_gates, hidden_gates, input_bias, hidden_bias, 4, cx,
           "prev_hidden")
    dt = input_gates.dtype
    ws = _gates(input_gates, hidden_gates, input_bias, hidden_bias)
    hy, cy = lstm_step(xp, ws, _acc(cx).reshape(ws.shape[0], -1))
    return (hy.astype(dt, copy=False).reshape(cx.shape), cy.astype(dt, copy=False)
            .reshape(cx.shape), ws.astype(dt, copy=False))


def lstm_step(xp, ws, cx):
    """(hy, cy) of one LSTM step from the summed pre-activations ``ws`` (B, 4H), which become
    the workspace in place, and cx (B, H), all in the compute type."""
    h = ws.shape[1] // 4
    ws[:, :2 * h] = _sigmoid(xp, ws[:, :2 * h])
    ws[:, 3 * h:] = _sigmoid(xp, ws[:, 3 * h:])
    ws[:, 2 * h:3 * h] = xp.tanh(ws[:, 2 * h:3 * h])
    i, f, g, o = ws[:, :h], ws[:, h:2 * h], ws[:, 2 * h:3 * h], ws[:, 3 * h:]
    cy = f * cx
    cy += i * g
    hy = xp.tanh(cy)
    hy *= o
    return hy, cy


def lstm_step_backward(xp, gh, gc, cx, cy, ws):
    """(the gates' gradient (B, 4H), cx's) of one LSTM step from hy's and cy's gradients
    (either may be None, not both), cx, cy and the workspace, all (B, .) in the compute
    type."""
    b, g4 = ws.shape
    h = g4 // 4
    i, f, g, o = ws[:, :h], ws[:, h:2 * h], ws[:, 2 * h:3 * h], ws[:, 3 * h:]
    one = ws.dtype.type(1)
    gates = xp.empty((b, g4), ws.dtype)
    gcx = gates[:, :h]  # cx's gradient through cy, built in the i slot first
    if gh is not None:
        t = xp.tanh(cy)
        gates[:, 3 * h:] = gh * t * o * (one - o)
        gcx[...] = gh * o * (one - t * t)
        if gc is not None:
            gcx += gc
    else:
        gates[:, 3 * h:] = 0
        gcx[...] = gc
    grad_cx = gcx * f
    gates[:, h:2 * h] = gcx * cx * f * (one - f)
    gates[:, 2 * h:3 * h] = gcx * i * (one - g * g)
    gates[:, :h] = gcx * g * i * (one - i)
    return gates, grad_cx


@op(differentiable=False, function=False, method=False)
def _thnn_fused_lstm_cell_backward_impl(xp, grad_hy: "Tensor?", grad_cy: "Tensor?",
                                        cx: "Tensor", cy: "Tensor", workspace: "Tensor",
                                        has_bias):
    """_thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias)
    -> (grad_gates, grad_cx, grad_bias): the gates' gradient (B, 4H), cx's, and the gates'
    batch sum when ``has_bias`` (else None). With neither gradient given, all None."""
    if grad_hy is None and grad_cy is None:
        return None, None, None
    dt = workspace.dtype
    b, g4 = workspace.shape
    h = g4 // 4

    def state(a):
        return None if a is None else _acc(a).reshape(b, h)
    gates, grad_cx = lstm_step_backward(xp, state(grad_hy), state(grad_cy), state(cx),
                                        state(cy), _acc(workspace))
    gates = gates.astype(dt, copy=False)
    return gates, grad_cx.astype(dt, copy=False), _batch_sum(gates) if has_bias else None


@_thnn_fused_lstm_cell.def_backward
def _(ctx, g_hy, g_cy=None, g_ws=None):
    has_bias = ctx.input_bias is not None
    if g_hy is None and g_cy is None:
        return (None,) * 5
    if not _grad_state.enabled:
        _, cy, ws = ctx.out
        gates, gcx, gb = _thnn_fused_lstm_cell_backward_impl(g_hy, g_cy, ctx.cx, cy, ws,
                                                             has_bias)
        return gates, gates, gcx.reshape(ctx.cx.shape), gb, gb
    return _lstm_backward_ops(g_hy, g_cy, ctx.input_gates, ctx.hidden_gates, ctx.cx,
                              ctx.input_bias, ctx.hidden_bias)


def _lstm_backward_ops(g_hy, g_cy, input_gates, hidden_gates, cx, input_bias, hidden_bias):
    """The LSTM cell's backward in ember ops from its inputs (differentiable again)."""
    from .joining import cat
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    b, g4 = gates.shape
    h = g4 // 4
    i, f, o = (gates.narrow(1, k * h, h).sigmoid() for k in (0, 1, 3))
    g = gates.narrow(1, 2 * h, h).tanh()
    cx_shape = cx.shape
    cx = cx.reshape(b, h)
    cy = f * cx + i * g
    gc = 0
    go = None
    if g_hy is not None:
        t = cy.tanh()
        gh = g_hy.reshape(b, h)
        go = gh * t * o * (1 - o)
        gc = gh * o * (1 - t * t)
    if g_cy is not None:
        gc = gc + g_cy.reshape(b, h)
    if go is None:
        go = gc * 0
    gates_grad = cat([gc * g * i * (1 - i), gc * cx * f * (1 - f), gc * i * (1 - g * g), go], 1)
    gb = gates_grad.sum(0) if input_bias is not None else None
    return gates_grad, gates_grad, (gc * f).reshape(cx_shape), gb, gb


# ---------------------------------------------------------------------- GRU
@op(saves=("input_gates", "hidden_gates", "hx", "input_bias", "hidden_bias"),
    save_output=True, function=False, method=False, nondiff_outputs=(1,))
def _thnn_fused_gru_cell(xp, input_gates: "Tensor", hidden_gates: "Tensor", hx: "Tensor",
                         input_bias: "Tensor?" = None, hidden_bias: "Tensor?" = None):
    """_thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None)
    -> (hy, workspace): one GRU step from the input's and the hidden state's projections
    (gates r, z, n; the n gate sees r * (hidden's n part + its bias))."""
    _check("_thnn_fused_gru_cell", input_gates, hidden_gates, input_bias, hidden_bias, 3, hx,
           "prev_hidden")
    dt = input_gates.dtype
    b, g3 = input_gates.shape
    h = g3 // 3
    x = _acc(input_gates)
    y = _acc(hidden_gates)
    if input_bias is not None:
        x = x + _acc(input_bias)
        y = y + _acc(hidden_bias)
    ws = xp.empty((b, 5 * h), x.dtype)
    ws[:, :2 * h] = _sigmoid(xp, x[:, :2 * h] + y[:, :2 * h])
    r, z = ws[:, :h], ws[:, h:2 * h]
    ws[:, 4 * h:] = y[:, 2 * h:]
    ws[:, 2 * h:3 * h] = xp.tanh(x[:, 2 * h:] + r * y[:, 2 * h:])
    ws[:, 3 * h:4 * h] = _acc(hx).reshape(b, h)
    n, prev = ws[:, 2 * h:3 * h], ws[:, 3 * h:4 * h]
    hy = prev - n
    hy *= z
    hy += n
    return hy.astype(dt, copy=False).reshape(hx.shape), ws.astype(dt, copy=False)


@op(differentiable=False, function=False, method=False)
def _thnn_fused_gru_cell_backward(xp, grad_hy: "Tensor", workspace: "Tensor", has_bias):
    """_thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias) -> (grad_input_gates,
    grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias); the bias gradients are the
    gates' batch sums when ``has_bias``, else None."""
    dt = workspace.dtype
    b, g5 = workspace.shape
    h = g5 // 5
    ws = _acc(workspace)
    r, z, n, prev, hn = (ws[:, k * h:(k + 1) * h] for k in range(5))
    gh = _acc(grad_hy).reshape(b, h)
    one = ws.dtype.type(1)
    gi = xp.empty((b, 3 * h), ws.dtype)
    gi[:, 2 * h:] = gh * (one - z) * (one - n * n)
    gn = gi[:, 2 * h:]
    gi[:, :h] = gn * hn * r * (one - r)
    gi[:, h:2 * h] = gh * (prev - n) * z * (one - z)
    gg = gi.copy()
    gg[:, 2 * h:] *= r
    ghx = (gh * z).astype(dt, copy=False)
    gi, gg = gi.astype(dt, copy=False), gg.astype(dt, copy=False)
    if not has_bias:
        return gi, gg, ghx, None, None
    return gi, gg, ghx, _batch_sum(gi), _batch_sum(gg)


@_thnn_fused_gru_cell.def_backward
def _(ctx, g_hy, g_ws=None):
    if g_hy is None:
        return (None,) * 5
    has_bias = ctx.input_bias is not None
    if not _grad_state.enabled:
        _, ws = ctx.out
        gi, gg, ghx, gib, ghb = _thnn_fused_gru_cell_backward(g_hy, ws, has_bias)
        return gi, gg, ghx.reshape(ctx.hx.shape), gib, ghb
    return _gru_backward_ops(g_hy, ctx.input_gates, ctx.hidden_gates, ctx.hx, ctx.input_bias,
                             ctx.hidden_bias)


def _gru_backward_ops(g_hy, input_gates, hidden_gates, hx, input_bias, hidden_bias):
    """The GRU cell's backward in ember ops from its inputs (differentiable again)."""
    from .joining import cat
    x, y = input_gates, hidden_gates
    if input_bias is not None:
        x, y = x + input_bias, y + hidden_bias
    b, g3 = x.shape
    h = g3 // 3
    r = (x.narrow(1, 0, h) + y.narrow(1, 0, h)).sigmoid()
    z = (x.narrow(1, h, h) + y.narrow(1, h, h)).sigmoid()
    hn = y.narrow(1, 2 * h, h)
    n = (x.narrow(1, 2 * h, h) + r * hn).tanh()
    prev = hx.reshape(b, h)
    gh = g_hy.reshape(b, h)
    gn = gh * (1 - z) * (1 - n * n)
    gr = gn * hn * r * (1 - r)
    gz = gh * (prev - n) * z * (1 - z)
    gi = cat([gr, gz, gn], 1)
    gg = cat([gr, gz, gn * r], 1)
    ghx = (gh * z).reshape(hx.shape)
    if input_bias is None:
        return gi, gg, ghx, None, None
    return gi, gg, ghx, gi.sum(0), gg.sum(0)
