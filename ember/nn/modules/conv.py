"""Convolutions: Conv1d/2d/3d and ConvTranspose1d/2d/3d."""

from __future__ import annotations

import math

from ..._tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module
from .utils import _ntuple, _reverse_repeat_tuple, empty_param

_PADDING_STRINGS = {"same", "valid"}
_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


class _ConvNd(Module):
    """State shared by every convolution: geometry, weight (out, in/groups, *k) or, when
    transposed, (in, out/groups, *k), and bias (out)."""

    __constants__ = ("stride", "padding", "dilation", "groups", "padding_mode",
                     "output_padding", "in_channels", "out_channels", "kernel_size")
    _nd = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding,
                 dilation, transposed: bool, output_padding, groups: int, bias: bool,
                 padding_mode: str, device=None, dtype=None) -> None:
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in _PADDING_STRINGS:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{_PADDING_STRINGS}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's amounts (last dim first) for the non-zero padding modes
        if isinstance(padding, str):
            pads = [0, 0] * len(kernel_size)
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(len(kernel_size) - 1, -1, -1)):
                    total = d * (k - 1)
                    pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
            self._reversed_padding_repeated_twice = pads
        else:
            self._reversed_padding_repeated_twice = list(_reverse_repeat_tuple(padding, 2))
        if transposed:
            shape = (in_channels, out_channels // groups, *kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *kernel_size)
        self.weight = empty_param(*shape, device=device, dtype=dtype)
        if bias:
            self.bias = empty_param(out_channels, device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform_(a=sqrt(5)) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the bias likewise
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def __setstate__(self, state):
        state.setdefault("padding_mode", "zeros")
        super().__setstate__(state)


class _Conv(_ConvNd):
    """ConvNd: ``ConvNd(in_channels, out_channels, kernel_size, stride=1, padding=0,
    dilation=1, groups=1, bias=True, padding_mode='zeros', device=None, dtype=None)``;
    ``padding`` may be 'same' or 'valid'."""

    _fn = None  # F.conv1d / conv2d / conv3d

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        tup = _ntuple(self._nd)
        super().__init__(in_channels, out_channels, tup(kernel_size), tup(stride),
                         padding if isinstance(padding, str) else tup(padding), tup(dilation),
                         False, tup(0), groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        fn = type(self)._fn
        if self.padding_mode != "zeros":
            return fn(F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode),
                      weight, bias, self.stride, _ntuple(self._nd)(0), self.dilation,
                      self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    __doc__ = _Conv.__doc__.replace("ConvNd", "Conv1d")
    _nd, _fn = 1, staticmethod(F.conv1d)


class Conv2d(_Conv):
    __doc__ = _Conv.__doc__.replace("ConvNd", "Conv2d")
    _nd, _fn = 2, staticmethod(F.conv2d)


class Conv3d(_Conv):
    __doc__ = _Conv.__doc__.replace("ConvNd", "Conv3d")
    _nd, _fn = 3, staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    """ConvTransposeNd: ``ConvTransposeNd(in_channels, out_channels, kernel_size, stride=1,
    padding=0, output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros',
    device=None, dtype=None)``; ``forward(input, output_size=None)`` picks the output padding
    that yields ``output_size``."""

    _fn = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        tup = _ntuple(self._nd)
        super().__init__(in_channels, out_channels, tup(kernel_size), tup(stride), tup(padding),
                         tup(dilation), True, tup(output_padding), groups, bias, padding_mode,
                         device, dtype)

    def _output_padding(self, input: Tensor, output_size, stride, padding, kernel_size,
                        num_spatial_dims: int, dilation=None) -> tuple:
        if output_size is None:
            return tuple(self.output_padding)
        batched = input.dim() == num_spatial_dims + 2
        lead = 2 if batched else 1
        output_size = list(output_size)
        if len(output_size) == lead + num_spatial_dims:
            output_size = output_size[lead:]
        if len(output_size) != num_spatial_dims:
            raise ValueError(f"ConvTranspose{num_spatial_dims}D: for {input.dim()}D input, "
                             f"output_size must have {num_spatial_dims} or "
                             f"{lead + num_spatial_dims} elements (got {len(output_size)})")
        lo, hi = [], []
        for d in range(num_spatial_dims):
            dil = dilation[d] if dilation is not None else 1
            size = ((input.size(d + lead) - 1) * stride[d] - 2 * padding[d]
                    + dil * (kernel_size[d] - 1) + 1)
            lo.append(size)
            hi.append(size + stride[d] - 1)
        for d, size in enumerate(output_size):
            if size < lo[d] or size > hi[d]:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {lo} to {hi} (for an input of "
                                 f"{input.size()[lead:]})")
        return tuple(output_size[d] - lo[d] for d in range(num_spatial_dims))

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        if self.padding_mode != "zeros":
            raise ValueError(f"Only `zeros` padding mode is supported for {type(self).__name__}")
        output_padding = self._output_padding(input, output_size, self.stride, self.padding,
                                              self.kernel_size, self._nd, self.dilation)
        return type(self)._fn(input, self.weight, self.bias, self.stride, self.padding,
                              output_padding, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    __doc__ = _ConvTransposeNd.__doc__.replace("ConvTransposeNd", "ConvTranspose1d")
    _nd, _fn = 1, staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    __doc__ = _ConvTransposeNd.__doc__.replace("ConvTransposeNd", "ConvTranspose2d")
    _nd, _fn = 2, staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    __doc__ = _ConvTransposeNd.__doc__.replace("ConvTransposeNd", "ConvTranspose3d")
    _nd, _fn = 3, staticmethod(F.conv_transpose3d)
