"""``ember.nn.attention.flex_attention``: attention with a user's ``score_mod(score, b, h,
q_idx, kv_idx)`` and a block-sparse ``BlockMask`` built from a ``mask_mod(b, h, q_idx,
kv_idx)`` (PyTorch 2.13's FlexAttention API).

Today every call runs the reference computation in ``_flex_eager`` (block-sparse, online
softmax, written with ember ops: it runs on CPU and CUDA and autograd differentiates it,
including on CPU where PyTorch has no backward). Under ``ember.compile`` the call is captured
as ops (the dense form); the fused generated kernels come with the compiler's Triton/C
backends (issues 15 and 16) under this same function.

Differences from PyTorch, by design: a backward on CPU; ``AuxRequest(max_scores=True)`` on
CPU; the index arguments of score_mod/mask_mod are broadcasting int32 tensors, not the 0-d
tensors PyTorch's vmap passes (elementwise code sees the same values).
"""

from __future__ import annotations

import math
import typing
import warnings
from typing import NamedTuple, TypedDict

from ..._dispatch import STATE as _STATE
from ..._tensor import Tensor
from . import _flex_eager
from ._flex_block_mask import (_DEFAULT_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE,
                               BlockMask, _create_empty_block_mask, _identity,
                               _mask_mod_signature, _score_mod_signature,
                               _sliced_mask_mod_error, and_masks, create_block_mask,
                               create_mask, noop_mask, or_masks)

__all__ = ["BlockMask", "flex_attention", "AuxOutput", "AuxRequest", "FlexKernelOptions",
           "create_block_mask", "create_mask", "or_masks", "and_masks", "noop_mask"]

_ = (_DEFAULT_SPARSE_BLOCK_SIZE, _mask_mod_signature, _score_mod_signature)  # re-exported

_Backend = typing.Literal["AUTO", "TRITON", "FLASH", "TRITON_DECODE"]
_WARNED: set = set()


class FlexKernelOptions(TypedDict, total=False):
    """Tuning options of the fused kernels (accepted and validated; the reference path
    ignores them)."""

    BACKEND: _Backend
    num_warps: int
    num_stages: int
    BLOCK_M: int
    BLOCK_N: int
    PRESCALE_QK: bool
    ROWS_GUARANTEED_SAFE: bool
    BLOCKS_ARE_CONTIGUOUS: bool
    WRITE_DQ: bool
    FORCE_USE_FLEX_ATTENTION: bool


class AuxRequest(NamedTuple):
    """Which auxiliary outputs ``flex_attention`` returns."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """Auxiliary outputs of ``flex_attention`` (None where not requested): the natural-log
    log-sum-exp of each query row's scores and their maximum, (B, Hq, L) float32."""

    lse: Tensor | None = None
    max_scores: Tensor | None = None


def _warn_once(key: str, message: str, category=UserWarning) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, category, stacklevel=3)


def _check_kernel_options(kernel_options) -> None:
    opts = dict(kernel_options or {})
    if "BACKEND" in opts and opts.get("FORCE_USE_FLEX_ATTENTION", False):
        raise RuntimeError(
            "BACKEND cannot be combined with legacy FORCE_USE_FLEX_ATTENTION. BACKEND "
            "supersedes the legacy knob; please drop FORCE_USE_FLEX_ATTENTION and only "
            "specify the desired BACKEND.")
    valid = typing.get_args(_Backend)
    if "BACKEND" in opts and opts["BACKEND"] not in valid:
        raise ValueError(f"Invalid BACKEND value '{opts['BACKEND']}'. Must be one of {valid}")
    for key in ("OUTPUT_LOGSUMEXP", "OUTPUT_MAX"):
        if key in opts:
            raise AssertionError(f"{key} must not be in kernel_options")


def _validate(query, key, value, block_mask, enable_gqa) -> None:
    """PyTorch's checks, in its order, with its exception types and messages."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"flex_attention(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
    if query.device != key.device or query.device != value.device:
        raise ValueError(
            "Expected query, key, and value to have the same device type, but got "
            f"query.device: {query.device}, key.device: {key.device}, and value.device: "
            f"{value.device} instead.")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got "
            f"query.dim: {query.dim()}, key.dim: {key.dim()} and value.dim: {value.dim()} "
            "instead.")
    if query.size(-1) != key.size(-1):
        raise ValueError(
            "Expect query and key/value to have the same embedding dimension but got "
            f"E={query.size(-1)} and E={key.size(-1)}.")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if not enable_gqa and query.size(-3) != key.size(-3):
        raise ValueError(
            "Expect query and key/value to have the same number of heads but got "
            f"Hq={query.size(-3)} and Hkv={key.size(-3)}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and query.size(1) % key.size(1) != 0:
        raise ValueError(
            "Expect number of query heads to be a multiple of kv heads for GQA but got "
            f"Hq={query.size(1)} and Hkv={key.size(1)}.")
    if query.size(0) != key.size(0):
        if block_mask is None:
            raise ValueError(
                "Expect query and key/value to have the same batch size, or non-none "
                f"block_mask, but got block_mask=None, Bq={query.size(0)}, and "
                f"Bkv={key.size(0)}.")
        if block_mask.kv_num_blocks.size(0) != query.size(0):
            raise ValueError(
                "Expect query and key/value to have the same batch size, or block_mask and "
                f"query to have the same batch size, but got Bq={query.size(0)}, "
                f"Bkv={key.size(0)}, B_block_mask={block_mask.kv_num_blocks.size(0)}.")
    # the shapes the products need (PyTorch's matmul/expand report these)
    Bq, Bk = query.size(0), key.size(0)
    if not (Bq == Bk or (Bq > 1 and Bk == 1)):
        raise RuntimeError(f"Bq and Bkv must broadcast. Got Bq={Bq} and Bkv={Bk}")
    if value.size(0) != key.size(0) or value.size(1) != key.size(1) or \
            value.size(2) != key.size(2):
        raise RuntimeError(
            "Expected key and value to have the same batch size, number of heads and "
            f"sequence length, but got key.shape: {tuple(key.shape)} and value.shape: "
            f"{tuple(value.shape)}.")
    if not (query.dtype.is_floating_point and key.dtype.is_floating_point
            and value.dtype.is_floating_point):
        raise RuntimeError(
            "flex_attention: query, key and value must be floating point tensors, but got "
            f"{query.dtype}, {key.dtype} and {value.dtype}.")


def _check_block_mask(block_mask: BlockMask, query, key) -> None:
    if getattr(block_mask, "mask_mod", None) is _sliced_mask_mod_error:
        raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
    if block_mask.BLOCK_SIZE[0] == _LARGE_SPARSE_BLOCK_SIZE and \
            block_mask.BLOCK_SIZE[1] == _LARGE_SPARSE_BLOCK_SIZE:
        pass
    else:
        bq, bkv = block_mask.shape[-2], block_mask.shape[-1]
        q_len, kv_len = query.size(-2), key.size(-2)
        if q_len > bq or kv_len > bkv:
            raise ValueError(
                f"block_mask was created for block_mask.shape={block_mask.shape} but got "
                f"q_len={q_len} and kv_len={kv_len}. As the block mask was created for a "
                "smaller length than you're using it for, you likely need to create a new "
                "block mask.")
        if (q_len < bq and kv_len <= bkv) or (q_len <= bq and kv_len < bkv):
            raise ValueError(
                f"block_mask was created for block_mask.shape={block_mask.shape} but got "
                f"q_len={q_len} and kv_len={kv_len}. As the block mask was created for a "
                "larger length than you're using it for, you can either 1. create a new block "
                "mask with the correct length, or 2. 'adjust' the existing block mask to the "
                "correct length by calling block_mask._adjust(q_len, kv_len). This essentially "
                "'crops' the block mask to the upper left corner, which does not work for all "
                "mask_mods!")
    if query.device != block_mask.kv_num_blocks.device:
        raise RuntimeError(
            "Expect q/k/v and block_mask to be on the same device but got "
            f"{query.device} and {block_mask.kv_num_blocks.device}.")


def flex_attention(query: Tensor, key: Tensor, value: Tensor, score_mod=None,
                   block_mask: BlockMask | None = None, scale: float | None = None,
                   enable_gqa: bool = False, return_lse: bool = False,
                   kernel_options: FlexKernelOptions | None = None, *,
                   return_aux: AuxRequest | None = None):
    """Attention of ``query`` (B, Hq, L, E) over ``key`` (B, Hkv, S, E) and ``value``
    (B, Hkv, S, Ev): softmax over keys of ``score_mod(scale * q . k, b, h, q_idx, kv_idx)``
    where ``block_mask`` allows, times the values; (B, Hq, L, Ev) in the query's dtype.

    ``scale`` defaults to 1/sqrt(E); ``enable_gqa`` lets Hkv divide Hq (query head h uses key
    head h // (Hq // Hkv)). ``return_aux=AuxRequest(lse=True, max_scores=True)`` adds an
    ``AuxOutput`` with each row's natural log-sum-exp and maximum score (-inf where no key is
    allowed; that row's output is 0); the deprecated ``return_lse=True`` returns
    ``(out, lse)``."""
    _validate(query, key, value, block_mask, enable_gqa)
    _check_kernel_options(kernel_options)
    if score_mod is None:
        score_mod = _identity
    if block_mask is None:
        block_mask = _create_empty_block_mask(query, key)
    _check_block_mask(block_mask, query, key)
    if scale is None:
        scale = 1.0 / math.sqrt(query.size(-1))
    if return_lse and return_aux is not None:
        raise ValueError(
            "Cannot specify both return_lse and return_aux. return_lse is deprecated, please "
            "use return_aux=AuxRequest(lse=True) instead.")
    if return_lse:
        _warn_once("return_lse", "return_lse is deprecated and will be removed in v2.10. "
                   "Please use return_aux=AuxRequest(lse=True) instead.", FutureWarning)
    if kernel_options and kernel_options.get("BACKEND") == "FLASH" and \
            return_aux is not None and return_aux.max_scores:
        raise NotImplementedError(
            "Returning max scores is not supported with BACKEND='FLASH'. Use "
            "return_aux=AuxRequest(lse=True) or omit max_scores.")
    run = _flex_eager.dense if _STATE.capture is not None else _flex_eager.blockwise
    out, lse, max_scores = run(query, key, value, score_mod, block_mask, float(scale))
    out = out.to(query.dtype)
    if return_aux is not None:
        return out, AuxOutput(lse=lse if return_aux.lse else None,
                              max_scores=max_scores if return_aux.max_scores else None)
    if return_lse:
        return out, lse
    return out
