"""View chains over graph values: the value a view node reads its storage from, and whether a
chain of views still shares its root's storage. Capture checks an in-place write against them
(``capture.check_mutable``); the functionalize pass turns writes through them into dataflow.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dispatch import STATE
from . import pytree
from .graph import Node

# views that reinterpret elements (another dtype, real/imag parts): no flat-index map
REINTERPRET = frozenset(["view_dtype", "real", "imag", "view_as_real", "view_as_complex"])


def is_view(n: Node) -> bool:
    if n.kind == "detach":
        return True
    if n.kind == "getitem":
        return is_view(n.args[0])
    return n.kind == "call" and "view" in n.target.tags


def base_of(n: Node) -> Node:
    """The value a view node reads its storage from."""
    if n.kind in ("detach", "getitem"):
        return n.args[0]
    return n.args[n.target.tensor_pos[0]]


class StorageProbe:
    """Whether a view chain still shares its root's storage: ops like ``reshape`` return a
    view or a copy depending on strides. The chain runs on an uninitialized array shaped
    like the root (contiguous, as eager results and guarded inputs are; the memory is never
    touched unless an op copies), and the result is checked for shared memory."""

    def __init__(self):
        self.values: dict[int, Any] = {}

    def _value(self, root: Node, chain: list[Node]):
        """The chain run eagerly, at the compiling call's sizes (symbolic sizes are read at
        their hints, which records no guard)."""
        from ..autograd.grad_mode import no_grad
        from ..ops.creation import empty
        from .symbolic import evaluate
        key = id(chain[-1]) if chain else id(root)
        if key in self.values:
            return self.values[key]
        if not chain:
            v = empty(evaluate(tuple(root.meta.shape)), dtype=root.meta.dtype)
        else:
            c, x = chain[-1], self._value(root, chain[:-1])
            if c.kind == "getitem":
                v = x[c.target]
            elif c.kind == "detach":
                v = x.detach()
            else:
                base = base_of(c)

                def arg(n: Node):
                    return x if n is base else \
                        empty(evaluate(tuple(n.meta.shape)), dtype=n.meta.dtype)
                args, kwargs = pytree.map_leaves((c.args, c.kwargs), Node, arg)
                with no_grad():
                    v = c.target(*hinted(args), **hinted(kwargs))
        self.values[key] = v
        return v

    def writable(self, root: Node, chain: list[Node]) -> bool:
        """False when eager would refuse to write the chain's view (an expanded view, whose
        elements alias each other)."""
        prev, STATE.capture = STATE.capture, None  # called during a trace: run eagerly
        try:
            return bool(self._value(root, chain)._data.flags.writeable)
        except Exception:  # noqa: BLE001  a chain the probe cannot run: let capture decide
            return True
        finally:
            STATE.capture = prev

    def shares_storage(self, root: Node, chain: list[Node]) -> bool:
        try:
            return bool(np.may_share_memory(self._value(root, chain)._data,
                                            self._value(root, [])._data))
        except Exception:  # noqa: BLE001  symbolic sizes: assume the view, as eager mostly is
            return True


def hinted(obj):
    """``obj`` with every SymInt (also inside sizes) at its hint, recording no guard."""
    from .._tensor import Size
    from .symbolic import SymInt, evaluate
    return pytree.map_leaves(obj, (SymInt, Size), lambda v: evaluate(tuple(v)) if
                             isinstance(v, Size) else evaluate(v))
