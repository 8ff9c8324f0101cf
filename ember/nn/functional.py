"""ember.nn.functional: PyTorch's ``torch.nn.functional``.

The kernels are ops in ``ember/ops`` (nn_ops, activations, normalization, losses, conv,
padding); this module re-exports them under their functional names and adds the thin layer
PyTorch's functional API puts on top: ``inplace=`` flags, ``training`` flags, argument order,
deprecated arguments and the checks PyTorch makes in Python.
"""

from __future__ import annotations

import warnings

from .._tensor import Tensor, _wrap_dim
from ..ops import conv as _conv
from ..ops.activations import (celu as _celu, celu_ as _celu_, elu as _elu, gelu, hardshrink,
                               hardsigmoid as _hardsigmoid, hardswish as _hardswish,
                               hardtanh as _hardtanh, leaky_relu as _leaky_relu,
                               legacy_softmax_dim, log_softmax as _log_softmax, logsigmoid,
                               mish as _mish, prelu, relu as _relu, rrelu as _rrelu,
                               rrelu_ as _rrelu_, selu as _selu, selu_ as _selu_, silu as _silu,
                               softmax as _softmax, softplus, softshrink,
                               threshold as _threshold)
from ..ops.conv import *  # convolution, pooling, resampling
from ..ops.losses import (binary_cross_entropy, binary_cross_entropy_with_logits,
                          cosine_embedding_loss, cross_entropy, gaussian_nll_loss,
                          hinge_embedding_loss, huber_loss, kl_div, l1_loss, margin_ranking_loss,
                          mse_loss, multi_margin_loss, multilabel_margin_loss,
                          multilabel_soft_margin_loss, nll_loss, poisson_nll_loss, smooth_l1_loss,
                          soft_margin_loss, triplet_margin_loss, triplet_margin_with_distance_loss)
from ..ops.nn_ops import (_dropout, bilinear, cosine_similarity, embedding as _embedding,
                          embedding_renorm_, linear, one_hot, pairwise_distance, pdist,
                          scaled_dot_product_attention)
from ..ops.normalization import (batch_norm as _batch_norm, group_norm,
                                 instance_norm as _instance_norm, layer_norm, rms_norm)
from ..ops.padding import pad
from ..ops.pointwise import sigmoid, tanh
from ..ops.arguments import takes_tensors
from ..ops.registry import call_inplace

__all__ = [
    # activations
    "relu", "relu_", "relu6", "hardtanh", "hardtanh_", "threshold", "threshold_", "leaky_relu",
    "leaky_relu_", "elu", "elu_", "selu", "selu_", "celu", "celu_", "rrelu", "rrelu_", "gelu",
    "silu", "mish", "softplus", "softsign", "hardswish", "hardsigmoid", "logsigmoid",
    "tanhshrink", "hardshrink", "softshrink", "prelu", "glu", "sigmoid", "tanh", "softmax",
    "softmin", "log_softmax",
    # layers
    "linear", "bilinear", "embedding", "one_hot", "pad", "scaled_dot_product_attention",
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    # normalisation and distances
    "batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm", "local_response_norm",
    "normalize", "cosine_similarity", "pairwise_distance", "pdist",
    # losses
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "margin_ranking_loss",
    "soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "triplet_margin_loss",
    "cosine_embedding_loss", "hinge_embedding_loss", "triplet_margin_with_distance_loss",
    "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
    "gumbel_softmax",
]
__all__ += _conv.__all__


def _maybe_inplace(op, input: Tensor, inplace: bool, *args) -> Tensor:
    return call_inplace(op, input, args, {}) if inplace else op(input, *args)


# ---------------------------------------------------------------------- activations
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """relu(input, inplace=False) -> Tensor"""
    return _maybe_inplace(_relu, input, inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(input, inplace=False) -> Tensor: min(max(0, x), 6)"""
    return _maybe_inplace(_hardtanh, input, inplace, 0.0, 6.0)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """hardtanh(input, min_val=-1., max_val=1., inplace=False) -> Tensor"""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _maybe_inplace(_hardtanh, input, inplace, min_val, max_val)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """threshold(input, threshold, value, inplace=False) -> Tensor"""
    return _maybe_inplace(_threshold, input, inplace, threshold, value)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """leaky_relu(input, negative_slope=0.01, inplace=False) -> Tensor"""
    return _maybe_inplace(_leaky_relu, input, inplace, negative_slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """elu(input, alpha=1.0, inplace=False) -> Tensor"""
    return _maybe_inplace(_elu, input, inplace, alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """selu(input, inplace=False) -> Tensor"""
    return _selu_(input) if inplace else _selu(input)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """celu(input, alpha=1., inplace=False) -> Tensor"""
    return _celu_(input, alpha) if inplace else _celu(input, alpha)


def _inplace_variant(fn):
    """``f_(input, ...)``: ``f(input, ..., inplace=True)``."""
    def variant(input: Tensor, *args, **kwargs) -> Tensor:
        return fn(input, *args, inplace=True, **kwargs)
    variant.__name__ = variant.__qualname__ = fn.__name__ + "_"
    variant.__doc__ = f"In-place {fn.__name__}."
    return variant


relu_, hardtanh_, threshold_, leaky_relu_, elu_ = (
    _inplace_variant(f) for f in (relu, hardtanh, threshold, leaky_relu, elu))
selu_ = _selu_
celu_ = _celu_


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """rrelu(input, lower=1./8, upper=1./3, training=False, inplace=False) -> Tensor"""
    return (_rrelu_ if inplace else _rrelu)(input, lower, upper, training)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False) -> Tensor:
    return _rrelu_(input, lower, upper, training)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """silu(input, inplace=False) -> Tensor: x * sigmoid(x)"""
    return _maybe_inplace(_silu, input, inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """mish(input, inplace=False) -> Tensor: x * tanh(softplus(x))"""
    return _maybe_inplace(_mish, input, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """hardswish(input, inplace=False) -> Tensor"""
    return _maybe_inplace(_hardswish, input, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """hardsigmoid(input, inplace=False) -> Tensor"""
    return _maybe_inplace(_hardsigmoid, input, inplace)


@takes_tensors("input")
def softsign(input: Tensor) -> Tensor:
    """softsign(input) -> Tensor: x / (1 + |x|)"""
    return input / (input.abs() + 1)


@takes_tensors("input")
def tanhshrink(input: Tensor) -> Tensor:
    """tanhshrink(input) -> Tensor: x - tanh(x)"""
    return input - input.tanh()


@takes_tensors("input")
def glu(input: Tensor, dim: int = -1) -> Tensor:
    """glu(input, dim=-1) -> Tensor: a * sigmoid(b) for the halves a, b of ``input``."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size "
                           f"{input.shape[d]}")
    a, b = input.chunk(2, d)
    return a * b.sigmoid()


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax(input, dim=None, dtype=None) -> Tensor"""
    if dim is None:
        dim = legacy_softmax_dim("softmax", input.ndim, _stacklevel)
    return _softmax(input, dim, dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmin(input, dim=None, dtype=None) -> Tensor: softmax(-input)"""
    if dim is None:
        dim = legacy_softmax_dim("softmin", input.ndim, _stacklevel)
    return _softmax(-input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype=None) -> Tensor:
    """log_softmax(input, dim=None, dtype=None) -> Tensor"""
    if dim is None:
        dim = legacy_softmax_dim("log_softmax", input.ndim, _stacklevel)
    return _log_softmax(input, dim, dtype)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """gumbel_softmax(logits, tau=1, hard=False, dim=-1) -> Tensor: softmax((logits + g) / tau)
    with Gumbel noise g; ``hard`` returns one-hot samples whose gradient is the soft one's."""
    from ..ops.creation import empty_like, zeros_like
    gumbels = -empty_like(logits).exponential_().log()
    y = _softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    y_hard = zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y.detach() + y


# ---------------------------------------------------------------------- embedding, dropout
def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, sparse=False) -> Tensor: rows of ``weight`` at ``input``;
    row ``padding_idx`` gets no gradient; rows read are renormalised in place to ``max_norm``."""
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx + n if padding_idx < 0 else padding_idx
    else:
        padding_idx = -1
    if max_norm is not None:
        embedding_renorm_(weight, input.contiguous(), max_norm, norm_type)
    return _embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


@takes_tensors("input")
def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    """dropout(input, p=0.5, training=True, inplace=False) -> Tensor: zero each element with
    probability p and scale the rest by 1 / (1 - p); the identity when not training."""
    _check_p(p)
    return _dropout(input, p, training, False, False, inplace)


@takes_tensors("input")
def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """alpha_dropout(input, p=0.5, training=False, inplace=False) -> Tensor: dropout that keeps
    the mean and variance of SELU activations."""
    _check_p(p)
    return _dropout(input, p, training, False, True, inplace)


@takes_tensors("input")
def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """feature_alpha_dropout(input, p=0.5, training=False, inplace=False) -> Tensor"""
    _check_p(p)
    return _dropout(input, p, training, True, True, inplace)


def _feature_dropout(input, p, training, inplace, batched):
    """Channel dropout; an unbatched input gets a batch dimension for the call."""
    if batched:
        return _dropout(input, p, training, True, False, inplace)
    x = input.unsqueeze(0)
    out = _dropout(x, p, training, True, False, inplace)
    return input if inplace or out is x else out.squeeze(0)


@takes_tensors("input")
def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """dropout1d(input, p=0.5, training=True, inplace=False) -> Tensor: zero whole channels of a
    (N, C, L) or (C, L) input."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout on "
                           "inputs with 1 spatial dimension, a channel dimension, and an optional "
                           "batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, input.ndim == 3)


@takes_tensors("input")
def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """dropout2d(input, p=0.5, training=True, inplace=False) -> Tensor: zero whole channels of a
    (N, C, H, W) input."""
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 3D or 4D inputs).", UserWarning, stacklevel=2)
    if input.ndim == 3:  # kept from PyTorch's history: 3-D means (N, C, L), not unbatched
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape (C, H, "
                      "W). To maintain the 1D channel-wise dropout behavior, please switch to "
                      "using dropout1d instead.", UserWarning, stacklevel=2)
    return _feature_dropout(input, p, training, inplace, True)


@takes_tensors("input")
def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """dropout3d(input, p=0.5, training=True, inplace=False) -> Tensor: zero whole channels of a
    (N, C, D, H, W) or (C, D, H, W) input."""
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 4D or 5D inputs).", UserWarning, stacklevel=2)
    return _feature_dropout(input, p, training, inplace, input.ndim == 5)


# ---------------------------------------------------------------------- normalisation
def _numel_per_channel(input) -> int:
    n = input.shape[0]
    for s in input.shape[2:]:
        n *= s
    return n


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
    momentum=0.1, eps=1e-05) -> Tensor"""
    if training and _numel_per_channel(input) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{input.shape}")
    return _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
    use_input_stats=True, momentum=0.1, eps=1e-05) -> Tensor"""
    if use_input_stats:
        n = 1
        for s in input.shape[2:]:
            n *= s
        if n == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input "
                             f"size {input.shape}")
    return _instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                          momentum, eps)


@takes_tensors("input")
def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0) -> Tensor: input divided
    by (k + alpha * mean of input^2 over ``size`` neighbouring channels)^beta."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         "dimensions)")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    sq = pad(input * input, [0, 0] * (input.ndim - 2) + [size // 2, (size - 1) // 2])
    # zero-padded window of ``size`` channels around each channel, averaged (padding counts)
    acc = sq.narrow(1, 0, c)
    for j in range(1, size):
        acc = acc + sq.narrow(1, j, c)
    # PyTorch averages with its pooling kernel, which truncates for integer inputs
    avg = acc / size if input.is_floating_point() else acc // size
    return input / (avg * alpha + k) ** beta


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """normalize(input, p=2.0, dim=1, eps=1e-12) -> Tensor: input / max(||input||_p, eps)
    along ``dim``."""
    from ..ops.binary import div
    from ..ops.linalg_norm import vector_norm
    denom = vector_norm(input, p, dim, keepdim=True).clamp_min(eps)
    return div(input, denom.expand_as(input), out=out)
