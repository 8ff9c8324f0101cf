"""Convolutions (conv1d/2d/3d, conv_transpose1d/2d/3d) and im2col/col2im (``F.unfold``/``fold``).

Every convolution runs on three internal ops that are bilinear and adjoint to one another:

    _conv_nd(x, w)            y = x (*) w: the windows of x against w, one matmul per group
    _conv_transpose_nd(y, w)  the adjoint of _conv_nd in x: w^T @ y and a scatter-add per
                              kernel offset (or, at stride 1, a _conv_nd with flipped weights)
    _conv_weight_grad(x, g)   the adjoint of _conv_nd in w: g @ windows of x

so the backward rule of each is written with the other two and differentiates again to any
order. The public ops (``conv2d``, ``conv_transpose2d``, ...) check their arguments with
PyTorch's messages and accept unbatched input; their backward rules use the same three ops.
Padding is given to the internal ops as the front padding ``lo`` plus the output size, which
covers symmetric padding, ``padding='same'`` with even kernels (the extra element goes at the
end, as in PyTorch) and ``output_padding`` with one mechanism.

This module is what ``ember.nn.functional`` star-imports: ``__all__`` also lists the pooling
and resampling functions, which live in ``pooling.py`` and ``resample.py``.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

from .._tensor import Tensor, _wrap_dim
from .arguments import takes_tensors
from .registry import op
from .window import (HALF, int_tuple, is_int, pad_to, padded_windows, prod, scatter_windows,
                     shape_str, type_name, upcast)

_HW = {1: ("width",), 2: ("height", "width"), 3: ("depth", "height", "width")}
_LOWER = {"Float": "float", "Double": "double", "Half": "c10::Half", "BFloat16": "c10::BFloat16",
          "Long": "long int", "Int": "int", "Short": "short int", "Char": "signed char",
          "Byte": "unsigned char", "ComplexFloat": "c10::complex<float>",
          "ComplexDouble": "c10::complex<double>"}


# ---------------------------------------------------------------------- array kernels
def _conv_kernel(xp, x, w, b, stride, lo, dilation, groups, out):
    """``(N, C, *S) (*) (O, C/groups, *K) -> (N, O, *out)`` with front padding ``lo``."""
    nd = len(out)
    dt = x.dtype
    x, w = upcast(x), upcast(w)
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    k = w.shape[2:]
    og = o // groups
    yt, kt = prod(out), prod(k)
    if n * o * yt == 0:
        y = xp.zeros((n, o) + tuple(out), x.dtype)
    elif cg == 1 and og == 1 and all(s == 1 for s in stride):
        y = _depthwise_kernel(xp, x, w, lo, dilation, groups, out)
    else:
        win = padded_windows(xp, x, nd, k, stride, dilation, lo, out)  # (N, C, *out, *K)
        # im2col: (N, groups, C/groups * K, out) so that one batched matmul hits BLAS
        perm = (0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd))
        cols = win.transpose(perm).reshape(n, groups, cg * kt, yt)
        y = xp.matmul(w.reshape(groups, og, cg * kt), cols).reshape((n, o) + tuple(out))
    if b is not None:
        y += upcast(b).reshape((1, o) + (1,) * nd)
    return y.astype(dt, copy=False)


def _depthwise_kernel(xp, x, w, lo, dilation, groups, out):
    """Stride-1 depthwise convolution (one input and one output channel per group), as
    shifted multiply-adds.

    The padded input is flattened per channel; kernel offset ``k`` then reads one contiguous
    run starting at its flat shift, and the output is computed on the padded grid's row pitch
    and cropped. Long contiguous runs keep numpy's per-loop overhead negligible, where a window
    view would iterate rows only a few elements long."""
    nd = len(out)
    n = x.shape[0]
    o = w.shape[0]
    og = o // groups
    k = w.shape[2:]
    ext = tuple((oo - 1) + d * (kk - 1) + 1 for oo, kk, d in zip(out, k, dilation))
    flat = xp.ascontiguousarray(pad_to(xp, x, nd, lo, ext)).reshape(n, groups, 1, -1)
    pitch = [prod(ext[j + 1:]) for j in range(nd)]
    length = sum((oo - 1) * p for oo, p in zip(out, pitch)) + 1
    wk = w.reshape(groups, og, -1)
    shifts = [sum(kd * d * p for kd, d, p in zip(off, dilation, pitch))
              for off in itertools.product(*(range(kk) for kk in k))]
    acc = xp.empty((n, groups, og, length), x.dtype)
    # a few samples at a time so the accumulator stays in cache across the kernel offsets
    step = max(1, (1 << 16) // max(1, groups * og * length))
    for n0 in range(0, n, step):
        src, dst = flat[n0:n0 + step], acc[n0:n0 + step]
        tmp = xp.empty_like(dst)
        for i, shift in enumerate(shifts):
            xp.multiply(src[..., shift:shift + length], wk[:, :, i, None], out=tmp if i else dst)
            if i:
                dst += tmp
    isz = acc.itemsize
    grid = xp.lib.stride_tricks.as_strided(acc, (n, groups, og) + tuple(out),
                                           acc.strides[:3] + tuple(p * isz for p in pitch))
    return xp.ascontiguousarray(grid).reshape((n, o) + tuple(out))


def _flip_transpose(xp, w, groups):
    """Weights of the stride-1 transposed convolution as a plain one: (C, O/groups, *K)."""
    o, cg = w.shape[:2]
    k = w.shape[2:]
    nd = len(k)
    v = w.reshape((groups, o // groups, cg) + k).swapaxes(1, 2)
    v = v[(Ellipsis,) + (slice(None, None, -1),) * nd]
    return xp.ascontiguousarray(v).reshape((groups * cg, o // groups) + k)


def _conv_transpose_kernel(xp, y, w, b, stride, lo, dilation, groups, size):
    """The adjoint of ``_conv_kernel`` in ``x``: ``(N, O, *Y) -> (N, C, *size)``."""
    nd = len(size)
    dt = y.dtype
    y, w = upcast(y), upcast(w)
    n, o = y.shape[:2]
    cg = w.shape[1]
    k = w.shape[2:]
    og = o // groups
    c = cg * groups
    if all(s == 1 for s in stride) and (og == 1 or o < c):
        # stride 1 and fewer input than output channels (or depthwise): a plain convolution
        # with flipped, transposed weights reads the smaller tensor's windows
        lo2 = tuple(d * (kk - 1) - p for d, kk, p in zip(dilation, k, lo))
        x = _conv_kernel(xp, y, _flip_transpose(xp, w, groups), None, stride, lo2, dilation,
                         groups, size)
    else:
        x = _scatter_transpose(xp, y, w, stride, lo, dilation, groups, size)
    if b is not None:
        x += upcast(b).reshape((1, c) + (1,) * nd)
    return x.astype(dt, copy=False)


def _scatter_transpose(xp, y, w, stride, lo, dilation, groups, size):
    """``w^T @ y`` with the batch innermost, then one scatter-add per kernel offset over long
    contiguous rows: the column layout is ``(groups, K, C/groups, *Y, N)``."""
    n, o = y.shape[:2]
    cg = w.shape[1]
    k = w.shape[2:]
    og = o // groups
    ys = y.shape[2:]
    kt, yt = prod(k), prod(ys)
    ym = y.reshape(n, groups, og, yt).transpose(1, 2, 3, 0).reshape(groups, og, yt * n)
    wm = w.reshape(groups, og, cg, kt).transpose(0, 3, 2, 1).reshape(groups, kt * cg, og)
    cols = xp.matmul(wm, ym).reshape((groups, kt, cg) + ys + (n,))
    offsets = {off: i for i, off in enumerate(itertools.product(*(range(kk) for kk in k)))}
    grid = scatter_windows(xp, lambda off: cols[:, offsets[off]], (groups, cg), k, stride,
                           dilation, ys, lo, size, cols.dtype, (n,))
    return xp.ascontiguousarray(xp.moveaxis(grid.reshape((groups * cg,) + tuple(size) + (n,)),
                                            -1, 0))


def _weight_grad_kernel(xp, x, g, k, stride, lo, dilation, groups):
    """The adjoint of ``_conv_kernel`` in ``w``: the windows of ``x`` against ``g``."""
    nd = len(k)
    dt = x.dtype
    x, g = upcast(x), upcast(g)
    n, c = x.shape[:2]
    o = g.shape[1]
    ys = g.shape[2:]
    cg, og = c // groups, o // groups
    kt, yt = prod(k), prod(ys)
    win = padded_windows(xp, x, nd, k, stride, dilation, lo, ys)  # (N, C, *Y, *K)
    perm = (1,) + tuple(range(2 + nd, 2 + 2 * nd)) + (0,) + tuple(range(2, 2 + nd))
    cols = win.transpose(perm).reshape(groups, cg * kt, n * yt)
    gm = g.reshape(n, groups, og, yt).transpose(1, 2, 0, 3).reshape(groups, og, n * yt)
    gw = xp.matmul(gm, cols.transpose(0, 2, 1))
    return gw.reshape((o, cg) + tuple(k)).astype(dt, copy=False)


# ---------------------------------------------------------------------- internal ops
_INTERNAL = dict(method=False, function=False, out=False, grad_name="ConvolutionBackward0")


@op("_conv_nd", saves=("input", "weight"), **_INTERNAL)
def _conv_nd(xp, input: "Tensor", weight: "Tensor", bias: "Tensor?", stride, padding, dilation,
             groups, out_size):
    return _conv_kernel(xp, input, weight, bias, stride, padding, dilation, groups, out_size)


@op("_conv_transpose_nd", saves=("input", "weight"), **_INTERNAL)
def _conv_transpose_nd(xp, input: "Tensor", weight: "Tensor", bias: "Tensor?", stride, padding,
                       dilation, groups, out_size):
    return _conv_transpose_kernel(xp, input, weight, bias, stride, padding, dilation, groups,
                                  out_size)


@op("_conv_weight_grad", saves=("input", "grad_output"), **_INTERNAL)
def _conv_weight_grad(xp, input: "Tensor", grad_output: "Tensor", kernel_size, stride, padding,
                      dilation, groups):
    return _weight_grad_kernel(xp, input, grad_output, kernel_size, stride, padding, dilation,
                               groups)


@_conv_nd.def_meta
def _(input, weight, bias, stride, padding, dilation, groups, out_size):
    return (input.shape[0], weight.shape[0]) + tuple(out_size), input.dtype


@_conv_transpose_nd.def_meta
def _(input, weight, bias, stride, padding, dilation, groups, out_size):
    return (input.shape[0], weight.shape[1] * groups) + tuple(out_size), input.dtype


@_conv_weight_grad.def_meta
def _(input, grad_output, kernel_size, stride, padding, dilation, groups):
    return (grad_output.shape[1], input.shape[1] // groups) + tuple(kernel_size), input.dtype


def _bias_grad(g):
    return g.sum([0] + list(range(2, g.ndim)))


def _c(t):
    """The other operand of a bilinear rule enters conjugated (PyTorch's complex gradients)."""
    return t.conj() if t.dtype.is_complex else t


def conv_grads(x, w, has_bias, g, geom, need):
    """Gradients of ``_conv_nd(x, w, b, *geom)`` for output gradient ``g`` (batched tensors)."""
    gx = _conv_transpose_nd(g, _c(w), None, *geom, tuple(x.shape[2:])) if need[0] else None
    gw = _conv_weight_grad(_c(x), g, tuple(w.shape[2:]), *geom) if need[1] else None
    gb = _bias_grad(g) if has_bias and need[2] else None
    return gx, gw, gb


def conv_transpose_grads(y, w, has_bias, g, geom, need):
    """Gradients of ``_conv_transpose_nd(y, w, b, *geom, size)`` for output gradient ``g``."""
    gy = _conv_nd(g, _c(w), None, *geom, tuple(y.shape[2:])) if need[0] else None
    gw = _conv_weight_grad(g, _c(y), tuple(w.shape[2:]), *geom) if need[1] else None
    gb = _bias_grad(g) if has_bias and need[2] else None
    return gy, gw, gb


def _geom(ctx):
    return ctx.stride, ctx.padding, ctx.dilation, ctx.groups


@_conv_nd.def_backward
def _(ctx, g):
    return conv_grads(ctx.input, ctx.weight, ctx.bias is not None, g, _geom(ctx),
                      ctx.needs_input_grad)


@_conv_transpose_nd.def_backward
def _(ctx, g):
    return conv_transpose_grads(ctx.input, ctx.weight, ctx.bias is not None, g, _geom(ctx),
                                ctx.needs_input_grad)


@_conv_weight_grad.def_backward
def _(ctx, gg):
    x, gy = ctx.input, ctx.grad_output
    geom = _geom(ctx)
    need = ctx.needs_input_grad
    dx = _conv_transpose_nd(_c(gy), gg, None, *geom, tuple(x.shape[2:])) if need[0] else None
    dgy = _conv_nd(_c(x), gg, None, *geom, tuple(gy.shape[2:])) if need[1] else None
    return dx, dgy


# ---------------------------------------------------------------------- argument checks
class ConvSpec(NamedTuple):
    batched: bool
    stride: tuple
    lo: tuple  # front padding (conv) or front crop (transposed conv)
    dilation: tuple
    groups: int
    out: tuple  # spatial output size


def _conv_list(name, argname, value, nd):
    r = int_tuple(name, argname, value, nd)
    if r is None:
        seq = list(value) if isinstance(value, (tuple, list)) else [value]
        raise RuntimeError(f"expected {argname} to be a single integer value or a list of {nd} "
                           f"values to match the convolution dimensions, but got "
                           f"{argname}={seq}")
    return r


def _named(label, values, nd, sep=" "):
    names = _HW[nd] if nd > 1 else ("height", "width")
    vals = tuple(values) if nd > 1 else (0 if label == "output_padding" else 1,) + tuple(values)
    return sep.join(f"{label}_{n}: {v}" for n, v in zip(names, vals))


_SPECS: dict = {}  # a call's shapes and int arguments -> its ConvSpec (checks passed)


def _ints(v):
    """``v`` as a key: an int, or a tuple of a tuple's or list's ints; TypeError otherwise."""
    if type(v) is int:
        return v
    if type(v) in (tuple, list) and all(type(e) is int for e in v):
        return tuple(v)
    raise TypeError


def conv_spec(name, nd, transposed, x, w, b, stride, padding, dilation, groups,
              output_padding=0) -> ConvSpec:
    """Check a convolution call the way PyTorch does; return its geometry. A call of the
    same shapes and int arguments as an earlier one that passed is looked up."""
    try:
        key = (name, transposed, tuple(x.shape), tuple(w.shape),
               None if b is None else tuple(b.shape), _ints(stride), _ints(padding),
               _ints(dilation), _ints(groups), _ints(output_padding))
    except TypeError:  # a str padding, a float, a tensor...: checked every time
        return _conv_spec(name, nd, transposed, x, w, b, stride, padding, dilation, groups,
                          output_padding)
    spec = _SPECS.get(key)
    if spec is None:
        spec = _conv_spec(name, nd, transposed, x, w, b, stride, padding, dilation, groups,
                          output_padding)
        if len(_SPECS) > 4096:
            _SPECS.clear()
        _SPECS[key] = spec
    return spec


def _conv_spec(name, nd, transposed, x, w, b, stride, padding, dilation, groups,
               output_padding=0) -> ConvSpec:
    if x.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"{name}, but got input of size: {list(x.shape)}")
    batched = x.ndim == nd + 2
    xshape = tuple(x.shape) if batched else (1,) + tuple(x.shape)
    if not is_int(groups):
        raise TypeError(f"{name}(): argument 'groups' must be int, not {type(groups).__name__}")
    groups = int(groups)
    stride = _conv_list(name, "stride", stride, nd)
    dilation = _conv_list(name, "dilation", dilation, nd)
    same = False
    if isinstance(padding, str):
        if transposed:
            raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
        if padding not in ("same", "valid"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if padding == "same" and any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        same = padding == "same"
        padding = (0,) * nd
    padding = _conv_list(name, "padding", padding, nd)
    opad = _conv_list(name, "output_padding", output_padding, nd) if transposed else (0,) * nd
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in opad):
        raise RuntimeError("negative output_padding is not supported")
    if any(d <= 0 for d in dilation):
        if transposed:
            raise RuntimeError("dilation should be greater than zero, but got "
                               + _named("dilation", dilation, nd, ", "))
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    wshape = list(w.shape)
    if w.ndim != nd + 2 and nd != 1:
        # PyTorch checks the (expanded) stride against the weight's spatial dims first
        raise RuntimeError(f"expected stride to be a single integer value or a list of "
                           f"{w.ndim - 2} values to match the convolution dimensions, but got "
                           f"stride={list(stride)}")
    if w.ndim != len(xshape):
        raise RuntimeError(f"Expected {w.ndim}-dimensional input for {w.ndim}-dimensional weight "
                           f"{wshape}, but got {len(xshape)}-dimensional input of size "
                           f"{list(xshape)} instead")
    if wshape[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {wshape} instead")
    if wshape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{wshape}] instead")
    c = xshape[1]
    if transposed:
        out_c = wshape[1] * groups
        if c != wshape[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {wshape}, expected "
                               f"input{list(xshape)} to have {wshape[0]} channels, but got {c} "
                               "channels instead")
    else:
        out_c = wshape[0]
        if c != wshape[1] * groups:
            raise RuntimeError(f"Given groups={groups}, weight of size {wshape}, expected "
                               f"input{list(xshape)} to have {wshape[1] * groups} channels, but "
                               f"got {c} channels instead")
    if b is not None and (b.ndim != 1 or b.shape[0] != out_c):
        pre = "Given transposed=1, weight" if transposed else "Given weight"
        raise RuntimeError(f"{pre} of size {wshape}, expected bias to be 1-dimensional with "
                           f"{out_c} elements, but got bias of size {list(b.shape)} instead")
    size = xshape[2:]
    k = wshape[2:]
    eff = tuple(d * (kk - 1) + 1 for d, kk in zip(dilation, k))
    if transposed:
        if any(p >= s and p >= d for p, s, d in zip(opad, stride, dilation)):
            raise RuntimeError("output padding must be smaller than either stride or dilation, "
                               "but got " + " ".join([_named("output_padding", opad, nd),
                                                      _named("stride", stride, nd),
                                                      _named("dilation", dilation, nd)]))
        out = tuple((i - 1) * s - 2 * p + e + q
                    for i, s, p, e, q in zip(size, stride, padding, eff, opad))
        if any(o <= 0 for o in out):
            sz = size if nd > 1 else (1,) + tuple(size)
            oz = out if nd > 1 else (1,) + out
            raise RuntimeError(f"Given input size per channel: ({shape_str(sz)}). Calculated "
                               f"output size per channel: ({shape_str(oz)}). Output size is too "
                               "small")
        return ConvSpec(batched, stride, padding, dilation, groups, out)
    lo = tuple((e - 1) // 2 for e in eff) if same else padding
    padded = tuple(i + (e - 1 if same else 2 * p) for i, e, p in zip(size, eff, padding))
    if any(pz < e for pz, e in zip(padded, eff)):
        raise RuntimeError(f"Calculated padded input size per channel: ({shape_str(padded)}). "
                           f"Kernel size: ({shape_str(eff)}). Kernel size can't be greater than "
                           "actual input size")
    out = tuple((pz - e) // s + 1 for pz, e, s in zip(padded, eff, stride))
    return ConvSpec(batched, stride, lo, dilation, groups, out)


def _check_dtypes(name, nd, x, w, b):
    tx, tw = type_name(x), type_name(w)
    if tx != tw:
        raise RuntimeError(f"expected scalar type {tx} but found {tw}")
    if b is not None and type_name(b) != tx:
        raise RuntimeError(f"Input type ({_LOWER.get(tx, tx)}) and bias type "
                           f"({_LOWER.get(type_name(b), type_name(b))}) should be the same")
    if x.dtype.kind not in "fiuc" and x.dtype not in HALF:
        kernel = f"slow_conv{nd}d_cpu" if nd > 1 else "slow_conv2d_cpu"
        raise NotImplementedError(f'"{kernel}" not implemented for \'{tx}\'')


# ---------------------------------------------------------------------- public ops
def _overridden(internal, xp, args):
    """The result of the "kernel" override of ``internal`` (``_conv_nd`` or
    ``_conv_transpose_nd``) on the backend whose arrays ``xp`` handles, or None (no override,
    or one that does not take these arguments). The public ops check their arguments, then
    compute exactly the internal op: a backend's own convolution kernels (CUDA's) serve
    both."""
    for backend, kernel in internal._kernel_overrides.items():
        if backend.xp is xp:
            return kernel(*args)
    return None


def _register_conv(nd: int):
    name = f"conv{nd}d"

    @op(name, method=False, function=False, out=False, saves=("input", "weight"),
        grad_name="ConvolutionBackward0")
    def conv(xp, input: "Tensor", weight: "Tensor", bias: "Tensor?" = None, stride=1,
             padding=0, dilation=1, groups=1):
        s = conv_spec(name, nd, False, input, weight, bias, stride, padding, dilation, groups)
        _check_dtypes(name, nd, input, weight, bias)
        x = input if s.batched else input[None]
        args = (x, weight, bias, s.stride, s.lo, s.dilation, s.groups, s.out)
        y = _overridden(_conv_nd, xp, args)
        if y is None:
            y = _conv_kernel(xp, *args)
        return y if s.batched else y[0]

    @conv.def_backward
    def _(ctx, g):
        x, w = ctx.input, ctx.weight
        s = conv_spec(name, nd, False, x, w, ctx.bias, ctx.stride, ctx.padding, ctx.dilation,
                      ctx.groups)
        if not s.batched:
            x, g = x.unsqueeze(0), g.unsqueeze(0)
        gx, gw, gb = conv_grads(x, w, ctx.bias is not None, g,
                                (s.stride, s.lo, s.dilation, s.groups), ctx.needs_input_grad)
        return (gx if s.batched or gx is None else gx.squeeze(0)), gw, gb

    @conv.def_meta
    def _(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        s = conv_spec(name, nd, False, input, weight, bias, stride, padding, dilation, groups)
        return ((input.shape[0],) if s.batched else ()) + (weight.shape[0],) + s.out, input.dtype

    conv.__doc__ = (f"{name}(input, weight, bias=None, stride=1, padding=0, dilation=1, "
                    f"groups=1) -> Tensor\n\nApplies a {nd}D convolution over an input made of "
                    "several input planes (``padding`` may also be 'valid' or 'same').")
    return conv


def _register_conv_transpose(nd: int):
    name = f"conv_transpose{nd}d"

    @op(name, method=False, function=False, out=False, saves=("input", "weight"),
        grad_name="ConvolutionBackward0")
    def conv_t(xp, input: "Tensor", weight: "Tensor", bias: "Tensor?" = None, stride=1,
               padding=0, output_padding=0, groups=1, dilation=1):
        s = conv_spec(name, nd, True, input, weight, bias, stride, padding, dilation, groups,
                      output_padding)
        _check_dtypes(name, nd, input, weight, bias)
        y = input if s.batched else input[None]
        args = (y, weight, bias, s.stride, s.lo, s.dilation, s.groups, s.out)
        x = _overridden(_conv_transpose_nd, xp, args)
        if x is None:
            x = _conv_transpose_kernel(xp, *args)
        return x if s.batched else x[0]

    @conv_t.def_backward
    def _(ctx, g):
        y, w = ctx.input, ctx.weight
        s = conv_spec(name, nd, True, y, w, ctx.bias, ctx.stride, ctx.padding, ctx.dilation,
                      ctx.groups, ctx.output_padding)
        if not s.batched:
            y, g = y.unsqueeze(0), g.unsqueeze(0)
        gy, gw, gb = conv_transpose_grads(y, w, ctx.bias is not None, g,
                                          (s.stride, s.lo, s.dilation, s.groups),
                                          ctx.needs_input_grad)
        return (gy if s.batched or gy is None else gy.squeeze(0)), gw, gb

    @conv_t.def_meta
    def _(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        s = conv_spec(name, nd, True, input, weight, bias, stride, padding, dilation, groups,
                      output_padding)
        lead = (input.shape[0],) if s.batched else ()
        return lead + (weight.shape[1] * s.groups,) + s.out, input.dtype

    conv_t.__doc__ = (f"{name}(input, weight, bias=None, stride=1, padding=0, output_padding=0, "
                      f"groups=1, dilation=1) -> Tensor\n\nApplies a {nd}D transposed "
                      "convolution (the gradient of conv{nd}d with respect to its input).")
    return conv_t


conv1d, conv2d, conv3d = (_register_conv(n) for n in (1, 2, 3))
conv_transpose1d, conv_transpose2d, conv_transpose3d = (_register_conv_transpose(n)
                                                        for n in (1, 2, 3))


# ---------------------------------------------------------------------- unfold / fold
def _fold_args(name, kernel_size, dilation, padding, stride):
    out = []
    for argname, v, label in (("kernel_size", kernel_size, "kernel"),
                              ("dilation", dilation, "dilation"), ("padding", padding, "pad"),
                              ("stride", stride, "stride")):
        t = int_tuple(name, argname, v, 2, allow_single=False)
        if t is None:
            raise RuntimeError(f"It is expected {argname} equals to 2, but got size "
                               f"{len(v)}")
        out.append(t)
    k, d, p, s = out
    if any(x <= 0 for x in k):
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: "
                           f"{k[0]} kernel_width: {k[1]}")
    if any(x <= 0 for x in s):
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: {s[0]} "
                           f"stride_width: {s[1]}")
    if any(x <= 0 for x in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: "
                           f"{d[0]} dilation_width: {d[1]}")
    if any(x < 0 for x in p):
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} "
                           f"pad_width: {p[1]}")
    return k, d, p, s


def _blocks(size, k, d, p, s):
    return tuple((n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
                 for n, kk, dd, pp, ss in zip(size, k, d, p, s))


def _float_or_bool(kernel, a):
    if a.dtype.kind not in "fb":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{type_name(a)}\'')


@op("im2col", method=False, function=False, out=False, grad_name="Im2ColBackward0")
def im2col(xp, input: "Tensor", kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s = _fold_args("im2col", kernel_size, dilation, padding, stride)
    if input.ndim not in (3, 4) or any(n == 0 for n in input.shape[-3:]):
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and "
                           f"other non-zero dimensions for input, but got: {list(input.shape)}")
    _float_or_bool("im2col_out_cpu", input)
    x = input if input.ndim == 4 else input[None]
    out = _blocks(x.shape[2:], k, d, p, s)
    if any(o < 1 for o in out):
        raise RuntimeError(f"Given input with spatial size {tuple(x.shape[2:])}, kernel_size={k}, "
                           f"dilation={d}, padding={p}, calculated shape of the array of sliding "
                           f"blocks as {out}, but its components must be at least one.")
    n, c = x.shape[:2]
    win = padded_windows(xp, x, 2, k, s, d, p, out)  # (N, C, oh, ow, kh, kw)
    cols = win.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * prod(k), prod(out))
    return cols if input.ndim == 4 else cols[0]


@im2col.def_backward
def _(ctx, g):
    size = tuple(ctx.input.shape[-2:])
    return col2im(g, size, ctx.kernel_size, ctx.dilation, ctx.padding, ctx.stride)


@op("col2im", method=False, function=False, out=False, grad_name="Col2ImBackward0")
def col2im(xp, input: "Tensor", output_size, kernel_size, dilation=1, padding=0, stride=1):
    size = int_tuple("col2im", "output_size", output_size, 2, allow_single=False)
    if size is None:
        raise RuntimeError(f"It is expected output_size equals to 2, but got size "
                           f"{len(output_size)}")
    k, d, p, s = _fold_args("col2im", kernel_size, dilation, padding, stride)
    if input.ndim not in (2, 3) or any(n == 0 for n in input.shape[-2:]):
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           "batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    _float_or_bool("col2im_out_cpu", input)
    cols = input if input.ndim == 3 else input[None]
    n, ck, nblocks = cols.shape
    kt = prod(k)
    if ck % kt:
        raise RuntimeError("Expected size of input's dimension 1 to be divisible by the product "
                           f"of kernel_size, but got input.size(1)={ck} and kernel_size={k}.")
    out = _blocks(size, k, d, p, s)
    if prod(out) != nblocks or any(o < 1 for o in out):
        raise RuntimeError(f"Given output_size={size}, kernel_size={k}, dilation={d}, padding="
                           f"{p}, stride={s}, expected size of input's dimension 2 to match the "
                           f"calculated number of sliding blocks {out[0]} * {out[1]} = "
                           f"{prod(out)}, but got input.size(2)={nblocks}.")
    c = ck // kt
    dt = cols.dtype
    full = upcast(cols).reshape((n, c) + k + out)
    res = xp.ascontiguousarray(scatter_windows(
        xp, lambda off: full[(slice(None), slice(None)) + off], (n, c), k, s, d, out, p, size,
        full.dtype)).astype(dt, copy=False)
    return res if input.ndim == 3 else res[0]


@col2im.def_backward
def _(ctx, g):
    return im2col(g, ctx.kernel_size, ctx.dilation, ctx.padding, ctx.stride)


@takes_tensors("input")
def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """unfold(input, kernel_size, dilation=1, padding=0, stride=1) -> Tensor

    Extracts sliding local blocks from a batched (N, C, H, W) or unbatched (C, H, W) input into
    columns of shape (N, C * prod(kernel_size), L)."""
    if input.ndim < 3 and input.ndim != 0:
        _wrap_dim(2, input.ndim)  # PyTorch's IndexError for a too-small input
    return im2col(input, kernel_size, dilation, padding, stride)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor

    Combines an array of sliding local blocks into a large containing tensor (summing where
    blocks overlap): the adjoint of ``unfold``."""
    return col2im(input, output_size, kernel_size, dilation, padding, stride)


from . import pooling as _pooling  # noqa: E402  (registers the pooling ops)
from . import resample as _resample  # noqa: E402  (registers the resampling ops)
from .pooling import *  # noqa: E402,F401,F403
from .resample import *  # noqa: E402,F401,F403

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "unfold", "fold"] + _pooling.__all__ + _resample.__all__
