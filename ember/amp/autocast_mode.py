"""``ember.autocast``: mixed precision as the "autocast" interposer of the dispatch stack.

Inside ``with ember.autocast("cpu"):`` each op call of the thread reaches ``_handle`` (see
``ember/_dispatch.py``), which looks the op up in ``autocast_lists``: for a listed op it casts
the float tensors of the region's device type among the call's arguments (also inside lists,
for ``cat``/``stack``) to the op's dtype, then hands the call on with ``redispatch``; any other
op passes through unchanged. The casts are ordinary differentiable ``_to_copy`` calls, so
gradients flow back to the inputs in their own dtypes. In-place and ``out=`` calls are not cast.

The state is per thread, as PyTorch's: which device types have autocast on, their dtypes, the
nesting depth, the weight-cast cache. It lives in the dispatcher's per-thread ``STATE``
(attribute ``autocast``). The interposer is installed only while some device type with a
policy table has autocast on, so with autocast off the op path pays nothing.
"""

from __future__ import annotations

import collections.abc
import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _dtype as D
from .._dispatch import STATE, redispatch, set_interposer
from .._tensor import Tensor
from ..ops.creation import _to_copy
from .autocast_lists import BANNED_MESSAGE, TABLES

__all__ = [
    "autocast", "is_autocast_available", "custom_fwd", "custom_bwd",
    "is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype",
    "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
    "autocast_increment_nesting", "autocast_decrement_nesting",
]

# PyTorch's device types, in the order its device-string error lists them
_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
                 "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                 "privateuseone")
# the device types PyTorch has autocast for, with their default dtypes
_DEFAULT_DTYPE = {"cpu": D.bfloat16, "cuda": D.float16, "ipu": D.float16, "xpu": D.float16,
                  "maia": D.bfloat16, "xla": D.bfloat16, "mps": D.float16, "hpu": D.bfloat16,
                  "mtia": D.float16, "privateuseone": D.float16}
_NO_AUTOCAST_DTYPE = {"hip": D.float16}  # a dtype to report, but no autocast
_SUPPORTED = (D.bfloat16, D.float16)  # what autocast(...) takes without disabling itself


# ---------------------------------------------------------------------- per-thread state
class _State:
    """One thread's autocast state (``STATE.autocast``)."""

    __slots__ = ("enabled", "dtype", "nesting", "cache_enabled", "cache", "rules")

    def __init__(self):
        self.enabled: dict[str, bool] = {}  # device type -> on (absent: off)
        self.dtype: dict[str, D.dtype] = {}  # device type -> dtype (absent: the default)
        self.nesting = 0
        self.cache_enabled = True
        # id(leaf) -> (leaf, its version, its cast): float32 leaves that require grad (model
        # weights) are cast once per outermost region, as PyTorch's weight cache does
        self.cache: dict[int, tuple] = {}
        # op name -> ((device type, dtype, policy, condition or None), ...) for the device
        # types that have autocast on: what ``_handle`` reads
        self.rules: dict[str, tuple] = {}

    def rebuild(self) -> None:
        """Recompute ``rules`` and install or remove the interposer to match."""
        # the tables' identities in the key: a test may swap a device's table
        self.rules, names = _rules(tuple(sorted((d, on, self.dtype.get(d), id(TABLES.get(d)))
                                                for d, on in self.enabled.items())))
        set_interposer("autocast", _handle if names else None, ops=names)


@functools.lru_cache(maxsize=64)
def _rules(state: tuple) -> tuple:
    """The rules of an autocast state ``((device type, on, dtype or None, table id), ...)``
    (op name -> ((device type, dtype, policy, condition or None), ...), for the device types
    that are on) and the names they cover: one computation per state, not per region."""
    rules: dict[str, list] = {}
    for device, on, dtype, _ in state:
        if not on or device not in TABLES:
            continue
        table, when = TABLES[device]
        dtype = _DEFAULT_DTYPE[device] if dtype is None else dtype
        for policy, names in table.items():
            for name in names:
                rules.setdefault(name, []).append((device, dtype, policy, None))
        for name, (policy, selector, values) in when.items():
            rules.setdefault(name, []).append((device, dtype, policy, (selector, values)))
    return {k: tuple(v) for k, v in rules.items()}, frozenset(rules)


def _state() -> _State:
    s = getattr(STATE, "autocast", None)
    if s is None:
        s = STATE.autocast = _State()
    return s


# ---------------------------------------------------------------------- the interposer
def _handle(op, args: tuple, kwargs: dict, mode: str):
    """The "autocast" interposer: cast a listed op's float arguments, then hand the call on."""
    if mode == "call":
        rules = STATE.autocast.rules.get(op.name)
        if rules is not None and (not kwargs or kwargs.get("out") is None):
            for rule in rules:
                args, kwargs = _apply(op, rule, args, kwargs)
    return redispatch("autocast", op, args, kwargs, mode)


def _apply(op, rule: tuple, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    device, dtype, policy, condition = rule
    if condition is not None:
        selector, values = condition
        if _SELECTORS[selector](op, args, kwargs) not in values:
            return args, kwargs
    if policy == "lower":
        target = dtype
    elif policy == "fp32":
        target = D.float32
    elif policy == "promote":
        target = _widest(device, dtype, args, kwargs)
    else:  # banned
        if any(_on(a, device) for a in _tensors(args, kwargs)):
            raise RuntimeError(BANNED_MESSAGE[op.name])
        return args, kwargs
    cache = dtype if policy == "lower" else None
    return (tuple(_cast(a, device, target, cache) for a in args),
            {k: _cast(v, device, target, cache) for k, v in kwargs.items()} if kwargs else kwargs)


def _tensors(args: tuple, kwargs: dict):
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, Tensor))


def _on(t: Tensor, device: str) -> bool:
    return t._backend.name == device  # the backend's name is its device type


def _eligible(t: Tensor, device: str) -> bool:
    """A tensor autocast may cast: floating point but not float64, on the region's device type."""
    dt = t._dtype
    return dt.is_floating_point and dt is not D.float64 and t._backend.name == device


def _widest(device: str, dtype, args: tuple, kwargs: dict):
    """The dtype a promote op's float arguments are cast to: float32 if any is float32, else
    the autocast dtype; another half type is PyTorch's error."""
    target = dtype
    for t in _tensors(args, kwargs):
        if target is D.float32 or not _eligible(t, device):
            continue
        if t._dtype is D.float32:
            target = D.float32
        elif t._dtype is not target:
            raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return target


def _cast(value, device: str, target, cache_dtype):
    """``value`` with its eligible tensors (also those in a list or tuple) cast to target."""
    if isinstance(value, Tensor):
        if value._dtype is target or not _eligible(value, device):
            return value
        if target is cache_dtype and value._leaf_rg and value._dtype is D.float32 and \
                STATE.enabled:
            return _cached_cast(value, target)
        return _to_copy(value, target)
    if isinstance(value, (list, tuple)) and any(isinstance(x, Tensor) for x in value):
        return type(value)(_cast(x, device, target, cache_dtype) for x in value)
    return value


def _cached_cast(leaf: Tensor, target) -> Tensor:
    state = STATE.autocast
    if not state.cache_enabled:
        return _to_copy(leaf, target)
    hit = state.cache.get(id(leaf))
    version = leaf._version
    if hit is not None and hit[0] is leaf and hit[1] == version and hit[2]._dtype is target:
        return hit[2]
    cast = _to_copy(leaf, target)
    state.cache[id(leaf)] = (leaf, version, cast)
    return cast


def _arg(op, args: tuple, kwargs: dict, name: str):
    """The value a call passes for parameter ``name`` (or its default)."""
    i = op.param_index[name]
    if i < len(args):
        return args[i]
    return kwargs.get(name, op.defaults.get(name))


_SELECTORS: dict[str, Callable] = {
    "pad_mode_dims": lambda op, a, k: (_arg(op, a, k, "mode"), len(_arg(op, a, k, "pad")) // 2),
    "number_first": lambda op, a, k: bool(a) and not isinstance(a[0], Tensor),
}


# ---------------------------------------------------------------------- device types
def _device_type(device_type: str, fn: str, position: int = 1) -> str:
    """The device type a device string names (``"cuda:0"`` -> ``"cuda"``), PyTorch's errors
    otherwise."""
    if not isinstance(device_type, str):
        raise TypeError(f"{fn}(): argument 'device_type' (position {position}) must be str, "
                        f"not {type(device_type).__name__}")
    if not device_type:
        raise RuntimeError("Device string must not be empty")
    name, sep, index = device_type.partition(":")
    if name not in _DEVICE_TYPES:
        raise RuntimeError(f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start of "
                           f"device string: {device_type}")
    if sep and not index.isdigit():
        raise RuntimeError(f"Invalid device string: '{device_type}'")
    return name


def _autocast_device(device_type: str, fn: str) -> str:
    """The device type, which must be one autocast exists for."""
    name = _device_type(device_type, fn)
    if name not in _DEFAULT_DTYPE:
        raise RuntimeError("unknown device type for autocast in "
                           "get_autocast_dispatch_key_from_device_type")
    return name


def _check_bool(value, fn: str, name: str, position: int) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be bool, not "
                        f"{type(value).__name__}")


# ---------------------------------------------------------------------- the state's API
def is_autocast_available(device_type: str) -> bool:
    """Whether autocast exists for ``device_type`` (``"cpu"``, ``"cuda"``, ...)."""
    return _device_type(device_type, "_is_autocast_available") in _DEFAULT_DTYPE


_UNSET = object()


def is_autocast_enabled(device_type: str = _UNSET) -> bool:
    """Whether autocast is on for ``device_type`` on this thread (CUDA when not given)."""
    if device_type is _UNSET:
        device_type = "cuda"
    return _state().enabled.get(_autocast_device(device_type, "is_autocast_enabled"), False)


def set_autocast_enabled(device_type, enabled=_UNSET) -> None:
    """Turn autocast on or off for ``device_type`` on this thread; ``set_autocast_enabled(
    flag)`` sets CUDA's."""
    if enabled is _UNSET:
        _check_bool(device_type, "set_autocast_enabled", "enabled", 1)
        device_type, enabled = "cuda", device_type
    _check_bool(enabled, "set_autocast_enabled", "enabled", 2)
    device = _autocast_device(device_type, "set_autocast_enabled")
    s = _state()
    s.enabled[device] = enabled
    s.rebuild()


def get_autocast_dtype(device_type: str):
    """The dtype autocast casts to for ``device_type`` on this thread."""
    device = _device_type(device_type, "get_autocast_dtype")
    dt = _state().dtype.get(device)
    if dt is None:
        dt = _DEFAULT_DTYPE.get(device, _NO_AUTOCAST_DTYPE.get(device))
    if dt is None:
        raise RuntimeError("unsupported scalarType")
    return dt


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the dtype autocast casts to for ``device_type`` on this thread."""
    device = _device_type(device_type, "set_autocast_dtype")
    if not isinstance(dtype, D.dtype):
        raise TypeError(f"set_autocast_dtype(): argument 'dtype' (position 2) must be "
                        f"torch.dtype, not {type(dtype).__name__}")
    s = _state()
    s.dtype[device] = dtype
    if s.enabled.get(device):
        s.rebuild()


def is_autocast_cache_enabled() -> bool:
    return _state().cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    _check_bool(enabled, "set_autocast_cache_enabled", "enabled", 1)
    _state().cache_enabled = enabled


def clear_autocast_cache() -> None:
    """Drop this thread's cached casts of weights."""
    _state().cache.clear()


def autocast_increment_nesting() -> int:
    s = _state()
    s.nesting += 1
    return s.nesting


def autocast_decrement_nesting() -> int:
    s = _state()
    s.nesting -= 1
    return s.nesting


# ---------------------------------------------------------------------- autocast
class autocast:
    """``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a context
    manager or decorator in which listed ops run in mixed precision.

    In the region, ops that are safe and faster in lower precision (matmul, linear,
    convolutions, ...) cast their float inputs to ``dtype`` (default: bfloat16 for "cpu",
    float16 for "cuda"); ops that need range or precision (many losses, reductions, linear
    algebra, ...) run in float32; a few ops that need their inputs in one dtype (``cat``,
    ``stack``, ...) run in the widest one; every other op runs as it would outside. Only tensors
    of ``device_type`` are cast. The lists are PyTorch's, per device type (see
    ``autocast_lists``). Regions nest; ``enabled=False`` turns autocast off inside one. The
    state is per thread. Wrap the forward pass and the loss, not the backward pass or the
    optimizer step.
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type "
                               f"'{device_type}'")
        device = _device_type(device_type, "autocast")
        if device == "privateuseone":  # ember registers no custom backend module
            raise AssertionError(
                "Tried to use AMP with the `privateuseone` backend, but the backend has not "
                "registered a module or  the module miss some necessary funcs. The backend "
                "should register a module by `torch._register_device_module`, and the module "
                "must have these funcs: \n`get_amp_supported_dtype() -> List[torch.dtype]`. \n")
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None \
            else cache_enabled
        if enabled:
            if device_type == "cuda":  # as PyTorch: "cuda:0" is not checked
                from .. import cuda  # same layer; imported here: ember.cuda imports ember.amp
                if not cuda.is_available():
                    warnings.warn("CUDA is not available or torch_xla is imported. Disabling "
                                  "autocast.", stacklevel=2)
                    enabled = False
                elif self.fast_dtype is D.bfloat16 and not cuda.is_bf16_supported():
                    raise RuntimeError("Current CUDA Device does not support bfloat16. Please "
                                       "switch dtype to float16.")
            elif self.fast_dtype not in _SUPPORTED:
                name = device_type.upper()
                warnings.warn(f"In {name} autocast, but the target dtype is not supported. "
                              f"Disabling autocast.\n{name} Autocast only supports dtypes of "
                              + ", ".join(map(str, _SUPPORTED)) + " currently.", stacklevel=2)
                enabled = False
        self._enabled = enabled
        self._saved: list[tuple] = []  # one entry per active entry (decorated recursion)

    def __enter__(self):
        s = _state()
        device = _autocast_device(self.device, "set_autocast_enabled")
        if not isinstance(self.fast_dtype, D.dtype):
            set_autocast_dtype(self.device, self.fast_dtype)  # PyTorch's TypeError
        self._saved.append((s.cache_enabled, s.enabled.get(device), s.dtype.get(device)))
        s.enabled[device] = self._enabled
        s.dtype[device] = self.fast_dtype
        s.rebuild()
        s.nesting += 1
        s.cache_enabled = self._cache_enabled
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        s = _state()
        device = _device_type(self.device, "set_autocast_enabled")
        s.cache_enabled, enabled, dtype = self._saved.pop()
        s.nesting -= 1
        if s.nesting == 0:
            s.cache.clear()  # the outermost region ends: drop the cached weight casts
        for table, value in ((s.enabled, enabled), (s.dtype, dtype)):
            if value is None:
                table.pop(device, None)
            else:
                table[device] = value
        s.rebuild()
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                f"Did you mean to use autocast as a context manager? For example:\n"
                f"    with torch.autocast(device_type=...):\n"
                f"        output = model(input)")

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return decorate_autocast


# ---------------------------------------------------------------------- custom Functions
def _cast_inputs(value, device: str, dtype):
    """``value`` with its floating tensors of ``device`` (not float64) cast to ``dtype``,
    through lists, tuples, dicts and other iterables, as ``custom_fwd`` casts its inputs."""
    if isinstance(value, Tensor):
        return value.to(dtype) if value.is_floating_point() and value.device.type == device \
            and value.dtype is not D.float64 else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast_inputs(k, device, dtype): _cast_inputs(v, device, dtype)
                for k, v in value.items()}
    if isinstance(value, collections.abc.Iterable):
        items = (_cast_inputs(v, device, dtype) for v in value)
        return type(value)(items) if isinstance(value, (list, tuple)) else items
    return value


def _check_device_type(device_type) -> None:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorator for the ``forward`` of a custom ``autograd.Function``: with ``cast_inputs``
    a dtype, inside an autocast region of ``device_type`` the forward gets its float tensor
    inputs cast to it and runs with autocast off; without, it runs under the region's state
    (which ``custom_bwd`` then restores for the backward)."""
    _check_device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast_inputs(args, device_type, cast_inputs),
                       **_cast_inputs(kwargs, device_type, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorator for the ``backward`` of a custom ``autograd.Function``: runs it under the
    autocast state its ``custom_fwd`` forward ran with."""
    _check_device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast,
                      dtype=ctx._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd


# ---------------------------------------------------------------------- deprecated spellings
def _deprecated(old: str, new: str, category=DeprecationWarning) -> None:
    warnings.warn(f"{old} is deprecated. Please use {new} instead.", category, stacklevel=3)


def _legacy(device: str, label: str):
    """PyTorch's per-device getters and setters of the autocast state (deprecated)."""
    def is_enabled() -> bool:
        _deprecated(f"torch.is_autocast_{label}_enabled()",
                    f"torch.is_autocast_enabled('{device}')")
        return is_autocast_enabled(device)

    def set_enabled(enabled: bool) -> None:
        _deprecated(f"torch.set_autocast_{label}_enabled(enabled)",
                    f"torch.set_autocast_enabled('{device}', enabled)")
        _check_bool(enabled, f"set_autocast_{label}_enabled", "enabled", 1)
        set_autocast_enabled(device, enabled)

    def get_dtype():
        _deprecated(f"torch.get_autocast_{label}_dtype()",
                    f"torch.get_autocast_dtype('{device}')")
        return get_autocast_dtype(device)

    def set_dtype(dtype) -> None:
        _deprecated(f"torch.set_autocast_{label}_dtype(dtype)",
                    f"torch.set_autocast_dtype('{device}', dtype)")
        set_autocast_dtype(device, dtype)
    return is_enabled, set_enabled, get_dtype, set_dtype


(is_autocast_cpu_enabled, set_autocast_cpu_enabled, get_autocast_cpu_dtype,
 set_autocast_cpu_dtype) = _legacy("cpu", "cpu")
_, _, get_autocast_gpu_dtype, set_autocast_gpu_dtype = _legacy("cuda", "gpu")
(is_autocast_xla_enabled, set_autocast_xla_enabled, get_autocast_xla_dtype,
 set_autocast_xla_dtype) = _legacy("xla", "xla")
(is_autocast_ipu_enabled, set_autocast_ipu_enabled, get_autocast_ipu_dtype,
 set_autocast_ipu_dtype) = _legacy("ipu", "ipu")

LEGACY = ("is_autocast_cpu_enabled", "set_autocast_cpu_enabled", "get_autocast_cpu_dtype",
          "set_autocast_cpu_dtype", "get_autocast_gpu_dtype", "set_autocast_gpu_dtype",
          "is_autocast_xla_enabled", "set_autocast_xla_enabled", "get_autocast_xla_dtype",
          "set_autocast_xla_dtype", "is_autocast_ipu_enabled", "set_autocast_ipu_enabled",
          "get_autocast_ipu_dtype", "set_autocast_ipu_dtype")


class _DeviceAutocast(autocast):
    """Base of ``ember.cpu.amp.autocast`` / ``ember.cuda.amp.autocast``: PyTorch's
    deprecated per-device spellings of ``autocast(device, ...)``."""

    _device = "cpu"
    _default = D.bfloat16

    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        warnings.warn(f"`torch.{self._device}.amp.autocast(args...)` is deprecated. Please use "
                      f"`torch.amp.autocast('{self._device}', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__(self._device, enabled=enabled,
                         dtype=self._default if dtype is None else dtype,
                         cache_enabled=cache_enabled)
