"""``ember.utils.checkpoint``: activation checkpointing (PyTorch 2.13's semantics).

A checkpointed region keeps none of the tensors its ops save for backward; backward runs the
region again to get them. Two variants, chosen by ``use_reentrant``:

- reentrant (``True``, also what ``None`` picks after its warning, as PyTorch 2.13 does): the
  region runs under ``no_grad`` inside a custom autograd Function whose backward reruns it
  with grad on and backpropagates through the fresh graph (``autograd.backward``, so it
  refuses ``autograd.grad`` and ``backward(inputs=)``).
- non-reentrant (``False``): the region runs with grad on under ``saved_tensors_hooks``; the
  pack hook keeps a placeholder (a ``_Holder``) for each saved tensor, the first unpack of a
  backward pass reruns the region under a second pair of hooks that collects the recomputed
  tensors in order (stopping as soon as all are there, ``early_stop``), and each holder
  unpacks to its recomputed tensor. Works with ``autograd.grad``, keyword arguments, inputs
  that don't require grad and nesting; ``determinism_check="default"`` compares the shapes,
  dtypes and devices of the recomputed tensors with the saved ones (``CheckpointError``).

Both replay the RNG (CPU generator and the CUDA Philox streams) and the autocast state of the
forward when ``preserve_rng_state``. Selective checkpointing (``context_fn`` from
``create_selective_checkpoint_contexts``) is in ``_checkpoint_sac.py``.
"""

from __future__ import annotations

import contextlib
import uuid
import warnings
import weakref
from collections import defaultdict

from .. import _random
from .._dispatch import STATE
from .._tensor import Tensor
from ..autograd import engine
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.graph import saved_tensors_hooks
from ..backends.cuda import philox as _philox
from ._checkpoint_sac import (CheckpointPolicy, SelectiveCheckpointContext,  # noqa: F401
                              create_selective_checkpoint_contexts, debug_contexts)

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointFunction",
           "CheckpointPolicy", "SelectiveCheckpointContext",
           "create_selective_checkpoint_contexts", "set_checkpoint_early_stop",
           "set_checkpoint_debug_enabled", "noop_context_fn", "detach_variable",
           "check_backward_validity"]


class CheckpointError(RuntimeError):
    """Raised when the recomputation does not save what the forward saved."""


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


_early_stop_override: bool | None = None
_debug_override: bool | None = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """Checkpoints whose forward runs inside use ``early_stop=enable``."""
    global _early_stop_override
    prev, _early_stop_override = _early_stop_override, enable
    try:
        yield
    finally:
        _early_stop_override = prev


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled: bool | None):
    """Checkpoints inside use ``debug=enabled`` (None: their own argument)."""
    global _debug_override
    prev, _debug_override = _debug_override, enabled
    try:
        yield
    finally:
        _debug_override = prev


def detach_variable(inputs: tuple) -> tuple:
    if not isinstance(inputs, tuple):
        raise RuntimeError("Only tuple of tensors is supported. Got Unsupported input type: "
                           f"{type(inputs).__name__}")
    out = []
    for a in inputs:
        if isinstance(a, Tensor):
            d = a.detach()
            d.requires_grad = a.requires_grad
            a = d
        out.append(a)
    return tuple(out)


def check_backward_validity(inputs) -> None:
    if not any(a.requires_grad for a in inputs if isinstance(a, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)


# ---------------------------------------------------------------------- forward state replay
def _device_type(args) -> str:
    """The device type whose autocast state the region replays: the first non-CPU tensor's,
    else "cuda" (PyTorch's default device type for checkpointing)."""
    for a in args:
        if isinstance(a, Tensor) and a.device.type != "cpu":
            return a.device.type
    return "cuda"


def _is_cuda_stream(key) -> bool:
    return key[0] == "cuda"


class _ForwardState:
    """What a recomputation must see as the forward did: the RNG states (when asked) and the
    autocast state of the CPU and the region's device type."""

    def __init__(self, args, preserve_rng_state: bool):
        from ..amp import autocast_mode as am
        self.preserve = preserve_rng_state
        if preserve_rng_state:
            self.cpu_rng = _random.get_rng_state()
            self.cuda_rng = _philox.snapshot(_is_cuda_stream)
        self.autocast = []
        for dev in ("cpu", _device_type(args)):
            if dev in ("cpu", "cuda") and am.is_autocast_enabled(dev):
                self.autocast.append((dev, am.get_autocast_dtype(dev),
                                      am.is_autocast_cache_enabled()))

    @contextlib.contextmanager
    def replay(self):
        from ..amp import autocast_mode as am
        with _random.fork_rng(enabled=self.preserve), contextlib.ExitStack() as stack:
            if self.preserve:
                _random.set_rng_state(self.cpu_rng)
                _philox.restore(self.cuda_rng, _is_cuda_stream)
            for dev, dtype, cache in self.autocast:
                stack.enter_context(am.autocast(dev, dtype=dtype, cache_enabled=cache))
            yield


# ---------------------------------------------------------------------- reentrant variant
class CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.state = _ForwardState(args, preserve_rng_state)
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if STATE.partial_backward:
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() "
                "or passing an `inputs` parameter to .backward(). To resolve this error, you can "
                "either set use_reentrant=False, or call .backward() without passing the "
                "`inputs` argument.")
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t
        with ctx.state.replay():
            detached = detach_variable(tuple(inputs))
            with enable_grad():
                outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        outs, gs = [], []
        for o, g in zip(outputs, grads):
            if isinstance(o, Tensor) and o.requires_grad:
                outs.append(o)
                gs.append(g)
        if not outs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        engine.backward(outs, gs)
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None
                                    for a in detached)


# ---------------------------------------------------------------------- non-reentrant variant
class _Holder:
    """The placeholder the graph saves for one tensor of the region; ``handles[gid]`` keys
    its recomputed tensor in backward pass ``gid`` (None once unpacked)."""

    __slots__ = ("handles", "__weakref__")

    def __init__(self):
        self.handles: dict = {}


class _Handle:
    __slots__ = ("__weakref__",)


class _StopRecomputation(Exception):
    pass


def _default_metadata(x) -> dict:
    return {"shape": x.shape, "dtype": x.dtype, "device": x.device}


_DETERMINISM_CHECKS = {"default": _default_metadata, "none": lambda _: None}

_DEBUG_TIP = """
Tip: To see a more detailed error message, either pass `debug=True` to
`torch.utils.checkpoint.checkpoint(...)` or wrap the code block
with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to
enable checkpoint-debug mode globally.
"""


class _Frame:
    """One checkpointed call: its inputs, the holders the forward saved (weakly: a holder
    dies with the graph node that saved it), their metadata and, per backward pass, the
    tensors the recomputation produced."""

    def __init__(self, recompute, early_stop, metadata_fn, error_cb):
        self.recompute = recompute
        self.early_stop = early_stop
        self.metadata_fn = metadata_fn
        self.error_cb = error_cb
        self.inputs: list = []
        self.holders: list = []
        self.metas: list = []
        self.recomputed = defaultdict(weakref.WeakKeyDictionary)  # gid -> {handle: tensor}
        self.count: defaultdict = defaultdict(int)
        self.done: defaultdict = defaultdict(bool)
        self.forward_completed = False
        self.ignore_mismatch = False

    def save_inputs(self, args) -> None:
        hooks, STATE.saved_hooks = STATE.saved_hooks, None  # the inputs are kept, not packed
        try:
            self.inputs = [engine.SavedTensor(a) if isinstance(a, Tensor) else a for a in args]
        finally:
            STATE.saved_hooks = hooks

    def get_inputs(self) -> list:
        return [a.unpack() if isinstance(a, engine.SavedTensor) else a for a in self.inputs]

    def check(self, gid) -> None:
        if self.ignore_mismatch:
            return
        if len(self.holders) != self.count[gid]:
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved during the "
                "original forward and recomputation.\n"
                f"Number of tensors saved during forward: {len(self.holders)}\n"
                f"Number of tensors saved during recomputation: {self.count[gid]}.\n"
                f"{_DEBUG_TIP}")
        different = []
        for k, ref in enumerate(self.holders):
            holder = ref()
            if holder is None:
                continue
            x = self.recomputed[gid][holder.handles[gid]]
            now = self.metadata_fn(x)
            if now != self.metas[k]:
                different.append(f"tensor at position {k}:\nsaved metadata: {self.metas[k]}\n"
                                 f"recomputed metadata: {now}\n")
        if different:
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have "
                f"different metadata than during the forward pass.\n{''.join(different)}.\n"
                f"{_DEBUG_TIP}")

    # the forward's hooks
    def pack(self, x):
        holder = _Holder()
        self.holders.append(weakref.ref(holder))
        if self.metadata_fn is not None:
            with no_grad():
                self.metas.append(self.metadata_fn(x))
        return holder

    def unpack(self, holder):
        try:
            return self._unpack(holder)
        except CheckpointError as e:
            if self.error_cb is None:
                raise
            self.error_cb(e)
            raise

    def _unpack(self, holder):
        gid = STATE.graph_task
        if gid == -1:
            gid = uuid.uuid4().int  # unpacked outside a backward pass
        if not self.done[gid]:
            args = self.get_inputs()
            try:
                with saved_tensors_hooks(*self._recompute_hooks(gid)), enable_grad():
                    self.recompute(*args)
            except _StopRecomputation:
                pass
            self.done[gid] = True
            self.check(gid)
        handle = holder.handles.get(gid)
        if handle is None:
            raise CheckpointError(
                "torch.utils.checkpoint: Unpack is being triggered for a tensor that was "
                "already unpacked once. If you are calling ctx.saved_tensors in backward, make "
                "sure to do so only once. Otherwise please open an issue with details on your "
                "use case.")
        holder.handles[gid] = None
        return self.recomputed[gid][handle]

    # the recomputation's hooks
    def _recompute_hooks(self, gid):
        ref = weakref.ref(self)

        def pack(x):
            frame = ref()
            x = x.detach() if x.requires_grad else x
            k = frame.count[gid]
            frame.count[gid] = k + 1
            if k >= len(frame.holders):
                if not frame.forward_completed:  # backward inside the forward, no early stop
                    frame.ignore_mismatch = True
                    return x
                raise CheckpointError(
                    "torch.utils.checkpoint: trying to save more tensors during recomputation "
                    f"than during the original forward pass.\n{_DEBUG_TIP}")
            holder = frame.holders[k]()
            if holder is not None:  # (None: a backward inside the forward freed it)
                handle = holder.handles[gid] = _Handle()
                frame.recomputed[gid][handle] = x
            if frame.early_stop and k + 1 == len(frame.holders):
                raise _StopRecomputation
            return x

        return pack, lambda x: x


def _checkpoint_non_reentrant(function, preserve, context_fn, determinism_check, debug,
                              early_stop, args, kwargs):
    error_cb = None
    if _debug_override if _debug_override is not None else debug:
        if context_fn is not noop_context_fn:
            raise ValueError("debug=True is incompatible with non-default context_fn")
        context_fn, error_cb = debug_contexts(CheckpointError)
    metadata_fn = _DETERMINISM_CHECKS.get(determinism_check) \
        if isinstance(determinism_check, str) else None
    if metadata_fn is None:
        raise ValueError(f"determinism_check should be one of {list(_DETERMINISM_CHECKS)}, "
                         f"but got {determinism_check}")
    forward_context, recompute_context = context_fn()
    state = _ForwardState(args, preserve)

    def recompute(*inputs):
        with state.replay(), recompute_context:
            function(*inputs, **kwargs)

    if not STATE.enabled:  # nothing is saved: a plain call
        return function(*args, **kwargs)
    stop = _early_stop_override if _early_stop_override is not None else early_stop
    frame = _Frame(recompute, stop, metadata_fn, error_cb)
    frame.save_inputs(args)
    suppressed = True
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        ret = function(*args, **kwargs)
        suppressed = False
    if suppressed:
        raise RuntimeError(
            "torch.utils.checkpoint: the forward context provided by context_fn suppressed an "
            "exception raised during the checkpointed forward. This is not supported because "
            "checkpoint cannot return a value for a failed forward.")
    frame.forward_completed = True
    return ret


# ---------------------------------------------------------------------- the entry points
def checkpoint(function, *args, use_reentrant: bool | None = None, context_fn=noop_context_fn,
               determinism_check: str = "default", debug: bool = False,
               early_stop: bool = True, **kwargs):
    """Run ``function(*args, **kwargs)`` keeping none of its intermediate tensors for backward;
    backward recomputes them. ``preserve_rng_state=`` (default True) is taken as a keyword."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
            "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an "
            "exception. use_reentrant=False is recommended, but if you need to preserve the "
            "current default behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    return _checkpoint_non_reentrant(function, preserve, context_fn, determinism_check, debug,
                                     early_stop, args, kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a Sequential or a list) in ``segments`` chunks, checkpointing every
    chunk but the last."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should "
            "be passed explicitly. In version 2.9 we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is recommended, but if you need to preserve "
            "the current default behavior, you can pass use_reentrant=True. Refer to docs for "
            "more details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    from ..nn import Sequential
    if isinstance(functions, Sequential):
        functions = list(functions.children())

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
