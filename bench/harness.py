"""Timing harness: median wall time of ember and of torch on the same workload, and the ratio.

A case is ``(name, make)``: ``make(lib)`` builds the inputs for one library (``lib`` is the
``ember`` or ``torch`` module) and returns a zero-argument callable that runs the workload once.
Inputs are built outside the timed region; each callable is warmed up, then timed in batches
until about ``budget`` seconds have passed; the reported time is the median batch time per call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], budget: float = 0.4, min_calls: int = 3) -> float:
    fn()  # warm-up (first-call caches, allocator)
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    per_batch = max(1, int(0.02 / one))  # batches of ~20 ms so timer resolution does not matter
    samples = []
    start = time.perf_counter()
    while len(samples) < min_calls or time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        for _ in range(per_batch):
            fn()
        samples.append((time.perf_counter() - t0) / per_batch)
    return statistics.median(samples)


def fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:8.1f} us"
    if s < 1:
        return f"{s * 1e3:8.2f} ms"
    return f"{s:8.2f} s "


def run(title: str, cases, libs, budget: float = 0.4, target: float | None = None):
    """Time every case in every library; print a table; return rows of (name, times...)."""
    import ember
    import torch

    names = [n for n, _ in libs]
    print(f"\n## {title}" + (f"  (target: ratio <= {target})" if target else ""))
    rw = max([16] + [len(n) + 9 for n in names])  # ratio column width: "<name>/torch"
    header = f"{'workload':34s}" + "".join(f"{n:>14s}" for n in names) + \
        "".join(f"{n + '/torch':>{rw}s}" for n in names if n != "torch")
    print(header)
    print("-" * len(header))
    rows = []
    for name, make in cases:
        times = {}
        for lib_name, lib in libs:
            fn = make(lib)
            times[lib_name] = median_time(fn, budget)
        ratios = {n: times[n] / times["torch"] for n in names if n != "torch"}
        line = f"{name:34s}" + "".join(f"{fmt_time(times[n]):>14s}" for n in names) + \
            "".join(f"{ratios[n]:{rw - 1}.2f}x" for n in ratios)
        if target is not None:
            line += "  ok" if all(r <= target for r in ratios.values()) else "  MISS"
        print(line, flush=True)
        rows.append((name, times, ratios))
    _ = (ember, torch)
    return rows
