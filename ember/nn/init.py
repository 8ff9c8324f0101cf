"""``ember.nn.init``: in-place initialisers drawing from PyTorch's distributions."""

from __future__ import annotations

import math
import warnings

from ..autograd.grad_mode import no_grad

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d")


def calculate_gain(nonlinearity: str, param=None) -> float:
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.size(1) * receptive, tensor.size(0) * receptive


_calculate_fan_in_and_fan_out = _fan_in_and_fan_out


def _fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fi, fo = _fan_in_and_fan_out(tensor)
    return fi if mode == "fan_in" else fo


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) truncated to [a, b], by inverting the normal CDF."""
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    with no_grad():
        lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
        tensor.uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
        tensor.erfinv_()
        tensor.mul_(std * math.sqrt(2.0))
        tensor.add_(mean)
        tensor.clamp_(min=a, max=b)
        return tensor


def constant_(tensor, val: float):
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    if tensor.ndimension() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from ..ops.creation import eye
    with no_grad():
        return tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor, groups=1):
    d = tensor.ndimension()
    if d not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_per = tensor.size(0) // groups
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for i in range(min(out_per, tensor.size(1))):
                idx = (g * out_per + i, i) + tuple(s // 2 for s in tensor.shape[2:])
                tensor[idx] = 1
    return tensor


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    fi, fo = _fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fi + fo))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    fi, fo = _fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fi + fo)), generator)


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain: float = 1, generator=None):
    if tensor.ndimension() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    from .. import linalg
    rows = tensor.size(0)
    cols = tensor.numel() // rows
    flat = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator)
    if rows < cols:
        flat = flat.t()
    q, r = linalg.qr(flat)
    q = q * r.diagonal().sign()
    if rows < cols:
        q = q.t()
    with no_grad():
        tensor.view_as(q).copy_(q)
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    if tensor.ndimension() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from ..ops.random import randperm
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for c in range(cols):
            idx = randperm(rows, generator=generator)[:zeros]
            tensor[idx, c] = 0
    return tensor


# PyTorch's deprecated non-underscore names
uniform, normal, constant = uniform_, normal_, constant_
xavier_uniform, xavier_normal = xavier_uniform_, xavier_normal_
kaiming_uniform, kaiming_normal, orthogonal = kaiming_uniform_, kaiming_normal_, orthogonal_
