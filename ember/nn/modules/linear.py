"""Identity, Linear, Bilinear."""

from __future__ import annotations

import math

from ..._tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module
from .utils import empty_param


class Identity(Module):
    """``Identity(*args, **kwargs)``: returns its input; the arguments are ignored."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


def _fan_in_bias_(bias: Tensor | None, fan_in: int) -> None:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on a bias: PyTorch's default for Linear and Conv."""
    if bias is not None:
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


class Linear(Module):
    """``Linear(in_features, out_features, bias=True, device=None, dtype=None)``:
    ``y = x @ weight.T + bias`` with ``weight`` of shape (out_features, in_features)."""

    __constants__ = ("in_features", "out_features")

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = empty_param(out_features, in_features, device=device, dtype=dtype)
        if bias:
            self.bias = empty_param(out_features, device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform_ with a=sqrt(5) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on the weight
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        _fan_in_bias_(self.bias, self.in_features)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class NonDynamicallyQuantizableLinear(Linear):
    """The Linear that MultiheadAttention uses for ``out_proj`` (the name shows in its repr)."""


class Bilinear(Module):
    """``Bilinear(in1_features, in2_features, out_features, bias=True, device=None,
    dtype=None)``: ``y = x1^T A x2 + b`` with ``weight`` of shape (out, in1, in2)."""

    __constants__ = ("in1_features", "in2_features", "out_features")

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = empty_param(out_features, in1_features, in2_features, device=device,
                                  dtype=dtype)
        if bias:
            self.bias = empty_param(out_features, device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
