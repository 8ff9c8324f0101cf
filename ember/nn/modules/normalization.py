"""Normalisation layers: BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, LayerNorm, RMSNorm,
GroupNorm, LocalResponseNorm."""

from __future__ import annotations

import numbers
import warnings

from ... import _dtype
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module
from .utils import empty_param


def _affine_params(module: Module, shape: tuple, affine: bool, bias: bool | None, device,
                   dtype) -> None:
    """Register ``weight`` and ``bias`` of ``shape`` (or None when not affine / no bias);
    ``bias=None`` means the layer has no bias at all (RMSNorm)."""
    names = ("weight",) if bias is None else ("weight", "bias")
    for name in names:
        if affine and (name == "weight" or bias):
            setattr(module, name, empty_param(*shape, device=device, dtype=dtype))
        else:
            module.register_parameter(name, None)


def _reset_affine(module: Module) -> None:
    """Weight ones, bias zeros: every normalisation layer's initial affine transform."""
    if getattr(module, "weight", None) is not None:
        init.ones_(module.weight)
    if getattr(module, "bias", None) is not None:
        init.zeros_(module.bias)


class _NormBase(Module):
    """Shared state of BatchNorm and InstanceNorm: affine weight/bias and the running stats."""

    _version = 2
    __constants__ = ("track_running_stats", "momentum", "eps", "num_features", "affine")

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        from ...ops.creation import ones, tensor, zeros
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine_params(self, (num_features,), affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked",
                                 tensor(0, dtype=_dtype.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, *args, **kwargs):
        # checkpoints without version metadata may predate num_batches_tracked: keep ours
        if local_metadata.get("version") is None and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                from ...ops.creation import tensor
                state_dict[key] = (self.num_batches_tracked
                                   if self.num_batches_tracked is not None
                                   else tensor(0, dtype=_dtype.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, *args, **kwargs)


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average over the batches seen
                factor = 1.0 / float(self.num_batches_tracked)
        # batch statistics in training, and in eval when there are no running stats
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        # the buffers are passed only where they are read or updated
        pass_stats = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if pass_stats else None,
                            self.running_var if pass_stats else None, self.weight, self.bias,
                            use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """``BatchNorm1d(num_features, eps=1e-5, momentum=0.1, affine=True,
    track_running_stats=True, device=None, dtype=None, *, bias=True)`` over (N, C) or (N, C, L).
    ``momentum=None`` keeps a cumulative average of the batch statistics."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """``BatchNorm2d(num_features, ...)`` over (N, C, H, W)."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """``BatchNorm3d(num_features, ...)`` over (N, C, D, H, W)."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class _InstanceNorm(_NormBase):
    _spatial = 1  # spatial dims; an unbatched input has _spatial + 1 dims

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _check_input_dim(self, input: Tensor) -> None:
        lo = self._spatial + 1
        if input.dim() not in (lo, lo + 1):
            raise ValueError(f"expected {lo}D or {lo + 1}D input (got {input.dim()}D input)")

    def _instance_norm(self, input: Tensor) -> Tensor:
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        unbatched = self._spatial + 1
        feature_dim = input.dim() - unbatched
        if input.size(feature_dim) != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.size(feature_dim)}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You "
                          "can silence this warning by not passing in num_features, which is "
                          "not used because affine=False", stacklevel=2)
        if input.dim() == unbatched:
            return self._instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._instance_norm(input)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, *args, **kwargs):
        if local_metadata.get("version") is None and not self.track_running_stats:
            keys = [prefix + n for n in ("running_mean", "running_var")
                    if prefix + n in state_dict]
            if keys:
                name = type(self).__name__
                quoted = " and ".join('"' + k + '"' for k in keys)
                error_msgs.append(
                    f"Unexpected running stats buffer(s) {quoted} "
                    f"for {name} with track_running_stats=False. If state_dict is a checkpoint "
                    f"saved before 0.4.0, this may be expected because {name} does not track "
                    "running stats by default since 0.4.0. Please remove these keys from "
                    "state_dict. If the running stats are actually needed, instead set "
                    f"track_running_stats=True in {name} to enable them. See the documentation "
                    f"of {name} for details.")
                for k in keys:
                    state_dict.pop(k)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, *args, **kwargs)


class InstanceNorm1d(_InstanceNorm):
    """``InstanceNorm1d(num_features, eps=1e-5, momentum=0.1, affine=False,
    track_running_stats=False, ...)`` over (N, C, L) or (C, L)."""
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """``InstanceNorm2d(num_features, ...)`` over (N, C, H, W) or (C, H, W)."""
    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """``InstanceNorm3d(num_features, ...)`` over (N, C, D, H, W) or (C, D, H, W)."""
    _spatial = 3


def _shape_tuple(normalized_shape) -> tuple:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(normalized_shape)


class LayerNorm(Module):
    """``LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None,
    dtype=None)``: normalise over the trailing ``normalized_shape`` dims."""

    __constants__ = ("normalized_shape", "eps", "elementwise_affine")

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_params(self, self.normalized_shape, elementwise_affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """``RMSNorm(normalized_shape, eps=None, elementwise_affine=True, device=None,
    dtype=None)``: x / sqrt(mean(x^2) + eps) * weight; ``eps=None`` uses the dtype's eps."""

    __constants__ = ("normalized_shape", "eps", "elementwise_affine")

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_params(self, self.normalized_shape, elementwise_affine, None, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """``GroupNorm(num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *,
    bias=True)``: normalise each group of channels of each sample."""

    __constants__ = ("num_groups", "num_channels", "eps", "affine")

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_params(self, (num_channels,), affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class LocalResponseNorm(Module):
    """``LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0)``: normalise each channel by
    the energy of its ``size`` neighbouring channels."""

    __constants__ = ("size", "alpha", "beta", "k")

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
