"""A whole LSTM layer's recurrence as one op (``_lstm_layer``), with its backward op
(``_lstm_layer_backward``): nn.LSTM's time loop without an autograd node per step.

The input's projection for every step (``input_gates``, (T, B, 4H), both biases folded in) is
computed outside, as one product; the op runs the recurrence

    gates_t = input_gates[t] + h_{t-1} W_hh^T      (one product per step)
    h_t, c_t = the LSTM cell of gates_t and c_{t-1}  (ops/rnn_cells.py's formulas)

over t = 0 .. T-1 (``reverse``: T-1 .. 0) and returns (output (T, B, H), h_n, c_n, cells
(T, B, H), workspace (T, B, 4H)); cells and workspace are saved for the backward and carry no
gradient. The backward walks the steps back: per step the cell's backward and one product
(the gradient reaching h_{t-1}), then W_hh's gradient as one product over all steps.

The generic impls compute through ``xp`` (numpy on the CPU; on other backends their xp);
the CUDA backend overrides both with cuBLAS products and one Triton launch per step
(backends/cuda/rnn_cells.py). float16 / bfloat16 compute in float32 and round once per
result; float64 in float64. Under ``create_graph`` the backward recomputes the layer step by
step with the differentiable fused cell ops (so gradients of any order follow).
"""

from __future__ import annotations

from .._tensor import Tensor
from ..autograd.grad_mode import state as _grad_state
from .registry import op
from .rnn_cells import _acc, lstm_step, lstm_step_backward


def _check(input_gates, hx, cx, weight_hh):
    if input_gates.ndim != 3 or input_gates.shape[2] % 4:
        raise RuntimeError(f"_lstm_layer: input_gates must be (T, B, 4H), got "
                           f"{list(input_gates.shape)}")
    t, b, g4 = input_gates.shape
    h = g4 // 4
    if t == 0:
        raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
    for name, a, shape in (("hx", hx, (b, h)), ("cx", cx, (b, h)),
                           ("weight_hh", weight_hh, (g4, h))):
        if a.shape != shape:
            raise RuntimeError(f"_lstm_layer: {name} must be {list(shape)}, got "
                               f"{list(a.shape)}")
        if a.dtype != input_gates.dtype:
            raise RuntimeError(f"_lstm_layer: {name} has dtype {a.dtype}, expected "
                               f"{input_gates.dtype}")


def steps(n: int, reverse: bool):
    return range(n - 1, -1, -1) if reverse else range(n)


@op(saves=("input_gates", "hx", "cx", "weight_hh"), save_output=True, function=False,
    method=False, nondiff_outputs=(3, 4))
def _lstm_layer(xp, input_gates: "Tensor", hx: "Tensor", cx: "Tensor", weight_hh: "Tensor",
                reverse=False):
    """_lstm_layer(input_gates, hx, cx, weight_hh, reverse=False) -> (output, hy, cy, cells,
    workspace): an LSTM layer's recurrence over (T, B, 4H) input gates (biases included)."""
    _check(input_gates, hx, cx, weight_hh)
    dt = input_gates.dtype
    t_len, b, g4 = input_gates.shape
    h = g4 // 4
    out = xp.empty((t_len, b, h), dt)
    cells = xp.empty((t_len, b, h), dt)
    ws = xp.empty((t_len, b, g4), dt)
    w_t = _acc(weight_hh).T
    hp, cp = _acc(hx), _acc(cx)
    for t in steps(t_len, reverse):
        gates = xp.matmul(hp, w_t)
        gates += _acc(input_gates[t])
        hy, cy = lstm_step(xp, gates, cp)
        out[t], cells[t], ws[t] = hy, cy, gates
        # the next step reads the states as stored (rounded, for half types)
        hp, cp = _acc(out[t]), _acc(cells[t])
    last = 0 if reverse else t_len - 1
    return out, out[last].copy(), cells[last].copy(), cells, ws


@op(differentiable=False, function=False, method=False)
def _lstm_layer_backward(xp, grad_output: "Tensor?", grad_hy: "Tensor?", grad_cy: "Tensor?",
                         hx: "Tensor", cx: "Tensor", weight_hh: "Tensor", output: "Tensor",
                         cells: "Tensor", workspace: "Tensor", reverse=False):
    """_lstm_layer_backward(grad_output, grad_hy, grad_cy, hx, cx, weight_hh, output, cells,
    workspace, reverse=False) -> (grad_input_gates, grad_hx, grad_cx, grad_weight_hh)."""
    dt = workspace.dtype
    t_len, b, g4 = workspace.shape
    h = g4 // 4
    w = _acc(weight_hh)
    grads = xp.empty((t_len, b, g4), dt)
    gh = None if grad_hy is None else _acc(grad_hy)
    gc = None if grad_cy is None else _acc(grad_cy)
    order = list(steps(t_len, reverse))
    for k in range(t_len - 1, -1, -1):
        t = order[k]
        if grad_output is not None:
            gh = _acc(grad_output[t]) if gh is None else gh + _acc(grad_output[t])
        c_prev = _acc(cx) if k == 0 else _acc(cells[order[k - 1]])
        if gh is None and gc is None:
            grads[t] = 0
            continue
        g, gc = lstm_step_backward(xp, gh, gc, c_prev, _acc(cells[t]), _acc(workspace[t]))
        grads[t] = g
        gh = xp.matmul(_acc(grads[t]), w)
    zeros = xp.zeros((b, h), dt)
    grad_hx = zeros if gh is None else gh.astype(dt, copy=False)
    grad_cx = zeros if gc is None else gc.astype(dt, copy=False)
    # W_hh's gradient: sum over steps of gates_grad_t^T h_{t-1}, as one product
    prev = xp.empty((t_len, b, h), dt)
    for k, t in enumerate(order):
        prev[t] = hx if k == 0 else output[order[k - 1]]
    g2 = _acc(grads).reshape(t_len * b, g4)
    grad_w = xp.matmul(g2.T, _acc(prev).reshape(t_len * b, h)).astype(dt, copy=False)
    return grads, grad_hx, grad_cx, grad_w


@_lstm_layer.def_backward
def _(ctx, g_out, g_hy=None, g_cy=None, g_cells=None, g_ws=None):
    if g_out is None and g_hy is None and g_cy is None:
        return (None,) * 4
    if not _grad_state.enabled:
        out, _, _, cells, ws = ctx.out
        return _lstm_layer_backward(g_out, g_hy, g_cy, ctx.hx, ctx.cx, ctx.weight_hh, out,
                                    cells, ws, ctx.reverse)
    return _layer_backward_ops(ctx, g_out, g_hy, g_cy)


def _layer_backward_ops(ctx, g_out, g_hy, g_cy):
    """The backward under ``create_graph``: the layer recomputed step by step with the fused
    cell ops (differentiable twice), and its gradient taken through them."""
    from ..autograd.engine import grad as autograd_grad
    from ..autograd.grad_mode import enable_grad
    from .joining import stack
    from .linalg import mm
    from .rnn_cells import _thnn_fused_lstm_cell
    with enable_grad():
        leaves = [x if x.requires_grad else x.detach().requires_grad_()
                  for x in (ctx.input_gates, ctx.hx, ctx.cx, ctx.weight_hh)]
        gates, h, c, w = leaves
        w_t = w.t()
        outs = [None] * gates.shape[0]
        for t in steps(gates.shape[0], ctx.reverse):
            h, c, _ = _thnn_fused_lstm_cell(gates[t], mm(h, w_t), c)
            outs[t] = h
        results, grads = [], []
        for r, g in ((stack(outs), g_out), (h, g_hy), (c, g_cy)):
            if g is not None:
                results.append(r)
                grads.append(g)
        found = autograd_grad(results, leaves, grads, create_graph=True, allow_unused=True)
    return tuple(found)
