"""The CUDA backend's fused optimizer steps (``Backend.offer_step``): Adam / AdamW and SGD over
a whole list of parameters in one Triton launch (kernels: ``optim_kernels.py``).

The protocols are their callers' (optim/adam.py, optim/sgd.py): ``fits(p, g, *state)`` says
whether a parameter's arrays go in; then one call updates a list of them in place, all of
one dtype. The arrays are CuPy's on the GPU, numpy's under Triton's interpreter (how CI runs
the kernels).

A launch reads a table of the parameters' sizes and addresses (optim_kernels.py describes
it), uploaded once and cached under those addresses, so a training loop whose gradients come
back at the same addresses (the caching allocator's usual behaviour) uploads it once. The
step's hyperparameters travel as a small float64 array, exact for float64 parameters.
"""

from __future__ import annotations

import functools

import numpy as np

from ... import _dtype as D
from . import triton_adapter as adapter
from .runtime import cupy

BLOCK, ITERS = 1024, 16  # a program updates BLOCK * ITERS elements of one parameter
MAX_TABLES = 16  # cached parameter tables (one per parameter list and address set)
STATS = {"launches": 0, "tables": 0}
_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, D.bfloat16.np))
_F64 = np.dtype(np.float64)
_TABLES: dict = {}


@functools.cache
def kernels():
    """The Triton kernel module, imported on first use (``import ember`` loads no Triton)."""
    adapter.triton()  # the version check
    from . import optim_kernels
    return optim_kernels


def _address(a) -> int:
    return a.__array_interface__["data"][0] if type(a) is np.ndarray else a.data.ptr


def _device(a):
    return None if type(a) is np.ndarray else a.device.id


def fits(p, g, *state) -> bool:
    """Whether a parameter's arrays go into a fused step: one array type, device, float dtype
    and shape; C-contiguous, 16-byte aligned (the kernels load vectors), not overlapping.
    (Once per parameter and step: written out, without generators.)"""
    kind, dtype, shape = type(p), p.dtype, p.shape
    if dtype not in _FLOATS:
        return False
    arrays = (p, g) + state
    for a in arrays:
        if type(a) is not kind or a.dtype != dtype or a.shape != shape or \
                not a.flags.c_contiguous:
            return False
    if kind is np.ndarray:
        for a in (p,) + state:
            if not a.flags.writeable:
                return False
    else:
        dev = p.data.device_id
        for a in arrays:
            if a.data.device_id != dev:
                return False
    if p.size == 0:
        return True
    n = p.nbytes
    starts = sorted([_address(a) for a in arrays])
    prev = None
    for lo in starts:
        if lo % 16 or (prev is not None and prev + n > lo):
            return False
        prev = lo
    return True


def _table(items):
    """(device table, where its program list starts, programs) for ``items``, tuples of
    arrays of one device with their elements first; None when nothing is to be done."""
    items = [q for q in items if q[0].size]
    if not items:
        return None
    if type(items[0][0]) is np.ndarray:
        rows = tuple((q[0].size, *[_address(a) for a in q]) for q in items)
    else:
        rows = tuple((q[0].size, *[a.data.ptr for a in q]) for q in items)
    key = (_device(items[0][0]), BLOCK, ITERS, rows)
    hit = _TABLES.get(key)
    if hit is not None:
        return hit
    cols = kernels().COLS.value
    rows = np.zeros((len(items), cols), np.int64)
    rows[:, :len(key[3][0])] = key[3]
    chunks = -(-rows[:, 0] // (BLOCK * ITERS))
    first = np.repeat(np.cumsum(chunks) - chunks, chunks)
    progs = np.stack([np.repeat(np.arange(len(items)), chunks),
                      np.arange(int(chunks.sum())) - first], axis=1)
    host = np.concatenate([rows.ravel(), progs.ravel()])
    table = host if isinstance(items[0][0], np.ndarray) else cupy().asarray(host)
    if len(_TABLES) >= MAX_TABLES:
        del _TABLES[next(iter(_TABLES))]
    STATS["tables"] += 1
    hit = _TABLES[key] = (table, rows.size, len(progs))
    return hit


def _launch(kernel, items, hyper, **constexprs) -> None:
    """``kernel`` once over every parameter in ``items`` (tuples of arrays of one dtype)."""
    by_device: dict = {}
    for q in items:
        by_device.setdefault(_device(q[0]), []).append(q)
    tl = kernels().tl
    dt = items[0][0].dtype
    constexprs.update(DT=_TL_DTYPES[dt](tl), ACC=tl.float64 if dt == _F64 else tl.float32,
                      BLOCK=BLOCK, ITERS=ITERS)
    h = np.array(hyper, np.float64)
    for dev, group in by_device.items():
        if dev is None:  # the interpreter, on numpy arrays
            plan = _table(group)
            if plan is not None:
                table, progs, grid = plan
                STATS["launches"] += 1
                adapter.launch(kernel, (grid,), [table, progs, h], **constexprs)
            continue
        cp = cupy()
        with cp.cuda.Device(dev):  # the table, the hyperparameters and the launch on dev
            plan = _table(group)
            if plan is None:
                continue
            table, progs, grid = plan
            STATS["launches"] += 1
            args = [adapter.Pointer(table.data.ptr, table.dtype), progs,
                    adapter.Pointer(cp.asarray(h).data.ptr, _F64)]
            adapter.launch(kernel, (grid,), args, num_warps=4, enable_fp_fusion=False,
                           **constexprs)


_TL_DTYPES = {np.dtype(np.float16): lambda tl: tl.float16,
              np.dtype(np.float32): lambda tl: tl.float32,
              np.dtype(np.float64): lambda tl: tl.float64,
              np.dtype(D.bfloat16.np): lambda tl: tl.bfloat16}


class AdamStep:
    """One Adam / AdamW step in place (optim/adam.py) over many parameters in one launch:
    ``fits(p, g, m, v[, max_v])`` says whether a parameter's arrays go in, then ``self(params,
    maximize, wd_mode, decay, wd, beta1, beta2, bc2_sqrt, eps, step)`` updates them: tuples
    (p, g, m, v), or (p, g, m, v, max_v) with amsgrad, of one dtype; wd_mode 0: no weight
    decay, 1: decoupled (``p *= decay``), 2: L2 (``g += wd * p``); ``step`` = -lr / bias
    correction 1."""

    fits = staticmethod(fits)

    def __call__(self, params: list, maximize: bool, wd_mode: int, decay: float, wd: float,
                 beta1: float, beta2: float, bc2_sqrt: float, eps: float, step: float) -> None:
        if not params:
            return
        _launch(kernels().adam, params,
                (decay, wd, 1 - beta1, beta2, 1 - beta2, bc2_sqrt, eps, step),
                MAXIMIZE=bool(maximize), WD_MODE=int(wd_mode), AMSGRAD=len(params[0]) == 5)


class SGDStep:
    """One SGD step in place (optim/sgd.py) over many parameters in one launch: ``fits(p, g[,
    buf])``, then ``self(params, maximize, wd, momentum, dampening, nesterov, lr, first)`` on
    tuples (p, g), or (p, g, momentum buffer) with momentum, of one dtype; ``first``: the
    buffers are new (each becomes its gradient, weight decay included)."""

    fits = staticmethod(fits)

    def __call__(self, params: list, maximize: bool, wd: float, momentum: float,
                 dampening: float, nesterov: bool, lr: float, first: bool) -> None:
        if not params:
            return
        _launch(kernels().sgd, params, (wd, momentum, 1 - dampening, -lr),
                MAXIMIZE=bool(maximize), WD=wd != 0, MOMENTUM=momentum != 0,
                FIRST=bool(first), NESTEROV=bool(nesterov))


def register(backend) -> None:
    """Offer the fused steps on ``backend``."""
    backend.offer_step("adam", AdamStep())
    backend.offer_step("sgd", SGDStep())
