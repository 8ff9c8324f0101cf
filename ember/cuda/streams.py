"""CUDA streams and events (``ember.cuda.Stream``, ``Event``, ``current_stream``, ``stream``).

ember's current stream on a device IS CuPy's current stream there (per thread and device, as
PyTorch's): ember's kernels (CuPy's, its Triton launches, cuBLAS through blas.py) all queue on
``cupy.cuda.get_current_stream()``, so ``with ember.cuda.stream(s):`` moves every one of them
to ``s``. A ``Stream`` wraps a CuPy stream, created non-blocking as PyTorch creates its
streams: it does not synchronise with the default stream implicitly; order across streams
comes from ``wait_stream`` / ``wait_event`` (and ``Tensor.record_stream`` for memory).
An ``Event`` makes its CUDA event at its first ``record`` (as PyTorch does), so an event never
recorded is complete, and waiting on it waits for nothing.
"""

from __future__ import annotations

import ctypes

from .._device import device as _device_cls
from ..backends.cuda import runtime as _runtime

_NO_STREAMS = "ember.cuda.Stream requires CUDA support: ember: CUDA is not available"
_NO_EVENTS = "ember.cuda.Event requires CUDA support: ember: CUDA is not available"


def _cp():
    return _runtime.cupy()


def _runtime_backend_installed() -> bool:
    from ..backends.cuda import backend
    return backend.BACKEND is not None


def _index(device) -> int:
    """The device index of a ``device=`` argument (the current device when None)."""
    if device is None:
        return _cp().cuda.runtime.getDevice()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    dev = _device_cls(device) if isinstance(device, str) else device
    if not isinstance(dev, _device_cls):
        raise ValueError(f"Expected a cuda device, but got: {device!r}")
    if dev.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {dev}")
    return _index(None) if dev.index is None else dev.index


def _usable(message: str) -> None:
    if _runtime.device_count() == 0:
        raise RuntimeError(message)


class Stream:
    """``ember.cuda.Stream(device=None, priority=0)``: a new CUDA stream on ``device`` (the
    current one when None). ``priority``: 0 or negative, lower is more urgent; CUDA clamps
    values outside the device's range into it."""

    __slots__ = ("_s", "_index", "_ctx")

    def __init__(self, device=None, priority: int = 0):
        _usable(_NO_STREAMS)
        cp = _cp()
        index = _index(device)
        with cp.cuda.Device(index):
            self._s = cp.cuda.Stream(non_blocking=True, priority=int(priority))
        self._index, self._ctx = index, None

    @classmethod
    def _of(cls, cupy_stream, index: int) -> "Stream":
        """A Stream over an existing CuPy stream of device ``index``."""
        s = object.__new__(cls)
        s._s, s._index, s._ctx = cupy_stream, index, None
        return s

    # ------------------------------------------------------------------ attributes
    @property
    def cuda_stream(self) -> int:
        return self._s.ptr

    @property
    def device(self):
        return _device_cls("cuda", self._index)

    @property
    def device_index(self) -> int:
        return self._index

    device_type = 1  # PyTorch's DeviceType number of CUDA

    @property
    def priority(self) -> int:
        return self._s.priority

    @property
    def _as_parameter_(self):
        return ctypes.c_void_p(self._s.ptr)

    def __cuda_stream__(self):
        return (0, self._s.ptr)

    # ------------------------------------------------------------------ work
    def query(self) -> bool:
        """Whether all the work queued on this stream has completed."""
        return self._s.done

    def synchronize(self) -> None:
        """Wait until all the work queued on this stream has completed."""
        self._s.synchronize()

    def wait_event(self, event: "Event") -> None:
        """Make the work queued on this stream from now on wait for ``event``."""
        if event._e is not None:
            self._s.wait_event(event._e)

    def wait_stream(self, stream: "Stream") -> None:
        """Make the work queued on this stream from now on wait for all the work queued on
        ``stream`` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        """Record ``event`` (a new one when None) on this stream, and return it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    # ------------------------------------------------------------------ protocol
    def __eq__(self, other):
        if isinstance(other, Stream):
            return self._s.ptr == other._s.ptr and self._index == other._index
        return NotImplemented

    def __hash__(self):
        return hash((self._s.ptr, self._index))

    def __repr__(self):
        return f"<ember.cuda.Stream device=cuda:{self._index} cuda_stream={self._s.ptr:#x}>"

    def __enter__(self):  # ``with s:`` is ``with ember.cuda.stream(s):``
        ctx = StreamContext(self)
        ctx.__enter__()
        if self._ctx is None:
            self._ctx = []
        self._ctx.append(ctx)
        return self

    def __exit__(self, *exc):
        self._ctx.pop().__exit__(*exc)
        return False


class ExternalStream(Stream):
    """``ember.cuda.ExternalStream(stream_ptr, device=None)``: a stream made elsewhere (its
    ``cudaStream_t`` as an int); ember neither creates nor destroys it."""

    __slots__ = ()

    def __init__(self, stream_ptr: int, device=None):
        _usable(_NO_STREAMS)
        cp = _cp()
        index = _index(device)
        self._s = cp.cuda.ExternalStream(int(stream_ptr), index)
        self._index, self._ctx = index, None


def current_stream(device=None) -> Stream:
    """The stream ember (and CuPy) queue work on for ``device`` in this thread."""
    cp = _cp()
    index = _index(device)
    return Stream._of(cp.cuda.get_current_stream(index), index)


def default_stream(device=None) -> Stream:
    """The device's default stream (the legacy default stream, or the per-thread one when
    CuPy runs with ``CUPY_CUDA_PER_THREAD_DEFAULT_STREAM``)."""
    cp = _cp()
    index = _index(device)
    return Stream._of(_default(cp), index)


def _default(cp):
    from cupy_backends.cuda import stream as backend_stream
    ptds = backend_stream.get_default_stream_ptr() == cp.cuda.Stream.ptds.ptr
    return cp.cuda.Stream.ptds if ptds else cp.cuda.Stream.null


def set_stream(stream: Stream | None) -> None:
    """Make ``stream`` current on its device (for this thread); None does nothing."""
    if stream is None:
        return
    cp = _cp()
    with cp.cuda.Device(stream._index):
        stream._s.use()


class StreamContext:
    """``ember.cuda.stream(s)``: ``s`` is current for the block (on its device, which is the
    current device for the block too); None changes nothing. The previous streams come back
    on exit."""

    def __init__(self, stream: Stream | None):
        self.stream = stream
        self._saved = None

    def __enter__(self):
        s = self.stream
        if s is None:
            return None
        cp = _cp()
        here = cp.cuda.runtime.getDevice()
        prev_here = cp.cuda.get_current_stream(here)
        prev_there = cp.cuda.get_current_stream(s._index)
        self._saved = (here, prev_here, prev_there)
        if s._index != here:
            cp.cuda.runtime.setDevice(s._index)
        s._s.use()
        return s

    def __exit__(self, *exc):
        s, saved = self.stream, self._saved
        if s is None or saved is None:
            return False
        cp = _cp()
        here, prev_here, prev_there = saved
        self._saved = None
        prev_there.use()  # the stream's device is current here
        if s._index != here:
            cp.cuda.runtime.setDevice(here)
            prev_here.use()
        return False


def stream(stream: Stream | None) -> StreamContext:
    """``with ember.cuda.stream(s):`` runs the block's CUDA work on ``s``."""
    return StreamContext(stream)


class Event:
    """``ember.cuda.Event(enable_timing=False, blocking=False, interprocess=False)``: a mark
    in a stream's work. ``blocking``: ``synchronize`` yields the thread instead of spinning;
    ``interprocess``: the event may be shared with other processes (not with timing)."""

    __slots__ = ("enable_timing", "blocking", "interprocess", "_e", "_index")

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        _usable(_NO_EVENTS)
        self.enable_timing, self.blocking = bool(enable_timing), bool(blocking)
        self.interprocess = bool(interprocess)
        self._e = None  # the CUDA event, made at the first record
        self._index = None

    @property
    def cuda_event(self) -> int:
        return 0 if self._e is None else self._e.ptr

    @property
    def device(self):
        return None if self._index is None else _device_cls("cuda", self._index)

    def record(self, stream: Stream | None = None) -> None:
        """Mark the work queued on ``stream`` (the current stream when None) so far."""
        if stream is None:
            stream = current_stream()
        if self._e is None:
            cp = _cp()
            with cp.cuda.Device(stream._index):
                self._e = cp.cuda.Event(block=self.blocking,
                                        disable_timing=not self.enable_timing,
                                        interprocess=self.interprocess)
            self._index = stream._index
        elif self._index != stream._index:
            raise RuntimeError(f"Event device index {self._index} does not match recording "
                               f"stream's device index {stream._index}.")
        self._e.record(stream._s)

    def wait(self, stream: Stream | None = None) -> None:
        """Make the work queued on ``stream`` (the current one) from now on wait for this
        event."""
        if stream is None:
            stream = current_stream()
        stream.wait_event(self)

    def query(self) -> bool:
        """Whether the work this event marks has completed (True when never recorded)."""
        return True if self._e is None else self._e.done

    def synchronize(self) -> None:
        """Wait until the work this event marks has completed."""
        if self._e is not None:
            self._e.synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds from this event to ``end_event`` (both with timing enabled, recorded
        and completed); ValueError or RuntimeError otherwise, as torch.cuda.Event's (2.11)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self._e is None or end_event._e is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        if not (self._e.done and end_event._e.done):
            raise RuntimeError("Both events must be completed before calculating elapsed "
                               "time.")
        return _cp().cuda.get_elapsed_time(self._e, end_event._e)

    def __repr__(self):
        if self._e is None:
            return "<ember.cuda.Event uninitialized>"
        return f"<ember.cuda.Event {self._e.ptr:#x}>"


def _register_device_generic() -> None:
    """``ember.Stream("cuda")`` / ``ember.Event("cuda")`` wrap these (ember/_stream.py)."""
    from .. import _stream
    _stream.DEVICE_TYPES["cuda"] = (
        lambda: _runtime.device_count() > 0,
        lambda index, priority: Stream(index, priority),
        lambda timing, blocking, interprocess: Event(timing, blocking, interprocess))


if _runtime_backend_installed():
    _register_device_generic()
