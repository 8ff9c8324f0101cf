"""``ember.autograd.graph``: hooks on the tensors the autograd graph saves for backward.

``with saved_tensors_hooks(pack_hook, unpack_hook):`` every tensor an op (or a custom
Function's ``ctx.save_for_backward``) saves for backward on this thread is handed to
``pack_hook`` and the graph keeps what it returns; backward calls ``unpack_hook`` on that
to get the tensor back. The stack of pairs lives in the dispatcher's per-thread state
(``STATE.saved_hooks``); the engine's ``SavedTensor`` / ``SavedOutput`` read it when they
are made (``ember/autograd/engine.py``). The innermost pair wins; hooks are off while a pack
hook runs. ``save_on_cpu`` keeps the saved tensors on the CPU; ``disable_saved_tensors_hooks``
makes installing hooks an error.
"""

from __future__ import annotations

import contextlib

from .._dispatch import STATE
from .engine import Node  # noqa: F401  (torch.autograd.graph.Node)

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "Node"]


class saved_tensors_hooks:
    """Context manager: tensors saved for backward inside go through ``pack_hook`` (when
    saved) and ``unpack_hook`` (when backward needs them)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        msg = STATE.saved_hooks_off
        if msg is not None:
            raise RuntimeError(msg)
        stack = STATE.saved_hooks
        STATE.saved_hooks = (stack or []) + [(self.pack_hook, self.unpack_hook)]
        self._prev = stack
        return self

    def __exit__(self, *exc):
        STATE.saved_hooks = self._prev
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are copied to the CPU (pinned when ``pin_memory``) when saved and back to
    their device when backward unpacks them."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        def pack(t):
            host = t.new_empty(t.shape, device="cpu",
                               pin_memory=bool(pin_memory) and t.device.type != "cpu")
            host.copy_(t.detach())
            return (t.device, host)

        def unpack(packed):
            device, host = packed
            return host.to(device, non_blocking=bool(pin_memory))

        super().__init__(pack, unpack)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message: str):
    """Inside, entering ``saved_tensors_hooks`` raises ``RuntimeError(error_message)``."""
    prev = STATE.saved_hooks_off
    STATE.saved_hooks_off = error_message
    try:
        yield
    finally:
        STATE.saved_hooks_off = prev
