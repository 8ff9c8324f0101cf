"""Padding modules: constant/zero, reflection, replication and circular, in 1, 2 and 3 dims.

Each holds a ``padding`` tuple in F.pad's order (last dimension first: left, right, top,
bottom, front, back); an int pads every side by that amount.
"""

from __future__ import annotations

from ..._tensor import Tensor
from .. import functional as F
from .module import Module
from .utils import _ntuple


class _PadNd(Module):
    __constants__ = ("padding",)
    _nd = 1           # spatial dims padded
    _mode = "constant"
    _check_ndim = False  # PyTorch checks the input rank in Python only for circular padding

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _ntuple(2 * self._nd)(padding)

    def forward(self, input: Tensor) -> Tensor:
        if self._check_ndim and input.dim() not in (self._nd + 1, self._nd + 2):
            raise ValueError(f"expected {self._nd + 1}D or {self._nd + 2}D input (got "
                             f"{input.dim()}D input)")
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    __constants__ = ("padding", "value")

    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """``ConstantPad1d(padding, value)``: pad the last dim with ``value``."""
    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    """``ConstantPad2d(padding, value)``: pad the last two dims with ``value``."""
    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """``ConstantPad3d(padding, value)``: pad the last three dims with ``value``."""
    _nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """``ZeroPad1d(padding)``: pad the last dim with zeros."""
    _nd = 1


class ZeroPad2d(_ZeroPadNd):
    """``ZeroPad2d(padding)``: pad the last two dims with zeros."""
    _nd = 2


class ZeroPad3d(_ZeroPadNd):
    """``ZeroPad3d(padding)``: pad the last three dims with zeros."""
    _nd = 3


class ReflectionPad1d(_PadNd):
    """``ReflectionPad1d(padding)``: mirror the input at its border (edge not repeated)."""
    _nd, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """``ReflectionPad2d(padding)``."""
    _nd, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """``ReflectionPad3d(padding)``."""
    _nd, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """``ReplicationPad1d(padding)``: repeat the edge values."""
    _nd, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """``ReplicationPad2d(padding)``."""
    _nd, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """``ReplicationPad3d(padding)``."""
    _nd, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """``CircularPad1d(padding)``: wrap around (the input is periodic)."""
    _nd, _mode, _check_ndim = 1, "circular", True


class CircularPad2d(_PadNd):
    """``CircularPad2d(padding)``."""
    _nd, _mode, _check_ndim = 2, "circular", True


class CircularPad3d(_PadNd):
    """``CircularPad3d(padding)``."""
    _nd, _mode, _check_ndim = 3, "circular", True
