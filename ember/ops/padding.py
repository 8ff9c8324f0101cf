"""``pad``: the op behind ``nn.functional.pad`` (constant, reflect, replicate, circular).

``pad`` lists (before, after) pairs starting from the last dimension. Constant padding works on
any number of dimensions and crops where a pad is negative. The other modes pad the last 1-3
dimensions of an input with one optional batch dimension, by gathering along an index map per
padded dimension (``_index_map``); their backward scatter-adds through the same maps.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from .registry import op
from .shape import _int_list

MODES = ("constant", "reflect", "replicate", "circular")

# PyTorch names the C type in its fill-value overflow message
_C_NAMES = {D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t", D.int32: "int",
            D.int64: "int64_t", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16",
            D.float32: "float"}


def _pairs(pad: tuple, ndim: int) -> list:
    """``[(dim, before, after), ...]`` from the outermost padded dimension inwards."""
    k = len(pad) // 2
    return [(ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in reversed(range(k))]


def _fill_value(value, dt: D.dtype):
    if value is None:
        return 0
    if isinstance(value, Tensor):
        value = value.item()
    if isinstance(value, complex) and not isinstance(value, numbers.Real):
        raise TypeError("pad(): argument 'value' (position 4) must be float, not complex")
    if dt is D.bool_ or dt.kind == "c" or dt is D.float64:
        return value
    v = float(value)
    if dt.kind in "iu":
        info = np.iinfo(dt.np)
        ok = math.isfinite(v) and info.min <= int(v) <= info.max and (
            not isinstance(value, int) or info.min <= value <= info.max)
        if ok:
            return int(value) if isinstance(value, int) else int(v)
    elif not math.isfinite(v) or abs(v) <= D.finfo(dt).max:
        return v
    raise RuntimeError(f"value cannot be converted to type {_C_NAMES[dt]} without overflow")


def _index_map(xp, n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """For each output position along one padded dimension, the input position it copies."""
    m = n + lo + hi
    if mode == "circular":
        c0 = max(-lo, 0)
        width = n - c0 - max(-hi, 0)
        j = xp.arange(m) - max(lo, 0)
        return c0 + j % width if width > 0 else j  # width 0: the output is empty
    k = xp.arange(m) - lo
    if mode == "replicate":
        return xp.clip(k, 0, n - 1)
    k = xp.abs(k)  # reflect: mirror about the first and the last element
    return xp.where(k > n - 1, 2 * (n - 1) - k, k)


def _check_constant(shape, pairs) -> None:
    for d, lo, hi in pairs:
        if shape[d] - max(-lo, 0) - max(-hi, 0) < 0:
            raise RuntimeError("narrow(): length must be non-negative.")


def _check_nonconstant(shape, pairs, mode: str, npad: int, kernel: str, dt: D.dtype) -> None:
    nd, pd = len(shape), npad // 2
    if pd not in (1, 2, 3) or nd not in (pd + 1, pd + 2):
        raise NotImplementedError(f"Padding size {npad} is not supported for {nd}D input "
                                  "tensor.")
    out = [shape[d] + lo + hi for d, lo, hi in pairs]
    if mode == "circular":
        for (d, lo, hi), o in zip(pairs, out):
            if lo > shape[d] or hi > shape[d]:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            if o < 0:
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
        for (d, lo, hi), o in zip(pairs, out):
            # a border wider than the cropped remainder wraps around it again (PyTorch's copy
            # may fail or read uninitialised memory there); an empty remainder has nothing to wrap
            if o > 0 and shape[d] - max(-lo, 0) - max(-hi, 0) <= 0:
                raise RuntimeError(f"pad(): circular padding of dimension {d} wraps around "
                                   f"nothing: negative padding crops all {shape[d]} elements")
        return
    first = 1 if nd == pd + 2 else 0  # a batch dimension may be empty, no other may
    if any(s == 0 for s in shape[first:]):
        raise RuntimeError(f"Expected {pd + 1}D or {pd + 2}D (batch mode) tensor with possibly 0 "
                           "batch size and other non-zero dimensions for input, but got: "
                           f"{list(shape)}")
    if mode == "reflect":
        for i, (d, lo, hi) in enumerate(reversed(pairs)):
            if lo >= shape[d] or hi >= shape[d]:
                raise RuntimeError(f"Argument #{4 + 2 * i}: Padding size should be less than "
                                   "the corresponding input dimension, but got: padding "
                                   f"({lo}, {hi}) at dimension {d} of input {list(shape)}")
    full = list(shape)
    for (d, _, _), o in zip(pairs, out):
        full[d] = o
    if pd == 1 and out[0] < 1:
        raise RuntimeError(f"input (W: {shape[-1]}) is too small. Calculated output W: "
                           f"{out[0]}")
    if pd == 2 and out[0] < 1 and out[1] < 1:
        gap = " " if mode == "replicate" else ""
        raise RuntimeError(f"input (H: {shape[-2]}, W: {shape[-1]}{gap}) is too small. "
                           f"Calculated output H: {out[0]} W: {out[1]}")
    if pd == 3 and all(o < 1 for o in out):
        raise RuntimeError(f"input (D: {shape[-3]} H: {shape[-2]}, W: {shape[-1]}) is too "
                           f"small. Calculated output D: {out[0]} H: {out[1]} W: {out[2]}")
    neg = [o for o in out if o < 0]
    if neg:
        if pd == 2 and mode == "reflect":
            raise RuntimeError("numel: integer multiplication overflow")
        raise RuntimeError(f"Trying to create tensor with negative dimension {neg[0]}: {full}")
    if dt is D.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


@op(method=False, function=False, out=False)
def pad(xp, input: "Tensor", pad, mode="constant", value=None):
    pad = _int_list(pad, "pad", "pad", 2)
    if mode not in MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    nd = input.ndim
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * nd:
        raise RuntimeError("Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{nd}")
    dt = D.from_np(input.dtype)
    pairs = _pairs(pad, nd)
    if mode == "constant":
        fill = _fill_value(value, dt)
        _check_constant(input.shape, pairs)
        return _pad_constant(xp, input, pairs, fill)
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    kernel = {"reflect": "reflection", "replicate": "replication"}.get(mode, "")
    _check_nonconstant(input.shape, pairs, mode, len(pad), f"{kernel}_pad{len(pad) // 2}d", dt)
    out = input
    for d, lo, hi in pairs:  # one padded dimension at a time: copy the middle, gather borders
        n = out.shape[d]
        idx = _index_map(xp, n, lo, hi, mode)
        shape = list(out.shape)
        shape[d] = m = idx.size
        res = xp.empty(shape, input.dtype)
        pre = (slice(None),) * d
        o0, i0, width = _middle(n, lo, hi, m)
        res[pre + (slice(o0, o0 + width),)] = out[pre + (slice(i0, i0 + width),)]
        for side in _sides(o0, width, m):
            res[pre + (side,)] = xp.take(out, idx[side], axis=d)
        out = res
    return out


def _middle(n: int, lo: int, hi: int, m: int) -> tuple:
    """(output start, input start, width) of the unpadded middle, which maps one to one."""
    o0, i0 = max(lo, 0), max(-lo, 0)
    return o0, i0, max(0, min(n - i0 - max(-hi, 0), m - o0))


def _run(xp, targets: np.ndarray) -> slice | None:
    """``targets`` as a slice when they are consecutive (ascending or descending)."""
    t0, t1 = int(targets[0]), int(targets[-1])
    step = 1 if t1 >= t0 else -1
    if targets.size != abs(t1 - t0) + 1 or not (xp.diff(targets) == step).all():
        return None
    return slice(t0, t1 + step if t1 + step >= 0 else None, step)


def _sides(o0: int, width: int, m: int) -> list:
    """The padded border slices of an output dimension of length ``m``."""
    return [s for s in (slice(0, o0), slice(o0 + width, m)) if s.stop > s.start]


def _pad_constant(xp, a: np.ndarray, pairs, fill) -> np.ndarray:
    out_shape = list(a.shape)
    src, dst = [slice(None)] * a.ndim, [slice(None)] * a.ndim
    for d, lo, hi in pairs:
        n = a.shape[d]
        out_shape[d] = n + lo + hi
        keep = n - max(-lo, 0) - max(-hi, 0)
        src[d] = slice(max(-lo, 0), max(-lo, 0) + keep)
        dst[d] = slice(max(lo, 0), max(lo, 0) + keep)
    out = xp.full(out_shape, fill, a.dtype)
    out[tuple(dst)] = a[tuple(src)]
    return out


@pad.def_backward
def _(ctx, g):
    p = _int_list(ctx.pad, "pad", "pad", 2)
    if ctx.mode == "constant":  # cropping the padding off (and zero-filling what was cropped)
        return pad(g, tuple(-v for v in p))
    return _pad_backward(g, tuple(ctx.input.shape), p, ctx.mode)


@op(method=False, function=False, out=False)
def _pad_backward(xp, grad: "Tensor", input_shape, pad, mode):
    """Gradient of a reflect/replicate/circular ``pad``: each output position's gradient is
    added to the input position it copied."""
    out = grad
    for d, lo, hi in _pairs(pad, len(input_shape)):
        n = input_shape[d]
        m = out.shape[d]
        idx = _index_map(xp, n, lo, hi, mode)
        shape = list(out.shape)
        shape[d] = n
        acc = xp.zeros(shape, grad.dtype)
        pre = (slice(None),) * d
        o0, i0, width = _middle(n, lo, hi, m)
        acc[pre + (slice(i0, i0 + width),)] = out[pre + (slice(o0, o0 + width),)]
        for side in _sides(o0, width, m):
            targets, vals = idx[side], out[pre + (side,)]
            if (targets == targets[0]).all():  # replicate: the border lands on one element
                acc[pre + (targets[:1],)] += vals.sum(axis=d, keepdims=True)
            elif _run(xp, targets) is not None:  # reflect, circular: a run of neighbours
                acc[pre + (_run(xp, targets),)] += vals
            else:
                xp.ufunc_at("add", acc, pre + (targets,), vals)
        out = acc
    return out


@_pad_backward.def_backward
def _(ctx, g):
    return pad(g, tuple(ctx.pad), ctx.mode)
