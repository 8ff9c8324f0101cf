"""Streams, events, pinned memory, the out-of-memory error and fork safety where no GPU is:
what PyTorch's CPU build answers, the allocator's message and bookkeeping from given numbers,
the at-fork hook (directly and across a real fork), and a user's Triton kernels compiled for
sm_90 with ember tensors' types. The same features on a GPU: tests/test_cuda_streams.py."""

from __future__ import annotations

import os
import warnings

import pytest

import ember
from ember.backends.cuda import memory, runtime
from ember.cuda.memory import summary_table
from triton_util import compile_for_sm90

torch = pytest.importorskip("torch")

cpu_only = pytest.mark.skipif(ember.cuda.is_available() or torch.cuda.is_available(),
                              reason="PyTorch's CPU-build answers: where no GPU is")


def outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - the type and message are compared
        return type(e).__name__, str(e)


# ---------------------------------------------------------------------- without a GPU
@cpu_only
def test_streams_and_events_without_cuda_answer_as_torch_cpu():
    for name in ("Stream", "Event"):
        assert outcome(getattr(ember.cuda, name))[0] == \
            outcome(getattr(torch.cuda, name))[0] == "RuntimeError"
    for name in ("current_stream", "default_stream"):
        assert outcome(getattr(ember.cuda, name))[0] == \
            outcome(getattr(torch.cuda, name))[0] == "AssertionError"
    assert ember.cuda.set_stream(None) is None
    for m in (ember, torch):
        with m.cuda.stream(None) as s:
            assert s is None
        assert isinstance(m.cuda.stream(None), m.cuda.StreamContext)
    with pytest.raises(RuntimeError, match="unknown parameter type"):
        torch.ones(2).record_stream(None)
    with pytest.raises(RuntimeError, match="unknown parameter type"):
        ember.ones(2).record_stream(None)
    with pytest.raises(RuntimeError, match="unknown parameter type"):
        ember.ones(2).record_stream(ember.Stream())  # a CPU stream is no CUDA stream


@cpu_only
def test_device_generic_stream_and_event_match_torch_cpu():
    for m in (ember, torch):
        s, e = m.Stream(), m.Event(enable_timing=True)
        assert s.device == m.device("cpu") and s.device_index == -1 and s.device_type == 0
        assert s.stream_id == 0 and s.query() is True and s.synchronize() is None
        assert s == m.Stream() and hash(s) == hash(m.Stream())
        assert e.query() is True and e.synchronize() is None and e.wait() is None
        assert s.wait_event(e) is None
        assert m.Stream(device="meta").device_type == 14
        with s as inside:
            assert inside is s
    pairs = [lambda m: m.Event().record(), lambda m: m.Stream().record_event(),
             lambda m: m.Stream().wait_stream(m.Stream()),
             lambda m: m.Event(device="meta").record(),
             lambda m: m.Event().elapsed_time(m.Event()),
             lambda m: m.Event(enable_timing=True).elapsed_time(m.Event(enable_timing=True)),
             lambda m: m.Stream(0), lambda m: m.Stream().native_handle,
             lambda m: m.Stream("cuda"), lambda m: m.Stream("cpu", 3)]
    for f in pairs:
        got, want = outcome(lambda: f(ember)), outcome(lambda: f(torch))
        assert got[0] == want[0], (got, want)
        if want[0] in ("RuntimeError", "ValueError") and "linked" not in want[1]:
            assert got[1] == want[1]
    assert repr(ember.Stream()) == repr(torch.Stream()).replace("torch", "ember")
    assert repr(ember.Event(enable_timing=True)) == \
        repr(torch.Event(enable_timing=True)).replace("torch", "ember")


@cpu_only
def test_pin_memory_without_a_gpu_raises_as_torch_cpu():
    for m in (ember, torch):
        assert m.ones(2).is_pinned() is False
    assert outcome(lambda: ember.ones(2).pin_memory()) == \
        outcome(lambda: torch.ones(2).pin_memory())
    factories = [lambda m: m.ones(2, pin_memory=True), lambda m: m.zeros(2, 3, pin_memory=True),
                 lambda m: m.empty(2, pin_memory=True), lambda m: m.full((2,), 1.0,
                                                                           pin_memory=True),
                 lambda m: m.tensor([1.0], pin_memory=True), lambda m: m.arange(3, pin_memory=True),
                 lambda m: m.eye(2, pin_memory=True), lambda m: m.randn(2, pin_memory=True),
                 lambda m: m.empty_strided((2,), (1,), pin_memory=True)]
    for f in factories:
        assert outcome(lambda: f(ember)) == outcome(lambda: f(torch))
    assert ember.zeros(2, pin_memory=False).tolist() == [0.0, 0.0]
    assert outcome(lambda: ember.ones(2, device="meta", pin_memory=True))[0] == "RuntimeError"


@cpu_only
def test_dataloader_pin_memory_without_a_gpu_warns_as_torch():
    got, want = [], []
    for m, out in ((ember, got), (torch, want)):
        data = m.utils.data.TensorDataset(m.arange(6.0))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            batches = list(m.utils.data.DataLoader(data, batch_size=4, pin_memory=True))
        out.append([str(x.message) for x in w if "pin_memory" in str(x.message)])
        out.append([[t.tolist() for t in b] for b in batches])
        assert not any(t.is_pinned() for b in batches for t in b)
    assert got == want and got[0]


@cpu_only
def test_memory_numbers_and_summary_without_a_gpu():
    assert ember.cuda.max_memory_reserved() == ember.cuda.memory_reserved() == 0
    assert ember.cuda.memory_stats() == {}
    ember.cuda.empty_cache()
    table = ember.cuda.memory_summary()
    assert "ember CUDA memory summary, device ID 0" in table and "CUDA OOMs: 0" in table
    assert "| Allocated memory" in table and "Frees waiting on streams" in table
    assert "Frees waiting" not in ember.cuda.memory_summary(abbreviated=True)
    assert "device ID 1" in ember.cuda.memory_summary("cuda:1")


# ---------------------------------------------------------------------- from given numbers
def test_sizes_print_as_pytorch_prints_them():
    cases = {0: "0 bytes", 1024: "1024 bytes", 1025: "1.00 KiB", 2 ** 20: "1024.00 KiB",
             2 ** 20 + 1: "1.00 MiB", 2 ** 30: "1024.00 MiB", 3 * 2 ** 30 // 2: "1.50 GiB",
             10 * 2 ** 40: "10240.00 GiB"}
    assert {n: memory.format_size(n) for n in cases} == cases


def test_out_of_memory_message_names_the_sizes():
    msg = memory.oom_message(10 * 2 ** 40, 0, 80 * 2 ** 30, 79 * 2 ** 30, 512 * 2 ** 20,
                             514 * 2 ** 20)
    assert msg.startswith("CUDA out of memory. Tried to allocate 10240.00 GiB. GPU 0 has a "
                          "total capacity of 80.00 GiB of which 79.00 GiB is free. ")
    assert "512.00 MiB is allocated by ember, and 2.00 MiB is reserved by ember but " \
        "unallocated" in msg
    assert issubclass(ember.cuda.OutOfMemoryError, RuntimeError)
    assert ember.cuda.OutOfMemoryError is ember.OutOfMemoryError


def test_summary_table_of_given_numbers():
    stats = {"allocated_bytes.all.current": 3 * 2 ** 20, "allocated_bytes.all.peak": 5 * 2 ** 30,
             "reserved_bytes.all.current": 4 * 2 ** 20, "reserved_bytes.all.peak": 6 * 2 ** 30,
             "inactive_split_bytes.all.current": 2 ** 20, "num_ooms": 2,
             "num_alloc_retries": 3, "num_pending_frees": 1, "inactive_split.all.current": 4}
    lines = summary_table(1, stats).splitlines()
    assert len({len(line) for line in lines}) == 1  # a rectangle
    row = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:4]]
           for line in lines if line.count("|") == 4}
    assert row["Allocated memory"] == ["3.00 MiB", "5.00 GiB"]
    assert row["Reserved memory"] == ["4.00 MiB", "6.00 GiB"]
    assert row["Reserved, not allocated"] == ["1.00 MiB", ""]
    assert row["Frees waiting on streams"] == ["1", ""]
    assert "CUDA OOMs: 2" in lines[3] and "cudaMalloc retries: 3" in lines[3]


class _Mark:
    """An event's protocol (``done``, ``synchronize``), as memory.sweep reads CuPy's."""

    def __init__(self, done):
        self.done, self.waited = done, False

    def synchronize(self):
        self.waited = self.done = True


def test_sweep_releases_what_streams_are_done_with(monkeypatch):
    pending = []
    monkeypatch.setattr(memory, "_PENDING", pending)
    done, busy = _Mark(True), _Mark(False)
    pending += [([done], "a"), ([done, busy], "b"), ([], "c")]
    memory.sweep()
    assert [held for _, held in pending] == ["b"] and not busy.waited
    memory.sweep(wait=True)
    assert pending == [] and busy.waited


# ---------------------------------------------------------------------- fork safety
@pytest.fixture
def initialised(monkeypatch):
    """CUDA counted as initialised in this process (one GPU), as ``runtime.cupy()`` leaves
    it; the state is restored afterwards."""
    monkeypatch.setattr(runtime, "_STATE", {"cp": object(), "count": 1, "bad_fork": False})
    return runtime._STATE


def test_fork_hook_marks_a_child_of_an_initialised_parent(initialised):
    assert runtime.initialized() and not runtime.in_bad_fork()
    runtime.check_fork()  # the parent may use CUDA
    runtime.after_fork_in_child()
    assert runtime.in_bad_fork() and not runtime.initialized()
    for call in (runtime.check_fork, runtime.cupy):
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value) == ("Cannot re-initialize CUDA in forked subprocess. To use CUDA "
                                "with multiprocessing, you must use the 'spawn' start method")
    assert runtime.device_count() == 1  # the parent's count, without touching CUDA


def test_fork_hook_leaves_a_child_of_an_uninitialised_parent(monkeypatch):
    monkeypatch.setattr(runtime, "_STATE", {"cp": None, "count": 0, "bad_fork": False})
    runtime.after_fork_in_child()
    assert not runtime.in_bad_fork()
    runtime.check_fork()


class _SeedLog:
    """A device generator's ``manual_seed``, as philox.manual_seed_all calls it."""

    def __init__(self):
        self.seeds = []

    def manual_seed(self, seed):
        self.seeds.append(seed)


def test_seeding_in_a_bad_fork_records_the_seed_without_the_device(initialised, monkeypatch):
    """A DataLoader worker forked from a process that used CUDA seeds itself: the devices'
    generators cannot be reached there, so the seed is only recorded (PyTorch defers it)."""
    from ember.backends.cuda import philox
    state = _SeedLog()
    monkeypatch.setattr(philox, "_DEFAULTS", {("cuda", 0): state})
    monkeypatch.setattr(philox, "_SEED_ALL", [None])
    philox.manual_seed_all(5)
    assert state.seeds == [5]
    runtime.after_fork_in_child()
    philox.manual_seed_all(7)
    assert state.seeds == [5] and philox._SEED_ALL == [7]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_real_fork_runs_the_hook(initialised):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what the hook left, then leave at once
        try:
            os.close(r)
            msg = outcome(runtime.cupy)[1] if runtime.in_bad_fork() else "not marked"
            os.write(w, msg.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    os.waitpid(pid, 0)
    assert msg.startswith("Cannot re-initialize CUDA in forked subprocess.")
    assert not runtime.in_bad_fork()  # the parent is untouched


# ---------------------------------------------------------------------- a user's Triton kernels
def test_triton_reads_ember_tensors_types_as_torch_ones():
    """What Triton's JIT specialises a tensor argument on (its ``dtype`` through ``str``, its
    ``data_ptr()`` alignment) is the same for ember's tensors as for torch's."""
    mangle = pytest.importorskip("triton.runtime.jit").mangle_type
    for name in ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16",
                 "int32", "int64", "bool"):
        e, t = ember.zeros(4, dtype=getattr(ember, name)), torch.zeros(4,
                                                                       dtype=getattr(torch, name))
        assert mangle(e) == mangle(t), name
        assert mangle(e[1:]) == mangle(t[1:]), name


COMPILE = r"""
import sys
sys.path.insert(0, %r)
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import _user_kernels as K

k = triton.compile(ASTSource(K.spin_kernel, signature={"out_ptr": "*i64", "ns": "i32"},
                             constexprs={}), target=GPUTarget("cuda", 90, 32))
assert k.asm["ptx"].count("globaltimer") == 2, "the timer is read before and in the loop"
sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
triton.compile(ASTSource(K.add_kernel, signature=sig, constexprs={"BLOCK": 128}),
               target=GPUTarget("cuda", 90, 32))
print("ok")
""" % os.path.dirname(os.path.abspath(__file__))


def test_user_kernels_compile_for_sm90():
    """The kernels tests/test_cuda_streams.py launches as a user would."""
    compile_for_sm90(COMPILE)
