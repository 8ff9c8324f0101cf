"""Per-thread dispatch state: what decides how an op call runs on the calling thread.

PyTorch keeps grad mode, inference mode and the compiler's tracing state per thread, so a
thread that runs ``ember.compile`` does not turn another thread's eager ops into symbolic
ones. All of it lives in one ``threading.local`` here, below every layer that reads it:

    enabled, inference   grad mode and inference mode (``ember.autograd.grad_mode``)
    top, top_kind        the first interposer of this thread's stack (or None), and its kind
    autocast             this thread's autocast state (``ember/amp/autocast_mode.py``), or None
    capture              the compiler's capture interposer (``STATE.capture = handler``
                         installs it in the stack; None removes it)
    tracing              how many traces are active on this thread (``is_compiling()``)
    shape_envs           the stack of symbolic shape environments recording guards; its
                         bottom entry is None (no environment)
    device               the device factories allocate on when given none (``with
                         ember.device(...)``, ``set_default_device``), or None for the CPU;
                         a factory call reads this one attribute
    default_device       ``set_default_device``'s device (None: the CPU), under the
    device_contexts      stack of the devices of this thread's active ``with device(...)``
    saved_hooks          the stack of ``saved_tensors_hooks`` (pack, unpack) pairs of this
                         thread, or None (``ember/autograd/graph.py``; the engine reads it)
    saved_hooks_off      the message ``disable_saved_tensors_hooks`` raises with, or None
    partial_backward     whether the running backward pass is ``autograd.grad`` or
                         ``backward(inputs=)`` (reentrant checkpointing refuses those)
    graph_task           the id of the running backward pass, -1 outside one

Interposers are what intercept an op call before the backend runs it, one ordered stack per
thread (``ORDER``, outermost first): the compiler's capture, ``__torch_function__`` and tensor
subclasses, vmap / forward-AD levels, autocast, selective activation checkpointing
(``ember/utils/checkpoint.py``), the flop counter (``ember/utils/flop_counter.py``), the
profiler (``ember/autograd/profiler.py``). Each is a handler
``handler(op, args, kwargs, mode)`` (mode "call" or "inplace") that may record, rewrite
or pass the call on with ``redispatch``, which runs it with the interposers below its own. The
dispatcher reads ``STATE.top``: with no interposer active that is the one check an op call pays.
An interposer installed with ``ops`` (a set of op names: autocast's listed ops) sees only those
ops' calls; ``STATE.top_ops`` is the union over the stack (None: some interposer sees every op),
and the dispatcher hands a call to the stack only where ``intercepts(name)``.
(Autograd recording is not an interposer here: it is the dispatcher's own last step, run only
when an input requires grad.)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from . import _device
from ._device import CPU, check_device

ORDER = ("capture", "torch_function", "functorch", "autocast", "checkpoint", "flop_counter",
         "profiler")

# how ``redispatch`` runs a call of each mode (the op table registers these: it sits above)
RUNNERS: dict[str, Callable] = {}


class _State(threading.local):
    enabled = True
    inference = False
    top = None
    top_kind = None
    top_ops = None
    autocast = None
    tracing = 0
    device = None
    default_device = None
    saved_hooks = None
    saved_hooks_off = None
    partial_backward = False
    graph_task = -1

    def __init__(self):  # runs once in each thread that touches STATE
        self.shape_envs = [None]
        self.device_contexts: list = []
        self.layers: dict[str, Callable] = {}  # kind -> handler, this thread's stack
        self.filters: dict[str, frozenset] = {}  # kind -> the op names it sees (absent: all)

    @property
    def capture(self):
        return self.layers.get("capture")

    @capture.setter
    def capture(self, handler) -> None:
        set_interposer("capture", handler)


STATE = _State()


def _set_top(after: int = -1) -> None:
    """Make the first installed interposer after position ``after`` of ORDER the top of this
    thread's stack (none: ``STATE.top`` None), with the op names the rest of the stack sees."""
    layers, filters = STATE.layers, STATE.filters
    top = kind = None
    ops: frozenset | None = frozenset()
    for k in ORDER[after + 1:]:
        h = layers.get(k)
        if h is not None:
            if top is None:
                top, kind = h, k
            f = filters.get(k)
            ops = None if f is None or ops is None else ops | f
    STATE.top, STATE.top_kind, STATE.top_ops = top, kind, ops


def intercepts(name: str) -> bool:
    """Whether this thread's interposer stack (``STATE.top`` set) sees calls of op ``name``."""
    ops = STATE.top_ops
    return ops is None or name in ops


def set_interposer(kind: str, handler: Callable | None, ops=None):
    """Install (or with None remove) this thread's interposer of ``kind``, seeing the calls of
    the ops named in ``ops`` (None: every op); returns the one it replaces."""
    if kind not in ORDER:
        raise ValueError(f"unknown interposer kind {kind!r}; the stack is {ORDER}")
    layers = STATE.layers
    prev = layers.pop(kind, None)
    STATE.filters.pop(kind, None)
    if handler is not None:
        layers[kind] = handler
        if ops is not None:
            STATE.filters[kind] = ops if type(ops) is frozenset else frozenset(ops)
    _set_top()
    return prev


@contextlib.contextmanager
def interposing(kind: str, handler: Callable):
    """``with interposing("autocast", handler):`` the handler sees every op call of this
    thread (after the interposers before it in ``ORDER``)."""
    prev = set_interposer(kind, handler)
    try:
        yield handler
    finally:
        set_interposer(kind, prev)


def interpose(op, args: tuple, kwargs: dict, mode: str):
    """Hand an op call to this thread's first interposer (the dispatcher's step when
    ``STATE.top`` is set). While the handler runs, its own op calls see only the interposers
    after it, so it can compute with ops without meeting itself."""
    saved = STATE.top, STATE.top_kind, STATE.top_ops
    layers, filters, name = STATE.layers, STATE.filters, op.name
    for i in range(ORDER.index(saved[1]), len(ORDER)):  # the first that sees this op
        kind = ORDER[i]
        handler = layers.get(kind)
        if handler is not None and ((f := filters.get(kind)) is None or name in f):
            break
    else:
        raise AssertionError(f"no interposer sees {name}")  # callers check intercepts()
    _set_top(i)
    try:
        return handler(op, args, kwargs, mode)
    finally:
        STATE.top, STATE.top_kind, STATE.top_ops = saved


def redispatch(kind: str, op, args: tuple, kwargs: dict, mode: str = "call"):
    """Run an op call that the interposer of ``kind`` handed on, with only the interposers
    after it in ``ORDER`` active (then the backend)."""
    saved = STATE.top, STATE.top_kind, STATE.top_ops
    _set_top(ORDER.index(kind))
    try:
        return RUNNERS[mode](op, args, kwargs)
    finally:
        STATE.top, STATE.top_kind, STATE.top_ops = saved


# ---------------------------------------------------------------------- default device
# PyTorch's device context is a function mode, so per thread: a thread started inside
# ``with ember.device("meta")`` (or after ``set_default_device``) allocates on the CPU.
def _update_device() -> None:
    stack = STATE.device_contexts
    dev = stack[-1] if stack else STATE.default_device
    STATE.device = None if dev is None or (dev.type == "cpu" and not stack) else dev


def enter_device(dev) -> None:
    """``with ember.device(...)``: factories of this thread allocate on ``dev`` until the
    matching ``exit_device``."""
    STATE.device_contexts.append(dev)
    _update_device()


def exit_device(dev) -> None:
    stack = STATE.device_contexts
    if stack:
        stack.pop()
    _update_device()


def set_default_device(device) -> None:
    """``ember.set_default_device(device)``: the device factories of this thread allocate on
    when given none; None means the CPU."""
    STATE.default_device = None if device is None else check_device(device)
    _update_device()


def get_default_device():
    """``ember.get_default_device()``: the device a factory given no ``device=`` allocates on
    (the innermost ``with ember.device(...)``, else ``set_default_device``'s, else the CPU)."""
    return STATE.device or CPU


_device.CONTEXT_HOOKS[:] = [enter_device, exit_device]


def is_tracing() -> bool:
    """Whether the compiler is capturing a graph on this thread."""
    return STATE.tracing > 0
