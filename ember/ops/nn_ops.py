"""Neural-network kernels: linear layers, embedding, one_hot, dropout, distances, attention.

The rest of ``nn.functional``'s kernels live beside this file, each a family of its own:
activations.py (activations, softmax, logsumexp), normalization.py (batch/layer/group/instance/
RMS norms), losses.py, and conv.py (convolution, pooling, resampling); ``ember.nn.functional``
is the public face.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._dispatch import STATE
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..autograd.grad_mode import state as _grad_state
from ..backends.casting import cast
from .activations import _safe_softmax
from .attention import _fused_attention, fused_attention_chosen
from .selection import where
from .arguments import takes_tensors
from .linalg import LOW_PRECISION
from .registry import op

_HALF16 = (np.dtype(np.float16), D.bfloat16.np)

PUBLIC = ["bilinear", "dropout", "dropout_", "feature_dropout", "feature_dropout_",
          "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_",
          "cosine_similarity", "pairwise_distance", "pdist", "cdist",
          "scaled_dot_product_attention"]

# C++ spellings PyTorch's matmul errors use for the common dtypes ("float != double")
_CPP_NAME = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
             np.dtype(np.float16): "c10::Half", D.bfloat16.np: "c10::BFloat16",
             np.dtype(np.int64): "long int", np.dtype(np.int32): "int"}


def _type_name(npdt) -> str:
    return D.TYPE_NAME[D.from_np(np.dtype(npdt))]


# ---------------------------------------------------------------------- random noise
def bernoulli_like(shape, p: float, dtype, device=None) -> Tensor:
    """A tensor of ``shape`` whose entries are 1 with probability ``p`` and 0 otherwise, drawn
    from ember's generator."""
    from .creation import empty
    return empty(tuple(shape), dtype=dtype, device=device).bernoulli_(p)


# ---------------------------------------------------------------------- linear layers
def _same_dtype(a, b):
    """PyTorch's error for operands of two numpy dtypes ``a`` and ``b``."""
    if a != b:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{_CPP_NAME.get(a, a.name)} != {_CPP_NAME.get(b, b.name)}")


def _linear_shape(x_shape: tuple, w_shape: tuple, x_dt, w_dt) -> tuple:
    """linear's checks on its operands' shapes and numpy dtypes; its result's shape."""
    if not x_shape or not w_shape:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are "
                           f"{len(x_shape)}D and {len(w_shape)}D")
    if len(w_shape) > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{len(w_shape)}D")
    _same_dtype(x_dt, w_dt)
    k, rows = x_shape[-1], _prod(x_shape[:-1])
    if w_shape[-1] != k:
        if len(w_shape) == 1:
            raise RuntimeError(f"size mismatch, got input ({rows}), mat ({rows}x{k}), vec "
                               f"({w_shape[0]})")
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k} and "
                           f"{w_shape[1]}x{w_shape[0]})")
    return tuple(x_shape[:-1]) + tuple(w_shape[:-1])


def _check_bias(bias_shape: tuple, bias_dt, out_shape: tuple, out_dt) -> None:
    if bias_dt != out_dt:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{_type_name(bias_dt)} and {_type_name(out_dt)}")
    _check_expandable(bias_shape, out_shape)


@op(saves=("input", "weight"), function=False, method=False)
def linear(xp, input: "Tensor", weight: "Tensor", bias: "Tensor?" = None):
    """linear(input, weight, bias=None) -> Tensor: input @ weight.T + bias; half-precision
    (and float8) products accumulate in float32 with the bias and round once, as PyTorch's
    gemm: the backend's matmul does so itself where it says so (``widens_half``), else the
    operands are widened here."""
    out_shape = _linear_shape(input.shape, weight.shape, input.dtype, weight.dtype)
    if bias is not None:
        _check_bias(bias.shape, bias.dtype, out_shape, input.dtype)
    k = input.shape[-1]
    x2 = input if input.ndim == 2 else input.reshape(_prod(input.shape[:-1]), k)
    w = (weight if weight.ndim == 2 else weight.reshape(_prod(weight.shape[:-1]), k)).T
    matmul = xp.matmul
    dt = input.dtype
    if getattr(matmul, "widens_half", False) and (dt.kind == "f" or dt in _HALF16) and \
            weight.ndim == 2:
        y = matmul(x2, w, bias=bias)  # the backend's product broadcasts the bias
        return y if y.shape == out_shape else y.reshape(out_shape)  # no view of itself
    low = dt in LOW_PRECISION
    if low:
        x2, w = x2.astype(np.float32), w.astype(np.float32)
    y = matmul(x2, w)
    y = y if y.shape == out_shape else y.reshape(out_shape)
    if bias is not None:
        y += bias.astype(np.float32) if low else bias
    return cast(y, D.from_np(dt)) if low else y


@linear.def_meta
def _(input, weight, bias=None):
    shape = _linear_shape(tuple(input.shape), tuple(weight.shape), input.dtype.np,
                          weight.dtype.np)
    if bias is not None:
        _check_bias(tuple(bias.shape), bias.dtype.np, shape, input.dtype.np)
    return shape, input.dtype


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _check_expandable(shape, target):
    """PyTorch's error when ``shape`` cannot be expanded to ``target``."""
    lead = len(target) - len(shape)
    for i, n in enumerate(shape):
        if lead < 0 or (n != 1 and n != target[lead + i]):
            raise RuntimeError(f"The expanded size of the tensor ({target[max(lead + i, 0)]}) "
                               f"must match the existing size ({n}) at non-singleton dimension "
                               f"{max(lead + i, 0)}.  Target sizes: {list(target)}.  Tensor "
                               f"sizes: {list(shape)}")


@linear.def_backward
def _(ctx, g):
    x, w, b = ctx.input, ctx.weight, ctx.bias
    need_x, need_w, need_b = ctx.needs_input_grad
    k = x.shape[-1]
    out = 1 if w.ndim == 1 else w.shape[0]
    m = _prod(x.shape[:-1])
    g2 = _shaped(g, (m, out))
    gx = gw = gb = None
    if not _grad_state.enabled and STATE.top is None and (need_x or need_w) and \
            g._dtype is x._dtype is w._dtype and g._dtype.kind == "f" and g._backend.has_data:
        # eager, no double backward: both products in one dispatch (the compiler captures
        # the formula below, which it lowers)
        gx, gw = _linear_backward(g2, x, w, need_x, need_w)
        need_x = need_w = False
    if need_x:  # g @ W, as a linear layer with weight W.T
        gx = _shaped(linear(g2, _shaped(w, (out, k)).t()), x.shape)
    if need_w:  # g.T @ x over all batch positions
        gw = _shaped(linear(g2.t(), _shaped(x, (m, k)).t()), w.shape)
    if need_b:
        gb = _shaped(g2.sum(0), b.shape) if b.numel() == out and b.ndim <= 1 else g
    return gx, gw, gb


@op("_linear_backward", method=False, function=False, out=False, differentiable=False)
def _linear_backward(xp, grad_output: "Tensor", input: "Tensor", weight: "Tensor", need_input,
                     need_weight):
    """linear's input and weight gradients for ``grad_output`` as (rows, out features): the
    products ``g @ W`` and ``g.T @ x`` of its impl, on the arrays (None where not needed)."""
    m, out = grad_output.shape
    k = input.shape[-1]
    gx = gw = None
    if need_input:
        gx = linear.impl(xp, grad_output, weight.reshape(out, k).T)
        gx = gx if gx.shape == input.shape else gx.reshape(input.shape)
    if need_weight:
        gw = linear.impl(xp, grad_output.T, input.reshape(m, k).T)
        gw = gw if gw.shape == weight.shape else gw.reshape(weight.shape)
    return gx, gw


@_linear_backward.def_meta
def _(grad_output, input, weight, need_input, need_weight):
    return ((tuple(input.shape), input.dtype) if need_input else None,
            (tuple(weight.shape), weight.dtype) if need_weight else None)


def _shaped(t, shape):
    """``t.reshape(shape)``, or ``t`` itself where it has that shape already (no view: a
    weight's gradient then owns its memory, and the engine can make it ``.grad`` as it is)."""
    return t if tuple(t.shape) == tuple(shape) else t.reshape(shape)


@takes_tensors("input1", "input2", "weight", "bias?")
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """bilinear(input1, input2, weight, bias=None) -> Tensor:
    ``y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]``."""
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and "
                           f"{input2.ndim}")
    for d in range(input1.ndim - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {d}: got "
                               f"{input1.shape[d]} and {input2.shape[d]}")
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be a 3D tensor, got {weight.ndim}D")
    o, i, j = weight.shape
    if input1.shape[-1] != i:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got "
                           f"{input1.shape[-1]} but expected {i}")
    if input2.shape[-1] != j:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got "
                           f"{input2.shape[-1]} but expected {j}")
    if bias is not None and bias.numel() != o:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias.numel()} but expected {o}")
    # input1 @ W as one matmul against W laid out (o*j, i), then contract j with input2
    t = linear(input1, weight.transpose(1, 2).reshape(o * j, i))
    y = (t.reshape(tuple(t.shape[:-1]) + (o, j)) * input2.unsqueeze(-2)).sum(-1)
    return y if bias is None else y + bias


# ---------------------------------------------------------------------- embedding
def _check_indices(indices, what="embedding"):
    """``indices`` (an array, or a Tensor outside a kernel) must be int64 or int32."""
    dt = indices.dtype.np if isinstance(indices, Tensor) else indices.dtype
    if dt not in (np.int64, np.int32):
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got "
                           f"ember.{_type_name(dt)}Tensor instead (while checking "
                           f"arguments for {what})")


@op(saves=("indices",))
def embedding(xp, weight: "Tensor", indices: "Tensor", padding_idx=-1, scale_grad_by_freq=False,
              sparse=False):
    """embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    rows of ``weight`` picked by ``indices``."""
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    _check_indices(indices)
    xp.check_index(indices, 0, weight.shape[0], "embedding",
                   lambda v: IndexError("index out of range in self"))
    return weight[indices]


@embedding.def_backward
def _(ctx, g):
    w = ctx.weight
    return embedding_dense_backward(g, ctx.indices, w.shape[0], ctx.padding_idx,
                                    ctx.scale_grad_by_freq), None


def _grad_scale(xp, indices, num_weights, padding_idx, scale_grad_by_freq):
    """Per-lookup factor of the weight gradient: 0 for padding_idx, 1/count with
    scale_grad_by_freq, else 1 (None when every factor is 1)."""
    flat = indices.reshape(-1)
    scale = None
    if scale_grad_by_freq:
        scale = 1.0 / xp.bincount(flat, minlength=num_weights)[flat]
    if padding_idx is not None and padding_idx >= 0:
        keep = (flat != padding_idx).astype(np.float64)
        scale = keep if scale is None else scale * keep
    return scale


@op(saves=("indices",), function=False, method=False)
def embedding_dense_backward(xp, grad_output: "Tensor", indices: "Tensor", num_weights,
                             padding_idx, scale_grad_by_freq):
    """The weight gradient of embedding: grad rows summed into the rows they were read from."""
    d = grad_output.shape[-1]
    g2 = grad_output.reshape(-1, d)
    scale = _grad_scale(xp, indices, num_weights, padding_idx, scale_grad_by_freq)
    if scale is not None:
        g2 = g2 * scale[:, None].astype(g2.dtype)
    flat = indices.reshape(-1)
    acc = np.float32 if g2.dtype.itemsize == 2 else g2.dtype
    out = xp.zeros((num_weights, d), acc)
    if flat.size:  # the CPU backend's override sums the rows in one C loop
        xp.ufunc_at("add", out, flat, g2.astype(acc, copy=False))
    return out.astype(grad_output.dtype, copy=False)


@embedding_dense_backward.def_backward
def _(ctx, gg):
    # PyTorch's double backward reads gg's rows and zeroes padding_idx; it does not apply the
    # scale_grad_by_freq factor again
    idx, pad = ctx.indices, ctx.padding_idx
    res = embedding(gg, idx)
    if pad is not None and pad >= 0:
        res = where((idx != pad).unsqueeze(-1), res, 0)
    return res, None


@takes_tensors("weight", "indices")
def embedding_renorm_(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float):
    """Rescale, in place, the rows of ``weight`` named in ``indices`` whose ``norm_type``-norm
    exceeds ``max_norm`` to norm ``max_norm`` (not recorded by autograd)."""
    from .linalg_norm import vector_norm
    _check_indices(indices, "embedding_renorm_")
    if indices.numel() == 0:
        return weight
    with no_grad():
        rows = indices.reshape(-1).unique()  # each row once
        sub = weight.index_select(0, rows).to(D.float64)
        norms = vector_norm(sub, norm_type, 1, keepdim=True)
        # rows within the norm are written back unchanged (exactly: scaled by 1)
        scale = where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight.index_copy_(0, rows, (sub * scale).to(weight.dtype))
    return weight


PUBLIC.append("embedding_renorm_")


@op(differentiable=False, function=False, method=False)
def one_hot(xp, tensor: "Tensor", num_classes=-1):
    """one_hot(tensor, num_classes=-1) -> LongTensor with a trailing class dimension."""
    if tensor.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if tensor.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max()) + 1
    # a negative class is reported first, as PyTorch checks the minimum first
    xp.check_index(tensor, 0, num_classes, "one_hot", lambda v: RuntimeError(
        "Class values must be non-negative." if tensor.min() < 0 else
        "Class values must be smaller than num_classes."), what="class value")
    return (tensor[..., None] == xp.arange(num_classes)).astype(np.int64)


@one_hot.def_meta
def _(tensor, num_classes=-1):
    if num_classes == -1:
        raise RuntimeError("one_hot: the number of classes depends on the input's values; pass "
                           "num_classes")
    return tuple(tensor.shape) + (num_classes,), D.int64


# ---------------------------------------------------------------------- dropout
_SELU_NEG = 1.7580993408473766  # -selu(-inf): where alpha dropout sends dropped units


def _dropout(input: Tensor, p: float, train: bool, feature: bool, alpha: bool,
             inplace: bool) -> Tensor:
    if p < 0 or p > 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not train or input.numel() == 0:
        return input
    if not input.is_floating_point():
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{D.TYPE_NAME[input.dtype]}")
    if feature and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 1:
        zero = input.new_zeros(())
        return input.mul_(zero) if inplace else input * zero
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else tuple(input.shape)
    keep = bernoulli_like(shape, 1 - p, input.dtype, input.device)
    if alpha:
        a = 1 / math.sqrt((_SELU_NEG ** 2 * p + 1) * (1 - p))
        shift = (keep - 1) * (_SELU_NEG * a) + _SELU_NEG * a * p
        keep = keep * a
        return input.mul_(keep).add_(shift) if inplace else input * keep + shift
    keep = keep / (1 - p)
    return input.mul_(keep) if inplace else input * keep


def _dropout_variant(name: str, feature: bool, alpha: bool, inplace: bool):
    def fn(input: Tensor, p: float, train: bool) -> Tensor:
        return _dropout(input, p, train, feature, alpha, inplace)
    fn.__name__ = fn.__qualname__ = name
    kind = ("feature " if feature else "") + ("alpha " if alpha else "")
    fn.__doc__ = (f"{name}(input, p, train) -> Tensor: {kind}dropout"
                  f"{' in place' if inplace else ''} with probability p when train is True.")
    return takes_tensors("input")(fn)


dropout = _dropout_variant("dropout", False, False, False)
dropout_ = _dropout_variant("dropout_", False, False, True)
feature_dropout = _dropout_variant("feature_dropout", True, False, False)
feature_dropout_ = _dropout_variant("feature_dropout_", True, False, True)
alpha_dropout = _dropout_variant("alpha_dropout", False, True, False)
alpha_dropout_ = _dropout_variant("alpha_dropout_", False, True, True)
feature_alpha_dropout = _dropout_variant("feature_alpha_dropout", True, True, False)
feature_alpha_dropout_ = _dropout_variant("feature_alpha_dropout_", True, True, True)


# ---------------------------------------------------------------------- distances
def _float_common(x1, x2):
    dt = D.result_type(x1, x2)
    if not dt.is_floating_point:
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is "
                           f"{D.TYPE_NAME[dt]}")
    return x1.to(dt), x2.to(dt)


@takes_tensors("x1", "x2")
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """cosine_similarity(x1, x2, dim=1, eps=1e-8) -> Tensor: x1.x2 / (|x1| |x2|) along dim, each
    norm clamped below by eps."""
    from .linalg_norm import vector_norm
    from .shape import broadcast_tensors
    x1, x2 = _float_common(x1, x2)
    x1, x2 = broadcast_tensors(x1, x2)
    # Normalise each side first (keeps the result in [-1, 1]); the clamp is applied without
    # autograd, so the gradient is that of the unclamped norm, as in PyTorch.
    n1 = vector_norm(x1, 2, dim, keepdim=True).clone()
    n2 = vector_norm(x2, 2, dim, keepdim=True).clone()
    with no_grad():
        n1.clamp_min_(eps)
        n2.clamp_min_(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


@takes_tensors("x1", "x2")
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False) -> Tensor: the p-norm of
    x1 - x2 + eps over the last dimension."""
    from .linalg_norm import vector_norm
    last = max(x1.ndim, x2.ndim) - 1
    return vector_norm(x1 - x2 + eps, p, last if last >= 0 else None, keepdim=keepdim)


@takes_tensors("input")
def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """pdist(input, p=2) -> Tensor: p-norm distances between all pairs of rows i < j of a 2-D
    input, in row-major order of (i, j)."""
    from .creation import triu_indices
    from .linalg_norm import vector_norm
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    ii, jj = triu_indices(n, n, 1, device=input.device)
    return vector_norm(input[ii] - input[jj], p, -1)


@takes_tensors("x1", "x2")
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """cdist(x1, x2, p=2.0) -> Tensor: p-norm distances between each row of x1 and each row of
    x2, batched over leading dimensions: (B, P, M) x (B, R, M) -> (B, P, R)."""
    from .linalg_norm import vector_norm
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if not (x1.is_floating_point() and x2.is_floating_point()):
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: "
                           f"{D.TYPE_NAME[x1.dtype]}")
    return vector_norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, -1)


# ---------------------------------------------------------------------- attention
@takes_tensors("query", "key", "value", "attn_mask?")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, *, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
    is_causal=False, *, scale=None, enable_gqa=False) -> Tensor

    softmax(query @ key.T * scale + bias) @ value over shapes (N, ..., L, E), (N, ..., S, E),
    (N, ..., S, Ev). A bool mask marks the positions that take part; a float mask is added.
    ``is_causal`` masks keys after each query (top-left aligned). Fully masked rows give zeros.
    On CUDA a fused flash kernel computes it where it can (ops/attention.py says where, and how
    ``nn.attention.sdpa_kernel`` selects); this math path is the reference and the fallback.
    """
    from .linalg import matmul
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError(f"scaled_dot_product_attention: expected query, key and value to be "
                           f"at least 2-D, got {query.ndim}D, {key.ndim}D and {value.ndim}D")
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {query.dtype} key.dtype: {key.dtype} and value.dtype: "
                           f"{value.dtype} instead.")
    if key.shape[-1] != query.shape[-1]:
        raise RuntimeError(f"Expected query and key to have the same embedding dimension, got "
                           f"{query.shape[-1]} and {key.shape[-1]}")
    if attn_mask is not None and attn_mask.dtype is not D.bool_ and attn_mask.dtype is not \
            query.dtype:
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: {_CPP_NAME.get(attn_mask.dtype.np)} "
                           f"and  query.dtype: {_CPP_NAME.get(query.dtype.np)} instead.")
    if fused_attention_chosen(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
        return _fused_attention(query, key, value, attn_mask, is_causal, scale)[0]
    L, S = query.shape[-2], key.shape[-2]
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hk != hv or hq % hk:
            raise RuntimeError(f"Expected query heads ({hq}) to be a multiple of key/value heads "
                               f"({hk}, {hv}), with key and value heads equal, for enable_gqa")
        if hq != hk:
            key, value = _repeat_heads(key, hq // hk), _repeat_heads(value, hq // hk)
    s = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = matmul(query * s, key.transpose(-2, -1))
    if is_causal:  # as an additive bias, built once per shape and dtype
        attn_mask = _causal_bias(L, S, query.dtype, query.device)
    if attn_mask is not None:
        if attn_mask.dtype is D.bool_:  # as an additive bias: the backward is then the identity
            attn_mask = where(attn_mask, 0.0, -math.inf).to(query.dtype)
        scores = scores + attn_mask
    weights = _safe_softmax(scores, -1)
    if dropout_p > 0:
        weights = _dropout(weights, dropout_p, True, False, False, False)
    return matmul(weights, value)


_CAUSAL: dict = {}


def _causal_bias(L: int, S: int, dtype, device) -> Tensor:
    """0 on and below the diagonal, -inf above: the causal mask as a bias (cached; it never
    requires grad and no op writes into it)."""
    from .creation import full
    key = (L, S, dtype, device)
    bias = _CAUSAL.get(key)
    if bias is None:
        if len(_CAUSAL) > 32:
            _CAUSAL.clear()
        # built eagerly, outside any capture: a plain tensor, also while the compiler traces
        prev, STATE.capture = STATE.capture, None
        try:
            with no_grad():
                bias = full((L, S), -math.inf, dtype=dtype, device=device).triu(1)
        finally:
            STATE.capture = prev
        _CAUSAL[key] = bias
    return bias


def _repeat_heads(t: Tensor, r: int) -> Tensor:
    """Repeat each head (dim -3) ``r`` times, copies adjacent: h0 h0 h1 h1 for r = 2."""
    shape = tuple(t.shape)
    rep = t.unsqueeze(-3).expand(shape[:-2] + (r,) + shape[-2:])
    return rep.reshape(shape[:-3] + (shape[-3] * r,) + shape[-2:])
