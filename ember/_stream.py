"""``ember.Stream`` and ``ember.Event``: PyTorch's device-generic stream and event.

On the CPU and meta devices there is one stream, which is always done, and no events (as in
PyTorch: recording raises "cpu backend doesn't support events."). On a CUDA device each
wraps the ``ember.cuda`` object it stands for (``ember.cuda.streams`` registers the maker in
``DEVICE_TYPES``; this layer sits below it). A ``device=`` of None means the current
accelerator, or the CPU without one."""

from __future__ import annotations

from ._device import device as _device_cls

# device type -> (whether a device of it is available(), make a stream(index, priority),
# make an event(enable_timing, blocking, interprocess)), for the device types whose streams
# and events are real (``ember.cuda`` registers "cuda"; this module imports nothing above it)
DEVICE_TYPES: dict = {}

_TYPE_NUMBERS = {"cpu": 0, "cuda": 1, "meta": 14}  # PyTorch's DeviceType values
_NO_ACCELERATOR = "Cannot access accelerator device when none is available."


def _accelerator() -> str | None:
    """The current accelerator's device type, None without one."""
    return next((kind for kind, (available, _, _) in DEVICE_TYPES.items() if available()),
                None)


def _resolve(device) -> _device_cls:
    if device is None:
        kind = _accelerator()
        return _device_cls("cpu") if kind is None else _device_cls(kind)
    if isinstance(device, int) and not isinstance(device, bool):
        kind = _accelerator()
        if kind is None:
            raise RuntimeError(_NO_ACCELERATOR)
        return _device_cls(kind, device)
    return device if isinstance(device, _device_cls) else _device_cls(device)


def _no_events(dev) -> RuntimeError:
    return RuntimeError(f"{dev.type} backend doesn't support events.")


class Stream:
    """``ember.Stream(device=None, *, priority=0)``: an in-order queue of work on a device."""

    __slots__ = ("_dev", "_impl")

    def __init__(self, device=None, *, priority: int = 0):
        dev = _resolve(device)
        maker = DEVICE_TYPES.get(dev.type)
        if dev.type == "cuda" and maker is None:
            raise RuntimeError("ember is not built with support for cuda devices")
        self._impl = maker[1](dev.index, priority) if maker is not None else None
        self._dev = dev if self._impl is None else self._impl.device

    @property
    def device(self) -> _device_cls:
        return self._dev

    @property
    def device_type(self) -> int:
        return _TYPE_NUMBERS[self._dev.type]

    @property
    def device_index(self) -> int:
        return -1 if self._dev.index is None else self._dev.index

    @property
    def stream_id(self) -> int:
        return 0 if self._impl is None else self._impl.cuda_stream

    @property
    def native_handle(self) -> int:
        if self._impl is None:
            raise RuntimeError("Backend doesn't support getting stream native handle.")
        return self._impl.cuda_stream

    def query(self) -> bool:
        return True if self._impl is None else self._impl.query()

    def synchronize(self) -> None:
        if self._impl is not None:
            self._impl.synchronize()

    def is_capturing(self) -> bool:
        if self._impl is None:
            return False
        return bool(self._impl._s.is_capturing())

    def record_event(self, event: "Event | None" = None) -> "Event":
        if event is None:
            event = Event(self._dev)
        event.record(self)
        return event

    def wait_event(self, event: "Event") -> None:
        if self._impl is not None and event._impl is not None:
            self._impl.wait_event(event._impl)

    def wait_stream(self, stream: "Stream") -> None:
        self.wait_event(stream.record_event())

    def __enter__(self):
        if self._impl is not None:
            self._impl.__enter__()
        return self

    def __exit__(self, *exc):
        if self._impl is not None:
            self._impl.__exit__(*exc)
        return False

    def __eq__(self, other):
        if not isinstance(other, Stream):
            return NotImplemented
        return (self._dev, self.stream_id) == (other._dev, other.stream_id)

    def __hash__(self):
        return hash((self._dev, self.stream_id))

    def __repr__(self):
        return (f"ember.Stream device_type={self._dev.type}, device_index={self.device_index},"
                f" stream_id={self.stream_id}")


class Event:
    """``ember.Event(device=None, *, enable_timing=False, blocking=False, interprocess=False)``:
    a mark in a stream's work (none on the CPU)."""

    __slots__ = ("_dev", "_impl", "enable_timing")

    def __init__(self, device=None, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        dev = _resolve(device)
        maker = DEVICE_TYPES.get(dev.type)
        if dev.type == "cuda" and maker is None:
            raise RuntimeError("ember is not built with support for cuda devices")
        self._dev, self.enable_timing = dev, bool(enable_timing)
        self._impl = maker[2](enable_timing, blocking, interprocess) if maker else None

    @property
    def device(self) -> _device_cls:
        return self._dev

    @property
    def event_id(self) -> int:
        return 0 if self._impl is None else self._impl.cuda_event

    def record(self, stream: Stream | None = None) -> None:
        if self._impl is None:
            raise _no_events(self._dev)
        if stream is None:
            self._impl.record()
        else:
            if stream._impl is None:
                raise _no_events(stream._dev)
            self._impl.record(stream._impl)
        self._dev = self._impl.device

    def wait(self, stream: Stream | None = None) -> None:
        if self._impl is None:
            return  # nothing was recorded: nothing to wait for
        if stream is None:
            self._impl.wait()
        else:
            stream.wait_event(self)

    def query(self) -> bool:
        return True if self._impl is None else self._impl.query()

    def synchronize(self) -> None:
        if self._impl is not None:
            self._impl.synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument "
                             "'enable_timing=True'.")
        if not (self.event_id and end_event.event_id):
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        return self._impl.elapsed_time(end_event._impl)

    def __repr__(self):
        index = -1 if self._dev.index is None else self._dev.index
        return (f"ember.Event device_type={self._dev.type}, device_index={index}, "
                f"event_flag={int(self.enable_timing)}, event_id={self.event_id}")
