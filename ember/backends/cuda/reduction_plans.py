"""Plans of the CUDA reductions (wrappers: ``reductions.py``; kernel: ``reduction_kernels.py``):
everything a reduction's launches need that follows from the input's shape, strides and
dtype and the op's normalised arguments, computed once and kept in a bounded cache, so that a
repeated call is a dictionary lookup, the output allocations and the launches.

Layout: the reduced dims are merged into one axis n, the dims before and after them into
``outer`` and ``inner`` ((outer, n, inner), one element stride per axis), where the strides
allow; otherwise the kept dims are moved in front of the reduced ones (strides only) and
merged there, or, failing that too, the input is copied (each call: ``Plan.perm``). A
reduction over the last dims reads rows (a program owns a few rows in [rows, n] tiles); one
over leading dims with the inner dims contiguous reads columns (a program owns a block of
columns and walks n). When those give too few programs to fill the GPU (a few long rows, a
full reduction, the bias-gradient sum over rows), n is also split between programs: a first
launch writes per-split partials, a second (never split again, narrower column blocks so more
programs share it) reduces them; no atomics, so results are the same from run to run.

A plan is a list of launches over numbered buffers (0: the input, then the allocations, made
directly in the results' shapes). On the GPU each launch goes through a launcher prepared
once (``triton_adapter.prepare``: the compiled kernel for the plan's fixed scalars and
dtypes), taking the buffers' addresses; a launch whose pointers are not all 16-byte aligned
(an offset view) goes through ``triton_adapter.launch``, which compiles for its alignment.
Under Triton's interpreter the launches go through ``launch`` on the numpy buffers.

Accumulation as PyTorch's CUDA kernels: float32 for float16 / bfloat16 / float32, float64 for
float64, int64 for integers and bool.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ... import _dtype as D
from . import triton_adapter as adapter
from .rows import _merged, _pow2, _sm_count
from .runtime import cupy

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)
_I64 = np.dtype(np.int64)
_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, D.bfloat16.np))
TILE = 4096  # elements of one program's tile (2048 in float64)
COLUMNS = 256  # at most this many contiguous inner columns per program
FINAL_COLUMNS = 32  # ... and this many when reducing partials (few rows: more programs)
CACHE = 512  # plans kept (the oldest goes first)
STATS = {"launches": 0, "plans": 0}
SUM, PROD, MAX, MIN, ARGMAX, ARGMIN, SQDEV = range(7)
VAR = 7  # a plan's op: the mean (SUM), then the squared deviations from it (SQDEV)

_PLANS: dict = {}


def kernels():
    """The Triton kernel module (reduction_kernels.py), imported at its first use."""
    return adapter.kernel_module("reduction_kernels")


@functools.cache
def _tl_type(np_dtype):
    tl = kernels().tl
    return {np.dtype(np.float16): tl.float16, np.dtype(D.bfloat16.np): tl.bfloat16,
            _F32: tl.float32, _F64: tl.float64, np.dtype(np.uint8): tl.uint8,
            np.dtype(np.int8): tl.int8, np.dtype(np.int16): tl.int16,
            np.dtype(np.int32): tl.int32, _I64: tl.int64,
            np.dtype(np.bool_): tl.int1}[np.dtype(np_dtype)]


def acc_of(dt) -> np.dtype:
    """The accumulator type for elements of numpy dtype ``dt``."""
    return _F64 if dt == _F64 else _F32 if dt in _FLOATS else _I64


def _ident(op: int, acc: np.dtype):
    """What masked lanes hold, as the Python number Triton takes for ``acc``."""
    if acc.kind == "f":
        return {SUM: 0.0, SQDEV: 0.0, PROD: 1.0, MAX: -math.inf, ARGMAX: -math.inf,
                MIN: math.inf, ARGMIN: math.inf}[op]
    info = np.iinfo(np.int64)
    return {SUM: 0, PROD: 1, MAX: int(info.min), ARGMAX: int(info.min), MIN: int(info.max),
            ARGMIN: int(info.max)}[op]


def _halves(v: float):
    """``v`` as float32 high and low parts (Triton passes Python floats as float32)."""
    hi = float(np.float32(v))
    return hi, float(np.float32(v - hi))


def out_shape(shape, axes, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if d in axes else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in axes)


# ---------------------------------------------------------------------- layout and tiles
def layout(shape, strides, axes):
    """(perm, (outer, n, inner), element strides) reducing ``axes`` (sorted; every dim of a
    non-empty input with element ``strides``), outputs in the order of the kept dims. ``perm``
    None: the input is read in place; else it is copied, contiguous, in that dim order first,
    and the sizes and strides are the copy's."""
    if not shape:  # a 0-d input: its one element
        return None, (1, 1, 1), (0, 0, 0)
    lo, hi = axes[0], axes[-1] + 1
    if hi - lo == len(axes):  # one run of dims: (before, run, after)
        parts = [_merged(shape[:lo], strides[:lo]), _merged(shape[lo:hi], strides[lo:hi]),
                 _merged(shape[hi:], strides[hi:])]
        if None not in parts:
            return None, tuple(p[0] for p in parts), tuple(p[1] for p in parts)
    kept = [d for d in range(len(shape)) if d not in axes]
    perm = kept + list(axes)
    k = len(kept)
    pshape, pst = [shape[d] for d in perm], [strides[d] for d in perm]
    outer, run = _merged(pshape[:k], pst[:k]), _merged(pshape[k:], pst[k:])
    if outer is None or run is None:
        n = math.prod(pshape[k:])
        return tuple(perm), (math.prod(shape) // n, n, 1), (n, 1, 0)
    return None, (outer[0], run[0], 1), (outer[1], run[1], 0)


def _want() -> int:
    """How many programs a launch should have to fill the device."""
    if adapter.interpreting():
        return 4
    return 4 * _sm_count(cupy().cuda.runtime.getDevice())


def tiles(outer: int, n: int, inner: int, si: int, f64: bool, split: bool = True):
    """(BLOCK_I, BLOCK_N, inner blocks, splits of n, chunk of n per split); ``split`` False:
    one split (a launch reducing partials)."""
    tile = TILE // 2 if f64 else TILE
    if si == 1 and inner > 1:  # columns: a block of contiguous inner indices walks n
        bi = min(_pow2(inner), COLUMNS, tile if split else FINAL_COLUMNS)
        bn = min(_pow2(n), max(tile // bi, 1))
    else:  # rows (inner, here the rows' index, steps by a row)
        bn = min(_pow2(n), tile)
        bi = min(_pow2(inner), max(tile // bn, 1))
    iblocks = -(-inner // bi)
    progs = outer * iblocks
    splits, chunk = 1, n
    if split and n > 2 * bn:
        want = _want()
        if progs < want:
            splits = min(-(-want // progs), -(-n // (2 * bn)))
            chunk = -(-(-(-n // splits)) // bn) * bn
            splits = -(-n // chunk)
    return bi, bn, iblocks, splits, chunk


# ---------------------------------------------------------------------- plans
class _Launch:
    """One launch of the ``reduce`` kernel: its pointer arguments as buffer numbers (x, xi,
    mean, y, yi), runtime scalars, grid, warps, constexprs, and (GPU) the launcher prepared
    for aligned pointers."""

    __slots__ = ("args", "scalars", "grid", "warps", "constexprs", "go")

    def __init__(self, args, scalars, grid, warps, constexprs):
        self.args, self.scalars, self.grid = args, scalars, grid
        self.warps, self.constexprs, self.go = warps, constexprs, None


class Plan:
    """The launches of one reduction over buffers (0: the input; then ``allocs``, each
    (shape, dtype), allocated per call); ``results``: the buffers returned."""

    __slots__ = ("perm", "allocs", "launches", "results")

    def __init__(self, perm):
        self.perm, self.allocs, self.launches, self.results = perm, [], [], ()

    def _buffer(self, shape, dtype) -> int:
        self.allocs.append((tuple(shape), dtype))
        return len(self.allocs)

    def reduce(self, src: int, sizes, strides, op: int, pre, out_dt, shape, fin: int = 0,
               div: float = 1.0, mean: int | None = None, xi: int | None = None,
               split: bool = True):
        """Add the launches of OP over n of buffer ``src`` seen as ``sizes`` = (outer, n,
        inner) with ``strides``, elements read as ``pre``, results of ``out_dt`` shaped
        ``shape`` -> (their buffer, the indices' buffer for ARGMAX / ARGMIN, else None)."""
        outer, n, inner = sizes
        so, sn, si = strides
        if inner == 1:  # rows: their index is the tile's first axis, so rows share a program
            outer, inner, so, si = 1, outer, 0, so
        acc = acc_of(pre)
        bi, bn, iblocks, splits, chunk = tiles(outer, n, inner, si, acc == _F64, split)
        indexed = op in (ARGMAX, ARGMIN)
        if splits == 1:
            y = self._buffer(shape, out_dt)
            yi = self._buffer(shape, _I64) if indexed else y
        else:  # partials (outer, splits, inner)
            y = self._buffer((outer * splits * inner,), acc)
            yi = self._buffer((outer * splits * inner,), _I64) if indexed else y
        scalars = [n, inner, iblocks, splits, chunk, so, sn, si, _ident(op, acc),
                   *_halves(div if splits == 1 else 1.0)]
        constexprs = dict(OP=op, PRE=_tl_type(pre), ACC=_tl_type(acc), IDX_IN=xi is not None,
                          FIN=fin if splits == 1 else 0, BLOCK_I=bi, BLOCK_N=bn)
        args = (src, src if xi is None else xi, src if mean is None else mean, y, yi)
        self.launches.append(_Launch(args, scalars, outer * iblocks * splits,
                                     4 if bi * bn <= 2048 else 8, constexprs))
        if splits == 1:
            return y, (yi if indexed else None)
        second = SUM if op == SQDEV else op
        return self.reduce(y, (outer, splits, inner), (splits * inner, inner, 1), second, acc,
                           out_dt, shape, fin, div, xi=yi if indexed else None, split=False)

    def run(self, x) -> list:
        """The launches on input ``x`` (CuPy's, numpy's under the interpreter) -> the
        results."""
        if adapter.interpreting():
            if self.perm is not None:
                x = np.ascontiguousarray(x.transpose(self.perm))
            bufs = [x] + [np.empty(s, d) for s, d in self.allocs]
            kernel = kernels().reduce
            for ln in self.launches:
                adapter.launch(kernel, (ln.grid,), [bufs[i] for i in ln.args] + ln.scalars,
                               num_warps=ln.warps, **ln.constexprs)
        else:
            cp = cupy()
            if self.perm is not None:
                x = cp.ascontiguousarray(x.transpose(self.perm))
            empty = cp.empty
            bufs = [x] + [empty(s, d) for s, d in self.allocs]
            stream = cp.cuda.get_current_stream().ptr
            for ln in self.launches:
                a, b, c, d, e = ln.args
                ptrs = (bufs[a].data.ptr, bufs[b].data.ptr, bufs[c].data.ptr,
                        bufs[d].data.ptr, bufs[e].data.ptr)
                go = ln.go
                if (ptrs[0] | ptrs[1] | ptrs[2] | ptrs[3] | ptrs[4]) & 15:
                    go = None  # an offset view: compiled for its alignment
                    adapter.launch(kernels().reduce, (ln.grid,), self._pointers(bufs, ln, ptrs)
                                   + ln.scalars, stream, num_warps=ln.warps, **ln.constexprs)
                elif go is None:
                    go = ln.go = adapter.prepare(
                        kernels().reduce, (ln.grid,), self._pointers(bufs, ln, ptrs)
                        + ln.scalars, num_warps=ln.warps, **ln.constexprs)
                if go is not None:
                    go(stream, *ptrs, *ln.scalars)
        STATS["launches"] += len(self.launches)
        return [bufs[i] for i in self.results]

    @staticmethod
    def _pointers(bufs, ln, ptrs) -> list:
        return [adapter.Pointer(p, bufs[i].dtype) for p, i in zip(ptrs, ln.args)]


def _build(shape, strides, spec):
    """The plan of ``spec`` (see ``planned``) for an input of ``shape`` and element
    ``strides``; None where it declines (a variance without degrees of freedom)."""
    op, axes, keepdim, pre, out_dt, fin, to_shape, correction = spec
    perm, sizes, st = layout(shape, strides, axes)
    out = out_shape(shape, axes if shape else (), keepdim) if to_shape is None else to_shape
    plan = Plan(perm)
    if op == VAR:
        dof = sizes[1] - correction
        if dof <= 0:
            return None  # the impl warns
        acc = acc_of(pre)
        mean, _ = plan.reduce(0, sizes, st, SUM, pre, acc, out, 1, float(sizes[1]))
        v, _ = plan.reduce(0, sizes, st, SQDEV, pre, out_dt, out, fin, float(dof), mean=mean)
        plan.results = (v, mean)
    else:
        v, i = plan.reduce(0, sizes, st, op, pre, out_dt, out, fin, float(sizes[1]))
        plan.results = (v,) if i is None else (v, i)
    return plan


def planned(x, spec):
    """The results of the reduction ``spec`` = (op, sorted axes, keepdim, elements' dtype,
    results' dtype, FIN, the results' shape or None (from keepdim), a variance's correction)
    of a non-empty ``x``, through the plan cached for ``x``'s shape, strides and dtype; None
    where the plan declines."""
    device = 0 if adapter.interpreting() else cupy().cuda.runtime.getDevice()
    key = (x.shape, x.strides, x.dtype, device, spec)
    plan = _PLANS.get(key, _PLANS)
    if plan is _PLANS:
        item = x.itemsize
        plan = _build(x.shape, tuple(s // item for s in x.strides), spec)
        while _PLANS and len(_PLANS) >= CACHE:
            forget(_PLANS)
        _PLANS[key] = plan
        STATS["plans"] += 1
    return None if plan is None else plan.run(x)


def forget(cache: dict) -> None:
    """Drop the oldest entry of ``cache`` (another thread may be dropping it too)."""
    try:
        del cache[next(iter(cache))]
    except (KeyError, RuntimeError, StopIteration):
        pass
