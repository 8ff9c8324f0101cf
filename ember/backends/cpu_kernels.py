"""The CPU backend's per-op overrides (see ``ops/registry.py``, "call paths"): where ember's own
kernels beat the generic numpy impl of an op, registered here by op name.

    binary    add, sub, mul, div: the threaded ufuncs; matmul: numpy's matmul (BLAS)
    kernel    add, sub with ``alpha``: one fused pass (native axpy), each element rounded once
              as PyTorch's fused kernel rounds it
    inplace   add_, sub_, mul_: written straight into the target's memory, without the result
              array and the copy (a third of the memory traffic of an optimizer's
              ``p.add_(d, alpha=-lr)``)

and one fused step of a layer above the op table (``Backend.fused_step``):

    adam      one Adam / AdamW step over every parameter of a group in one native call (the
              arithmetic of optim/adam.py's ``_fused_update``, with its bits)

Each computes exactly the values of the generic impl, which the op tests check.
"""

from __future__ import annotations

import numpy as np

from . import native
from .cpu import BACKEND, parallel_ufunc, parallel_ufunc_into

_FLOATS = (np.float32, np.float64)


def _axpy(negate: bool):
    """``input + alpha * other`` (``-`` for sub) for float arrays of one dtype, shape and
    layout: a copy of input, then axpy into it; None where that does not apply."""
    def kernel(input, other, alpha=1):
        if type(alpha) not in (int, float) or alpha == 1 or not native.axpy_fits(input, other):
            return None
        out = np.copy(input, order="K")  # a dense input's layout: the copy fits too
        return out if native.axpy(out, other, -alpha if negate else alpha) else None
    return kernel


def _into(ufunc, scaled: bool):
    """``x.<op>_(other[, alpha=a])`` into x's memory (``a``: ``alpha``, None when not given):
    float x, ``b`` an array of x's dtype broadcasting to x's shape or a Python number (without
    alpha). With alpha, a fused axpy where x and other share one dense layout, else
    ``other * alpha`` rounded to x's dtype, then the ufunc: the out-of-place values."""
    def into(a, b, alpha) -> bool:
        if a.dtype not in _FLOATS or not a.flags.writeable or (alpha is not None and not scaled):
            return False
        alpha = 1 if alpha is None else alpha
        if type(b) is not np.ndarray:
            if alpha != 1:
                return False
            b = np.asarray(b).astype(a.dtype)
        elif b.shape != a.shape:
            try:
                if np.broadcast_shapes(a.shape, b.shape) != a.shape:
                    return False
            except ValueError:
                return False
        if scaled and native.axpy(a, b, -alpha if ufunc is np.subtract else alpha):
            return True  # one pass, rounded once: the fused kernel's values
        parallel_ufunc_into(ufunc, a, b, None if alpha == 1 else np.asarray(alpha).astype(a.dtype))
        return True
    return into


# ---------------------------------------------------------------------- Adam
class _AdamStep:
    """One Adam / AdamW step in place (optim/adam.py) over many parameters in one native
    call: ``fits(p, g, m, v)`` says whether a parameter's arrays go in, then ``self(params,
    maximize, wd_mode, decay, wd, beta1, beta2, bc2_sqrt, eps, step)`` updates them (see
    ``native.adam``)."""

    @staticmethod
    def fits(p, g, m, v) -> bool:
        return native.adam_fits(p, g, m, v)

    def __call__(self, params: list, *hyper) -> None:
        native.adam(params, *hyper)


for _name, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("div", np.true_divide)):
    BACKEND.override(_name, "binary", parallel_ufunc(_ufunc))
BACKEND.override("matmul", "binary", np.matmul)
BACKEND.override("add", "kernel", _axpy(negate=False))
BACKEND.override("sub", "kernel", _axpy(negate=True))
BACKEND.override("add", "inplace", _into(np.add, scaled=True))
BACKEND.override("sub", "inplace", _into(np.subtract, scaled=True))
BACKEND.override("mul", "inplace", _into(np.multiply, scaled=False))
BACKEND.offer_step("adam", _AdamStep())
