"""Pooling over 1-3 spatial dims: max (with PyTorch's flat per-plane indices), average,
adaptive average/max, Lp pooling and max unpooling.

Kernels read windows through strided views (``window.py``) and loop over kernel offsets only,
never over output positions. Gradients are themselves ops so that they differentiate again:
max pooling's gradient scatters by index (``_max_pool_scatter``, whose adjoint is the gather
``_pool_gather``), average pooling's is its adjoint ``_avg_pool_adjoint`` (whose own gradient
is average pooling again), and adaptive average pooling is a separable linear map
(``_separable_map``: one small matrix per spatial dim, applied with matmul, transposed for the
gradient) that ``resample.py`` also uses for interpolation.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from .arguments import takes_tensors
from .registry import op
from .window import (int_tuple, padded_windows, pool_arg, pool_out_size, prod, scatter_windows,
                     type_name, upcast)

__all__ = [f"{kind}{nd}d" for kind in ("max_pool", "avg_pool", "adaptive_avg_pool",
                                       "adaptive_max_pool", "lp_pool", "max_unpool")
           for nd in (1, 2, 3)] + \
    [f"{kind}{nd}d_with_indices" for kind in ("max_pool", "adaptive_max_pool") for nd in (1, 2, 3)]

_INTERNAL = dict(method=False, function=False, out=False)
_KNAMES = {1: ("kW",), 2: ("kH", "kW"), 3: ("kT", "kH", "kW")}
_DNAMES = {1: ("dilationW",), 2: ("dilationH", "dilationW"), 3: ("dilationT", "dilationH",
                                                                  "dilationW")}


# ---------------------------------------------------------------------- argument checks
def _check_input(name, nd, x, adaptive=False):
    if adaptive:
        if x.ndim not in (nd + 1, nd + 2):
            if nd == 1:
                raise RuntimeError(f"Expected 2 to 3 dimensions, but got {x.ndim}-dimensional "
                                   f"tensor for argument #1 'self' (while checking arguments "
                                   f"for {name})")
            sep = ":" if name.startswith("adaptive_max") else ""
            raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got{sep} "
                               f"{list(x.shape)}")
        for i in range(x.ndim - nd, x.ndim):
            if x.shape[i] == 0:
                raise RuntimeError(f"{name}(): Expected input to have non-zero size for "
                                   f"non-batch dimensions, but input has sizes {list(x.shape)} "
                                   f"with dimension {i} being empty")
        return
    if x.ndim not in (nd + 1, nd + 2):
        if name == "avg_pool1d":
            raise RuntimeError(f"Expected 2 to 3 dimensions, but got {x.ndim}-dimensional tensor "
                               "for argument #1 'self' (while checking arguments for avg_pool1d)")
        if nd > 1:
            raise RuntimeError(f"non-empty {nd + 1}D or {nd + 2}D (batch mode) tensor expected "
                               "for input")
    if x.ndim not in (nd + 1, nd + 2) or any(s == 0 for s in x.shape[x.ndim - nd - 1:]) or (
            x.ndim == nd + 1 and x.shape[0] == 0):
        pre = f"{name}: " if name == "max_pool1d" else ""
        raise RuntimeError(f"{pre}Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with "
                           f"optional 0 dim batch size for input, but got:{list(x.shape)}")


def pool_geometry(name, nd, x, kernel_size, stride, padding, dilation, ceil_mode, caller=None):
    """Check pooling arguments as PyTorch does; return (kernel, stride, padding, dilation, out)."""
    k = pool_arg(name, "kernel_size", kernel_size, nd, caller=caller)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else \
        pool_arg(name, "stride", stride, nd, caller=caller)
    p = pool_arg(name, "padding", padding, nd, caller=caller)
    d = pool_arg(name, "dilation", dilation, nd, "must be either", caller)
    _check_input(name, nd, x)
    if name == "max_pool1d":  # PyTorch checks 1-D max pooling with messages of its own
        for what, v, ok in (("kernel_size", k[0], k[0] > 0), ("stride", s[0], s[0] > 0),
                            ("dilation", d[0], d[0] > 0)):
            if not ok:
                raise RuntimeError(f"max_pool1d() {what} must be greater than zero, but got {v}")
        if p[0] < 0:
            raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p[0]}")
        if p[0] > k[0] // 2:
            raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but "
                               f"got padding={p[0]} and kernel_size={k[0]}")
    if any(v <= 0 for v in k):
        raise RuntimeError("kernel size should be greater than zero, but got " +
                           " ".join(f"{n}: {v}" for n, v in zip(_KNAMES[nd], k)))
    if any(v <= 0 for v in s):
        raise RuntimeError("stride should not be zero")
    if any(v <= 0 for v in d):
        raise RuntimeError("dilation should be greater than zero, but got " +
                           " ".join(f"{n}: {v}" for n, v in zip(_DNAMES[nd], d)))
    for pp in p:
        if pp < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {pp}")
    for pp, kk, dd in zip(p, k, d):
        if pp > ((kk - 1) * dd + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pp}, kernel_size={kk} and dilation={dd}")
    size = x.shape[x.ndim - nd:]
    out = tuple(pool_out_size(n, kk, ss, pp, dd, ceil_mode)
                for n, kk, ss, pp, dd in zip(size, k, s, p, d))
    if any(o < 1 for o in out):
        if name == "max_pool1d":
            raise RuntimeError(f"max_pool1d() Invalid computed output size: {out[0]}")
        c = x.shape[x.ndim - nd - 1]
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (c,) + tuple(size)))}). "
                           f"Calculated output size: ({'x'.join(map(str, (c,) + out))}). "
                           "Output size is too small")
    return k, s, p, d, out


def _plane_strides(size):
    st, acc = [], 1
    for n in reversed(size):
        st.append(acc)
        acc *= n
    return tuple(reversed(st))


def _mesh(xp, vectors):
    """Per-dim index vectors reshaped to broadcast against each other over ``len`` dims."""
    nd = len(vectors)
    return [xp.asarray(v).reshape((-1,) + (1,) * (nd - 1 - j)) for j, v in enumerate(vectors)]


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _running_max(xp, win, nd, init_idx, pos, first_valid, nan_free):
    """Max and its flat plane index over the trailing ``nd`` kernel axes of ``win``.

    ``pos(k)`` is the flat index (broadcastable to the output) read at kernel offset ``k``.
    Like PyTorch, a later element wins when strictly greater or NaN, and a window without any
    such element keeps ``init_idx`` (its first position inside the input). ``first_valid``
    says offset 0 always lies inside the input, which lets NaN-free input start from it."""
    shape = win.shape[:win.ndim - nd]
    offsets = list(itertools.product(*(range(n) for n in win.shape[win.ndim - nd:])))
    if first_valid and nan_free and offsets:
        # branchless: a running maximum plus the (small) number of the winning offset, turned
        # into flat indices once at the end through a (positions x offsets) table
        best = xp.array(win[(Ellipsis,) + offsets[0]])
        won = xp.zeros(shape, np.min_scalar_type(len(offsets)))
        for i, off in enumerate(offsets[1:], 1):
            v = win[(Ellipsis,) + off]
            m = v > best
            xp.maximum(best, v, out=best)
            won = xp.where(m, won.dtype.type(i), won)
        ys = shape[len(shape) - nd:]
        table = xp.stack([xp.broadcast_to(pos(off), ys) for off in offsets], -1)
        at = xp.arange(prod(ys), dtype=np.int64).reshape(ys) * len(offsets)
        return best, xp.take(table.ravel(), won + at)
    idx = xp.empty(shape, np.int64)
    best = xp.full(shape, _lowest(win.dtype), win.dtype)
    idx[...] = init_idx
    for off in offsets:
        v = win[(Ellipsis,) + off]
        m = v > best
        if not nan_free:
            m |= xp.isnan(v)
        xp.copyto(best, v, where=m)
        xp.copyto(idx, pos(off), where=m)
    return best, idx


def _nan_free(xp, x) -> bool:
    # a NaN sum may also come from inf - inf: that only costs the exact (slower) path
    return x.dtype.kind != "f" or not xp.isnan(xp.sum(x))


def _check_pool_dtype(kernel, x, ints=True):
    """PyTorch's dtype support: no bool/complex; ``ints`` True (all), "long" or False."""
    bad_int = x.dtype.kind in "iu" and (not ints or (ints == "long" and x.dtype != np.int64))
    if x.dtype.kind in "bc" or bad_int:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{type_name(x)}\'')


# ---------------------------------------------------------------------- gather / scatter
@op("_max_pool_scatter", saves=("indices",), **_INTERNAL)
def _max_pool_scatter(xp, grad: "Tensor", indices: "Tensor", plane, unique=False):
    """Sum ``grad`` into zeros of shape ``(*lead, *plane)`` at the flat plane ``indices``."""
    nd = len(plane)
    lead = grad.shape[:grad.ndim - nd]
    n, size = prod(lead), prod(plane)
    g = upcast(grad).reshape(n, grad.size // max(n, 1))
    flat = (indices.reshape(g.shape) + (xp.arange(n, dtype=np.int64) * size)[:, None]).ravel()
    if unique:  # disjoint windows: each position receives at most one value
        out = xp.zeros(n * size, g.dtype)
        out[flat] = g.ravel()
    else:
        out = xp.bincount(flat, weights=g.ravel(), minlength=n * size).astype(g.dtype)
    return out.reshape(tuple(lead) + tuple(plane)).astype(grad.dtype, copy=False)


@_max_pool_scatter.def_backward
def _(ctx, gg):
    return _pool_gather(gg, ctx.indices, len(ctx.plane)), None


@op("_pool_gather", saves=("indices",), **_INTERNAL)
def _pool_gather(xp, input: "Tensor", indices: "Tensor", nd):
    """``input`` read at the flat plane ``indices`` (the adjoint of ``_max_pool_scatter``)."""
    lead = input.shape[:input.ndim - nd]
    n = prod(lead)
    cols = indices.size // max(n, 1)
    return xp.take_along_axis(input.reshape(n, input.size // max(n, 1)),
                              indices.reshape(n, cols), 1).reshape(indices.shape)


@_pool_gather.def_backward
def _(ctx, g):
    nd = ctx.nd
    return _max_pool_scatter(g, ctx.indices, tuple(ctx.input.shape[ctx.input.ndim - nd:])), None


# ---------------------------------------------------------------------- max pooling
def _max_pool_kernel(xp, x, nd, k, s, p, d, out):
    dt = x.dtype
    x = upcast(x)
    size = x.shape[x.ndim - nd:]
    win = padded_windows(xp, x, nd, k, s, d, p, out, _lowest(x.dtype))  # (*lead, *out, *k)
    pstr = _plane_strides(size)
    starts = [xp.arange(o) * ss - pp for o, ss, pp in zip(out, s, p)]
    first = [xp.where(st < 0, st + (-st + dd - 1) // dd * dd, st) for st, dd in zip(starts, d)]
    init = sum(m * t for m, t in zip(_mesh(xp, first), pstr))
    base = sum(m * t for m, t in zip(_mesh(xp, starts), pstr))
    best, idx = _running_max(xp, win, nd, init,
                             lambda off: base + sum(o * dd * t for o, dd, t in zip(off, d, pstr)),
                             not any(p), _nan_free(xp, x))
    return best.astype(dt, copy=False), idx


def _register_max_pool(nd):
    name = f"max_pool{nd}d"

    @op(f"max_pool{nd}d_with_indices", save_output=True, **_INTERNAL,
        grad_name=f"MaxPool{nd}DWithIndicesBackward0")
    def max_pool_with_indices(xp, input: "Tensor", kernel_size, stride=None, padding=0,
                              dilation=1, ceil_mode=False, return_indices=False):
        """Max pooling returning ``(values, flat indices per input plane)``."""
        k, s, p, d, out = pool_geometry(name, nd, input, kernel_size, stride, padding, dilation,
                                        ceil_mode, f"{name}_with_indices")
        _check_pool_dtype(name, input)
        return _max_pool_kernel(xp, input, nd, k, s, p, d, out)

    @max_pool_with_indices.def_backward
    def _(ctx, g, _gi):
        x = ctx.input
        k, s, p, d, out = pool_geometry(name, nd, x, ctx.kernel_size, ctx.stride, ctx.padding,
                                        ctx.dilation, ctx.ceil_mode)
        unique = all(ss >= (kk - 1) * dd + 1 for ss, kk, dd in zip(s, k, d))
        return _max_pool_scatter(g, ctx.out[1], tuple(x.shape[x.ndim - nd:]), unique)

    @max_pool_with_indices.def_meta
    def _(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
          return_indices=False):
        out = pool_geometry(name, nd, input, kernel_size, stride, padding, dilation,
                            ceil_mode)[-1]
        shape = tuple(input.shape[:input.ndim - nd]) + out
        return (shape, input.dtype), (shape, D.int64)

    def max_pool(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                 ceil_mode: bool = False, return_indices: bool = False):
        res = max_pool_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
        return res if return_indices else res[0]

    max_pool.__name__ = max_pool.__qualname__ = name
    max_pool.__doc__ = (f"{name}(input, kernel_size, stride=None, padding=0, dilation=1, "
                        "ceil_mode=False, return_indices=False)\n\nApplies a "
                        f"{nd}D max pooling; ``return_indices`` also returns the flat index of "
                        "each maximum within its input plane.")
    return max_pool_with_indices, max_pool


(max_pool1d_with_indices, max_pool1d), (max_pool2d_with_indices, max_pool2d), \
    (max_pool3d_with_indices, max_pool3d) = (_register_max_pool(n) for n in (1, 2, 3))


# ---------------------------------------------------------------------- average pooling
def _avg_divisor(xp, size, k, s, p, out, count_include_pad, divisor_override):
    if divisor_override is not None:
        return float(divisor_override)
    per_dim = []
    for n, kk, ss, pp, o in zip(size, k, s, p, out):
        start = xp.arange(o) * ss - pp
        end = xp.minimum(start + kk, n + pp)
        if count_include_pad:
            per_dim.append(end - start)
        else:
            per_dim.append(xp.minimum(end, n) - xp.maximum(start, 0))
    div = 1
    for m in _mesh(xp, per_dim):
        div = div * m
    return div


def _avg_args(name, nd, x, kernel_size, stride, padding, ceil_mode, divisor_override):
    k, s, p, d, out = pool_geometry(name, nd, x, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    return k, s, p, out


def _register_avg_pool(nd):
    name = f"avg_pool{nd}d"

    def avg_pool(xp, input: "Tensor", kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        k, s, p, out = _avg_args(name, nd, input, kernel_size, stride, padding, ceil_mode,
                                 divisor_override)
        _check_pool_dtype(name if nd < 3 else "avg_pool3d_out_frame", input, "long")
        dt = input.dtype
        x = upcast(input)
        win = padded_windows(xp, x, nd, k, s, (1,) * nd, p, out)
        total = win.sum(axis=tuple(range(win.ndim - nd, win.ndim)))
        div = _avg_divisor(xp, x.shape[x.ndim - nd:], k, s, p, out, count_include_pad,
                           divisor_override)
        if dt.kind in "iu":  # integer pooling divides with truncation, like PyTorch
            return xp.trunc(total / div).astype(dt)
        return (total / div).astype(dt, copy=False)

    if nd == 1:  # avg_pool1d has no divisor_override
        def avg_pool1(xp, input: "Tensor", kernel_size, stride=None, padding=0,
                      ceil_mode=False, count_include_pad=True):
            return avg_pool(xp, input, kernel_size, stride, padding, ceil_mode,
                            count_include_pad)
        impl = avg_pool1
    else:
        impl = avg_pool
    d = op(name, grad_name=f"AvgPool{nd}DBackward0", **_INTERNAL)(impl)

    @d.def_meta
    def _(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
          divisor_override=None):
        out = _avg_args(name, nd, input, kernel_size, stride, padding, ceil_mode,
                        divisor_override)[-1]
        return tuple(input.shape[:input.ndim - nd]) + out, input.dtype

    @d.def_backward
    def _(ctx, g):
        x = ctx.input
        div = None if nd == 1 else ctx.divisor_override
        return _avg_pool_adjoint(g, tuple(x.shape[x.ndim - nd:]), ctx.kernel_size, ctx.stride,
                                 ctx.padding, ctx.ceil_mode, ctx.count_include_pad, div)

    d.__doc__ = (f"{name}(input, kernel_size, stride=None, padding=0, ceil_mode=False, "
                 f"count_include_pad=True{', divisor_override=None' if nd > 1 else ''})"
                 f"\n\nApplies a {nd}D average pooling.")
    return d


@op("_avg_pool_adjoint", **_INTERNAL)
def _avg_pool_adjoint(xp, grad: "Tensor", input_size, kernel_size, stride, padding, ceil_mode,
                      count_include_pad, divisor_override):
    """The gradient of average pooling: each output's share spread back over its window."""
    nd = len(input_size)
    k = int_tuple("avg_pool", "kernel_size", kernel_size, nd)
    s = k if stride is None or stride == [] or stride == () else \
        int_tuple("avg_pool", "stride", stride, nd)
    p = int_tuple("avg_pool", "padding", padding, nd)
    out = grad.shape[grad.ndim - nd:]
    dt = grad.dtype
    g = upcast(grad) / _avg_divisor(xp, input_size, k, s, p, out, count_include_pad,
                                    divisor_override)
    lead = g.shape[:g.ndim - nd]
    gl = g.reshape((-1,) + tuple(out)).transpose(tuple(range(1, nd + 1)) + (0,))
    # batch-like dims innermost: every add runs over long contiguous rows
    gl = xp.ascontiguousarray(gl)
    res = scatter_windows(xp, lambda off: gl, (), k, s, (1,) * nd, out, p, input_size, g.dtype,
                          (gl.shape[-1],))
    res = xp.moveaxis(res, -1, 0).reshape(tuple(lead) + tuple(input_size))
    return xp.ascontiguousarray(res).astype(dt, copy=False)


@_avg_pool_adjoint.def_backward
def _(ctx, gg):
    nd = len(ctx.input_size)
    args = (ctx.kernel_size, ctx.stride, ctx.padding, ctx.ceil_mode, ctx.count_include_pad)
    if nd > 1:
        args += (ctx.divisor_override,)
    return _AVG[nd](gg, *args)


avg_pool1d, avg_pool2d, avg_pool3d = (_register_avg_pool(n) for n in (1, 2, 3))
_AVG = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}


# ---------------------------------------------------------------------- adaptive pooling
def adaptive_ranges(xp, n_in: int, n_out: int):
    """PyTorch's adaptive windows: [floor(i*in/out), ceil((i+1)*in/out)) for each output i."""
    i = xp.arange(n_out)
    return (i * n_in) // n_out, ((i + 1) * n_in + n_out - 1) // n_out


def _adaptive_out(name, nd, x, output_size):
    if isinstance(output_size, (tuple, list)):
        sizes = tuple(output_size)
        if len(sizes) != nd:
            raise RuntimeError(f"{name}: output_size must be {nd}")
    else:
        sizes = (output_size,) * nd
    size = x.shape[x.ndim - nd:]
    res = []
    for o, n in zip(sizes, size):
        if o is None:
            res.append(int(n))
            continue
        res.append(int_tuple(name, "output_size", o, 1)[0])
    if any(o < 0 for o in res):
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to 0 "
                           f"but received {{{', '.join(map(str, res))}}}")
    return tuple(res)


def _average_matrix(xp, n_in, n_out):
    start, end = adaptive_ranges(xp, n_in, n_out)
    j = xp.arange(n_in)
    inside = (j >= start[:, None]) & (j < end[:, None])
    return inside / (end - start)[:, None]


def apply_mats(xp, x, mats, transpose=False):
    """Apply one matrix per trailing dim (``(out, in)``, or its transpose); None skips a dim.
    The matrices may be numpy arrays built by the caller (interpolate, backward rules)."""
    nd = len(mats)
    dt = x.dtype
    x = upcast(x)
    for j, m in enumerate(mats):
        if m is None:
            continue
        a = xp.asarray(m.T if transpose else m).astype(x.dtype, copy=False)
        ax = x.ndim - nd + j
        pre, post = prod(x.shape[:ax]), prod(x.shape[ax + 1:])
        if post == 1:
            y = x.reshape(pre, a.shape[1]) @ a.T
        else:
            y = xp.matmul(a, x.reshape(pre, a.shape[1], post))
        x = y.reshape(x.shape[:ax] + (a.shape[0],) + x.shape[ax + 1:])
    return x.astype(dt, copy=False)


@op("_separable_map", **_INTERNAL)
def _separable_map(xp, input: "Tensor", mats, transpose=False):
    """A linear map that acts on each trailing dim by its own matrix (resampling, averaging)."""
    return apply_mats(xp, input, mats, transpose)


@_separable_map.def_backward
def _(ctx, g):
    return _separable_map(g, ctx.mats, not ctx.transpose)


def _register_adaptive_avg(nd):
    name = f"adaptive_avg_pool{nd}d"

    @op(name, grad_name=f"AdaptiveAvgPool{nd}DBackward0", **_INTERNAL)
    def adaptive_avg(xp, input: "Tensor", output_size):
        out = _adaptive_out(name, nd, input, output_size)
        _check_input(name, nd, input, adaptive=True)
        _check_pool_dtype(name, input, ints=False)
        return apply_mats(xp, input, _avg_mats(xp, input, out))

    @adaptive_avg.def_meta
    def _(input, output_size):
        out = _adaptive_out(name, nd, input, output_size)
        return tuple(input.shape[:input.ndim - nd]) + out, input.dtype

    @adaptive_avg.def_backward
    def _(ctx, g):
        x = ctx.input
        out = _adaptive_out(name, nd, x, ctx.output_size)
        if all(o == 1 for o in out):  # global pooling: each input gets g / (its plane's size),
            # two pointwise kernels on any device (no matrices moved from the host)
            return (g / prod(x.shape[x.ndim - nd:])).expand(x.shape).contiguous()
        return _separable_map(g, _avg_mats(np, x, out), True)  # host mats, as interpolate's

    adaptive_avg.__doc__ = (f"{name}(input, output_size) -> Tensor\n\nApplies a {nd}D "
                            "adaptive average pooling.")
    return adaptive_avg


def _avg_mats(xp, x, out):
    size = x.shape[x.ndim - len(out):]
    return tuple(None if n == o else _average_matrix(xp, n, o) for n, o in zip(size, out))


adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d = (
    _register_adaptive_avg(n) for n in (1, 2, 3))


def _adaptive_max_kernel(xp, x, nd, out):
    dt = x.dtype
    x = upcast(x)
    size = x.shape[x.ndim - nd:]
    pstr = _plane_strides(size)
    taps, starts = [], []
    for n, o in zip(size, out):
        st, en = adaptive_ranges(xp, n, o)
        kmax = int((en - st).max()) if o else 1
        # clamp to the window's last element: repeats cannot change the (first) maximum
        taps.append(xp.minimum(st[:, None] + xp.arange(kmax), en[:, None] - 1))
        starts.append(st)
    lead = x.ndim - nd
    index = []
    for j, t in enumerate(taps):  # broadcast as (out_0, k_0, out_1, k_1, ...)
        shape = [1] * (2 * nd)
        shape[2 * j], shape[2 * j + 1] = t.shape
        index.append(t.reshape(shape))
    g = x[(Ellipsis,) + tuple(index)]
    perm = tuple(range(lead)) + tuple(lead + 2 * j for j in range(nd)) + \
        tuple(lead + 2 * j + 1 for j in range(nd))
    win = g.transpose(perm)  # (*lead, *out, *k)
    init = sum(m * t for m, t in zip(_mesh(xp, starts), pstr))
    best, idx = _running_max(xp, win, nd, init, lambda off: sum(
        m * t for m, t in zip(_mesh(xp, [tp[:, o] for tp, o in zip(taps, off)]), pstr)), True,
        _nan_free(xp, x))
    return best.astype(dt, copy=False), idx


def _register_adaptive_max(nd):
    name = f"adaptive_max_pool{nd}d"

    @op(f"{name}_with_indices", save_output=True, grad_name=f"AdaptiveMaxPool{nd}DBackward0",
        **_INTERNAL)
    def with_indices(xp, input: "Tensor", output_size, return_indices=False):
        """Adaptive max pooling returning ``(values, flat indices per input plane)``."""
        out = _adaptive_out(name, nd, input, output_size)
        _check_input(name, nd, input, adaptive=True)
        _check_pool_dtype(name, input, ints=False)
        return _adaptive_max_kernel(xp, input, nd, out)

    @with_indices.def_meta
    def _(input, output_size, return_indices=False):
        shape = tuple(input.shape[:input.ndim - nd]) + _adaptive_out(name, nd, input,
                                                                    output_size)
        return (shape, input.dtype), (shape, D.int64)

    @with_indices.def_backward
    def _(ctx, g, _gi):
        x = ctx.input
        out = _adaptive_out(name, nd, x, ctx.output_size)
        size = tuple(x.shape[x.ndim - nd:])
        unique = all(n % o == 0 and n >= o for n, o in zip(size, out))
        return _max_pool_scatter(g, ctx.out[1], size, unique)

    def adaptive_max(input: Tensor, output_size, return_indices: bool = False):
        res = with_indices(input, output_size)
        return res if return_indices else res[0]

    adaptive_max.__name__ = adaptive_max.__qualname__ = name
    adaptive_max.__doc__ = (f"{name}(input, output_size, return_indices=False)\n\nApplies a "
                            f"{nd}D adaptive max pooling (optionally returning flat indices).")
    return with_indices, adaptive_max


(adaptive_max_pool1d_with_indices, adaptive_max_pool1d), \
    (adaptive_max_pool2d_with_indices, adaptive_max_pool2d), \
    (adaptive_max_pool3d_with_indices, adaptive_max_pool3d) = (
        _register_adaptive_max(n) for n in (1, 2, 3))


# ---------------------------------------------------------------------- Lp pooling
def _lp_pool(nd):
    avg = _AVG[nd]

    def lp_pool(input: Tensor, norm_type: float, kernel_size, stride=None,
                ceil_mode: bool = False) -> Tensor:
        k = pool_arg(f"lp_pool{nd}d", "kernel_size", kernel_size, nd)
        out = avg(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
        # sign * |out| keeps PyTorch's zero gradient where the window sum is exactly zero
        return (out.sign() * out.abs().clamp_min(0)).mul(prod(k)).pow(1.0 / norm_type)

    lp_pool.__name__ = lp_pool.__qualname__ = f"lp_pool{nd}d"
    lp_pool.__doc__ = (f"lp_pool{nd}d(input, norm_type, kernel_size, stride=None, "
                       f"ceil_mode=False)\n\nApplies a {nd}D power-average pooling: the "
                       "norm_type-th root of the sum of input**norm_type over each window.")
    return takes_tensors("input")(lp_pool)


lp_pool1d, lp_pool2d, lp_pool3d = (_lp_pool(n) for n in (1, 2, 3))


# ---------------------------------------------------------------------- max unpooling
@op("_max_unpool", saves=("indices",), **_INTERNAL)
def _max_unpool(xp, input: "Tensor", indices: "Tensor", output_size):
    nd = len(output_size)
    if indices.dtype != np.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: "
                           f"{type_name(indices)}")
    if indices.shape != input.shape:
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    size = prod(output_size)
    xp.check_index(indices, 0, size, "max_unpool", lambda v: RuntimeError(
        f"Found an invalid max index: {v} (output volumes are of size "
        f"{'x'.join(map(str, output_size))}"))
    lead = input.shape[:input.ndim - nd]
    n = prod(lead)
    out = xp.zeros((n, size), input.dtype)
    cols = input.size // max(n, 1)
    xp.put_along_axis(out, indices.reshape(n, cols), input.reshape(n, cols), 1)
    return out.reshape(tuple(lead) + tuple(output_size))


@_max_unpool.def_backward
def _(ctx, g):
    nd = len(ctx.output_size)
    return _pool_gather(g, ctx.indices, nd), None


def _unpool(nd):
    name = f"max_unpool{nd}d"

    def max_unpool(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                   output_size=None) -> Tensor:
        k = pool_arg(name, "kernel_size", kernel_size, nd)
        s = k if stride is None else pool_arg(name, "stride", stride, nd)
        p = pool_arg(name, "padding", padding, nd)
        if input.ndim not in (nd + 1, nd + 2):
            raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got "
                               f"{list(input.shape)}")
        size = tuple(input.shape[input.ndim - nd:])
        default = tuple((n - 1) * ss - 2 * pp + kk for n, ss, pp, kk in zip(size, s, p, k))
        if output_size is None:
            out = default
        else:
            out = tuple(int(v) for v in output_size)
            if len(out) == nd + 2:
                out = out[2:]
            if len(out) != nd:
                raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} "
                                 f"elements, but it has a length of '{len(output_size)}'")
            for j, (o, dflt, ss) in enumerate(zip(out, default, s)):
                lo, hi = dflt - ss, dflt + ss
                if not lo < o < hi:
                    raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {j} must '
                                     f"be between {lo} and {hi})")
        return _max_unpool(input, indices, out)

    max_unpool.__name__ = max_unpool.__qualname__ = name
    max_unpool.__doc__ = (f"{name}(input, indices, kernel_size, stride=None, padding=0, "
                          "output_size=None)\n\nComputes a partial inverse of max pooling: "
                          "each value is written at its index, every other position is zero.")
    return takes_tensors("input", "indices")(max_unpool)


max_unpool1d, max_unpool2d, max_unpool3d = (_unpool(n) for n in (1, 2, 3))
