"""Activation modules: thin wrappers that hold the options of one ``F`` function.

``MultiheadAttention`` lives in ``attention.py`` and is re-exported here, where PyTorch keeps it.
"""

from __future__ import annotations

import warnings

from ..._tensor import Tensor
from .. import functional as F
from .. import init
from .attention import MultiheadAttention
from .module import Module
from .utils import empty_param

__all__ = [
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "SELU",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "LeakyReLU",
    "LogSigmoid",
    "LogSoftmax",
    "Mish",
    "MultiheadAttention",
    "PReLU",
    "RReLU",
    "ReLU",
    "ReLU6",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softmax2d",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Tanh",
    "Tanhshrink",
    "Threshold",
]


def _inplace_suffix(inplace: bool) -> str:
    return ", inplace=True" if inplace else ""


class _InplaceActivation(Module):
    """An activation whose only option is ``inplace`` (ReLU, SiLU, Mish, SELU, ...)."""

    __constants__ = ("inplace",)
    _fn = None  # the F function, called as _fn(input, inplace)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class _PlainActivation(Module):
    """An activation without options (Sigmoid, Tanh, ...)."""

    _fn = None

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input)


class ReLU(_InplaceActivation):
    """``ReLU(inplace=False)``: max(0, x)."""
    _fn = staticmethod(F.relu)


class SiLU(_InplaceActivation):
    """``SiLU(inplace=False)``: x * sigmoid(x)."""
    _fn = staticmethod(F.silu)


class Mish(_InplaceActivation):
    """``Mish(inplace=False)``: x * tanh(softplus(x))."""
    _fn = staticmethod(F.mish)


class SELU(_InplaceActivation):
    """``SELU(inplace=False)``: scale * elu(x, alpha) with the self-normalising constants."""
    _fn = staticmethod(F.selu)


class Hardswish(_InplaceActivation):
    """``Hardswish(inplace=False)``: x * relu6(x + 3) / 6."""
    _fn = staticmethod(F.hardswish)

    def extra_repr(self) -> str:  # PyTorch prints no options for this one
        return ""


class Hardsigmoid(_InplaceActivation):
    """``Hardsigmoid(inplace=False)``: relu6(x + 3) / 6."""
    _fn = staticmethod(F.hardsigmoid)

    def extra_repr(self) -> str:
        return ""


class Sigmoid(_PlainActivation):
    """``Sigmoid()``: 1 / (1 + exp(-x))."""
    _fn = staticmethod(F.sigmoid)


class Tanh(_PlainActivation):
    """``Tanh()``."""
    _fn = staticmethod(F.tanh)


class LogSigmoid(_PlainActivation):
    """``LogSigmoid()``: log(sigmoid(x))."""
    _fn = staticmethod(F.logsigmoid)


class Softsign(_PlainActivation):
    """``Softsign()``: x / (1 + |x|)."""
    _fn = staticmethod(F.softsign)


class Tanhshrink(_PlainActivation):
    """``Tanhshrink()``: x - tanh(x)."""
    _fn = staticmethod(F.tanhshrink)


class Threshold(Module):
    """``Threshold(threshold, value, inplace=False)``: x where x > threshold, else value."""

    __constants__ = ("threshold", "value", "inplace")

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}{_inplace_suffix(self.inplace)}"


class RReLU(Module):
    """``RReLU(lower=1/8, upper=1/3, inplace=False)``: leaky ReLU with a random slope in
    [lower, upper] while training and the mean slope in eval."""

    __constants__ = ("lower", "upper", "inplace")

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{_inplace_suffix(self.inplace)}"


class Hardtanh(Module):
    """``Hardtanh(min_val=-1.0, max_val=1.0, inplace=False)``: clamp(x, min_val, max_val)."""

    __constants__ = ("min_val", "max_val", "inplace")

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
                 min_value: float | None = None, max_value: float | None = None) -> None:
        super().__init__()
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and rename to `min_val`",
                          FutureWarning, stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and rename to `max_val`",
                          FutureWarning, stacklevel=2)
            max_val = max_value
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise AssertionError(f"max_val ({self.max_val}) must be greater than min_val "
                                 f"({self.min_val})")

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_suffix(self.inplace)}"


class ReLU6(Hardtanh):
    """``ReLU6(inplace=False)``: min(max(0, x), 6)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class _AlphaActivation(Module):
    """ELU / CELU: one ``alpha`` and ``inplace``."""

    __constants__ = ("alpha", "inplace")
    _fn = None

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{_inplace_suffix(self.inplace)}"


class ELU(_AlphaActivation):
    """``ELU(alpha=1.0, inplace=False)``: x if x > 0 else alpha * (exp(x) - 1)."""
    _fn = staticmethod(F.elu)


class CELU(_AlphaActivation):
    """``CELU(alpha=1.0, inplace=False)``: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    _fn = staticmethod(F.celu)


class LeakyReLU(Module):
    """``LeakyReLU(negative_slope=0.01, inplace=False)``."""

    __constants__ = ("inplace", "negative_slope")

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}{_inplace_suffix(self.inplace)}"


class GLU(Module):
    """``GLU(dim=-1)``: a * sigmoid(b) for the two halves of the input along ``dim``."""

    __constants__ = ("dim",)

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class GELU(Module):
    """``GELU(approximate='none')``: x * Phi(x); ``approximate='tanh'`` uses the tanh form."""

    __constants__ = ("approximate",)

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class _Shrink(Module):
    __constants__ = ("lambd",)
    _fn = None

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    """``Hardshrink(lambd=0.5)``: x where |x| > lambd, else 0."""
    _fn = staticmethod(F.hardshrink)


class Softshrink(_Shrink):
    """``Softshrink(lambd=0.5)``: x - lambd, x + lambd or 0."""
    _fn = staticmethod(F.softshrink)


class Softplus(Module):
    """``Softplus(beta=1.0, threshold=20.0)``: log(1 + exp(beta x)) / beta, linear above
    ``threshold``."""

    __constants__ = ("beta", "threshold")

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class PReLU(Module):
    """``PReLU(num_parameters=1, init=0.25, device=None, dtype=None)``: leaky ReLU with a
    learnt slope (one per channel when ``num_parameters`` is the channel count)."""

    __constants__ = ("num_parameters",)

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None,
                 dtype=None) -> None:
        self.num_parameters = num_parameters
        super().__init__()
        self.init = init
        self.weight = empty_param(num_parameters, device=device, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class _SoftmaxBase(Module):
    __constants__ = ("dim",)
    _fn = None

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "dim"):  # modules pickled before ``dim`` existed
            self.dim = None

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    """``Softmax(dim=None)``: exp(x) / sum(exp(x)) along ``dim``."""
    _fn = staticmethod(F.softmax)


class Softmin(_SoftmaxBase):
    """``Softmin(dim=None)``: softmax(-x) along ``dim``."""
    _fn = staticmethod(F.softmin)


class LogSoftmax(_SoftmaxBase):
    """``LogSoftmax(dim=None)``: log(softmax(x)) along ``dim``."""
    _fn = staticmethod(F.log_softmax)


class Softmax2d(Module):
    """``Softmax2d()``: softmax over the channels of a (N, C, H, W) or (C, H, W) input."""

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D "
                             "instead")
        return F.softmax(input, -3, _stacklevel=5)

