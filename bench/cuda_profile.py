"""Where a CUDA training step spends its time, ember beside PyTorch: each library's step runs
under torch.profiler, whose CUPTI tracing sees every kernel launched in the process (ember's
Triton, cuBLAS and CuPy kernels included). Printed per library: wall time per step, GPU kernel
time per step (the difference is time the GPU waited for the host), kernel launches per step,
and the kernels taking the most GPU time.

    python -m bench cuda_profile [gpt2|cnn|lstm|add ...] [--top N] [--host|--sample]

``add`` is a host-side cProfile of ember's 8x8 add instead (the small-op overhead);
``--host`` profiles ember's steps with cProfile instead of timing kernels; ``--sample`` samples
the stack by a timer signal instead (host time without cProfile's overhead).

Not one of the default suites: a tool for finding the next thing to speed up on the GPU.
"""

from __future__ import annotations

import collections
import gc
import os
import sys
import time

STEPS = 3


def _workloads():
    from . import cuda, gpt2

    batch = int(os.environ.get("BENCH_GPT2_BATCH", "16"))
    return {
        "gpt2": lambda name: gpt2.build(name, batch),
        "cnn": lambda name: _plain(name, cuda._cnn_step),
        "lstm": lambda name: _plain(name, cuda._lstm_layer),
    }


def _plain(name, make):
    import importlib
    lib = importlib.import_module(name)
    return lib, make(lib), None


def _short(name: str, width: int = 90) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def profile(lib_name: str, build, top: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity
    lib, step, state = build(lib_name)
    step()
    step()
    lib.cuda.synchronize()
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(STEPS):
            step()
        lib.cuda.synchronize()
        wall = (time.perf_counter() - t0) / STEPS
    kernels = collections.defaultdict(lambda: [0.0, 0])
    api = collections.defaultdict(lambda: [0.0, 0])  # CUDA runtime / driver calls on the host
    spans = []  # (start, end, name) of each kernel, in microseconds
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            spans.append((ev.time_range.start, ev.time_range.end, ev.name))
            k = kernels[ev.name]
            k[0] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
            k[1] += 1
        elif ev.name.startswith(("cuda", "cu")) and not ev.name.startswith("cudnn"):
            a = api[ev.name]
            a[0] += ev.cpu_time_total
            a[1] += 1
    gpu_us = sum(v[0] for v in kernels.values()) / STEPS
    launches = sum(v[1] for v in kernels.values()) / STEPS
    idle = max(0.0, wall * 1e3 - gpu_us / 1e3)
    print(f"\n### {lib_name}: wall {wall * 1e3:.1f} ms/step, GPU kernels {gpu_us / 1e3:.1f} "
          f"ms/step ({launches:.0f} launches/step; GPU idle {idle:.1f} ms)")
    rows = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:top]
    for name, (us, n) in rows:
        print(f"  {us / STEPS / 1e3:8.3f} ms  {n / STEPS:6.0f}x  {_short(name)}")
    _print_gaps(spans, top)
    print("  -- host time in CUDA API calls (a synchronising call waits for the GPU there)")
    for name, (us, n) in sorted(api.items(), key=lambda kv: -kv[1][0])[:12]:
        print(f"  {us / STEPS / 1e3:8.3f} ms  {n / STEPS:6.0f}x  {_short(name)}")
    del step, state
    gc.collect()
    lib.cuda.empty_cache()


def _print_gaps(spans: list, top: int) -> None:
    """Where the GPU waited for the host: the idle time before each kernel (the host was late
    issuing it), summed by the names of the kernels on either side of the gap."""
    spans.sort()
    gaps = collections.defaultdict(lambda: [0.0, 0])
    total, busy_until, prev = 0.0, None, None
    for start, end, name in spans:
        if busy_until is not None and start > busy_until:
            g = gaps[(_short(prev, 40), _short(name, 40))]
            g[0] += start - busy_until
            g[1] += 1
            total += start - busy_until
        busy_until = end if busy_until is None else max(busy_until, end)
        prev = name
    print(f"  -- GPU idle between kernels: {total / STEPS / 1e3:.2f} ms/step, by the kernels "
          f"around the gap (after -> before)")
    for (a, b), (us, n) in sorted(gaps.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {us / STEPS / 1e3:8.3f} ms  {n / STEPS:6.0f}x  {a} -> {b}")


def host_profile(top: int) -> None:
    """cProfile of ember's 8x8 add on CUDA: where the host time of one small op goes."""
    import cProfile
    import pstats

    import ember
    a = ember.ones(8, 8, device="cuda")
    b = ember.ones(8, 8, device="cuda")
    for _ in range(100):
        a + b
    ember.cuda.synchronize()
    n = 5000
    t0 = time.perf_counter()
    for _ in range(n):
        a + b
    ember.cuda.synchronize()
    print(f"\n## small op: ember 8x8 add {(time.perf_counter() - t0) / n * 1e6:.1f} us per call")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        a + b
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def host_steps(name: str, build, top: int) -> None:
    """cProfile of ember's step of workload ``name``: where its host time goes."""
    import cProfile
    import pstats
    lib, step, state = build("ember")
    step()
    step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(STEPS):
        step()
    prof.disable()
    if os.environ.get("BENCH_PSTATS_DIR"):
        prof.dump_stats(os.path.join(os.environ["BENCH_PSTATS_DIR"], f"{name}.pstats"))
    print(f"\n## host profile of ember's {name} step ({STEPS} steps)")
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    del step, state
    gc.collect()


def sample_steps(name: str, build, top: int, seconds: float = 6.0) -> None:
    """Where ember's host time goes in workload ``name``'s step, without cProfile's distortion:
    the stack sampled every 0.3 ms of wall time while steps run; printed are the functions most
    often on top of the stack (self), anywhere on it (inclusive) and the lines on top."""
    lib, step, state = build("ember")
    step()
    step()
    wall, steps, counts = sampled(step, seconds)
    n = max(sum(counts[0].values()), 1)
    print(f"\n## sampled host time of ember's {name} step: {wall * 1e3:.1f} ms/step, "
          f"{n} samples over {steps} steps")
    for title, c in zip(("self", "inclusive", "lines"), counts):
        print(f"-- {title}")
        for w, k in c.most_common(top):
            print(f"  {100 * k / n:5.1f}%  {w}")
    del step, state
    gc.collect()


def sampled(step, seconds: float, every: float = 3e-4):
    """``(seconds per step, steps, (self, inclusive, line) counters)`` of calling ``step`` for
    ``seconds``, its stack sampled by a wall-clock timer signal. The handler runs in the main
    thread between bytecodes, so a C call (a launch, a library call) is counted at the Python
    line that made it, once however long it ran (the signal does not queue: right for the
    microsecond calls of a host-bound step, an undercount of long ones). A sampling thread
    instead sees the main thread only where it releases the GIL (those C calls), which
    over-counts them many times over."""
    import signal
    own, incl, lines = (collections.Counter() for _ in range(3))

    def where(code):
        return f"{code.co_filename.split('site-packages/')[-1]}:{code.co_name}"

    def handler(signum, frame):
        own[where(frame.f_code)] += 1
        lines[f"{where(frame.f_code)}:{frame.f_lineno}"] += 1
        seen = set()
        while frame is not None:
            w = where(frame.f_code)
            if w not in seen:
                seen.add(w)
                incl[w] += 1
            frame = frame.f_back

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, every, every)
    try:
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            step()
            steps += 1
        wall = (time.perf_counter() - t0) / steps
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
    return wall, steps, (own, incl, lines)


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = 25
    host = "--host" in argv
    if host:
        argv.remove("--host")
    sample = "--sample" in argv
    if sample:
        argv.remove("--sample")
    if "--top" in argv:
        i = argv.index("--top")
        top = int(argv[i + 1])
        del argv[i:i + 2]
    import ember
    import torch
    if not ember.cuda.is_available() or not torch.cuda.is_available():
        print("cuda_profile: needs a GPU, ember's CUDA backend and a CUDA build of torch")
        return
    work = _workloads()
    for name in argv or ["gpt2"]:
        if name == "add":
            host_profile(top)
            continue
        if host:
            host_steps(name, work[name], top)
            continue
        if sample:
            sample_steps(name, work[name], top)
            continue
        print(f"\n## {name} on {torch.cuda.get_device_name()}")
        for lib_name in ("ember", "torch"):
            profile(lib_name, work[name], top)


if __name__ == "__main__":
    main()
