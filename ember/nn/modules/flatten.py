"""Flatten and Unflatten."""

from __future__ import annotations

from ..._tensor import Tensor
from .module import Module


class Flatten(Module):
    """``Flatten(start_dim=1, end_dim=-1)``: merge dims start_dim..end_dim into one."""

    __constants__ = ("start_dim", "end_dim")

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


def _require_tuple_of_ints(size) -> None:
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"unflattened_size must be a tuple of ints, but found type "
                        f"{type(size).__name__}")
    for i, s in enumerate(size):
        if not isinstance(s, int):
            raise TypeError(f"unflattened_size must be tuple of ints, but found element of type "
                            f"{type(s).__name__} at pos {i}")


class Unflatten(Module):
    """``Unflatten(dim, unflattened_size)``: split dimension ``dim`` into ``unflattened_size``
    (which may hold one -1)."""

    __constants__ = ("dim", "unflattened_size")

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        _require_tuple_of_ints(unflattened_size)
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
