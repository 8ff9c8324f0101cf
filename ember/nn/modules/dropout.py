"""Dropout modules: active in training mode, the identity in eval mode."""

from __future__ import annotations

from ..._tensor import Tensor
from .. import functional as F
from .module import Module


class _DropoutNd(Module):
    __constants__ = ("p", "inplace")
    _fn = None  # the F function, called as _fn(input, p, training, inplace)

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """``Dropout(p=0.5, inplace=False)``: zero elements with probability p while training and
    scale the others by 1 / (1 - p)."""
    _fn = staticmethod(F.dropout)


class Dropout1d(_DropoutNd):
    """``Dropout1d(p=0.5, inplace=False)``: zero whole channels of (N, C, L) or (C, L)."""
    _fn = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """``Dropout2d(p=0.5, inplace=False)``: zero whole channels of (N, C, H, W) or (N, C, L)."""
    _fn = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """``Dropout3d(p=0.5, inplace=False)``: zero whole channels of (N, C, D, H, W) or
    (C, D, H, W)."""
    _fn = staticmethod(F.dropout3d)


class AlphaDropout(_DropoutNd):
    """``AlphaDropout(p=0.5, inplace=False)``: dropout that keeps SELU's mean and variance."""
    _fn = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    """``FeatureAlphaDropout(p=0.5, inplace=False)``: alpha dropout of whole channels."""
    _fn = staticmethod(F.feature_alpha_dropout)
