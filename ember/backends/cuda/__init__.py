"""``ember.backends.cuda``: the CUDA backend's public settings (PyTorch's names). The backend
itself arrives with the devices issue; these flags are the state it will read, settable and
readable now, as on PyTorch's CPU-only build.

``matmul.allow_tf32`` and ``ember.set_float32_matmul_precision`` are two views of one
setting: "highest" computes float32 products in float32; "high" and "medium" allow
TensorFloat-32 (``allow_tf32`` True, ``fp32_precision`` "tf32")."""

from __future__ import annotations

import warnings
from contextvars import ContextVar, Token

from . import attention, backend, random_ops  # attention registers its overrides
from .settings import STATE as _STATE

if backend.BACKEND is not None:  # Philox draws for the sampling ops
    random_ops.register(backend.BACKEND)

_PRECISIONS = ("highest", "high", "medium")


def is_built() -> bool:
    """Whether this ember has a CUDA backend: when CuPy is installed (``pip install
    ember[cuda]``)."""
    return backend.BACKEND is not None


def set_float32_matmul_precision(precision: str) -> None:
    """``ember.set_float32_matmul_precision("highest" | "high" | "medium")``."""
    if not isinstance(precision, str):
        raise TypeError(f"set_float32_matmul_precision(): argument 'precision' (position 1) must "
                        f"be str, not {type(precision).__name__}")
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "setFloat32MatmulPrecision call has no effect.", stacklevel=2)
        return
    _STATE["precision"] = precision
    _STATE["fp32_precision"] = "ieee" if precision == "highest" else "tf32"


def get_float32_matmul_precision() -> str:
    return _STATE["precision"]


class _Matmul:
    """``ember.backends.cuda.matmul``: settings of float32/half products on CUDA."""

    _FLAGS = ("allow_tf32", "allow_fp16_reduced_precision_reduction",
              "allow_bf16_reduced_precision_reduction", "fp32_precision")

    def __init__(self):
        object.__setattr__(self, "_reduced", {"allow_fp16_reduced_precision_reduction": True,
                                              "allow_bf16_reduced_precision_reduction": True})

    def __getattr__(self, name):
        if name == "allow_tf32":
            return _STATE["precision"] != "highest"
        if name == "fp32_precision":
            return _STATE["fp32_precision"]
        if name in self._reduced:
            return self._reduced[name]
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name, value):
        if name == "allow_tf32":
            set_float32_matmul_precision("high" if value else "highest")
        elif name == "fp32_precision":
            if value not in ("none", "ieee", "tf32"):
                raise RuntimeError(f"{value} is not supported in cuda matmul: supported values "
                                   "are none, ieee, tf32")
            _STATE["fp32_precision"] = value
            if value != "none":
                _STATE["precision"] = "high" if value == "tf32" else "highest"
        elif name in self._reduced:
            self._reduced[name] = bool(value)
        else:
            raise AttributeError(f"Unknown attribute {name}")


matmul = _Matmul()

# scaled_dot_product_attention's kernels. ``enable_*_sdp`` set process-wide flags, as PyTorch's
# do; ``nn.attention.sdpa_kernel`` selects for the calling thread (and asyncio task) only: a
# context variable that, while set, is what the getters read and the setters change, and is
# restored when the context exits.
_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True, "overrideable": True}
_SDP_PRIORITY = ("flash", "mem_efficient", "math", "cudnn", "overrideable")  # PyTorch's default
_SDP_SELECTION: ContextVar = ContextVar("ember_sdp_selection", default=None)


def sdp_selection() -> tuple[frozenset, tuple]:
    """(the enabled attention backends, all of them in priority order) for this thread."""
    sel = _SDP_SELECTION.get()
    if sel is not None:
        return sel
    return frozenset(n for n, on in _SDP.items() if on), _SDP_PRIORITY


def select_sdp(enabled, priority=None) -> Token:
    """Select ``enabled`` (names) for this thread, with ``priority`` (all names, first
    preferred; the current order when None); ``reset_sdp(token)`` restores the previous."""
    _, current = sdp_selection()
    return _SDP_SELECTION.set((frozenset(enabled), tuple(priority or current)))


def reset_sdp(token: Token) -> None:
    _SDP_SELECTION.reset(token)


def _sdp_enabled(name: str) -> bool:
    return name in sdp_selection()[0]


def _enable_sdp(name: str, enabled: bool) -> None:
    sel = _SDP_SELECTION.get()
    if sel is None:
        _SDP[name] = bool(enabled)
    else:
        on, priority = sel
        _SDP_SELECTION.set((on | {name} if enabled else on - {name}, priority))


def flash_sdp_enabled() -> bool:
    return _sdp_enabled("flash")


def enable_flash_sdp(enabled: bool) -> None:
    _enable_sdp("flash", enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _sdp_enabled("mem_efficient")


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _enable_sdp("mem_efficient", enabled)


def math_sdp_enabled() -> bool:
    return _sdp_enabled("math")


def enable_math_sdp(enabled: bool) -> None:
    _enable_sdp("math", enabled)


def cudnn_sdp_enabled() -> bool:
    return _sdp_enabled("cudnn")


def enable_cudnn_sdp(enabled: bool) -> None:
    _enable_sdp("cudnn", enabled)
