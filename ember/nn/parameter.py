"""Parameter: a Tensor that a Module registers as a learnable weight."""

from __future__ import annotations

from .._tensor import Tensor, _wrap


class Parameter(Tensor):
    """``nn.Parameter(data=None, requires_grad=True)``: shares ``data``'s memory."""

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from ..ops.creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, got {type(data).__name__}")
        p = object.__new__(cls)
        p._data, p._dtype = data._data, data._dtype
        if data._backend is not Tensor._backend:
            p._backend = data._backend
        p._vc = data._version_counter()
        p.requires_grad = requires_grad
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(_wrap(self._data.copy(), self._dtype, self._backend), self.requires_grad)
        if self.grad is not None:
            p.grad = self.grad.__deepcopy__(memo)
        p.__dict__.update({k: v for k, v in self.__dict__.items()
                           if k not in ("_data", "_dtype", "_vc", "grad", "_acc", "_leaf_rg")})
        memo[id(self)] = p
        return p


class Buffer(Tensor):
    """``nn.Buffer(data, persistent=True)``: marks a tensor to register as a module buffer."""

    def __new__(cls, data: Tensor, *, persistent: bool = True):
        b = object.__new__(cls)
        b._data, b._dtype = data._data, data._dtype
        if data._backend is not Tensor._backend:
            b._backend = data._backend
        b._vc = data._version_counter()
        b.persistent = persistent
        return b

    def __init__(self, data=None, *, persistent=True):
        pass


def is_lazy(param) -> bool:
    return False
