"""The fused recurrent cells as ember's own Triton kernels (``rnn_cell_kernels.py``),
registered as the CUDA backend's "kernel" overrides (ops/registry.py) of
``_thnn_fused_lstm_cell``, ``_thnn_fused_lstm_cell_backward_impl``, ``_thnn_fused_gru_cell``
and ``_thnn_fused_gru_cell_backward``: one launch per call (plus one batch sum per bias
gradient when the backward is asked for them).

Each wrapper takes the op's arrays (CuPy's on the GPU; numpy's under Triton's interpreter,
which is how CI runs them) and returns the result arrays, or None where it does not apply
(bad shapes, mixed or non-float dtypes, empty inputs), so the generic impl runs and raises
its own errors. Gate arrays are read in place when their last dim is contiguous; state
arrays are made contiguous. float16 / bfloat16 compute in float32 and round once; float64 in
float64. A whole layer's products (``_lstm_layer``) are float32 products in TF32 while
``ember.backends.cudnn.allow_tf32`` is set (default True), as PyTorch's cuDNN RNNs are.
"""

from __future__ import annotations


import numpy as np

from ... import _dtype as D
from .. import cudnn
from . import triton_adapter as adapter
from .runtime import cupy

_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, D.bfloat16.np))
_F64 = np.dtype(np.float64)
BLOCK = 512  # cells per program (256 in float64)
STATS = {"launches": 0}


def kernels():
    """The Triton kernel module (rnn_cell_kernels.py), imported at its first use."""
    return adapter.kernel_module("rnn_cell_kernels")


def _xp(a):
    return np if isinstance(a, np.ndarray) else cupy()


def _launch(kernel, n: int, arrays, scalars, f64: bool, **constexprs) -> None:
    """``kernel`` over the ``n`` cells, pointer arguments ``arrays`` then ``scalars``."""
    STATS["launches"] += 1
    block = BLOCK // 2 if f64 else BLOCK
    ptrs = adapter.pointers(arrays)
    tl = kernels().tl
    adapter.launch(kernel, (-(-n // block),), ptrs + list(scalars), num_warps=4,
                   ACC=tl.float64 if f64 else tl.float32, BLOCK=block, **constexprs)


def _rows(a):
    """A 2-D gate array with a unit column stride (copied if not), and its row stride."""
    if a.strides[1] != a.itemsize and a.shape[1] > 1:
        a = _xp(a).ascontiguousarray(a)
    return a, a.strides[0] // a.itemsize


def _state(a, rows: int, hidden: int):
    return _xp(a).ascontiguousarray(a).reshape(rows, hidden)


def _cell_args(input_gates, hidden_gates, prev, input_bias, hidden_bias, factor: int):
    """(rows, hidden) when the kernel applies to these operands, else None."""
    dt = input_gates.dtype
    if dt not in _FLOATS or input_gates.ndim != 2 or hidden_gates.shape != input_gates.shape \
            or not input_gates.size or input_gates.shape[1] % factor or prev.ndim != 2:
        return None
    rows, hidden = input_gates.shape[0], input_gates.shape[1] // factor
    if prev.size != rows * hidden or (input_bias is None) != (hidden_bias is None):
        return None
    arrays = [hidden_gates, prev] + [b for b in (input_bias, hidden_bias) if b is not None]
    if any(a.dtype != dt for a in arrays):
        return None
    if input_bias is not None and (input_bias.shape != (factor * hidden,)
                                   or hidden_bias.shape != input_bias.shape):
        return None
    return rows, hidden


def _lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """_thnn_fused_lstm_cell -> (hy, cy, workspace)."""
    found = _cell_args(input_gates, hidden_gates, cx, input_bias, hidden_bias, 4)
    if found is None:
        return None
    rows, hidden = found
    xp = _xp(cx)
    ig, s_ig = _rows(input_gates)
    hg, s_hg = _rows(hidden_gates)
    c = _state(cx, rows, hidden)
    dt = ig.dtype
    hy = xp.empty((rows, hidden), dt)
    cy = xp.empty((rows, hidden), dt)
    ws = xp.empty((rows, 4 * hidden), dt)
    bias = input_bias is not None
    bi = input_bias if bias else ig
    bh = hidden_bias if bias else ig
    _launch(kernels().lstm_fwd, rows * hidden, [ig, hg, c, bi, bh, hy, cy, ws],
            [rows * hidden, hidden, s_ig, s_hg], dt == _F64, HAS_BIAS=bias)
    return hy.reshape(cx.shape), cy.reshape(cx.shape), ws


def _lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    """_thnn_fused_lstm_cell_backward_impl -> (grad_gates, grad_cx, grad_bias)."""
    if grad_hy is None and grad_cy is None:
        return None
    dt = workspace.dtype
    if dt not in _FLOATS or workspace.ndim != 2 or not workspace.size or \
            workspace.shape[1] % 4:
        return None
    rows, hidden = workspace.shape[0], workspace.shape[1] // 4
    states = [a for a in (grad_hy, grad_cy, cx, cy) if a is not None]
    if any(a.dtype != dt or a.size != rows * hidden for a in states):
        return None
    xp = _xp(workspace)
    ws = xp.ascontiguousarray(workspace)
    gh = ws if grad_hy is None else _state(grad_hy, rows, hidden)
    gc = ws if grad_cy is None else _state(grad_cy, rows, hidden)
    c = _state(cx, rows, hidden)
    y = _state(cy, rows, hidden)
    gates = xp.empty((rows, 4 * hidden), dt)
    gcx = xp.empty((rows, hidden), dt)
    _launch(kernels().lstm_bwd, rows * hidden, [ws, gh, gc, c, y, ws, gates, gcx],
            [rows * hidden, hidden], dt == _F64, HAS_GO=False, HAS_GH=grad_hy is not None,
            HAS_GC=grad_cy is not None)
    return gates, gcx, _batch_sum(gates) if has_bias else None


def _batch_sum(a):
    """The sum over rows, accumulated in the compute type, in ``a``'s dtype."""
    acc = _F64 if a.dtype == _F64 else np.dtype(np.float32)
    return a.sum(axis=0, dtype=acc).astype(a.dtype, copy=False)


def _gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """_thnn_fused_gru_cell -> (hy, workspace)."""
    found = _cell_args(input_gates, hidden_gates, hx, input_bias, hidden_bias, 3)
    if found is None:
        return None
    rows, hidden = found
    xp = _xp(hx)
    ig, s_ig = _rows(input_gates)
    hg, s_hg = _rows(hidden_gates)
    h = _state(hx, rows, hidden)
    dt = ig.dtype
    hy = xp.empty((rows, hidden), dt)
    ws = xp.empty((rows, 5 * hidden), dt)
    bias = input_bias is not None
    bi = input_bias if bias else ig
    bh = hidden_bias if bias else ig
    _launch(kernels().gru_fwd, rows * hidden, [ig, hg, h, bi, bh, hy, ws],
            [rows * hidden, hidden, s_ig, s_hg], dt == _F64, HAS_BIAS=bias)
    return hy.reshape(hx.shape), ws


def _gru_cell_backward(grad_hy, workspace, has_bias):
    """_thnn_fused_gru_cell_backward -> (grad_input_gates, grad_hidden_gates, grad_hx,
    grad_input_bias, grad_hidden_bias)."""
    dt = workspace.dtype
    if dt not in _FLOATS or workspace.ndim != 2 or not workspace.size or \
            workspace.shape[1] % 5:
        return None
    rows, hidden = workspace.shape[0], workspace.shape[1] // 5
    if grad_hy.dtype != dt or grad_hy.size != rows * hidden:
        return None
    xp = _xp(workspace)
    ws = xp.ascontiguousarray(workspace)
    g = _state(grad_hy, rows, hidden)
    gi = xp.empty((rows, 3 * hidden), dt)
    gh = xp.empty((rows, 3 * hidden), dt)
    ghx = xp.empty((rows, hidden), dt)
    _launch(kernels().gru_bwd, rows * hidden, [g, ws, gi, gh, ghx], [rows * hidden, hidden],
            dt == _F64)
    if not has_bias:
        return gi, gh, ghx, None, None
    return gi, gh, ghx, _batch_sum(gi), _batch_sum(gh)


# ---------------------------------------------------------------------- a whole LSTM layer
def _mm_into(a, b, out, beta: int = 0) -> None:
    """out = a @ b (+ out when ``beta``), 2-D: cuBLAS on the GPU (transposed views read in
    place), numpy's matmul under the interpreter."""
    if isinstance(a, np.ndarray):
        r = np.matmul(a.astype(np.float32), b.astype(np.float32)) if a.dtype in _HALF \
            else a @ b
        if beta:
            r = r + out
        out[...] = r
        return
    from .blas import _as_gemm_operand, _gemm
    m, k = a.shape
    _gemm(_as_gemm_operand(a), _as_gemm_operand(b), out, m, b.shape[1], k, 1, beta=beta,
          tf32=cudnn.allow_tf32)


_HALF = frozenset((np.dtype(np.float16), np.dtype(D.bfloat16.np)))


def _layer_args(input_gates, hx, cx, weight_hh):
    """(T, B, H) when the layer kernels apply, else None."""
    dt = input_gates.dtype
    if dt not in _FLOATS or input_gates.ndim != 3 or input_gates.shape[2] % 4 or \
            not input_gates.size:
        return None
    t_len, b, g4 = input_gates.shape
    h = g4 // 4
    for a, shape in ((hx, (b, h)), (cx, (b, h)), (weight_hh, (g4, h))):
        if a.shape != shape or a.dtype != dt:
            return None
    return t_len, b, h


def _steps(n: int, reverse: bool):
    return range(n - 1, -1, -1) if reverse else range(n)


def _lstm_layer(input_gates, hx, cx, weight_hh, reverse=False):
    """_lstm_layer -> (output, hy, cy, cells, workspace): per step one product into a
    reused buffer and one cell launch writing the step's slices of the results."""
    found = _layer_args(input_gates, hx, cx, weight_hh)
    if found is None:
        return None
    t_len, b, h = found
    xp = _xp(input_gates)
    dt = input_gates.dtype
    ig = xp.ascontiguousarray(input_gates)
    out = xp.empty((t_len, b, h), dt)
    cells = xp.empty((t_len, b, h), dt)
    ws = xp.empty((t_len, b, 4 * h), dt)
    hg = xp.empty((b, 4 * h), dt)
    w_t = xp.ascontiguousarray(weight_hh).T  # read transposed in place by the products
    hp, cp = xp.ascontiguousarray(hx), xp.ascontiguousarray(cx)
    kernel, n, f64 = kernels().lstm_fwd, b * h, dt == _F64
    if _fast_forward(ig, hp, cp, w_t, out, cells, ws, hg, reverse):
        last = 0 if reverse else t_len - 1
        return out, out[last].copy(), cells[last].copy(), cells, ws
    for t in _steps(t_len, reverse):
        _mm_into(hp, w_t, hg)
        _launch(kernel, n, [ig[t], hg, cp, hg, hg, out[t], cells[t], ws[t]],
                [n, h, 4 * h, 4 * h], f64, HAS_BIAS=False)
        hp, cp = out[t], cells[t]
    last = 0 if reverse else t_len - 1
    return out, out[last].copy(), cells[last].copy(), cells, ws


def _lstm_layer_backward(grad_output, grad_hy, grad_cy, hx, cx, weight_hh, output, cells,
                         workspace, reverse=False):
    """_lstm_layer_backward -> (grad_input_gates, grad_hx, grad_cx, grad_weight_hh): per step
    one cell launch (it adds the output's and the carried gradient of h, and carries c's in
    place) and one product for h's gradient; W_hh's gradient as two products at the end."""
    if grad_output is None and grad_hy is None and grad_cy is None:
        return None
    if workspace.ndim != 3:
        return None
    found = _layer_args(workspace, hx, cx, weight_hh)
    if found is None:
        return None
    t_len, b, h = found
    dt = workspace.dtype
    for a, shape in ((grad_output, (t_len, b, h)), (grad_hy, (b, h)), (grad_cy, (b, h)),
                     (output, (t_len, b, h)), (cells, (t_len, b, h))):
        if a is not None and (a.dtype != dt or a.shape != shape):
            return None
    xp = _xp(workspace)
    ws = xp.ascontiguousarray(workspace)
    cs = xp.ascontiguousarray(cells)
    out = xp.ascontiguousarray(output)
    go = None if grad_output is None else xp.ascontiguousarray(grad_output)
    gh = xp.empty((b, h), dt)  # h's gradient carried back (a product's result)
    gc = xp.empty((b, h), dt)  # c's gradient carried back (the kernel writes it in place)
    if grad_hy is not None:
        gh[...] = grad_hy
    if grad_cy is not None:
        gc[...] = grad_cy
    has_gh, has_gc = grad_hy is not None, grad_cy is not None
    grads = xp.empty((t_len, b, 4 * h), dt)
    c0 = xp.ascontiguousarray(cx)
    w = xp.ascontiguousarray(weight_hh)
    order = list(_steps(t_len, reverse))
    kernel, n, f64 = kernels().lstm_bwd, b * h, dt == _F64
    fast = _fast_backward(go, gh, gc, has_gh, has_gc, c0, cs, ws, grads, w, reverse)
    for k in range(t_len - 1, -1, -1) if not fast else ():
        t = order[k]
        c_prev = c0 if k == 0 else cs[order[k - 1]]
        _launch(kernel, n, [gh if go is None else go[t], gh, gc, c_prev, cs[t], ws[t],
                            grads[t], gc], [n, h], f64, HAS_GO=go is not None,
                HAS_GH=has_gh, HAS_GC=has_gc)
        _mm_into(grads[t], w, gh)
        has_gh = has_gc = True
    # W_hh's gradient: sum over steps of grads_t^T h_{t-1} (h_{-1} = hx)
    gw = xp.empty((4 * h, h), dt)
    rows = (t_len - 1) * b
    if reverse:
        later, earlier, first = grads[:-1], out[1:], grads[t_len - 1]
    else:
        later, earlier, first = grads[1:], out[:-1], grads[0]
    _mm_into(first.T, xp.ascontiguousarray(hx), gw)
    if rows:
        _mm_into(later.reshape(rows, 4 * h).T, earlier.reshape(rows, h), gw, beta=1)
    return grads, gh, gc, gw


# ---------------------------------------------------------------------- the loops on the GPU
# On the GPU the layer's loops go through launchers prepared once per call (cuBLAS's and
# Triton's argument work done before the loop, addresses computed per step): a step then costs
# two C calls of host time, where the general path (kept for the interpreter) spends tens of
# microseconds per step on slicing arrays and building arguments.

def _worst(*addresses) -> int:
    """The first of ``addresses`` that is not 16-byte aligned, else the first: a launcher
    prepared for it serves all of them."""
    for a in addresses:
        if a % 16:
            return a
    return addresses[0]


def _prepared(kernel, n: int, pointers, scalars, dtype, **constexprs):
    """``kernel`` prepared (triton_adapter.prepare) over ``n`` cells, or None."""
    f64 = dtype == _F64
    block = BLOCK // 2 if f64 else BLOCK
    tl = kernels().tl
    return adapter.prepare(kernel, (-(-n // block),),
                           [adapter.Pointer(p, dtype) for p in pointers] + list(scalars),
                           num_warps=4, ACC=tl.float64 if f64 else tl.float32, BLOCK=block,
                           **constexprs)


def _fast_forward(ig, hx, cx, w_t, out, cells, ws, hg, reverse) -> bool:
    """The forward loop through prepared launchers; False (nothing done) where they do not
    apply (the interpreter, or a product cuBLAS cannot take in place)."""
    if isinstance(ig, np.ndarray):
        return False
    from .blas import gemm_launcher
    gemm = gemm_launcher(hx, w_t, hg, tf32=cudnn.allow_tf32)
    if gemm is None:
        return False
    t_len, b, g4 = ig.shape
    h = g4 // 4
    n, dt = b * h, ig.dtype
    sh, sg = n * dt.itemsize, b * g4 * dt.itemsize
    ig0, out0, cs0, ws0, hg0 = (a.data.ptr for a in (ig, out, cells, ws, hg))
    go = _prepared(kernels().lstm_fwd, n,
                   [_worst(ig0, ig0 + sg), hg0, _worst(cx.data.ptr, cs0, cs0 + sh), hg0, hg0,
                    _worst(out0, out0 + sh), _worst(cs0, cs0 + sh), _worst(ws0, ws0 + sg)],
                   [n, h, g4, g4], dt, HAS_BIAS=False)
    stream = cupy().cuda.get_current_stream().ptr
    w_ptr, h_ptr, c_ptr = w_t.data.ptr, hx.data.ptr, cx.data.ptr
    for t in _steps(t_len, reverse):
        gemm(h_ptr, w_ptr, hg0)
        o, c = out0 + t * sh, cs0 + t * sh
        go(stream, ig0 + t * sg, hg0, c_ptr, hg0, hg0, o, c, ws0 + t * sg, n, h, g4, g4)
        h_ptr, c_ptr = o, c
    STATS["launches"] += t_len
    return True


def _fast_backward(go, gh, gc, has_gh, has_gc, c0, cells, ws, grads, w, reverse) -> bool:
    """The backward loop through prepared launchers (see ``_fast_forward``): per step the
    cell's launch, then h's gradient into ``gh``; ``gc`` carries c's."""
    if isinstance(ws, np.ndarray):
        return False
    from .blas import gemm_launcher
    t_len, b, g4 = ws.shape
    gemm = gemm_launcher(grads[0], w, gh, tf32=cudnn.allow_tf32)
    if gemm is None:
        return False
    h = g4 // 4
    n, dt = b * h, ws.dtype
    sh, sg = n * dt.itemsize, b * g4 * dt.itemsize
    cs0, ws0, gr0, gh0, gc0 = (a.data.ptr for a in (cells, ws, grads, gh, gc))
    go0 = gh0 if go is None else go.data.ptr
    pointers = [_worst(go0, go0 + sh) if go is not None else gh0, gh0, gc0,
                _worst(c0.data.ptr, cs0, cs0 + sh), _worst(cs0, cs0 + sh), _worst(ws0, ws0 + sg),
                _worst(gr0, gr0 + sg), gc0]
    kernel, has_go = kernels().lstm_bwd, go is not None
    first = _prepared(kernel, n, pointers, [n, h], dt, HAS_GO=has_go, HAS_GH=has_gh,
                      HAS_GC=has_gc)
    rest = _prepared(kernel, n, pointers, [n, h], dt, HAS_GO=has_go, HAS_GH=True, HAS_GC=True)
    stream = cupy().cuda.get_current_stream().ptr
    order = list(_steps(t_len, reverse))
    w_ptr, c_first = w.data.ptr, c0.data.ptr
    launch = first
    for k in range(t_len - 1, -1, -1):
        t = order[k]
        c_prev = c_first if k == 0 else cs0 + order[k - 1] * sh
        g_t = gr0 + t * sg
        launch(stream, go0 + t * sh if has_go else gh0, gh0, gc0, c_prev, cs0 + t * sh,
               ws0 + t * sg, g_t, gc0, n, h)
        gemm(g_t, w_ptr, gh0)
        launch = rest
    STATS["launches"] += t_len
    return True


OVERRIDES = {
    "_thnn_fused_lstm_cell": _lstm_cell,
    "_thnn_fused_lstm_cell_backward_impl": _lstm_cell_backward,
    "_thnn_fused_gru_cell": _gru_cell,
    "_thnn_fused_gru_cell_backward": _gru_cell_backward,
    "_lstm_layer": _lstm_layer,
    "_lstm_layer_backward": _lstm_layer_backward,
}


def register(backend) -> None:
    """Register the cell kernels as ``backend``'s "kernel" overrides."""
    for name, fn in OVERRIDES.items():
        backend.override(name, "kernel", fn)
