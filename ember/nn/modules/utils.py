"""Argument helpers the layer modules share: int-or-tuple expansion (PyTorch's ``_pair``...)."""

from __future__ import annotations

import collections.abc
from itertools import repeat


def _ntuple(n: int, name: str = "parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n: int) -> tuple:
    """(a, b) -> (b, b, a, a) for n=2: per-dimension padding in F.pad's last-dim-first order."""
    return tuple(x for x in reversed(t) for _ in range(n))


def factory(device=None, dtype=None) -> dict:
    """The ``device``/``dtype`` keyword arguments every layer forwards to ``ember.empty``."""
    return {"device": device, "dtype": dtype}


def empty_param(*shape, device=None, dtype=None, requires_grad: bool = True):
    """An uninitialised Parameter; ``reset_parameters`` fills it."""
    from ...ops.creation import empty
    from ..parameter import Parameter
    return Parameter(empty(shape, device=device, dtype=dtype), requires_grad)
