"""The Triton pointwise emitter: a definition ``defn(ops, x, ...)`` over the scalar primitives,
plus its operands' dtypes and layout class, becomes the source of one Triton kernel.

Operands: each is an array (``Operand``: its dtype and how it is read) or a Python constant
(a number, None or a string the definition reads as a parameter; baked into the source, so
it is part of the kernel's key). The output is a new contiguous array of the broadcast shape.

Layout classes (how an array operand is read):
- "dense":  contiguous, with the output's shape: element ``i`` at offset ``i``;
- "scalar": one element (a 0-d array, or every size 1), loaded once and broadcast;
- "strided": anything else; the kernel takes the output's sizes and the operand's element
  strides (0 along broadcast dimensions) and computes each offset, over ``ndim`` dimensions.
A kernel whose operands are all "dense" or "scalar" indexes with the flat offset alone.

The source imports nothing but ``triton``, ``triton.language as tl`` and a ``libdevice``
module the runtime puts in its namespace (Triton's, or the interpreter's stand-in).
"""

from __future__ import annotations

from typing import NamedTuple

from ... import _dtype as D
from .scalar_ops import HALF, TL_DTYPE, TritonScalarOps, Value


class Operand(NamedTuple):
    dtype: D.dtype
    layout: str  # "dense", "scalar" or "strided"


class Number(NamedTuple):
    """A Python number passed at launch (not baked into the source): weakly typed, it takes
    its partner's dtype in every primitive, as PyTorch's wrapped numbers do."""

    kind: str  # "float", "int" or "bool"


class Kernel(NamedTuple):
    source: str
    name: str
    out_dtype: D.dtype
    arrays: tuple[int, ...]  # positions of the array operands, in kernel argument order
    ndim: int                # dimensions of the strided index (0: flat)


def emit(defn, operands: tuple, ndim: int, name: str = "kernel") -> Kernel:
    """The kernel computing ``defn`` on ``operands`` (``Operand``s and constants, in the
    definition's parameter order) over an output of ``ndim`` dimensions."""
    ops = TritonScalarOps()
    strided = any(isinstance(o, Operand) and o.layout == "strided" for o in operands)
    idx_dims = ndim if strided else 0
    params, loads, arrays, args, numbers = ["out_ptr"], [], [], [], []
    for i, o in enumerate(operands):
        if isinstance(o, Number):
            numbers.append(f"s{i}")
            args.append(Value(f"s{i}", None))
            continue
        if not isinstance(o, Operand):
            args.append(o)
            continue
        arrays.append(i)
        ptr = f"in{i}_ptr"
        params.append(ptr)
        if o.layout == "scalar":
            load = f"tl.broadcast_to(tl.load({ptr}), [BLOCK])"
        elif o.layout == "dense":
            load = f"tl.load({ptr} + offs, mask=mask)"
        else:
            strides = [f"st{i}_{d}" for d in range(ndim)]
            offset = " + ".join(f"i{d} * {s}" for d, s in enumerate(strides)) or "0"
            load = f"tl.load({ptr} + ({offset}), mask=mask)"
        if o.dtype in HALF:
            load += ".to(tl.float32)"
        loads.append(f"x{i} = {load}")
        args.append(Value(f"x{i}", o.dtype))
    params += numbers
    params.append("n")
    sizes = [f"size{d}" for d in range(idx_dims)]
    params += sizes
    for i in arrays:
        if operands[i].layout == "strided":
            params += [f"st{i}_{d}" for d in range(ndim)]
    result = defn(ops, *args)
    if not isinstance(result, Value):
        raise TypeError(f"{name}: a definition returns a value a primitive computed")
    out_dt = result.dtype
    if result.dtype is None:
        raise TypeError(f"{name}: a definition's result depends on its tensors, not only on "
                        "numbers")
    out_dt = result.dtype
    lines = [
        f"@triton.jit(do_not_specialize={numbers!r})" if numbers else "@triton.jit",
        f"def {name}({', '.join(params)}, BLOCK: tl.constexpr):",
        "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < n",
    ]
    if idx_dims:
        lines.append("    rest = offs")
        for d in reversed(range(idx_dims)):
            if d:
                lines.append(f"    i{d} = rest % size{d}")
                lines.append(f"    rest = rest // size{d}")
            else:
                lines.append("    i0 = rest")
    lines += [f"    {s}" for s in loads + ops.body]
    store = result if out_dt not in HALF and out_dt is not D.bool_ else \
        f"{result}.to({TL_DTYPE[out_dt]})"
    if out_dt is D.bool_:
        store = f"{result}.to(tl.int1)"
    lines.append(f"    tl.store(out_ptr + offs, {store}, mask=mask)")
    header = "import triton\nimport triton.language as tl\n\n"
    source = header + f"# {_describe(defn)}\n" + "\n".join(lines) + "\n"
    return Kernel(source, name, out_dt, tuple(arrays), idx_dims)


def _describe(defn) -> str:
    return f"{getattr(defn, '__module__', '?')}.{getattr(defn, '__qualname__', repr(defn))}"
