"""CUDA eager pointwise ops: each definition over the scalar primitives becomes one generated
Triton kernel per (operand dtypes and layout classes, constants, dimensions), emitted by
codegen/triton/pointwise.py, loaded once and cached.

``compile(defn, xp)`` is the kernel the op table calls for arrays of ``xp`` (CuPy's, or numpy's
under Triton's interpreter, which is how CI runs every generated kernel without a GPU): it
takes the definition's operands (arrays of one device, Python constants), allocates the
contiguous output and launches one kernel.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np

from ... import _dtype as D
from ...codegen import cache
from ...codegen.triton.pointwise import Number, Operand, emit
from ...codegen.triton.scalar_ops import TL_DTYPE
from . import triton_adapter as adapter

BLOCK = 1024
NUMBERS = {float: "float", int: "int", bool: "bool"}
CODEGEN_DTYPES = frozenset(d.np for d in TL_DTYPE)
F64 = np.dtype(np.float64)
_KERNELS: dict = {}
STATS = {"emitted": 0, "launches": 0}


def compile(defn, xp):
    """``kernel(*operands)`` computing ``defn`` with generated Triton kernels on ``xp``'s
    arrays."""
    array_type = type(xp.empty(0))
    name = getattr(defn, "__name__", "pointwise").strip("<>_") or "pointwise"
    plans: dict = {}  # the operands' shapes, strides, dtypes and constants -> Plan

    fallback = None
    baked = False  # the definition uses its numbers as Python constants: compiled in

    def kernel(*operands, out=None):
        nonlocal fallback, baked
        key, numbers, f64 = [], False, False
        for a in operands:
            t = type(a)
            if t is array_type:
                dt = a.dtype
                if dt not in CODEGEN_DTYPES:
                    # complex (and float8): no Triton spelling; the handler computes
                    if out is not None:
                        return None
                    if fallback is None:
                        from ..xp_ops import handler
                        fallback = functools.partial(defn, handler(xp))
                    return fallback(*operands)
                f64 = f64 or dt == F64
                key.append((a.shape, a.strides, dt))
            elif t in NUMBERS:
                numbers = True
                key.append(t)  # passed at launch
            elif t is D.dtype:
                key.append(a)  # (a cast's target: ember's dtypes are singletons)
            else:
                key.append((t, repr(a)))
        if numbers and (f64 or baked):  # numbers compiled in: their values count
            key = [(type(a), repr(a)) if type(a) in NUMBERS else k
                   for a, k in zip(operands, key)]
        key = tuple(key)
        plan = plans.get(key)
        if plan is None:
            if len(plans) > 4096:  # shapes that keep changing: start over
                plans.clear()
            try:
                plan = _plan(defn, name, array_type, operands, baked)
            except TypeError:
                if baked or not numbers:
                    raise
                # a definition that computes with its numbers in Python (elu's alpha *
                # scale, round's decimals): from now on they are compiled in, by value
                baked = True
                return kernel(*operands, out=out)
            plans[key] = plan
        fn, out_dtype, shape, n, grid, tail, passed, ready = plan
        if out is None:
            out = array_type(shape, out_dtype)  # uninitialised, as xp.empty (one call less)
        elif type(out) is not array_type or out.shape != shape or out.dtype != out_dtype or \
                not out.flags.c_contiguous:
            return None  # the result is not out's shape, dtype or layout: nothing written
        if n:
            STATS["launches"] += 1
            arrays = (out, *(a for a in operands if type(a) is array_type))
            numbers = [operands[i] for i in passed] if passed else ()
            if ready is not None:
                # the plan's prepared launcher: every address 16-byte aligned, on its device,
                # the numbers of the types it was prepared for
                ptrs = [a.data.ptr for a in arrays]
                bits = 0
                for p in ptrs:
                    bits |= p
                if not bits & 15 and adapter.current_device() == ready[0] and \
                        (not numbers or _types(numbers) == ready[2]):
                    ready[1](adapter.current_stream(), *ptrs, *numbers, *tail)
                    return out
            args = adapter.pointers(arrays) + list(numbers)
            adapter.launch(fn, grid, args + tail, BLOCK=BLOCK)
            if ready is None and not adapter.interpreting():
                if not any(a.ptr & 15 for a in args[:len(arrays)]):
                    plan[7] = (adapter.current_device(),
                               adapter.prepare(fn, grid, args + tail, BLOCK=BLOCK),
                               _types(numbers))
        return out
    kernel.__name__ = f"triton_{name}"
    return kernel


def _types(numbers) -> tuple:
    """What a launch's compiled signature takes of numbers passed at launch (the kernels do
    not specialise on their values): bool, float (float32), or an int of 32 or 64 bits."""
    return tuple(-2**31 <= v < 2**31 if type(v) is int else type(v) for v in numbers)


def inplace(plain, scaled, integers: bool, backend):
    """``backend``'s "inplace" override (ops/registry.py) of an arithmetic op whose definitions
    are ``plain(a, b)`` and ``scaled(a, b, alpha)`` (None: the op takes no alpha; integer
    operands only where ``integers``): ``x.op_(other[, alpha=])`` as one kernel writing its
    result into x's memory, where that result has x's shape and dtype and x is C-contiguous;
    False (nothing written) elsewhere, and the op runs out of place and is copied in.
    ``other`` is an array of x's dtype or a Python number; an operand may be x itself (each
    element is read, then written, by one program), and one that partly overlaps it was
    refused before (check_partial_overlap)."""
    def into(a, b, alpha) -> bool:
        if a.dtype not in CODEGEN_DTYPES or a.dtype == np.bool_ or (
                not integers and a.dtype.kind in "iu"):
            return False  # (bool arithmetic is logic, the impl's)
        xp = backend.xp
        if alpha is None:
            return plain.kernels[xp](a, b, out=a) is not None
        if scaled is None or (a.dtype.kind in "iu" and type(alpha) is not int):
            return False  # (an integer x with a float alpha: the impl's error)
        return scaled.kernels[xp](a, b, alpha, out=a) is not None
    return into


def _plan(defn, name, array_type, operands, baked: bool = False):
    """What a call on operands of these shapes, strides and dtypes launches: ``[kernel,
    output numpy dtype, output shape, elements, grid, the size and stride arguments, the
    positions of numbers passed at launch, the prepared launcher or None]``; ``baked``:
    every number compiled into the source."""
    arrays = [a for a in operands if type(a) is array_type]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    n = 1
    for s in shape:
        n *= s
    layouts, strided, passed = [], [], []
    # numbers are passed at launch, except beside float64 tensors (Triton passes a Python
    # float as float32; those are baked into the source, exact)
    by_value = not baked and not any(a.dtype == np.float64 for a in arrays)
    for i, a in enumerate(operands):
        if type(a) in NUMBERS and by_value:
            layouts.append(Number(NUMBERS[type(a)]))
            passed.append(i)
        elif type(a) is not array_type:
            layouts.append(a)
        elif a.size == 1:
            layouts.append(Operand(D.from_np(a.dtype), "scalar"))
        elif a.shape == shape and a.flags.c_contiguous:
            layouts.append(Operand(D.from_np(a.dtype), "dense"))
        else:
            layouts.append(Operand(D.from_np(a.dtype), "strided"))
            strided.append(a)
    sizes, strides = _collapse(shape, strided) if strided else ((), [])
    key = (defn, tuple(_key(o) for o in layouts), len(sizes), adapter.interpreting())
    entry = _KERNELS.get(key)
    if entry is None:
        entry = _KERNELS[key] = _load(emit(defn, tuple(layouts), len(sizes), f"{name}_kernel"))
    fn, out_dtype = entry
    tail = [n, *sizes]
    for st in strides:
        tail += st
    # the last entry: (device, launcher) prepared for aligned addresses after a first launch
    return [fn, out_dtype.np, shape, n, ((n + BLOCK - 1) // BLOCK,), tail, tuple(passed), None]


def _key(o):
    return o if isinstance(o, Operand) else (type(o).__name__, repr(o))


def _collapse(shape, arrays):
    """The output's sizes and each array's element strides over them (0 along broadcast
    dimensions), with dimensions merged where every stride allows and size-1 ones dropped."""
    nd = len(shape)
    per = []
    for a in arrays:
        pad = nd - a.ndim
        st = [0] * pad + [s // a.itemsize for s in a.strides]
        sh = [1] * pad + list(a.shape)
        per.append([0 if sh[d] == 1 else st[d] for d in range(nd)])
    dims = [d for d in range(nd) if shape[d] != 1]
    sizes = [shape[d] for d in dims]
    strides = [[st[d] for d in dims] for st in per]
    merged_sizes, merged = [], [[] for _ in arrays]
    for j, size in enumerate(sizes):
        if merged_sizes and all(m[-1] == st[j] * size for m, st in zip(merged, strides)):
            merged_sizes[-1] *= size
            for m, st in zip(merged, strides):
                m[-1] = st[j]
            continue
        merged_sizes.append(size)
        for m, st in zip(merged, strides):
            m.append(st[j])
    return tuple(merged_sizes), merged


def _load(k):
    """The ``@triton.jit`` function of kernel ``k``: its source written to the cache directory
    (Triton reads a kernel's source from its file) and imported."""
    adapter.triton()
    key = cache.key_of(k.source, "interpret" if adapter.interpreting() else "cuda")
    folder = os.path.join(cache.cache_dir(), "triton")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{k.name}_{key}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(k.source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(f"ember_triton_{key}", path)
    module = importlib.util.module_from_spec(spec)
    module.libdevice = adapter.libdevice()
    spec.loader.exec_module(module)
    STATS["emitted"] += 1
    return getattr(module, k.name), k.out_dtype

