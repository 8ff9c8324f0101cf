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
