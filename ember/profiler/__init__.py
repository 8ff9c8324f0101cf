"""``ember.profiler``: PyTorch's profiler API over ember's recorder (``ember.autograd.profiler``).

``profile(activities=, schedule=, on_trace_ready=, record_shapes=, profile_memory=,
with_stack=)`` records the op calls of the thread that starts it; ``prof.step()`` moves the
schedule on (``schedule(wait=, warmup=, active=, repeat=, skip_first=, skip_first_wait=)``
says, per step, whether to record, and when a cycle's trace is ready for ``on_trace_ready``,
e.g. ``tensorboard_trace_handler(dir)``). With a schedule, each step is a
``ProfilerStep#<n>`` range in the trace. Results: ``key_averages(group_by_input_shape=)``,
``events()``, ``export_chrome_trace(path)``, ``export_stacks(path)``.
``ProfilerActivity.CUDA`` adds each CUDA op's device time (CUDA events on its stream).
"""

from __future__ import annotations

import enum
import json
import os
import socket
import time
import warnings
from collections.abc import Callable, Iterable

from ..autograd.profiler import _Recorder, record_function
from ..autograd.profiler_util import export_chrome_trace as _export

__all__ = ["profile", "schedule", "ProfilerAction", "ProfilerActivity", "record_function",
           "tensorboard_trace_handler", "supported_activities", "_KinetoProfile"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5

    @property
    def name(self):
        return self._name_


def supported_activities() -> set:
    """The activities this build can profile: the CPU, and CUDA where a GPU is usable."""
    from .. import cuda
    acts = {ProfilerActivity.CPU}
    if cuda.is_available():
        acts.add(ProfilerActivity.CUDA)
    return acts


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable:
    """The action for each step: after ``skip_first`` steps, cycles of ``wait`` idle,
    ``warmup`` warming and ``active`` recording steps (the last one saves), ``repeat`` times
    (0: for ever); ``skip_first_wait`` leaves out the first cycle's wait."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), "
            f"warmup={warmup} (need >= 0), active={active} (need > 0), repeat={repeat} "
            f"(need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        k = step - skip_first + (wait if skip_first_wait else 0)
        if repeat > 0 and k / cycle >= repeat:
            return ProfilerAction.NONE
        pos = k % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def _always_record(_step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False, use_python_export: bool = False):
    """``on_trace_ready`` that writes each trace to ``dir_name`` as
    ``<worker>.<ns>.pt.trace.json[.gz]`` (worker: host name and process id)."""

    def handler(prof) -> None:
        nonlocal worker_name
        if not os.path.isdir(dir_name):
            try:
                os.makedirs(dir_name, exist_ok=True)
            except Exception as e:
                raise RuntimeError("Can't create directory: " + dir_name) from e
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker_name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler


class _KinetoProfile:
    """Recording without a schedule: ``start()`` ... ``stop()``."""

    def __init__(self, *, activities: Iterable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_flops: bool = False, with_modules: bool = False,
                 experimental_config=None, execution_trace_observer=None,
                 acc_events: bool = False, custom_trace_id_callback=None):
        acts = set(activities) if activities else supported_activities()
        for a in acts:
            if not isinstance(a, ProfilerActivity):
                raise AssertionError(f"Unsupported profiler activity: {a}")
        self.activities = acts
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.with_flops, self.with_modules = with_stack, with_flops, with_modules
        self.acc_events = acc_events
        self.metadata: dict = {}
        self._recorder: _Recorder | None = None
        self._events = None
        self._memory: list = []

    # the recording
    def prepare_trace(self) -> None:
        self._recorder = _Recorder(self.record_shapes, self.profile_memory, self.with_stack,
                                   ProfilerActivity.CUDA in self.activities, self.with_flops)

    def start_trace(self) -> None:
        if self._recorder is None:
            self.prepare_trace()
        self._recorder.start()

    def stop_trace(self) -> None:
        rec = self._recorder
        if rec is None or not rec.active:
            return
        rec.stop()
        evs = rec.events()
        if self.acc_events and self._events is not None:
            evs = type(evs)(list(self._events) + list(evs), use_device=evs._use_device,
                            profile_memory=evs._profile_memory, with_flops=evs._with_flops)
            self._memory = self._memory + rec.memory
        else:
            self._memory = list(rec.memory)
        self._events = evs

    def start(self) -> None:
        self.prepare_trace()
        self.start_trace()

    def stop(self) -> None:
        self.stop_trace()

    # the results
    def events(self):
        """The recorded events (None before a recording ends)."""
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False):
        if self._events is None:
            raise RuntimeError("Profiler didn't finish running")
        if group_by_input_shape and not self.record_shapes:
            raise AssertionError("group_by_input_shape requires record_shapes=True")
        return self._events.key_averages(group_by_input_shape, group_by_stack_n,
                                         group_by_overload_name)

    def export_chrome_trace(self, path: str) -> None:
        if self._events is None:
            raise RuntimeError("Profiler didn't finish running")
        meta = {"traceName": str(path)}
        if self.metadata:
            meta["metadata"] = dict(self.metadata)
        base = self._recorder.base_ns if self._recorder else 0
        _export(self._events, path, base, self._memory, meta)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Each event's stack and its ``metric`` (microseconds) as flame-graph lines."""
        if not self.with_stack:
            raise AssertionError("export_stacks() requires with_stack=True")
        with open(path, "w") as f:
            for e in self._events or ():
                if e.stack:
                    value = getattr(e, metric.replace("cuda", "device"))
                    if value > 0:
                        f.write(";".join(reversed(e.stack)) + f";{e.name} {int(value)}\n")

    def add_metadata(self, key: str, value: str) -> None:
        self.metadata[key] = value

    def add_metadata_json(self, key: str, value: str) -> None:
        self.metadata[key] = json.loads(value)


class profile(_KinetoProfile):
    """The profiler: ``with profile(activities=..., schedule=..., on_trace_ready=...) as p:``
    and ``p.step()`` at each step's end."""

    def __init__(self, *, activities=None, schedule: Callable | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_flops: bool = False, with_modules: bool = False,
                 experimental_config=None, execution_trace_observer=None,
                 acc_events: bool = False, use_cuda: bool | None = None,
                 custom_trace_id_callback=None):
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead",
                          FutureWarning, stacklevel=2)
            activities = set(activities or {ProfilerActivity.CPU})
            if use_cuda:
                activities.add(ProfilerActivity.CUDA)
            else:
                activities.discard(ProfilerActivity.CUDA)
        super().__init__(activities=activities, record_shapes=record_shapes,
                         profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules,
                         acc_events=acc_events)
        self.schedule = schedule if schedule else _always_record
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self._step_range = None

    def _trace_ready(self) -> None:
        if self.on_trace_ready:
            self.on_trace_ready(self)

    def _transit(self, prev, now) -> None:
        A = ProfilerAction
        recording = (A.RECORD, A.RECORD_AND_SAVE)
        if prev == A.NONE and now in (A.WARMUP, *recording):
            self.prepare_trace()
            if now in recording:
                self.start_trace()
        elif prev == A.WARMUP:
            if now in recording:
                self.start_trace()
            elif now in (A.NONE, None):
                if now is A.NONE:
                    warnings.warn("Incorrect schedule: WARMUP followed by NONE", stacklevel=3)
                self.start_trace()
                self.stop_trace()
        elif prev == A.RECORD:
            if now in (A.NONE, A.WARMUP):
                warnings.warn(f"Incorrect schedule: RECORD followed by {now.name}",
                              stacklevel=3)
                self.stop_trace()
            elif now is None:
                self.stop_trace()
                self._trace_ready()
        elif prev == A.RECORD_AND_SAVE:
            self.stop_trace()
            self._trace_ready()
            if now in (A.WARMUP, *recording):
                self.prepare_trace()
                if now in recording:
                    self.start_trace()

    def _enter_step(self) -> None:
        rec = self._recorder
        if self.record_steps and rec is not None and rec.active:
            self._step_range = (rec, rec.push(f"ProfilerStep#{self.step_num}"))

    def _exit_step(self) -> None:
        if self._step_range is not None:
            rec, r = self._step_range
            if rec.active:
                rec.pop(r)
            self._step_range = None

    def start(self) -> None:
        self._transit(ProfilerAction.NONE, self.current_action)
        self._enter_step()

    def stop(self) -> None:
        self._exit_step()
        self._transit(self.current_action, None)

    def step(self) -> None:
        """The current step ends: the schedule decides what the next one does."""
        self._exit_step()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(prev, self.current_action)
        self._enter_step()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
