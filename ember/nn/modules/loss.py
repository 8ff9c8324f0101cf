"""Loss modules: option holders over the ``F`` losses, with ``weight``/``pos_weight``
registered as buffers as PyTorch does (so they follow ``.to()`` and appear in state_dict)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

from ..._tensor import Tensor
from .. import functional as F
from .distance import PairwiseDistance
from .module import Module


def _legacy_reduction(size_average, reduce) -> str:
    """The ``reduction`` string equivalent to the deprecated size_average/reduce flags."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{ret}' instead.", stacklevel=3)
    return ret


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            self.reduction = _legacy_reduction(size_average, reduce)
        else:
            self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class _PairLoss(_Loss):
    """A loss of (input, target) with only the reduction as option."""

    __constants__ = ("reduction",)
    _fn = None

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return type(self)._fn(input, target, reduction=self.reduction)


class L1Loss(_PairLoss):
    """``L1Loss(size_average=None, reduce=None, reduction='mean')``: |input - target|."""
    _fn = staticmethod(F.l1_loss)


class MSELoss(_PairLoss):
    """``MSELoss(size_average=None, reduce=None, reduction='mean')``: (input - target)^2."""
    _fn = staticmethod(F.mse_loss)


class SoftMarginLoss(_PairLoss):
    """``SoftMarginLoss(size_average=None, reduce=None, reduction='mean')``:
    log(1 + exp(-target * input))."""
    _fn = staticmethod(F.soft_margin_loss)


class NLLLoss(_WeightedLoss):
    """``NLLLoss(weight=None, size_average=None, ignore_index=-100, reduce=None,
    reduction='mean')``: -input[target] (input holds log-probabilities)."""

    __constants__ = ("ignore_index", "reduction")

    def __init__(self, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
                 reduce=None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """Deprecated alias of NLLLoss."""

    def __init__(self, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
                 reduce=None, reduction: str = "mean") -> None:
        warnings.warn("NLLLoss2d has been deprecated. Please use NLLLoss instead as a drop-in "
                      "replacement and see https://pytorch.org/docs/main/nn.html#torch.nn."
                      "NLLLoss for more details.", stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class CrossEntropyLoss(_WeightedLoss):
    """``CrossEntropyLoss(weight=None, size_average=None, ignore_index=-100, reduce=None,
    reduction='mean', label_smoothing=0.0)``: log_softmax then NLL; targets are class indices
    or class probabilities."""

    __constants__ = ("ignore_index", "reduction", "label_smoothing")

    def __init__(self, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
                 reduce=None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, weight=self.weight,
                               ignore_index=self.ignore_index, reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class BCELoss(_WeightedLoss):
    """``BCELoss(weight=None, size_average=None, reduce=None, reduction='mean')``: binary cross
    entropy of probabilities."""

    __constants__ = ("reduction",)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """``BCEWithLogitsLoss(weight=None, size_average=None, reduce=None, reduction='mean',
    pos_weight=None)``: sigmoid + binary cross entropy in one stable step; ``pos_weight``
    weighs the positive term per class."""

    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None,
                 reduction: str = "mean", pos_weight: Tensor | None = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class KLDivLoss(_Loss):
    """``KLDivLoss(size_average=None, reduce=None, reduction='mean', log_target=False)``:
    target * (log target - input); input holds log-probabilities."""

    __constants__ = ("reduction",)

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class SmoothL1Loss(_Loss):
    """``SmoothL1Loss(size_average=None, reduce=None, reduction='mean', beta=1.0)``."""

    __constants__ = ("reduction",)

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """``HuberLoss(reduction='mean', delta=1.0)``."""

    __constants__ = ("reduction", "delta")

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class PoissonNLLLoss(_Loss):
    """``PoissonNLLLoss(log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
    reduction='mean')``."""

    __constants__ = ("log_input", "full", "eps", "reduction")

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None,
                 eps: float = 1e-8, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """``GaussianNLLLoss(*, full=False, eps=1e-6, reduction='mean')``;
    ``forward(input, target, var)``."""

    __constants__ = ("full", "eps", "reduction")

    def __init__(self, *, full: bool = False, eps: float = 1e-6,
                 reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Tensor, target: Tensor, var) -> Tensor:
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class _MarginLoss(_Loss):
    __constants__ = ("margin", "reduction")

    def __init__(self, margin: float, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class HingeEmbeddingLoss(_MarginLoss):
    """``HingeEmbeddingLoss(margin=1.0, size_average=None, reduce=None, reduction='mean')``."""

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.hinge_embedding_loss(input, target, margin=self.margin,
                                      reduction=self.reduction)


class CosineEmbeddingLoss(_MarginLoss):
    """``CosineEmbeddingLoss(margin=0.0, size_average=None, reduce=None, reduction='mean')``."""

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class MarginRankingLoss(_MarginLoss):
    """``MarginRankingLoss(margin=0.0, size_average=None, reduce=None, reduction='mean')``:
    max(0, -target * (input1 - input2) + margin)."""

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``TripletMarginLoss(margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
    reduce=None, reduction='mean')``."""

    __constants__ = ("margin", "p", "eps", "swap", "reduction")

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """``TripletMarginWithDistanceLoss(*, distance_function=None, margin=1.0, swap=False,
    reduction='mean')``: max(d(a, p) - d(a, n) + margin, 0) with any distance function
    (pairwise Euclidean by default)."""

    __constants__ = ("margin", "swap", "reduction")

    def __init__(self, *, distance_function: Callable | None = None, margin: float = 1.0,
                 swap: bool = False, reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        self.distance_function = (distance_function if distance_function is not None
                                  else PairwiseDistance())
        self.margin = margin
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        dims = (anchor.dim(), positive.dim(), negative.dim())
        if len(set(dims)) != 1:
            raise RuntimeError("The anchor, positive, and negative tensors are expected to have "
                               "the same number of dimensions, but got: anchor "
                               f"{dims[0]}D, positive {dims[1]}D, and negative {dims[2]}D "
                               "inputs")
        from ...ops.binary import minimum
        d_pos = self.distance_function(anchor, positive)
        d_neg = self.distance_function(anchor, negative)
        if self.swap:
            d_neg = minimum(d_neg, self.distance_function(positive, negative))
        return _reduce((self.margin + d_pos - d_neg).clamp_min(0), self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """``MultiLabelSoftMarginLoss(weight=None, size_average=None, reduce=None,
    reduction='mean')``: per-class binary logistic loss averaged over the classes."""

    __constants__ = ("reduction",)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        loss = -(target * F.logsigmoid(input) + (1 - target) * F.logsigmoid(-input))
        if self.weight is not None:
            loss = loss * self.weight
        class_dim = input.dim() - 1
        loss = loss.sum(dim=class_dim) / input.size(class_dim)
        return _reduce(loss, self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """``MultiMarginLoss(p=1, margin=1.0, weight=None, size_average=None, reduce=None,
    reduction='mean')``: multi-class hinge loss, sum over wrong classes j of
    max(0, margin - x[y] + x[j])^p / C."""

    __constants__ = ("p", "margin", "reduction")

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{weight.dim()}D instead")
        self.p = p
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        from ...ops.creation import ones_like
        if input.dim() not in (1, 2) or input.numel() == 0 and input.dim() != 2:
            raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                               f"size, but got: {list(input.shape)}")
        x = input if input.dim() == 2 else input.unsqueeze(0)
        y = target.reshape(-1, 1)
        if y.size(0) != x.size(0):
            raise RuntimeError(f"inconsistent target size, expected {x.size(0)} but got "
                               f"{list(target.shape)}")
        c = x.size(1)
        z = (self.margin - x.gather(1, y) + x).clamp_min(0)
        if self.p == 2:
            z = z * z
        if self.weight is not None:
            z = z * self.weight[y]
        # the target class itself contributes nothing
        z = z * ones_like(z).scatter_(1, y, 0.0)
        loss = z.sum(1) / c
        if input.dim() == 1:
            loss = loss.squeeze(0)
        return _reduce(loss, self.reduction)
