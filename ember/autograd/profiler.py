"""``ember.autograd.profiler``: the profiler's recorder, ``record_function`` and the autograd
profiler context (``profile``); ``ember.profiler`` builds its scheduled profiler on these.

While a recording runs, it is the "profiler" interposer of the thread that started it
(``ember/_dispatch.py``): each op-table call of that thread reaches ``_Recorder.handle``,
which times the call (``time.perf_counter_ns``), hands it on and notes its name
(``aten::<op>``, ``aten::<op>_`` for an in-place call, PyTorch's names for its CPU ops), its
parent (the innermost open ``record_function`` or op), input shapes (``record_shapes``), the
bytes of the tensors it returned that are not views of its inputs (``profile_memory``) and
the Python stack (``with_stack``). With ``use_cuda`` an op that runs on a CUDA tensor also gets
a pair of CUDA events recorded on the current stream around it: its device interval, read
when the recording stops and placed on the host's clock through a reference event. With no
recording active nothing is installed, so an op call pays nothing. Calls made inside an op's
own implementation are part of that op (the interposers below the profiler see them). The
engine applies each backward node inside two ranges named as PyTorch's
("autograd::engine::evaluate_function: SinBackward0" around "SinBackward0"), so a backward
rule's op calls nest under their node.
"""

from __future__ import annotations

import functools
import sys
import threading
import time

from .._dispatch import ORDER, RUNNERS as _RUN, STATE, set_interposer
from .._tensor import Tensor
from . import engine
from .profiler_util import EventList, FunctionEvent, FunctionEventAvg  # noqa: F401

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]

_perf_ns = time.perf_counter_ns
# the recorder hands calls straight to the runners: nothing sits below it in the stack
assert ORDER[-1] == "profiler", ORDER
_NAMES: dict = {}  # (op name, mode) -> event name
_HERE = __file__.rsplit("/", 2)[0]  # ember's package directory: its frames are left out


def _event_name(op, mode: str) -> str:
    key = (op.name, mode)
    name = _NAMES.get(key)
    if name is None:
        name = _NAMES[key] = "aten::" + op.name + ("_" if mode == "inplace" else "")
    return name


def _shape_of(a):
    if isinstance(a, Tensor):
        return list(a.shape)
    if isinstance(a, (list, tuple)) and a and all(isinstance(x, Tensor) for x in a):
        return [list(x.shape) for x in a]
    return []


def _user_stack() -> list:
    """The Python frames below ember's own, innermost first ("file(line): function")."""
    out = []
    f = sys._getframe(2)
    while f is not None:
        path = f.f_code.co_filename
        if not path.startswith(_HERE):
            out.append(f"{path}({f.f_lineno}): {f.f_code.co_name}")
        f = f.f_back
    return out


def _new_bytes(out, args) -> tuple[int, int]:
    """(host bytes, device bytes) of the tensors in ``out`` that are not inputs or views."""
    host = dev = 0
    items = out if isinstance(out, (tuple, list)) else (out,)
    for t in items:
        if isinstance(t, Tensor) and t._base is None and not any(t is a for a in args):
            n = t._data.nbytes
            if t._backend.name == "cpu":
                host += n
            else:
                dev += n
    return host, dev


def _is_cuda(args) -> int | None:
    """The CUDA device index of the first CUDA tensor among ``args`` (None: none)."""
    for a in args:
        if isinstance(a, Tensor) and a._backend.name == "cuda":
            return a.device.index or 0
    return None


# A record is a list (cheaper to make than an object, once per op call):
# [name, parent record or None, start ns, end ns, is a record_function range, _Detail or None]
_NAME, _PARENT, _START, _END, _ANNOTATION, _DETAIL = range(6)


class _Detail:
    """What a record holds beyond its name and times, when asked for."""

    __slots__ = ("shapes", "stack", "host", "dev", "gpu")

    def __init__(self):
        self.shapes = self.stack = self.gpu = None
        self.host = self.dev = 0


class _Recorder:
    """One recording on one thread."""

    def __init__(self, record_shapes=False, profile_memory=False, with_stack=False,
                 use_cuda=False, with_flops=False):
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.use_cuda, self.with_flops = with_stack, use_cuda, with_flops
        self.detailed = record_shapes or profile_memory or with_stack or use_cuda
        self.records: list = []
        self.open: list = []
        self.names: dict = {}  # op -> its event name (in-place calls: keyed by (op, mode))
        self.memory: list = []  # (us, bytes, device, thread) per allocation
        self.thread = threading.get_ident()
        self.refs: dict = {}  # device -> (reference CUDA event, host ns when it completed)
        self.prev = None
        self.active = False
        self.base_ns = time.time_ns() - _perf_ns()  # wall clock = perf counter + base

    # the interposer (the last of the stack: the call it hands on meets no other)
    def handle(self, op, args, kwargs, mode):
        opened = self.open
        key = op if mode == "call" else (op, mode)
        name = self.names.get(key)
        if name is None:
            name = self.names[key] = _event_name(op, mode)
        rec = [name, opened[-1] if opened else None, 0, 0, False, None]
        if self.detailed:
            return self._handle_detailed(rec, op, args, kwargs, mode)
        self.records.append(rec)
        opened.append(rec)
        rec[2] = _perf_ns()
        try:
            return _RUN[mode](op, args, kwargs)
        finally:
            rec[3] = _perf_ns()
            opened.pop()

    def _handle_detailed(self, rec, op, args, kwargs, mode):
        d = rec[5] = _Detail()
        if self.record_shapes:
            d.shapes = [_shape_of(a) for a in args]
        if self.with_stack:
            d.stack = _user_stack()
        gpu = None
        if self.use_cuda:
            device = _is_cuda(args)
            if device is not None:
                gpu = self._cuda_start(device)
        opened = self.open
        self.records.append(rec)
        opened.append(rec)
        rec[2] = _perf_ns()
        try:
            out = _RUN[mode](op, args, kwargs)
        finally:
            rec[3] = _perf_ns()
            opened.pop()
            if gpu is not None:
                d.gpu = self._cuda_end(gpu)
        if self.profile_memory:
            d.host, d.dev = _new_bytes(out, args)
            if d.host or d.dev:
                ts = (rec[3] + self.base_ns) / 1e3
                if d.host:
                    self.memory.append((ts, d.host, -1, self.thread))
                if d.dev:
                    self.memory.append((ts, d.dev, gpu[2] if gpu else 0, self.thread))
        return out

    # CUDA intervals: CuPy's events on the current stream (the one ember's ops queue on)
    def _cuda_start(self, device):
        from ..backends.cuda.runtime import cupy
        cp = cupy()
        with cp.cuda.Device(device):
            stream = cp.cuda.get_current_stream()
            if device not in self.refs:
                ref = cp.cuda.Event()
                ref.record(stream)
                ref.synchronize()
                self.refs[device] = (ref, _perf_ns())
            start = cp.cuda.Event()
            start.record(stream)
        return start, stream, device

    def _cuda_end(self, started):
        from ..backends.cuda.runtime import cupy
        start, stream, device = started
        with cupy().cuda.Device(device):
            end = cupy().cuda.Event()
            end.record(stream)
        return start, end, device, stream.ptr

    @staticmethod
    def _elapsed_ms(a, b) -> float:
        from ..backends.cuda.runtime import cupy
        return cupy().cuda.get_elapsed_time(a, b)

    # ranges from record_function and the engine's backward nodes
    def push(self, name: str, annotation: bool = True) -> list:
        opened = self.open
        rec = [name, opened[-1] if opened else None, 0, 0, annotation, None]
        if self.with_stack:
            rec[5] = _Detail()
            rec[5].stack = _user_stack()
        self.records.append(rec)
        opened.append(rec)
        rec[2] = _perf_ns()
        return rec

    def pop(self, rec: list) -> None:
        rec[3] = _perf_ns()
        opened = self.open
        if opened and opened[-1] is rec:
            opened.pop()
        elif any(r is rec for r in opened):
            while opened.pop() is not rec:
                pass

    # on and off
    def start(self) -> None:
        if self.active:
            raise RuntimeError("Profiler is already enabled on this thread")
        self.prev = set_interposer("profiler", self.handle)
        self.prev_range = engine.node_range
        engine.node_range = _node_range
        self.prev_active = _ACTIVE.get(self.thread)  # (a profiler inside another one)
        _ACTIVE[self.thread] = self
        self.active = True

    def stop(self) -> None:
        if not self.active:
            return
        now = _perf_ns()
        for rec in self.open:  # ranges still open end here
            rec[3] = now
        self.open.clear()
        set_interposer("profiler", self.prev)
        engine.node_range = self.prev_range
        if self.prev_active is not None:
            _ACTIVE[self.thread] = self.prev_active
        else:
            _ACTIVE.pop(self.thread, None)
        self.active = False

    def events(self) -> EventList:
        """The FunctionEvents of the records, in start order, children linked."""
        base = self.base_ns
        ids = {}
        events = []
        none = _Detail()
        for k, rec in enumerate(self.records):
            name, parent, start, end, annotation, d = rec
            d = d or none
            shown = name
            if annotation and name.startswith("ProfilerStep#"):
                shown = "ProfilerStep*"  # (one row for all steps; the trace keeps the number)
            ev = FunctionEvent(k, shown, self.thread, (start + base) / 1e3, (end + base) / 1e3,
                               input_shapes=d.shapes, stack=d.stack,
                               is_user_annotation=annotation, cpu_memory_usage=d.host,
                               device_memory_usage=d.dev)
            ev.trace_name = name
            if self.use_cuda:
                ev.use_device = "cuda"
            if d.gpu is not None:
                g_start, g_end, device, stream = d.gpu
                g_end.synchronize()
                ref, ref_ns = self.refs[device]
                t0 = (ref_ns + base) / 1e3 + self._elapsed_ms(ref, g_start) * 1e3
                ev.kernels.append((name, device, stream, t0,
                                   self._elapsed_ms(g_start, g_end) * 1e3))
                ev.device_index = device
            ids[id(rec)] = ev
            if parent is not None:
                p = ids[id(parent)]
                ev.cpu_parent = p
                p.cpu_children.append(ev)
            events.append(ev)
        return EventList(events, use_device="cuda" if self.use_cuda else None,
                         profile_memory=self.profile_memory, with_flops=self.with_flops)


_ACTIVE: dict = {}  # thread id -> its running recorder


def _node_range(node, grads):
    """The engine applies a backward node: inside ranges named as PyTorch's
    ("autograd::engine::evaluate_function: <node>" around "<node>") on a profiled thread."""
    rec = _current()
    if rec is None:
        return node.apply(grads)
    name = node.name()
    outer = rec.push("autograd::engine::evaluate_function: " + name, annotation=False)
    inner = rec.push(name, annotation=False)
    try:
        return node.apply(grads)
    finally:
        rec.pop(inner)
        rec.pop(outer)


def _current():
    return _ACTIVE.get(threading.get_ident()) if _ACTIVE else None


class record_function:
    """``with record_function("name"):`` (or ``@record_function("name")``) marks a range of
    the running profiler's trace; with no profiler running it records nothing."""

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self.args = args
        self._recs: list = []

    def __enter__(self):
        rec = _current()
        self._recs.append((rec, rec.push(self.name) if rec is not None else None))
        return self

    def __exit__(self, *exc):
        recorder, rec = self._recs.pop()
        if rec is not None:
            recorder.pop(rec)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return wrapper


class profile:
    """The autograd profiler: ``with profile(record_shapes=..., profile_memory=...) as prof:``
    records this thread's op calls; afterwards ``prof.function_events``,
    ``prof.key_averages()``, ``prof.table()``, ``prof.export_chrome_trace(path)``."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        if use_cuda:
            import warnings
            warnings.warn("The attribute `use_cuda` will be deprecated soon, please use "
                          "``use_device = 'cuda'`` instead.", FutureWarning, stacklevel=2)
            use_device = "cuda"
        if use_device not in (None, "cuda"):
            raise AssertionError(f"{use_device} is not a supported device for ember's profiler")
        self.enabled = enabled
        self.use_device = use_device
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.with_flops = with_stack, with_flops
        self.acc_events = acc_events
        self.entered = False
        self.function_events: EventList | None = None
        self._recorder: _Recorder | None = None
        self._all: list = []

    def _start(self):
        self._recorder = _Recorder(self.record_shapes, self.profile_memory, self.with_stack,
                                   self.use_device == "cuda", self.with_flops)
        self._recorder.start()

    def _stop(self):
        rec = self._recorder
        rec.stop()
        evs = rec.events()
        if self.acc_events and self.function_events is not None:
            evs = EventList(list(self.function_events) + list(evs), use_device=evs._use_device,
                            profile_memory=evs._profile_memory, with_flops=evs._with_flops)
        self.function_events = evs

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._start()
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        self._stop()
        self.entered = False
        return False

    def _check_finish(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        self._check_finish()
        if not self.record_shapes and group_by_input_shape:
            raise AssertionError("group_by_input_shape requires record_shapes=True")
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n,
                                                 group_by_overload_name)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        self._check_finish()
        return self.function_events.table(sort_by, row_limit, max_src_column_width,
                                          max_name_column_width, max_shapes_column_width,
                                          header, top_level_events_only, time_unit)

    def total_average(self):
        self._check_finish()
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self):
        self._check_finish()
        return self.function_events.self_cpu_time_total

    def export_chrome_trace(self, path):
        from .profiler_util import export_chrome_trace
        self._check_finish()
        rec = self._recorder
        export_chrome_trace(self.function_events, path, rec.base_ns if rec else 0,
                            rec.memory if rec else None)

    def __str__(self):
        self._check_finish()
        return str(self.function_events)


def _is_recording() -> bool:
    """Whether a profiler records this thread's op calls."""
    return STATE.layers.get("profiler") is not None and _current() is not None
