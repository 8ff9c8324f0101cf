"""The negative log likelihood as ember's own Triton kernels (``loss_kernels.py``), registered
as the CUDA backend's "kernel" overrides (ops/registry.py) of ``nll_loss_nd`` and
``nll_loss_backward``: cross-entropy's second half. The generic impls (ops/losses.py) are a
dozen array-library calls each (picks, masks, casts, two sums), tens of microseconds of host
time apiece; here the forward is two launches and the backward a memset and one or three.

Each wrapper takes the op's arrays (CuPy's on the GPU; numpy's under Triton's interpreter,
which is how CI runs them) and returns the op's result arrays, or None where it does not
apply (not [m, c] rows of classes with m targets, other dtypes, empty), so the generic impl
runs and raises its own errors. The targets' bounds are checked on the device
(checks.py), as the generic impl checks them.
"""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from . import checks
from . import triton_adapter as adapter
from .runtime import cupy

_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, D.bfloat16.np))
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
BLOCK = 1024  # rows of one program's block
PROGRAMS = 64  # at most this many programs share the forward's rows
STATS = {"launches": 0}


def kernels():
    """The Triton kernel module (loss_kernels.py), imported at its first use."""
    return adapter.kernel_module("loss_kernels")


def _xp(a):
    return np if isinstance(a, np.ndarray) else cupy()


def _launch(kernel, grid: int, arrays, scalars, **constexprs) -> None:
    STATS["launches"] += 1
    adapter.launch(kernel, (grid,), adapter.pointers(arrays) + list(scalars), num_warps=4,
                   **constexprs)


def _acc(f64: bool):
    tl = kernels().tl
    return tl.float64 if f64 else tl.float32


def _operands(input, target, weight, ignore_index, reduction):
    """(rows, classes) where the kernels take these operands, else None."""
    if input.ndim != 2 or input.dtype not in _FLOATS or target.dtype != _I64 or \
            target.shape != input.shape[:1] or not target.flags.c_contiguous or \
            type(ignore_index) is not int or reduction not in ("none", "mean", "sum"):
        return None
    m, c = input.shape
    if not m or not c or input.strides[1] != input.itemsize or \
            (weight is not None and (weight.shape != (c,) or weight.dtype != input.dtype or
                                     not weight.flags.c_contiguous)):
        return None
    return m, c


def _sums(x, t, w, m, ignore, mean: bool, dtype, each=None):
    """(loss or mean loss, total weight) as 0-d arrays of ``dtype``; ``x`` None: the total
    weight alone (the loss 0); ``each``: every row's loss stored there too."""
    xp = _xp(t)
    f64 = dtype == _F64
    progs = min(-(-m // BLOCK), PROGRAMS)
    part = xp.empty((2, progs), _F64 if f64 else np.float32)
    loss, total = xp.empty((), dtype), xp.empty((), dtype)
    _launch(kernels().nll_partials, progs,
            [t if x is None else x, t, t if w is None else w, part if each is None else each,
             part],
            [m, 0 if x is None else x.strides[0] // x.itemsize, ignore, progs],
            HAS_X=x is not None, HAS_W=w is not None, EACH=each is not None, ACC=_acc(f64),
            BLOCK=BLOCK)
    _launch(kernels().nll_total, 1, [part, loss, total], [progs], MEAN=mean,
            BLOCK_P=max(16, 1 << (progs - 1).bit_length()))
    return loss, total


def _nll_loss_nd(input, target, weight=None, reduction="mean", ignore_index=-100):
    """nll_loss_nd -> (loss, total_weight)."""
    found = _operands(input, target, weight, ignore_index, reduction)
    if found is None:
        return None
    m, c = found
    checks.check_index(target, 0, c, "nll_loss", what="target", ignore=ignore_index)
    each = _xp(input).empty(m, input.dtype) if reduction == "none" else None
    loss, total = _sums(input, target, weight, m, ignore_index, reduction == "mean",
                        input.dtype, each)
    return (each if each is not None else loss), total


def _nll_loss_backward(grad_output, target, weight, input_shape, reduction, ignore_index):
    """nll_loss_backward -> the input's gradient, [m, c]."""
    shape = tuple(input_shape)
    if len(shape) != 2 or grad_output.dtype not in _FLOATS or target.dtype != _I64 or \
            target.shape != shape[:1] or not target.flags.c_contiguous or \
            type(ignore_index) is not int or reduction not in ("none", "mean", "sum") or \
            grad_output.shape != (shape[:1] if reduction == "none" else ()) or \
            not grad_output.flags.c_contiguous:
        return None
    m, c = shape
    dt = grad_output.dtype
    if not m or not c or (weight is not None and (weight.shape != (c,) or weight.dtype != dt or
                                                  not weight.flags.c_contiguous)):
        return None
    checks.check_index(target, 0, c, "nll_loss", what="target", ignore=ignore_index)
    xp = _xp(grad_output)
    f64 = dt == _F64
    total = grad_output  # unread unless a mean
    if reduction == "mean":  # the total weight, as the forward sums it
        total = _sums(None, target, weight, m, ignore_index, False, dt)[1]
    out = xp.zeros(shape, dt)
    _launch(kernels().nll_grad, -(-m // BLOCK),
            [grad_output, target, grad_output if weight is None else weight, total, out],
            [m, c, ignore_index], PER_ROW=reduction == "none", MEAN=reduction == "mean",
            HAS_W=weight is not None, ACC=_acc(f64), BLOCK=BLOCK)
    return out


OVERRIDES = {"nll_loss_nd": _nll_loss_nd, "nll_loss_backward": _nll_loss_backward}


def register(backend) -> None:
    """Register the loss kernels as ``backend``'s "kernel" overrides."""
    for name, fn in OVERRIDES.items():
        backend.override(name, "kernel", fn)
