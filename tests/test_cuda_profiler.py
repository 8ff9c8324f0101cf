"""GPU tier: the profiler's device times (CUDA events on the op's stream) against torch's CUDA
profiler on the same work, and the device intervals in the Chrome trace."""

import json

import numpy as np

import ember
import ember.profiler as eprof
from test_cuda import GPU_TIER, torch
from test_profiler import validate_trace

pytestmark = GPU_TIER

N = 2048


def _mm_device_us(lib, pm, x):
    """Device microseconds per mm over 5 profiled calls (after a warm-up)."""
    x.mm(x)
    lib.cuda.synchronize()
    with pm.profile(activities=[pm.ProfilerActivity.CPU, pm.ProfilerActivity.CUDA]) as p:
        for _ in range(5):
            x.mm(x)
        lib.cuda.synchronize()
    avg = {e.key: e for e in p.key_averages()}
    return avg["aten::mm"].device_time_total / 5, p


def test_mm_device_time_close_to_torch():
    a = np.random.default_rng(0).standard_normal((N, N)).astype(np.float32)
    e_us, p = _mm_device_us(ember, eprof, ember.tensor(a).cuda())
    t_us, _ = _mm_device_us(torch, torch.profiler, torch.tensor(a).cuda())
    assert e_us > 0 and t_us > 0
    # the same cuBLAS work: within a factor of 3 either way (ember's includes the op's whole
    # stream interval, launches and any copies, torch's only its kernels)
    assert t_us / 3 < e_us < t_us * 3, (e_us, t_us)
    table = p.key_averages().table(sort_by="cuda_time_total")
    assert "Self CUDA" in table and "CUDA total" in table and "Self CUDA time total" in table


def test_device_intervals_in_the_trace(tmp_path):
    x = ember.randn(N, N, device="cuda")
    x.mm(x)
    with eprof.profile(activities=[eprof.ProfilerActivity.CPU,
                                   eprof.ProfilerActivity.CUDA]) as p:
        with eprof.record_function("block"):
            y = x.mm(x).relu()
        ember.cuda.synchronize()
    path = str(tmp_path / "trace.json")
    p.export_chrome_trace(path)
    data = json.load(open(path))
    validate_trace(data)
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "kernel"]
    ops = {e["args"]["External id"]: e for e in data["traceEvents"]
           if e.get("cat") == "cpu_op"}
    assert {k["name"] for k in kernels} >= {"aten::mm", "aten::relu"}
    block = next(e for e in data["traceEvents"] if e["name"] == "block")
    for k in kernels:
        op = ops[k["args"]["External id"]]
        assert k["ts"] + 50 >= op["ts"]  # a kernel starts after its launch (50 us slack)
        assert k["ts"] >= block["ts"] - 50
    flows = [e for e in data["traceEvents"] if e.get("cat") == "ac2g"]
    assert len(flows) == 2 * len(kernels)
    assert y.device.type == "cuda"


def test_profiler_off_leaves_cuda_ops_alone():
    x = ember.randn(64, 64, device="cuda")
    with eprof.profile(activities=[eprof.ProfilerActivity.CPU]) as p:
        x.sin()
    (ev,) = [e for e in p.events() if e.name == "aten::sin"]
    assert ev.device_time_total == 0 and not ev.kernels
    from ember._dispatch import STATE
    assert STATE.top is None
