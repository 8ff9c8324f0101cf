"""MultiheadAttention, with PyTorch's parameter names so state dicts interchange."""

from __future__ import annotations

import math
import warnings

from ... import _dtype
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from .linear import NonDynamicallyQuantizableLinear
from .module import Module
from .utils import empty_param


def _canonical_mask(mask: Tensor | None, mask_name: str, other_type, other_name: str,
                    target_type, check_other: bool = True) -> Tensor | None:
    """A boolean mask (True = masked out) becomes an additive float mask of ``target_type``
    with -inf at masked positions; a float mask is returned unchanged."""
    if mask is None:
        return None
    if mask.dtype is not _dtype.bool_ and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype is not other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
                      "Use same type for both instead.", stacklevel=3)
    if mask.is_floating_point():
        return mask
    from ...ops.creation import zeros_like
    return zeros_like(mask, dtype=target_type).masked_fill_(mask, float("-inf"))


def _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads) -> bool:
    """PyTorch's shape checks for a MultiheadAttention call; True when the input is batched."""
    def need(cond, msg):
        if not cond:
            raise AssertionError(msg)

    if query.dim() == 3:
        kind, nd = "batched (3-D)", 3
    elif query.dim() == 2:
        kind, nd = "unbatched (2-D)", 2
    else:
        raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.dim()}-D query tensor")
    need(key.dim() == nd and value.dim() == nd,
         f"For {kind} `query`, expected `key` and `value` to be {nd}-D but found "
         f"{key.dim()}-D and {value.dim()}-D tensors respectively")
    if key_padding_mask is not None:
        need(key_padding_mask.dim() == nd - 1,
             f"For {kind} `query`, expected `key_padding_mask` to be `None` or {nd - 1}-D but "
             f"found {key_padding_mask.dim()}-D tensor instead")
    if attn_mask is not None:
        need(attn_mask.dim() in (2, 3),
             f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
             f"{attn_mask.dim()}-D tensor instead")
        if nd == 2 and attn_mask.dim() == 3:
            expected = (num_heads, query.shape[0], key.shape[0])
            need(tuple(attn_mask.shape) == expected,
                 f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
    return nd == 3


def _map_distinct(fn, query, key, value):
    """fn applied to each distinct tensor once, so self-attention (query is key is value)
    stays recognisable and gets one packed projection."""
    done: dict = {}
    for t in (query, key, value):
        if id(t) not in done:
            done[id(t)] = fn(t)
    return done[id(query)], done[id(key)], done[id(value)]


class MultiheadAttention(Module):
    """``MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
    add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None, dtype=None)``.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (output, weights or None)``. Masks are
    boolean (True = not allowed to attend) or additive float masks.
    """

    __constants__ = ("batch_first",)

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None,
                 dtype=None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        fk = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = empty_param(embed_dim, embed_dim, **fk)
            self.k_proj_weight = empty_param(embed_dim, self.kdim, **fk)
            self.v_proj_weight = empty_param(embed_dim, self.vdim, **fk)
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = empty_param(3 * embed_dim, embed_dim, **fk)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = empty_param(3 * embed_dim, **fk)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **fk)
        if add_bias_kv:
            self.bias_k = empty_param(1, 1, embed_dim, **fk)
            self.bias_v = empty_param(1, 1, embed_dim, **fk)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def __setstate__(self, state):
        state.setdefault("_qkv_same_embed_dim", True)
        super().__setstate__(state)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        batched = _check_shapes(query, key, value, key_padding_mask, attn_mask, self.num_heads)
        key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                           None if attn_mask is None else attn_mask.dtype,
                                           "attn_mask", query.dtype)
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                               "Transformer module method `generate_square_subsequent_mask` to "
                               "create this mask.")
        if is_causal and key_padding_mask is None and not need_weights:
            attn_mask = None  # the hint alone suffices: attention applies the causal mask
        else:
            attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, False)
            if key_padding_mask is not None:
                is_causal = False
        if self.batch_first and batched:
            query, key, value = _map_distinct(lambda t: t.transpose(1, 0), query, key, value)
        if not batched:
            query, key, value = _map_distinct(lambda t: t.unsqueeze(1), query, key, value)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        out, weights = self._attend(query, key, value, key_padding_mask, need_weights,
                                    attn_mask, average_attn_weights, is_causal)
        if not batched:
            return out.squeeze(1), None if weights is None else weights.squeeze(0)
        if self.batch_first:
            out = out.transpose(1, 0)
        return out, weights

    def _project(self, query, key, value):
        """The input projections q, k, v (sequence-first)."""
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else b.chunk(3)
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:  # self-attention: one matmul for all three
                return F.linear(query, w, b).chunk(3, -1)
            wq, wk, wv = w.chunk(3)
        else:
            if key.shape[:2] != value.shape[:2]:
                raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not "
                                     f"match value's {value.shape[:2]}")
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def _attend(self, query, key, value, key_padding_mask, need_weights, attn_mask,
                average_attn_weights, is_causal):
        from ...ops.creation import zeros
        from ...ops.joining import cat
        tgt_len, bsz, embed_dim = query.shape
        if embed_dim != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but "
                                 f"got {embed_dim}")
        if self._qkv_same_embed_dim and key.shape != value.shape:
            raise AssertionError(f"key shape {key.shape} does not match value shape "
                                 f"{value.shape}")
        src_len = key.shape[0]
        heads, hd = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value)
        if attn_mask is not None:
            if attn_mask.dim() == 2:
                if tuple(attn_mask.shape) != (tgt_len, src_len):
                    raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                                       f"should be {(tgt_len, src_len)}.")
                attn_mask = attn_mask.unsqueeze(0)
            elif attn_mask.dim() == 3:
                want = (bsz * heads, tgt_len, src_len)
                if tuple(attn_mask.shape) != want:
                    raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but "
                                       f"should be {want}.")
            else:
                raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

        def extend_masks(attn_mask, key_padding_mask):
            # one more key position (bias_k or the zero key) that every query may attend to
            return (None if attn_mask is None else F.pad(attn_mask, (0, 1)),
                    None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1)))

        if self.bias_k is not None and self.bias_v is not None:
            k = cat([k, self.bias_k.repeat(1, bsz, 1)])
            v = cat([v, self.bias_v.repeat(1, bsz, 1)])
            attn_mask, key_padding_mask = extend_masks(attn_mask, key_padding_mask)
        # (L, N, E) -> (N * heads, L, head_dim)
        q = q.reshape(tgt_len, bsz * heads, hd).transpose(0, 1)
        k = k.reshape(k.shape[0], bsz * heads, hd).transpose(0, 1)
        v = v.reshape(v.shape[0], bsz * heads, hd).transpose(0, 1)
        if self.add_zero_attn:
            z = zeros((bsz * heads, 1, hd), dtype=q.dtype)
            k, v = cat([k, z], 1), cat([v, z], 1)
            attn_mask, key_padding_mask = extend_masks(attn_mask, key_padding_mask)
        src_len = k.size(1)
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (bsz, src_len):
                raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but "
                                     f"got {key_padding_mask.shape}")
            kpm = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, heads, -1, -1)
            kpm = kpm.reshape(bsz * heads, 1, src_len)
            attn_mask = kpm if attn_mask is None else attn_mask + kpm
        p = self.dropout if self.training else 0.0
        if need_weights:
            from ...ops.linalg import baddbmm, bmm
            scores = (baddbmm(attn_mask, q * math.sqrt(1.0 / hd), k.transpose(-2, -1))
                      if attn_mask is not None else bmm(q * math.sqrt(1.0 / hd),
                                                        k.transpose(-2, -1)))
            weights = F.softmax(scores, dim=-1)
            if p > 0.0:
                weights = F.dropout(weights, p=p)
            out = bmm(weights, v)  # (N * heads, L, hd)
            out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
            weights = weights.view(bsz, heads, tgt_len, src_len)
            if average_attn_weights:
                weights = weights.mean(dim=1)
        else:
            if attn_mask is not None:
                attn_mask = (attn_mask.unsqueeze(0) if attn_mask.size(0) == 1
                             else attn_mask.view(bsz, heads, -1, src_len))
            q = q.view(bsz, heads, tgt_len, hd)
            k = k.view(bsz, heads, src_len, hd)
            v = v.view(bsz, heads, src_len, hd)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask, p, is_causal)
            out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
            weights = None
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        return out.view(tgt_len, bsz, out.size(1)), weights
