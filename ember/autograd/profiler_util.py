"""The profiler's results: events, their averages, the summary table and the Chrome trace.

A ``FunctionEvent`` is one op call (``aten::<op>``, category ``cpu_op``) or one
``record_function`` range (category ``user_annotation``) on the host, with its children (the
events that ran inside it), the bytes of the tensors it allocated and, for an op on a CUDA
device profiled with ``ProfilerActivity.CUDA``, its device interval measured with CUDA events
on the stream it ran on. Times are in microseconds, as PyTorch reports them.

``EventList.key_averages`` groups events by name (and input shapes, stack) into
``FunctionEventAvg`` rows; ``table`` prints them with PyTorch's columns ("Self CPU %", "Self
CPU", "CPU total %", "CPU total", "CPU time avg", device and memory columns when there are
such numbers, "# of Calls", "Input Shapes", "Source Location"); ``export_chrome_trace`` writes
the trace-event JSON that Perfetto and chrome://tracing open.
"""

from __future__ import annotations

import json
import os

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg"]

_SORT_KEYS_DEVICE = ("cuda", "xpu", "privateuse1")


def _format_time(us: float, unit: str | None = None) -> str:
    if unit == "s" or (unit is None and us >= 1e6):
        return f"{us / 1e6:.3f}s"
    if unit == "ms" or (unit is None and us >= 1e3):
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_share(us: float, total: float) -> str:
    return "NaN" if total == 0 else f"{us * 100.0 / total:.2f}%"


def _format_memory(n: int) -> str:
    for size, unit in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


class _Times:
    """The ``*_str`` forms of the time attributes."""

    @property
    def cpu_time_str(self):
        return _format_time(self.cpu_time)

    @property
    def cpu_time_total_str(self):
        return _format_time(self.cpu_time_total)

    @property
    def self_cpu_time_total_str(self):
        return _format_time(self.self_cpu_time_total)

    @property
    def device_time_str(self):
        return _format_time(self.device_time)

    @property
    def device_time_total_str(self):
        return _format_time(self.device_time_total)

    @property
    def self_device_time_total_str(self):
        return _format_time(self.self_device_time_total)

    # PyTorch's older names for the device columns
    @property
    def cuda_time_total(self):
        return self.device_time_total

    @property
    def self_cuda_time_total(self):
        return self.self_device_time_total


class FunctionEvent(_Times):
    """One profiled range on the host (an op call or a ``record_function``)."""

    def __init__(self, id, name, thread, start_us, end_us, *, input_shapes=None, stack=None,
                 is_user_annotation=False, cpu_memory_usage=0, device_memory_usage=0,
                 device_index=0, flops=0, sequence_nr=-1):
        self.id, self.name, self.thread = id, name, thread
        self.trace_name = name  # the name in the Chrome trace
        self.start_us, self.end_us = start_us, end_us
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.stack = stack if stack is not None else []
        self.is_user_annotation = is_user_annotation
        self.own_cpu_memory = cpu_memory_usage  # bytes of the tensors this event allocated
        self.own_device_memory = device_memory_usage
        self.device_index = device_index
        self.flops = flops
        self.sequence_nr = sequence_nr
        self.cpu_children: list[FunctionEvent] = []
        self.cpu_parent: FunctionEvent | None = None
        self.kernels: list[tuple] = []  # (name, device, stream, start_us, duration_us)
        self.count = 1
        self.device_type = "CPU"
        self.use_device = None
        self.is_async = False
        self.is_legacy = True
        self.node_id = -1
        self.overload_name = ""
        self.scope = 0

    # the time numbers
    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    @property
    def self_device_time_total(self) -> float:
        return sum(k[4] for k in self.kernels)

    @property
    def device_time_total(self) -> float:
        return self.self_device_time_total + sum(c.device_time_total for c in self.cpu_children)

    @property
    def device_time(self) -> float:
        return self.device_time_total

    # the memory numbers: an event's allocations include those of the events inside it
    @property
    def self_cpu_memory_usage(self) -> int:
        return self.own_cpu_memory

    @property
    def cpu_memory_usage(self) -> int:
        return self.own_cpu_memory + sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_device_memory_usage(self) -> int:
        return self.own_device_memory

    @property
    def device_memory_usage(self) -> int:
        return self.own_device_memory + sum(c.device_memory_usage for c in self.cpu_children)

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} device_type={self.device_type} "
                f"cpu_time={self.cpu_time_str} start_us={self.start_us:.3f} "
                f"end_us={self.end_us:.3f} cpu_children={[c.id for c in self.cpu_children]} "
                f"device_time={self.device_time_str} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage} "
                f"device_memory_usage={self.device_memory_usage} is_legacy={self.is_legacy}>")


class FunctionEventAvg(_Times):
    """Events of one key summed: totals, self totals, memory, call count."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.node_id = 0
        self.is_async = False
        self.is_legacy = True
        self.is_user_annotation = False
        self.use_device = None
        self.device_type = "CPU"
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.device_memory_usage = self.self_device_memory_usage = 0
        self.input_shapes = None
        self.stack = None
        self.cpu_parent = None
        self.flops = 0
        self.overload_name = ""
        self.scope = 0

    def add(self, other):
        if self.key is None:
            self.key = other.key
            self.node_id, self.is_async = other.node_id, other.is_async
            self.is_user_annotation = other.is_user_annotation
            self.use_device, self.device_type = other.use_device, other.device_type
            self.input_shapes, self.stack = other.input_shapes, other.stack
            self.cpu_parent = other.cpu_parent
            self.overload_name = other.overload_name
        elif other.key != self.key:
            raise AssertionError(f"Expected keys to match, but got {self.key} vs {other.key}")
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.device_time_total += other.device_time_total
        self.self_device_time_total += other.self_device_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.device_memory_usage += other.device_memory_usage
        self.self_device_memory_usage += other.self_device_memory_usage
        self.count += other.count
        self.flops += other.flops
        return self

    __iadd__ = add

    @property
    def cpu_time(self) -> float:
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self) -> float:
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str}"
                f" cpu_time={self.cpu_time_str}  self_device_time="
                f"{self.self_device_time_total_str} device_time={self.device_time_str} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage} "
                f"device_memory_usage={self.device_memory_usage}>")


class EventList(list):
    """A list of events (or of averages) with the summary operations."""

    def __init__(self, *args, use_device=None, profile_memory=False, with_flops=False,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self._use_device = use_device
        self._profile_memory = profile_memory
        self._with_flops = with_flops

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """One ``FunctionEventAvg`` per name (and input shapes / top stack frames when
        asked), in the order the keys first occur."""
        groups: dict = {}
        for e in self:
            key = (e.key, str(e.input_shapes) if group_by_input_shapes else None,
                   tuple(e.stack[:group_by_stack_n]) if group_by_stack_n > 0 else None,
                   e.overload_name if group_by_overload_name else None)
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg()
            avg.add(e)
        return EventList(groups.values(), use_device=self._use_device,
                         profile_memory=self._profile_memory, with_flops=self._with_flops)

    def total_average(self):
        total = FunctionEventAvg()
        for e in self:
            if total.key is not None:
                total.key = e.key  # (sums across keys)
            total.add(e)
        total.key = "Total"
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        return _table(self, sort_by, row_limit, max_src_column_width, max_name_column_width,
                      max_shapes_column_width, header, top_level_events_only, time_unit,
                      self._use_device, self._profile_memory)

    def export_chrome_trace(self, path):
        export_chrome_trace(self, path)

    def __str__(self):
        return self.table()


def _table(events, sort_by, row_limit, max_src, max_name, max_shapes, header, top_only,
           unit, use_device, profile_memory) -> str:
    """PyTorch's summary table of ``events`` (events or averages)."""
    if not events:
        return ""
    if unit not in (None, "s", "ms", "us"):
        unit = None  # (PyTorch falls back to the automatic unit as well)
    rows = list(events)
    if sort_by is not None:
        attr = sort_by
        for dev in _SORT_KEYS_DEVICE:
            attr = attr.replace(dev, "device")
        rows.sort(key=lambda e: getattr(e, attr), reverse=True)
    has_device_time = any(e.self_device_time_total > 0 for e in rows)
    has_device_mem = any(e.self_device_memory_usage > 0 for e in rows)
    has_shapes = any(e.input_shapes for e in rows)
    stacks = [e.stack for e in rows if e.stack]
    dev = (use_device or "cuda").upper()
    name_w = max(len(e.key) for e in rows) + 4
    if max_name is not None:
        name_w = min(name_w, max_name)
    shapes_w = max(len(str(e.input_shapes)) for e in rows) + 4
    if max_shapes is not None:
        shapes_w = min(shapes_w, max_shapes)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if has_device_time:
        headers += [f"Self {dev}", f"Self {dev} %", f"{dev} total", f"{dev} time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
        if has_device_mem:
            headers += [f"{dev} Mem", f"Self {dev} Mem"]
    headers.append("# of Calls")
    widths = [name_w] + [12] * (len(headers) - 1)
    aligns = [">"] * len(headers)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(shapes_w)
        aligns.append(">")
    if stacks:
        src_w = max(len(s) for st in stacks for s in st) + 4
        if max_src is not None:
            src_w = min(src_w, max_src)
        headers.append("Source Location")
        widths.append(src_w)
        aligns.append("<")
    row_fmt = "".join("{: " + a + str(w) + "}  " for a, w in zip(aligns, widths))
    sep = "".join("-" * w + "  " for w in widths)
    total_self = sum(e.self_cpu_time_total for e in rows)
    total_dev = sum(e.self_device_time_total for e in rows)
    out = []
    if header is not None:
        out += ["=" * (sum(widths) + 2 * len(widths) - 2), header]
    if top_only:
        out += ["=" * (sum(widths) + 2 * len(widths) - 2),
                "This report only display top-level ops statistics"]
    out += [sep, row_fmt.format(*headers), sep]
    shown = 0
    for e in rows:
        if shown == row_limit:
            break
        if top_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name is not None and len(name) >= max_name - 3:
            name = name[:max_name - 3] + "..."
        vals = [name, _format_share(e.self_cpu_time_total, total_self),
                _format_time(e.self_cpu_time_total, unit),
                _format_share(e.cpu_time_total, total_self),
                _format_time(e.cpu_time_total, unit), _format_time(e.cpu_time, unit)]
        if has_device_time:
            vals += [_format_time(e.self_device_time_total, unit),
                     _format_share(e.self_device_time_total, total_dev),
                     _format_time(e.device_time_total, unit),
                     _format_time(e.device_time, unit)]
        if profile_memory:
            vals += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage)]
            if has_device_mem:
                vals += [_format_memory(e.device_memory_usage),
                         _format_memory(e.self_device_memory_usage)]
        vals.append(e.count)
        if has_shapes:
            vals.append(str(e.input_shapes)[:shapes_w])
        if stacks:
            vals.append(_trim(e.stack[0], src_w) if e.stack else "")
        out.append(row_fmt.format(*vals))
        if stacks and e.stack:
            blank = [""] * (len(headers) - 1)
            for frame in e.stack[1:]:
                out.append(row_fmt.format(*blank, _trim(frame, src_w)))
            out.append(row_fmt.format(*blank, ""))
    out.append(sep)
    out.append(f"Self CPU time total: {_format_time(total_self, unit)}")
    if has_device_time:
        out.append(f"Self {dev} time total: {_format_time(total_dev, unit)}")
    return "\n".join(out) + "\n"


def _trim(path: str, width: int) -> str:
    if len(path) > width:
        path = path[len(path) - width:]
        if len(path) > 3:
            path = "..." + path[3:]
    return path


# ---------------------------------------------------------------------- the Chrome trace
def chrome_trace(events, base_ns: int = 0, memory: list | None = None,
                 metadata: dict | None = None) -> dict:
    """The trace-event JSON object of ``events`` (complete "X" events on the host thread, one
    per kernel interval on the device's stream track, flow arrows from an op to its kernels,
    "i" instant events for the allocations when memory was profiled)."""
    pid = os.getpid()
    trace = []
    flow = 0
    for e in events:
        args = {"External id": e.id}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
        if e.sequence_nr >= 0:
            args["Sequence number"] = e.sequence_nr
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        trace.append({"ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
                      "name": e.trace_name, "pid": pid, "tid": e.thread, "ts": e.start_us,
                      "dur": e.cpu_time_total, "args": args})
        for name, device, stream, start, dur in e.kernels:
            flow += 1
            trace.append({"ph": "X", "cat": "kernel", "name": name, "pid": device,
                          "tid": stream, "ts": start, "dur": dur,
                          "args": {"External id": e.id, "device": device, "stream": stream,
                                   "correlation": flow}})
            trace.append({"ph": "s", "id": flow, "pid": pid, "tid": e.thread, "ts": e.start_us,
                          "cat": "ac2g", "name": "ac2g"})
            trace.append({"ph": "f", "id": flow, "pid": device, "tid": stream, "ts": start,
                          "cat": "ac2g", "name": "ac2g", "bp": "e"})
    for ts, nbytes, device, thread in memory or ():
        trace.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                      "pid": pid, "tid": thread, "ts": ts,
                      "args": {"Device Type": 0 if device < 0 else 1,
                               "Device Id": device, "Bytes": nbytes}})
    out = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": trace,
           "displayTimeUnit": "ms", "baseTimeNanoseconds": base_ns}
    out.update(metadata or {})
    return out


def export_chrome_trace(events, path, base_ns: int = 0, memory=None, metadata=None) -> None:
    data = chrome_trace(events, base_ns, memory, metadata)
    if str(path).endswith(".gz"):
        import gzip
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(data, f)
    else:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)
