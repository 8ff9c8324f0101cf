"""Embedding and EmbeddingBag."""

from __future__ import annotations

import numpy as np

from ... import _dtype
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import empty_param


def _normalize_padding_idx(padding_idx: int | None, num_embeddings: int,
                           msg: str = "Padding_idx must be within num_embeddings") -> int | None:
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise AssertionError(msg)
    return padding_idx + num_embeddings if padding_idx < 0 else padding_idx


def _pretrained_weight(_weight: Tensor, num_embeddings: int, embedding_dim: int,
                       freeze: bool) -> Parameter:
    if list(_weight.shape) != [num_embeddings, embedding_dim]:
        raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
    return Parameter(_weight, requires_grad=not freeze)


class Embedding(Module):
    """``Embedding(num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
    norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False,
    device=None, dtype=None)``: a lookup table; weights start N(0, 1) with the
    ``padding_idx`` row zero (that row also receives no gradient)."""

    __constants__ = ("num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type",
                     "scale_grad_by_freq", "sparse")

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _normalize_padding_idx(padding_idx, num_embeddings)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        if _weight is None:
            self.weight = empty_param(num_embeddings, embedding_dim, device=device, dtype=dtype,
                                      requires_grad=not _freeze)
            self.reset_parameters()
        else:
            self.weight = _pretrained_weight(_weight, num_embeddings, embedding_dim, _freeze)
        self.sparse = sparse

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding whose weight is ``embeddings`` (shared, not copied; the padding row is
        left as given); ``freeze`` turns off its gradient."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, _freeze=freeze,
                   padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """PyTorch's ``F.embedding_bag``: sums, means or maxima of bags of embedding rows.

    Written with ember ops (embedding lookup, then index_add / scatter_reduce per bag), so it
    is differentiable like any composition; empty bags give zeros."""
    from ...ops.creation import arange, tensor, zeros
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is "
                         f"not None, then it must have the same shape as the input "
                         f"({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is "
                             "a mini-batch of fixed length sequences. However, found offsets of "
                             f"type {type(offsets)}")
        offsets = arange(0, input.numel(), input.size(1))
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. "
                                  "per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    padding_idx = _normalize_padding_idx(padding_idx, weight.size(0),
                                         "padding_idx must be within the number of embeddings")
    if max_norm is not None:
        with no_grad():
            F.embedding_renorm_(weight, input, max_norm, norm_type)
    # bag boundaries are integer metadata: compute the bag of every element in numpy
    n = input.numel()
    off = np.asarray(offsets.detach()._data, dtype=np.int64)
    if off.size and off[0] != 0:
        raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                           f"has to start from position 0. However, got {int(off[0])}")
    if off.size and off[-1] > n:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got "
                           f"offsets[-1] of {int(off[-1])}")
    ends = off[1:] if include_last_offset else np.append(off[1:], n)
    starts = off[:-1] if include_last_offset else off
    bags = len(starts)
    lengths = np.maximum(ends - starts, 0)
    bag_of = np.repeat(np.arange(bags), lengths)
    pos = np.concatenate([np.arange(s, s + k) for s, k in zip(starts, lengths)]) if bags \
        else np.zeros(0, np.int64)
    idx = np.asarray(input.detach()._data, dtype=np.int64)[pos]
    keep = idx != padding_idx if padding_idx is not None else np.ones(len(idx), bool)
    pos, bag_of = pos[keep], bag_of[keep]
    rows = F.embedding(input[tensor(pos, dtype=_dtype.int64)], weight, None, None, norm_type,
                       scale_grad_by_freq, sparse)
    target = tensor(bag_of, dtype=_dtype.int64)
    out = zeros((bags, weight.size(1)), dtype=weight.dtype)
    if mode == "max":
        index = target.unsqueeze(1).expand(-1, weight.size(1))
        return out.scatter_reduce(0, index, rows, "amax", include_self=False)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[tensor(pos, dtype=_dtype.int64)].unsqueeze(1)
    out = out.index_add(0, target, rows)
    if mode == "mean":
        counts = np.bincount(bag_of, minlength=bags).clip(min=1)
        out = out / tensor(counts, dtype=weight.dtype).unsqueeze(1)
    return out


class EmbeddingBag(Module):
    """``EmbeddingBag(num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, mode='mean', sparse=False, _weight=None,
    include_last_offset=False, padding_idx=None, device=None, dtype=None)``:
    ``forward(input, offsets=None, per_sample_weights=None)`` reduces each bag of rows."""

    __constants__ = ("num_embeddings", "embedding_dim", "max_norm", "norm_type",
                     "scale_grad_by_freq", "mode", "sparse", "include_last_offset",
                     "padding_idx")

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Tensor | None = None,
                 include_last_offset: bool = False, padding_idx: int | None = None,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _normalize_padding_idx(
            padding_idx, num_embeddings, "padding_idx must be within num_embeddings")
        if _weight is None:
            self.weight = empty_param(num_embeddings, embedding_dim, device=device, dtype=dtype)
            self.reset_parameters()
        else:
            self.weight = _pretrained_weight(_weight, num_embeddings, embedding_dim, False)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse,
                             per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """An EmbeddingBag over ``embeddings`` (shared); ``freeze`` turns off its gradient."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings,
                  max_norm=max_norm, norm_type=norm_type,
                  scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad = not freeze
        return bag
