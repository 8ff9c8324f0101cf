"""Loss functions of ``nn.functional``, with PyTorch's signatures, reductions and errors.

``nll_loss_nd`` and ``binary_cross_entropy`` are ops with their own kernels and backward rules
(PyTorch's BCE gradient is not the derivative of its clamped forward). The other losses are
compositions of ember ops, so autograd derives them; where PyTorch's formula has a kink the
composition is written the way PyTorch writes it, so the gradient there matches.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from .activations import log_softmax, logsigmoid, softplus
from .selection import where
from .arguments import takes_tensors
from .registry import op

PUBLIC: list = []
REDUCTIONS = ("none", "mean", "sum")
_EPSILON = 1e-12  # PyTorch's guard against 0 / 0 in BCE and cosine embedding losses


def legacy_reduction(size_average, reduce) -> str:
    """The reduction that the deprecated ``size_average``/``reduce`` flags ask for (warns)."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' "
                  "instead.", UserWarning, stacklevel=4)
    return ret


def get_reduction(reduction: str, size_average=None, reduce=None) -> str:
    if size_average is not None or reduce is not None:
        return legacy_reduction(size_average, reduce)
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def reduce_loss(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _warn_target_size(input, target, stacklevel=3):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", UserWarning,
                      stacklevel=stacklevel)


def _float_only(kernel, x):
    if not x.is_floating_point():
        raise NotImplementedError(f'"{kernel}" not implemented for \'{D.TYPE_NAME[x.dtype]}\'')


# ---------------------------------------------------------------------- negative log likelihood
def _check_nll(input: Tensor, target: Tensor) -> None:
    """PyTorch's shape and dtype checks for class-index targets (here, not in the kernel,
    because some are ValueErrors, which the dispatcher would turn into RuntimeErrors)."""
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    if target.dtype not in (D.int64, D.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got "
                           f"{D.TYPE_NAME[target.dtype]}")
    tb = target.shape[0] if target.ndim else 0
    if input.ndim != 1 and input.shape[0] != tb:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({tb}).")
    spatial = (input.shape[0],) + tuple(input.shape[2:])
    if input.ndim <= 2:
        if target.ndim > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if input.ndim == 1 and target.ndim == 1 and target.shape[0] != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: "
                             f"{target.shape[0]}")
    elif input.ndim == 4 and tuple(target.shape) != spatial:
        raise RuntimeError(f"size mismatch (got input: {list(input.shape)} , target: "
                           f"{list(target.shape)}")
    elif tuple(target.shape) != spatial:
        raise RuntimeError(f"Expected target size {list(spatial)}, got {list(target.shape)}")


def _nll_layout(xp, input, target):
    """(input as (M, C), target as (M,), C): classes moved last, positions flattened."""
    c = input.shape[0] if input.ndim == 1 else input.shape[1]
    x2 = input.reshape(1, c) if input.ndim == 1 else xp.moveaxis(input, 1, -1).reshape(-1, c)
    return x2, target.reshape(-1), c


def _nll_picks(xp, target, c, weight, ignore_index):
    """Per-element (class index, weight): ignored positions get weight 0 and class 0."""
    xp.check_index(target, 0, c, "nll_loss",
                   lambda v: IndexError(f"Target {v} is out of bounds."), what="target",
                   ignore=ignore_index)
    valid = target != ignore_index
    cls = xp.where(valid, target, 0).astype(np.intp)
    w = valid.astype(np.float64) if weight is None else xp.where(valid, weight[cls], 0)
    return cls, w


@op(saves=("target", "weight"), function=False, method=False, upcast_half=True,
    grad_name="NllLossBackward0")
def nll_loss_nd(xp, input: "Tensor", target: "Tensor", weight: "Tensor?" = None,
                reduction="mean", ignore_index=-100):
    """Negative log likelihood of class ``target`` under log-probabilities ``input`` (classes on
    dim 1, or dim 0 for an unbatched input) -> (loss, total_weight)."""
    if input.dtype.kind != "f":
        raise NotImplementedError(f'"nll_loss_out_frame" not implemented for '
                                  f"'{D.TYPE_NAME[D.from_np(input.dtype)]}'")
    x2, t, c = _nll_layout(xp, input, target)
    if weight is not None and weight.size != c:
        raise RuntimeError(f"weight tensor should be defined either for all {c} classes or no "
                           f"classes but got weight tensor of shape: {list(weight.shape)}")
    cls, w = _nll_picks(xp, t, c, weight, ignore_index)
    w = w.astype(x2.dtype)
    losses = -w * x2[xp.arange(x2.shape[0]), cls]
    total = w.sum(dtype=x2.dtype)
    if reduction == "none":
        shape = () if input.ndim == 1 else target.shape
        return losses.reshape(shape), total
    s = losses.sum(dtype=x2.dtype)
    return (s / total if reduction == "mean" else s), total


@nll_loss_nd.def_backward
def _(ctx, g, _total_grad=None):
    return nll_loss_backward(g, ctx.target, ctx.weight, tuple(ctx.input.shape), ctx.reduction,
                             ctx.ignore_index), None, None


@op(saves=("target", "weight"), function=False, method=False, upcast_half=True)
def nll_loss_backward(xp, grad_output: "Tensor", target: "Tensor", weight: "Tensor?",
                      input_shape, reduction, ignore_index):
    """The input gradient of nll_loss_nd: -weight[target] * grad at each target position."""
    shape = tuple(input_shape)
    c = shape[0] if len(shape) == 1 else shape[1]
    t = target.reshape(-1)
    cls, w = _nll_picks(xp, t, c, weight, ignore_index)
    coef = -w.astype(grad_output.dtype)
    if reduction == "none":
        coef = coef * grad_output.reshape(-1)
    else:
        coef = coef * grad_output.reshape(())
        if reduction == "mean":  # the total weight in float64: a half one overflows at 65504
            coef = (coef / w.sum()).astype(grad_output.dtype)
    g2 = xp.zeros((t.size, c), grad_output.dtype)
    # every row written (no data-dependent row list: that would read the device): ignored
    # positions get +0 at class 0
    g2[xp.arange(t.size), cls] = xp.where(t != ignore_index, coef, 0)
    if len(shape) == 1:
        return g2.reshape(shape)
    moved = (shape[0],) + shape[2:] + (c,)
    return xp.ascontiguousarray(xp.moveaxis(g2.reshape(moved), -1, 1))


@nll_loss_backward.def_backward
def _(ctx, gg):
    # linear in grad_output: its adjoint is the loss itself applied to gg
    return nll_loss_nd(gg, ctx.target, ctx.weight, ctx.reduction, ctx.ignore_index)[0], None, \
        None


@takes_tensors("input", "target", "weight?")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """nll_loss(input, target, weight=None, ignore_index=-100, reduction='mean') -> Tensor"""
    reduction = get_reduction(reduction, size_average, reduce)
    _check_nll(input, target)
    return nll_loss_nd(input, target, weight, reduction, ignore_index)[0]


@takes_tensors("input", "target", "weight?")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """cross_entropy(input, target, weight=None, ignore_index=-100, reduction='mean',
    label_smoothing=0.0) -> Tensor: log_softmax over the class dim (1, or 0 when unbatched)
    then NLL; ``target`` holds class indices, or class probabilities when shaped like input."""
    reduction = get_reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{label_smoothing:g}")
    cdim = 1 if input.ndim >= 2 else 0
    logp = log_softmax(input, cdim)
    if tuple(input.shape) == tuple(target.shape):
        return _soft_target_ce(input, target, logp, cdim, weight, ignore_index, reduction,
                               label_smoothing)
    _check_nll(input, target)
    loss, total = nll_loss_nd(logp, target, weight, reduction, ignore_index)
    if label_smoothing == 0:
        return loss
    c = input.shape[cdim]
    wv = None if weight is None else weight.reshape((c,) + (1,) * (input.ndim - cdim - 1))
    smooth = -(logp if wv is None else logp * wv).sum(cdim)
    smooth = where(target == ignore_index, 0, smooth)
    if reduction == "mean":  # normalised like the nll term: by the total weight of the picks
        smooth = smooth.sum() / total.detach()
    else:
        smooth = reduce_loss(smooth, reduction)
    return loss * (1 - label_smoothing) + smooth * (label_smoothing / c)


def _soft_target_ce(input, target, logp, cdim, weight, ignore_index, reduction, smoothing):
    if not target.is_floating_point():
        raise RuntimeError(f"Expected floating point type for target with class probabilities, "
                           f"got {D.TYPE_NAME[target.dtype]}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    c = input.shape[cdim]
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"cross_entropy: weight tensor should be defined either for all {c} "
                           f"classes or no classes but got weight tensor of shape: "
                           f"{list(weight.shape)}")
    if smoothing > 0:
        target = target * (1 - smoothing) + smoothing / c
    prod = logp * target
    if weight is not None:
        prod = prod * weight.reshape((c,) + (1,) * (input.ndim - cdim - 1))
    loss = -prod.sum(cdim)
    if reduction == "mean":
        return loss.sum() / (input.numel() / c)
    return reduce_loss(loss, reduction)


# ---------------------------------------------------------------------- regression losses
def _pair(input, target, reduction, size_average, reduce, kernel_name):
    _warn_target_size(input, target, stacklevel=4)
    reduction = get_reduction(reduction, size_average, reduce)
    from .shape import broadcast_tensors
    x, y = broadcast_tensors(input, target)
    if kernel_name:
        _float_only(kernel_name, x)
    return x, y, reduction


def _weighted(loss, weight, input, reduction, normalise):
    if weight is None:
        return reduce_loss(loss, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "mean" and normalise:
        return loss.sum() / weight.sum()
    return reduce_loss(loss, reduction)


@takes_tensors("input", "target", "weight?")
def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """mse_loss(input, target, reduction='mean', weight=None) -> Tensor: (input - target)^2"""
    x, y, reduction = _pair(input, target, reduction, size_average, reduce, "mse_cpu")
    d = x - y
    return _weighted(d * d, weight, input, reduction, True)


@takes_tensors("input", "target", "weight?")
def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """l1_loss(input, target, reduction='mean', weight=None) -> Tensor: |input - target|"""
    x, y, reduction = _pair(input, target, reduction, size_average, reduce, None)
    return _weighted((x - y).abs(), weight, input, reduction, True)


@takes_tensors("input", "target")
def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """smooth_l1_loss(input, target, reduction='mean', beta=1.0) -> Tensor: 0.5 d^2 / beta where
    |d| < beta, |d| - 0.5 beta elsewhere (l1 when beta = 0)."""
    x, y, reduction = _pair(input, target, reduction, size_average, reduce,
                            "smooth_l1_cpu")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = x - y
    ad = d.abs()
    if beta == 0:
        return reduce_loss(ad, reduction)
    return reduce_loss(where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta), reduction)


@takes_tensors("input", "target", "weight?")
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """huber_loss(input, target, reduction='mean', delta=1.0, weight=None) -> Tensor: 0.5 d^2
    where |d| < delta, delta (|d| - 0.5 delta) elsewhere."""
    x, y, reduction = _pair(input, target, reduction, None, None, "huber_cpu")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = x - y
    ad = d.abs()
    loss = where(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * delta)
    return _weighted(loss, weight, input, reduction, False)


# ---------------------------------------------------------------------- binary classification
@op(saves=("input", "target", "weight"), function=False, method=False, upcast_half=True,
    grad_name="BinaryCrossEntropyBackward0")
def binary_cross_entropy_op(xp, input: "Tensor", target: "Tensor", weight: "Tensor?" = None,
                            reduction="mean"):
    """-(y log x + (1 - y) log(1 - x)) * weight, each log clamped to >= -100."""
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {D.TYPE_NAME[D.from_np(target.dtype)]} but expected "
                           f"{D.TYPE_NAME[D.from_np(input.dtype)]}")
    xp.check_unit_interval(input, "binary_cross_entropy", lambda v: RuntimeError(
        "all elements of input should be between 0 and 1"), what="input")
    loss = (target - 1) * xp.maximum(xp.log1p(-input), -100) - target * xp.maximum(
        xp.log(input), -100)
    if weight is not None:
        loss = loss * weight
    if reduction == "mean":
        return loss.mean() if loss.size else xp.asarray(np.nan, loss.dtype)
    return loss.sum() if reduction == "sum" else loss


@binary_cross_entropy_op.def_backward
def _(ctx, g):
    x, y, w = ctx.input, ctx.target, ctx.weight
    if ctx.reduction == "mean":
        g = g / max(x.numel(), 1)
    if w is not None:
        g = g * w
    gx = gy = None
    if ctx.needs_input_grad[0]:
        gx = g * (x - y) / ((1 - x) * x).clamp_min(_EPSILON)
    if ctx.needs_input_grad[1]:
        gy = g * ((-x).log1p() - x.log())
    return gx, gy, None


@takes_tensors("input", "target", "weight?")
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """binary_cross_entropy(input, target, weight=None, reduction='mean') -> Tensor for
    probabilities ``input`` in [0, 1]."""
    reduction = get_reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input "
                         f"size ({input.shape}) is deprecated. Please ensure they have the same "
                         "size.")
    if weight is not None:
        weight = _expand_weight(weight, input.shape)
    return binary_cross_entropy_op(input, target, weight, reduction)


def _expand_weight(weight, shape):
    shape = tuple(shape)
    for i, n in enumerate(reversed(tuple(weight.shape))):
        if n != 1 and (i >= len(shape) or n != shape[-1 - i]):
            raise RuntimeError(f"Attempting to broadcast a dimension of length {n} at {-1 - i}! "
                               f"Mismatching argument at index 1 had {weight.shape}; but "
                               f"expected shape should be broadcastable to {list(shape)}")
    return weight.expand(shape)


@takes_tensors("input", "target", "weight?", "pos_weight?")
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """binary_cross_entropy_with_logits(input, target, weight=None, reduction='mean',
    pos_weight=None) -> Tensor: BCE of sigmoid(input), computed from log-sigmoid (stable)."""
    reduction = get_reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    ls = logsigmoid(input)
    if pos_weight is not None:  # positives weigh pos_weight, negatives 1
        ls = ls * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * input - ls
    if weight is not None:
        loss = loss * weight
    return reduce_loss(loss, reduction)


@takes_tensors("input", "target")
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """kl_div(input, target, reduction='mean', log_target=False) -> Tensor: pointwise
    target * (log target - input), ``input`` being log-probabilities; 'batchmean' divides the
    sum by the batch size."""
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", UserWarning, stacklevel=2)
    elif reduction not in REDUCTIONS + ("batchmean",):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = target.xlogy(target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return reduce_loss(loss, reduction)


# ---------------------------------------------------------------------- margin losses
@takes_tensors("input1", "input2", "target")
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """margin_ranking_loss(input1, input2, target, margin=0, reduction='mean') -> Tensor:
    max(0, -target * (input1 - input2) + margin)"""
    reduction = get_reduction(reduction, size_average, reduce)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {input1.shape}, input2: {input2.shape}, "
                           f"target: {target.shape} ")
    return reduce_loss((-target * (input1 - input2) + margin).clamp_min(0), reduction)


@takes_tensors("input", "target")
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """soft_margin_loss(input, target, reduction='mean') -> Tensor: log(1 + exp(-target * input))"""
    reduction = get_reduction(reduction, size_average, reduce)
    return reduce_loss(softplus(-target * input), reduction)


@takes_tensors("input", "target")
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """hinge_embedding_loss(input, target, margin=1.0, reduction='mean') -> Tensor: input where
    target is 1, max(0, margin - input) where target is -1."""
    reduction = get_reduction(reduction, size_average, reduce)
    hinge = where(target != 1, (margin - input).clamp_min(0), 0)
    return reduce_loss(hinge + where(target != -1, input, 0), reduction)


@takes_tensors("input1", "input2", "target")
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                          size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """cosine_embedding_loss(input1, input2, target, margin=0, reduction='mean') -> Tensor:
    1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where target is -1."""
    reduction = get_reduction(reduction, size_average, reduce)
    td = target.ndim
    if td > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    want = 2 if td == 1 else 1
    if input1.ndim != want or input2.ndim != want:
        raise RuntimeError(f"{td}D target tensor expects {want}D input tensors, but found inputs "
                           f"with sizes {list(input1.shape)} and {list(input2.shape)}.")
    dot = (input1 * input2).sum(td)
    mag = ((input1 * input1).sum(td) + _EPSILON) * ((input2 * input2).sum(td) + _EPSILON)
    cos = dot / mag.sqrt()
    loss = where(target == 1, 1 - cos, 0) + where(target == -1, (cos - margin).clamp_min(0), 0)
    return reduce_loss(loss, reduction)


@takes_tensors("anchor", "positive", "negative")
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
    reduction='mean') -> Tensor: max(0, margin + d(a, p) - d(a, n)) with pairwise_distance d."""
    from .nn_ops import pairwise_distance
    reduction = get_reduction(reduction, size_average, reduce)
    return _triplet(anchor, positive, negative, lambda x, y: pairwise_distance(x, y, p, eps),
                    margin, swap, reduction)


@takes_tensors("anchor", "positive", "negative")
def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
    margin=1.0, swap=False, reduction='mean') -> Tensor: the triplet loss under any distance
    (pairwise_distance by default)."""
    from .nn_ops import pairwise_distance
    reduction = get_reduction(reduction)
    return _triplet(anchor, positive, negative, distance_function or pairwise_distance, margin,
                    swap, reduction)


def _triplet(anchor, positive, negative, dist, margin, swap, reduction):
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {anchor.ndim}D, positive "
                           f"{positive.ndim}D, and negative {negative.ndim}D inputs")
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:  # the harder of the two negatives' distances
        from .binary import minimum
        d_neg = minimum(d_neg, dist(positive, negative))
    return reduce_loss((d_pos - d_neg + margin).clamp_min(0), reduction)


# ---------------------------------------------------------------------- multi-class margins
def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average=None, reduce=None,
                                reduction: str = "mean") -> Tensor:
    """multilabel_soft_margin_loss(input, target, weight=None, reduction='mean') -> Tensor:
    per-class binary cross entropy of sigmoid(input), averaged over the classes (last dim)."""
    reduction = get_reduction(reduction, size_average, reduce)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    cdim = input.ndim - 1
    return reduce_loss(loss.sum(cdim) / input.shape[cdim], reduction)


@takes_tensors("input", "target", "weight?")
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average=None, reduce=None,
                      reduction: str = "mean") -> Tensor:
    """multi_margin_loss(input, target, p=1, margin=1, weight=None, reduction='mean') -> Tensor:
    sum over classes j != y of max(0, margin - x[y] + x[j])^p / C (times weight[y])."""
    from .creation import arange
    reduction = get_reduction(reduction, size_average, reduce)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    if input.ndim > 2 or (input.ndim and input.shape[-1] == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(input.shape)}")
    n = input.shape[0] if input.ndim == 2 else 1
    if target.ndim > 1 or target.numel() != n:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to "
                           f"the number of input samples (batch size). Expected target size "
                           f"[{n}], but got {list(target.shape)}. Input has shape "
                           f"{list(input.shape)}.")
    c = input.shape[-1] if input.ndim else 1
    x = input.reshape(n, c)
    t = target.reshape(n)
    t._backend.check_index(t._data, 0, c, "multi_margin_loss",
                           lambda v: RuntimeError("target out of range"), what="target")
    is_y = t.unsqueeze(-1) == arange(c, device=t.device)
    x_y = where(is_y, x, 0).sum(-1, keepdim=True)
    z = (x - x_y + margin).clamp_min(0)
    z = where(is_y, 0, z if p == 1 else z * z)
    if weight is not None:
        z = z * weight[target.reshape(n)].unsqueeze(-1)
    loss = z.sum(-1) / c
    return reduce_loss(loss if input.ndim == 2 else loss.reshape(target.shape), reduction)


@takes_tensors("input", "target")
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """multilabel_margin_loss(input, target, reduction='mean') -> Tensor: for each listed target
    class j (``target`` rows list class indices, ended by the first -1; a class listed twice
    counts twice) and each unlisted class k, max(0, 1 - (x[j] - x[k])), summed and divided by
    the number of classes C."""
    reduction = get_reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape) or input.ndim > 2:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    c = input.shape[-1] if input.ndim else 1
    t = target.reshape(-1, c)
    t._backend.check_index(t._data, -1, c, "multilabel_margin_loss",
                           lambda v: RuntimeError("argument #2 'target' is out of range"),
                           what="target")  # PyTorch checks every entry: in [-1, C)
    listed = (t >= 0).cumprod(1) != 0  # entries before the first -1
    # how often each class is listed in its row (unlisted entries add 0 to class 0)
    counts = t.new_zeros(t.shape, dtype=D.int64).scatter_add(
        1, where(listed, t, 0).to(D.int64), listed.to(D.int64))
    x = input.reshape(-1, c)
    pair = (1 - x.unsqueeze(-1) + x.unsqueeze(-2)).clamp_min(0)  # [row, j, k]
    times = counts.unsqueeze(-1) * (counts.unsqueeze(-2) == 0)
    loss = (pair * times.to(input.dtype)).sum((-2, -1)) / c
    return reduce_loss(loss.reshape(tuple(input.shape[:-1])), reduction)


# ---------------------------------------------------------------------- likelihood losses
@takes_tensors("input", "target")
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction='mean')
    -> Tensor: exp(input) - target * input (log_input), else input - target * log(input + eps);
    ``full`` adds Stirling's approximation of log(target!) where target > 1."""
    reduction = get_reduction(reduction, size_average, reduce)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + (target * (2 * math.pi)).log() * 0.5
        loss = loss + where(target <= 1, 0, stirling)
    return reduce_loss(loss, reduction)


@takes_tensors("input", "target")
def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction='mean') -> Tensor:
    0.5 (log var + (input - target)^2 / var), var clamped below by eps (without autograd)."""
    from .creation import full_like
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = full_like(input, float(var))
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):  # one variance per sample
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and sum(
                v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")  # else: one dim of var broadcasts
    if reduction not in REDUCTIONS:
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = ((input - target) ** 2 / var + var.log()) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction)
