"""Nested containers (tuple, list, dict, namedtuple) of leaves: find, replace, flatten."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def map_leaves(obj: Any, cls: type | tuple, fn: Callable) -> Any:
    """``obj`` with every instance of ``cls`` inside it replaced by ``fn(leaf)``."""
    if isinstance(obj, cls):
        return fn(obj)
    t = type(obj)
    if t is tuple or t is list:
        return t(map_leaves(x, cls, fn) for x in obj)
    if _is_namedtuple(obj):
        return t(*(map_leaves(x, cls, fn) for x in obj))
    if t is dict:
        return {k: map_leaves(v, cls, fn) for k, v in obj.items()}
    return obj


def collect(obj: Any, cls: type | tuple, out: list) -> list:
    """Append every instance of ``cls`` inside ``obj`` to ``out`` (depth first)."""
    if isinstance(obj, cls):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            collect(x, cls, out)
    elif type(obj) is dict:
        for v in obj.values():
            collect(v, cls, out)
    return out


class Slot:
    """Where the i-th flattened leaf goes back."""

    __slots__ = ("i",)

    def __init__(self, i: int):
        self.i = i

    def __repr__(self) -> str:
        return f"Slot({self.i})"


def flatten(obj: Any, cls: type | tuple) -> tuple[list, Any]:
    """``(leaves, skeleton)``: the ``cls`` instances in order and ``obj`` with Slots for them."""
    leaves: list = []

    def put(x):
        leaves.append(x)
        return Slot(len(leaves) - 1)

    return leaves, map_leaves(obj, cls, put)


def unflatten(skeleton: Any, leaves: list | tuple) -> Any:
    return map_leaves(skeleton, Slot, lambda s: leaves[s.i])


def paths(obj: Any, cls: type | tuple, prefix: str = "") -> list[str]:
    """A readable access path (``args[0]['x']``) for each ``cls`` leaf, in flatten order."""
    out: list[str] = []

    def walk(x, p):
        if isinstance(x, cls):
            out.append(p)
        elif isinstance(x, (tuple, list)):
            for i, v in enumerate(x):
                walk(v, f"{p}[{i}]")
        elif type(x) is dict:
            for k, v in x.items():
                walk(v, f"{p}[{k!r}]")

    walk(obj, prefix)
    return out
