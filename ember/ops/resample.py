"""Resampling: ``interpolate`` (and the deprecated ``upsample*`` aliases), pixel (un)shuffle and
channel shuffle.

Every interpolation mode is separable: along each spatial dim, output ``i`` is a fixed
weighted sum of a few inputs. ``interpolate`` builds that as one small ``(out, in)`` matrix per
dim, with PyTorch's source-coordinate formulas evaluated in the same precision its CPU kernels
use (float32 for float32/half input), and runs it through ``_separable_map``; the gradient is
the same map transposed. 'nearest' reads by index instead (exact for every dtype and cheaper),
with the transposed one-hot matrices as its gradient. 'area' is adaptive average pooling.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .._tensor import Tensor
from .pooling import _adaptive_out, _separable_map, adaptive_avg_pool1d, adaptive_avg_pool2d, \
    adaptive_avg_pool3d
from .arguments import takes_tensors
from .registry import op
from .window import is_int, type_name

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle",
           "pixel_unshuffle", "channel_shuffle"]

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}
_AXES = {1: ("W",), 2: ("H", "W"), 3: ("D", "H", "W")}
_CUBIC_A = -0.75
_INTERNAL = dict(method=False, function=False, out=False)


# ---------------------------------------------------------------------- source coordinates
# These run on the host, in interpolate and the backward rules, to build the index vectors
# and matrices that _index_map and _separable_map take as arguments: they stay numpy.
def _scale(n_in, n_out, align_corners, scale, ft):
    """PyTorch's ratio between input and output coordinates (``area_pixel_compute_scale``)."""
    if align_corners:
        return ft((n_in - 1) / (n_out - 1)) if n_out > 1 else ft(0)
    if scale is not None and scale > 0:
        return ft(1.0 / scale)
    return ft(n_in) / ft(n_out)


# numpy-only: host-built interpolation taps (an argument of the resampling ops)
def _taps(mode, n_in, n_out, align_corners, scale, ft, dim):
    """(indices, weights), each ``(n_out, taps)``, of one dim's interpolation."""
    i = np.arange(n_out).astype(ft)
    # PyTorch's kernels special-case these sizes whatever the scale: linear modes copy equal
    # sizes; 2-D nearest also copies equal sizes and halves indices for exact doubling
    if (n_out == n_in and mode in ("linear", "bilinear", "trilinear")) or (
            n_out == n_in and mode == "nearest" and dim == 2):
        return np.arange(n_out)[:, None], np.ones((n_out, 1), ft)
    if mode == "nearest" and dim == 2 and n_out == 2 * n_in:
        return (np.arange(n_out) >> 1)[:, None], np.ones((n_out, 1), ft)
    if mode in ("nearest", "nearest-exact"):
        sc = ft(1.0 / scale) if scale is not None and scale > 0 else ft(n_in) / ft(n_out)
        src = np.floor((i + ft(0.5)) * sc if mode == "nearest-exact" else i * sc)
        idx = np.minimum(src.astype(np.int64), n_in - 1)
        return idx[:, None], np.ones((n_out, 1), ft)
    sc = _scale(n_in, n_out, align_corners, scale, ft)
    src = sc * i if align_corners else sc * (i + ft(0.5)) - ft(0.5)
    if mode == "bicubic":
        base = np.floor(src)
        t = (src - base).astype(ft)
        a = ft(_CUBIC_A)

        def near(x):  # |x| <= 1
            return ((a + 2) * x - (a + 3)) * x * x + 1

        def far(x):  # 1 < |x| < 2
            return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

        w = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], 1)
        idx = np.clip(base.astype(np.int64)[:, None] + np.arange(-1, 3), 0, n_in - 1)
        return idx, w
    src = np.maximum(src, ft(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    lam = np.clip(src - i0.astype(ft), ft(0), ft(1)).astype(ft)
    i1 = i0 + (i0 < n_in - 1)
    return np.stack([i0, i1], 1), np.stack([1 - lam, lam], 1)


# numpy-only: host-built interpolation matrix (an argument of the resampling ops)
def _matrix(idx, w, n_in):
    m = np.zeros((idx.shape[0], n_in), np.float64)
    np.add.at(m, (np.arange(idx.shape[0])[:, None].repeat(idx.shape[1], 1), idx), w)
    return m


@op("_index_map", saves=(), grad_name="UpsampleNearestBackward0", **_INTERNAL)
def _index_map(xp, input: "Tensor", indices):
    """Read ``input`` at one index vector per trailing dim (nearest-neighbour resampling)."""
    nd = len(indices)
    sel = tuple(xp.asarray(ix).reshape((-1,) + (1,) * (nd - 1 - j))
                for j, ix in enumerate(indices))
    return input[(Ellipsis,) + sel]


@_index_map.def_backward
def _(ctx, g):
    size = ctx.input.shape[ctx.input.ndim - len(ctx.indices):]
    # numpy-only: host-built interpolation matrix
    mats = tuple(_matrix(ix[:, None], np.ones((len(ix), 1)), n)
                 for ix, n in zip(ctx.indices, size))
    return _separable_map(g, mats, True)


# ---------------------------------------------------------------------- interpolate
def _output_size(input, size, scale_factor, dim):
    spatial = list(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {spatial} and output size of {size}. "
                    "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output "
                    "size in (o1, o2, ...,oK) format.")
            sizes = list(size)
        else:
            sizes = [size] * dim
        if not all(is_int(s) for s in sizes):
            raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                            "Tuple[int, int, int], but got size with types "
                            f"{[type(s) for s in sizes]}")
        return [int(s) for s in sizes], None
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dim:
            raise ValueError(
                "Input and scale_factor must have the same number of spatial dimensions, but "
                f"got input with spatial dimensions of {spatial} and scale_factor of shape "
                f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                "and scale_factor in (s1, s2, ...,sK) format.")
        scales = [float(s) for s in scale_factor]
    else:
        scales = [float(scale_factor)] * dim
    return None, scales


@takes_tensors("input")
def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """interpolate(input, size=None, scale_factor=None, mode='nearest', align_corners=None,
    recompute_scale_factor=None, antialias=False) -> Tensor

    Resizes a batched (N, C, d1, ..., dK) input, K = 1..3, to ``size`` or by ``scale_factor``
    with mode 'nearest', 'nearest-exact', 'linear', 'bilinear', 'trilinear', 'bicubic' or
    'area'."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.ndim - 2
    sizes, scales = _output_size(input, size, scale_factor, dim)
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and sizes is None:
        recompute_scale_factor = True
    if recompute_scale_factor and scales is not None:
        sizes = [math.floor(float(n) * s) for n, s in zip(input.shape[2:], scales)]
        scales = None
    if antialias and not (mode in ("bilinear", "bicubic") and input.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                         "modes and requires a 4-D tensor as input")
    if mode in _LINEAR and mode != "bicubic" and input.ndim in (3, 4, 5) and \
            input.ndim != _LINEAR[mode] + 2:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                  f"{_LINEAR[mode] + 2}D input")
    if input.ndim not in (3, 4, 5) or mode not in ("nearest", "nearest-exact", "area") and \
            mode not in _LINEAR or (mode == "bicubic" and input.ndim != 4):
        if mode == "lanczos" and input.ndim in (3, 4, 5):
            raise NotImplementedError("interpolate: mode 'lanczos' is not supported by ember")
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                                  f"{input.ndim}D) for the modes: {_MODES} (got {mode})")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by ember")
    if sizes is None:
        sizes = [int(float(n) * s) for n, s in zip(input.shape[2:], scales)]
    if mode == "area":
        pool = (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[dim - 1]
        _adaptive_out(pool.name, dim, input, sizes)
        return pool(input, tuple(sizes))
    spatial = tuple(input.shape[2:])
    if any(s <= 0 for s in spatial) or any(o <= 0 for o in sizes):
        ax = _AXES[dim]
        raise RuntimeError("Input and output sizes should be greater than 0, but got input ("
                           + ", ".join(f"{a}: {n}" for a, n in zip(ax, spatial)) + ") output ("
                           + ", ".join(f"{a}: {n}" for a, n in zip(ax, sizes)) + ")")
    kind = {"nearest": "nearest", "nearest-exact": "nearest_exact"}.get(mode, mode)
    dt = input.dtype
    if not dt.is_floating_point and not (mode.startswith("nearest") and dt.name == "uint8"):
        raise NotImplementedError(f'"upsample_{kind}{dim}d" not implemented for '
                                  # numpy-only: host-built interpolation matrix
                                  f"'{type_name(np.empty(0, dt.np))}'")
    ft = np.float64 if dt.name == "float64" else np.float32
    scales = scales or [None] * dim
    taps = [_taps(mode, n, o, align_corners, s, ft, dim)
            for n, o, s in zip(spatial, sizes, scales)]
    if mode.startswith("nearest"):
        return _index_map(input, tuple(ix[:, 0] for ix, _ in taps))
    mats = tuple(None if n == o and _identity(ix, w) else
                 _matrix(ix, w, n) for (ix, w), n, o in zip(taps, spatial, sizes))
    return _separable_map(input, mats)


# numpy-only: host-built interpolation matrix (an argument of the resampling ops)
def _identity(ix, w):
    return bool(np.all(ix[:, 0] == np.arange(len(ix))) and np.all(w[:, 0] == 1))


@takes_tensors("input")
def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """Deprecated alias of :func:`interpolate`."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode='nearest')``."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)``."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------------- pixel / channel shuffle
def _shuffle_factor(name, what, r):
    if not isinstance(r, numbers.Integral) or isinstance(r, bool):
        raise TypeError(f"{name}(): argument '{what}' must be int, not {type(r).__name__}")
    if r <= 0:
        raise RuntimeError(f"{name} expects a positive {what}, but got {r}")
    return int(r)


@op("pixel_shuffle", grad_name="PixelShuffleBackward0", **_INTERNAL)
def pixel_shuffle(xp, input: "Tensor", upscale_factor):
    """pixel_shuffle(input, upscale_factor) -> Tensor: (*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got "
                           f"input with {input.ndim} dimension(s)")
    r = _shuffle_factor("pixel_shuffle", "upscale_factor", upscale_factor)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    b = len(lead)
    x = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    x = x.transpose(tuple(range(b)) + (b, b + 3, b + 1, b + 4, b + 2))
    return xp.ascontiguousarray(x).reshape(tuple(lead) + (c // (r * r), h * r, w * r))


@pixel_shuffle.def_backward
def _(ctx, g):
    return pixel_unshuffle(g, ctx.upscale_factor)


@op("pixel_unshuffle", grad_name="PixelUnshuffleBackward0", **_INTERNAL)
def pixel_unshuffle(xp, input: "Tensor", downscale_factor):
    """pixel_unshuffle(input, downscale_factor) -> Tensor: the inverse of pixel_shuffle."""
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.ndim} dimension(s)")
    r = _shuffle_factor("pixel_unshuffle", "downscale_factor", downscale_factor)
    *lead, c, h, w = input.shape
    if h % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, "
                           f"but input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, "
                           f"but input.size(-1)={w} is not divisible by {r}")
    b = len(lead)
    x = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    x = x.transpose(tuple(range(b)) + (b, b + 2, b + 4, b + 1, b + 3))
    return xp.ascontiguousarray(x).reshape(tuple(lead) + (c * r * r, h // r, w // r))


@pixel_unshuffle.def_backward
def _(ctx, g):
    return pixel_shuffle(g, ctx.downscale_factor)


@op("channel_shuffle", grad_name="ChannelShuffleBackward0", **_INTERNAL)
def channel_shuffle(xp, input: "Tensor", groups):
    """channel_shuffle(input, groups) -> Tensor: interleave the channels of ``groups`` groups."""
    if input.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(input.shape)}")
    if not is_int(groups):
        raise TypeError(f"channel_shuffle(): argument 'groups' must be int, not "
                        f"{type(groups).__name__}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    n, c = input.shape[:2]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    x = input.reshape((n, groups, c // groups) + input.shape[2:]).swapaxes(1, 2)
    return xp.ascontiguousarray(x).reshape(input.shape)


@channel_shuffle.def_backward
def _(ctx, g):
    return channel_shuffle(g, ctx.input.shape[1] // ctx.groups)
