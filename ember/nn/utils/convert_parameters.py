"""Flatten parameters into one vector and back."""

from __future__ import annotations

from ..._tensor import Tensor


def _check(params):
    if isinstance(params, Tensor):
        raise TypeError(f"expected an iterable of Tensors, got {params.type()}")


def parameters_to_vector(parameters) -> Tensor:
    from ...ops.joining import cat
    _check(parameters)
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    _check(parameters)
    offset = 0
    for p in parameters:
        n = p.numel()
        p.data = vec[offset:offset + n].view_as(p).data
        offset += n
