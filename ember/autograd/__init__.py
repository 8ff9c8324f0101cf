"""ember.autograd: the engine, custom Functions, grad modes and gradient checks."""

from .engine import backward, grad, Node  # noqa: F401
from .function import Function, FunctionCtx  # noqa: F401
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled,  # noqa: F401
                        is_inference_mode_enabled, no_grad, set_grad_enabled)
from .gradcheck import gradcheck, gradgradcheck  # noqa: F401
from . import functional, graph, profiler  # noqa: F401
from .._dispatch import STATE as _STATE


def _is_checkpoint_valid() -> bool:
    """False inside an ``autograd.grad`` / ``backward(inputs=)`` pass (reentrant
    checkpointing cannot run there)."""
    return not _STATE.partial_backward


def _register_post_accumulate_grad_hook(self, hook):
    """``Tensor.register_post_accumulate_grad_hook``: ``hook(leaf)`` runs each time a backward
    pass has accumulated the leaf's ``.grad`` (the engine calls it from AccumulateGrad)."""
    from .engine import _Handle, edge_of
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if not self._leaf_rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    acc = edge_of(self)[0]
    acc.post_hooks = hooks = acc.post_hooks or []
    hooks.append(hook)
    return _Handle(hooks, hook)


def _bind() -> None:
    from .._tensor import Tensor
    Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook


_bind()
