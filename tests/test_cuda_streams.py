"""Streams, events, memory and fork safety on a real GPU (the GPU tier: ``-m cuda``).

Order across streams is shown with a kernel that keeps a stream busy for tens of
milliseconds (``spin``: a user's Triton kernel reading the GPU's timer, tests/_user_kernels):
work queued behind it on one stream is still pending when the host looks, and work on
another stream runs or waits as the streams and events say. The CPU side of these features
(no GPU, the fork hook, the messages): tests/test_streams_memory.py.
"""

from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

pytestmark = GPU_TIER
torch = pytest.importorskip("torch")


def _kernels():
    import _user_kernels
    return _user_kernels


def spin(ms: float):
    """Queue a kernel on the current stream that is busy for ``ms`` milliseconds; its
    output (int64, on the GPU) is the time it spun, in nanoseconds."""
    out = ember.zeros(1, dtype=ember.int64, device="cuda")
    _kernels().spin_kernel[(1,)](out, int(ms * 1e6))
    return out


# ---------------------------------------------------------------------- streams
def test_current_default_and_selected_streams():
    cuda = ember.cuda
    default = cuda.default_stream()
    assert cuda.current_stream() == default and default.cuda_stream in (0, 2)
    assert default.device == ember.device("cuda", 0) and default.device_index == 0
    s1, s2 = cuda.Stream(), cuda.Stream()
    assert s1 != s2 and s1 != default and len({s1, s1, s2}) == 2
    assert s1.cuda_stream not in (0, 2) and s1.device == ember.device("cuda", 0)
    with cuda.stream(s1):
        assert cuda.current_stream() == s1
        import cupy
        assert cupy.cuda.get_current_stream().ptr == s1.cuda_stream  # ember's is CuPy's
        with cuda.stream(s2):
            assert cuda.current_stream() == s2
        with cuda.stream(None):
            assert cuda.current_stream() == s1
        assert cuda.current_stream() == s1
    assert cuda.current_stream() == default
    with s2:
        assert cuda.current_stream() == s2
    cuda.set_stream(s1)
    try:
        assert cuda.current_stream() == s1
        with cuda.stream(s2):
            pass
        assert cuda.current_stream() == s1  # the block gives back what was current
    finally:
        cuda.set_stream(default)
    assert cuda.current_stream() == default
    assert cuda.Stream(priority=-1).priority == torch.cuda.Stream(priority=-1).priority
    assert -100 < cuda.Stream(priority=-100).priority < 0  # clamped into the device's range
    assert s1.query() and s1.synchronize() is None
    assert f"cuda_stream={s1.cuda_stream:#x}" in repr(s1)


def test_wait_stream_orders_work_across_streams():
    a = ember.zeros(1 << 16, device="cuda")
    spin(1)
    a.fill_(1.0)
    (a + 1).sum()  # every kernel below compiled first: the spin must outlast the host's work
    ember.cuda.synchronize()
    s1, s2 = ember.cuda.Stream(), ember.cuda.Stream()
    with ember.cuda.stream(s1):
        spin(200)
        a.fill_(1.0)  # queued behind the spin
    s2.wait_stream(s1)
    with ember.cuda.stream(s2):
        b = a + 1  # must see the fill
    assert not s1.query() and not s2.query()
    s2.synchronize()
    assert s1.query()
    assert b.cpu().numpy().min() == 2.0 and b.cpu().numpy().max() == 2.0


def test_events_record_wait_query_and_time():
    e = ember.cuda.Event()
    assert e.query() and e.cuda_event == 0 and "uninitialized" in repr(e)
    x = ember.zeros(1024, device="cuda")
    ember.cuda.synchronize()
    s1, s2 = ember.cuda.Stream(), ember.cuda.Stream()
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    with ember.cuda.stream(s1):
        start.record()
        spin(40)
        x.fill_(3.0)
        end.record()
        marked = s1.record_event()
    assert not marked.query() and not end.query()
    marked.wait(s2)
    with ember.cuda.stream(s2):
        y = x * 2
    end.synchronize()
    assert end.query() and marked.query()
    assert 30.0 < start.elapsed_time(end) < 5000.0
    s2.synchronize()
    assert y.cpu().tolist() == [6.0] * 1024
    assert end.device == ember.device("cuda", 0)


def test_event_errors_match_torch():
    def outcome(m, fn):
        try:
            fn(m)
        except Exception as ex:  # noqa: BLE001 - compared
            return type(ex).__name__, str(ex)
        return None

    plain = lambda m: m.cuda.Event().elapsed_time(m.cuda.Event())  # noqa: E731
    unrecorded = lambda m: m.cuda.Event(enable_timing=True).elapsed_time(  # noqa: E731
        m.cuda.Event(enable_timing=True))
    for f in (plain, unrecorded):
        assert outcome(ember, f) == outcome(torch, f)

    def busy(m):
        start, end = m.cuda.Event(enable_timing=True), m.cuda.Event(enable_timing=True)
        start.record()
        if m is ember:
            spin(40)
        else:
            torch.cuda._sleep(100_000_000)  # clock cycles: tens of milliseconds
        end.record()
        return start.elapsed_time(end)

    assert outcome(ember, busy) == outcome(torch, busy)  # not completed yet
    ember.cuda.synchronize()
    torch.cuda.synchronize()
    s = ember.cuda.Event()
    s.record()
    s.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        s.elapsed_time(s)  # recorded and completed, without timing


def test_device_generic_stream_and_event_on_cuda():
    s = ember.Stream("cuda")
    assert s.device == ember.device("cuda", 0) and s.device_type == 1
    assert s.native_handle == s.stream_id != 0
    start, end = ember.Event("cuda", enable_timing=True), ember.Event("cuda",
                                                                     enable_timing=True)
    with s:
        start.record(s)
        spin(20)
        end.record(s)
    end.synchronize()
    assert start.elapsed_time(end) > 10.0 and s.query()


# ---------------------------------------------------------------------- memory
def test_record_stream_keeps_a_block_until_the_stream_is_done():
    """A block freed while another stream uses it goes back to the pool only after that
    stream's work is done; freed without a claim, the pool hands it out again at once."""
    ember.cuda.synchronize()
    ember.cuda.empty_cache()
    n = (64 << 20) // 4 + 384  # an unusual size: no other free block of it is cached
    x = ember.empty(n, device="cuda")
    ptr = x.data_ptr()
    del x
    y = ember.empty(n, device="cuda")
    assert y.data_ptr() == ptr  # the pool reuses a block freed without a claim
    s = ember.cuda.Stream()
    (y * 2).sum()  # kernels compiled first: the spin must outlast the host's work
    with ember.cuda.stream(s):
        spin(300)
        z = y * 2  # reads y's block on s, after the spin
    y.record_stream(s)
    del y
    held = ember.empty(n, device="cuda")
    assert held.data_ptr() != ptr  # still claimed by s
    assert ember.cuda.memory_stats()["num_pending_frees"] >= 1
    s.synchronize()
    again = ember.empty(n, device="cuda")
    assert again.data_ptr() == ptr  # released once s is done
    del z, held, again


def test_out_of_memory_raises_names_sizes_and_leaves_the_process_working():
    ember.cuda.empty_cache()
    ooms = ember.cuda.memory_stats()["num_ooms"]
    with pytest.raises(ember.cuda.OutOfMemoryError) as e:
        ember.empty(10 * 2 ** 40, dtype=ember.uint8, device="cuda")
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, ember.OutOfMemoryError)
    msg = str(e.value)
    assert msg.startswith("CUDA out of memory. Tried to allocate 10240.00 GiB. GPU 0 has a "
                          "total capacity of ")
    with pytest.raises(torch.OutOfMemoryError) as t:
        torch.empty(10 * 2 ** 40, dtype=torch.uint8, device="cuda")
    assert msg.split(" of which")[0] == str(t.value).split(" of which")[0]
    assert ember.cuda.memory_stats()["num_ooms"] == ooms + 1
    x = ember.ones(1000, device="cuda") * 2  # the process goes on
    assert x.sum().item() == 2000.0
    block = ember.empty(64 << 20, dtype=ember.uint8, device="cuda")
    del block
    gc.collect()
    cached = ember.cuda.memory_reserved()
    ember.cuda.empty_cache()
    assert ember.cuda.memory_reserved() <= cached - (64 << 20)


def test_memory_numbers_follow_allocations():
    cuda = ember.cuda
    cuda.synchronize()
    cuda.empty_cache()  # frees waiting on streams (all done now) go before counting
    cuda.reset_peak_memory_stats()
    base = cuda.memory_allocated()
    assert cuda.max_memory_allocated() == base
    x = ember.empty(32 << 20, dtype=ember.uint8, device="cuda")
    assert cuda.memory_allocated() >= base + (32 << 20)
    assert cuda.memory_reserved() >= cuda.memory_allocated()
    del x
    assert cuda.memory_allocated() == base
    assert cuda.max_memory_allocated() >= base + (32 << 20)
    assert cuda.max_memory_reserved() >= cuda.memory_reserved()
    cuda.reset_peak_memory_stats()
    assert cuda.max_memory_allocated() == cuda.memory_allocated()
    stats = cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == cuda.memory_allocated()
    table = cuda.memory_summary()
    assert "ember CUDA memory summary, device ID 0" in table and "| Allocated memory" in table
    free, total = cuda.mem_get_info()
    assert 0 < free <= total == torch.cuda.mem_get_info()[1]
    assert cuda.is_initialized()


def test_forked_child_cannot_use_cuda():
    ember.ones(1, device="cuda").sum().item()  # CUDA is initialised here
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: try CUDA, report, leave at once
        try:
            os.close(r)
            out = []
            for fn in (lambda: ember.ones(2, device="cuda"), ember.cuda.current_device,
                       ember.cuda.synchronize):
                try:
                    fn()
                    out.append("no error")
                except RuntimeError as e:
                    out.append(str(e))
            out.append(str(ember.cuda.is_initialized()))
            os.write(w, "\n".join(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.monotonic() + 60
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            pytest.fail("the forked child hung")
        time.sleep(0.05)
    with os.fdopen(r, "rb") as f:
        lines = f.read().decode().split("\n")
    want = ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
            "multiprocessing, you must use the 'spawn' start method")
    assert lines == [want, want, want, "False"]
    assert (ember.ones(2, device="cuda") + 1).sum().item() == 4.0  # the parent goes on


def test_forked_dataloader_workers_after_cuda_was_used():
    """Workers forked from a process whose CUDA generator holds device state seed themselves
    without reaching the device (it would raise there) and load CPU batches."""
    ember.randn(4, device="cuda").sum().item()
    data = ember.utils.data.TensorDataset(ember.arange(8.0))
    loader = ember.utils.data.DataLoader(data, batch_size=4, num_workers=2,
                                         multiprocessing_context="fork")
    assert [b[0].tolist() for b in loader] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]


# ---------------------------------------------------------------------- pinned host memory
def test_pinned_memory_and_asynchronous_copies():
    x = ember.arange(1 << 18, dtype=ember.float32)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p.pin_memory() is p and p.tolist() == x.tolist()
    for t in (ember.ones(3, pin_memory=True), ember.empty(2, 3, pin_memory=True),
              ember.tensor([1.0, 2.0], pin_memory=True)):
        assert t.is_pinned() and t.device == ember.device("cpu")
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        g = p.to("cuda", non_blocking=True)
    s.synchronize()
    np.testing.assert_array_equal(g.cpu().numpy(), x.numpy())
    g2 = p.cuda()  # blocking: p may change at once
    p.fill_(0.0)
    np.testing.assert_array_equal(g2.cpu().numpy(), x.numpy())
    with pytest.raises(RuntimeError) as e:
        ember.ones(2, device="cuda").pin_memory()
    with pytest.raises(RuntimeError) as t:
        torch.ones(2, device="cuda").pin_memory()
    assert str(e.value) == str(t.value).replace("torch", "ember")


@pytest.mark.xfail(strict=False, reason="flaky on the H200 (2026-11-26: passed in one run, "
                   "failed in the next): a non_blocking copy from pinned memory sometimes waits "
                   "for the stream's earlier work; with a first non_blocking copy on the same "
                   "stream s before the spin it failed 5 runs of 5 (2026-11-27), so the wait "
                   "follows an earlier copy on that stream (issue 14: remaining)")
def test_a_non_blocking_copy_from_pinned_memory_returns_at_once():
    p = ember.arange(1 << 18, dtype=ember.float32).pin_memory()
    s = ember.cuda.Stream()
    p.to("cuda", non_blocking=True)  # first-use costs paid before the spin
    spin(1)
    ember.cuda.synchronize()
    with ember.cuda.stream(s):
        spin(300)
        g = p.to("cuda", non_blocking=True)  # queued on s, behind the spin
        assert not s.query()
    s.synchronize()
    np.testing.assert_array_equal(g.cpu().numpy(), p.numpy())


def test_dataloader_pins_batches_with_a_gpu():
    data = ember.utils.data.TensorDataset(ember.arange(8.0), ember.arange(8))
    batches = list(ember.utils.data.DataLoader(data, batch_size=4, pin_memory=True))
    assert len(batches) == 2 and all(t.is_pinned() for b in batches for t in b)
    assert batches[1][0].tolist() == [4.0, 5.0, 6.0, 7.0]


# ---------------------------------------------------------------------- a user's Triton kernels
def test_user_triton_kernel_on_ember_tensors():
    x, y = ember.randn(1000, device="cuda"), ember.randn(1000, device="cuda")
    out = ember.empty_like(x)
    _kernels().add_kernel[(8,)](x, y, out, 1000, BLOCK=128)
    np.testing.assert_allclose(out.cpu().numpy(), (x + y).cpu().numpy(), rtol=1e-6)


def test_user_triton_kernel_runs_on_embers_current_stream():
    from triton.runtime import driver
    ember.cuda.synchronize()
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        assert driver.active.get_current_stream() == s.cuda_stream
        spun = spin(60)
        assert not s.query()  # the kernel went to s ...
        assert ember.cuda.default_stream().query()  # ... not to the default stream
    s.synchronize()
    assert spun.item() >= 60_000_000
    assert driver.active.get_current_stream() == torch.cuda.current_stream().cuda_stream
