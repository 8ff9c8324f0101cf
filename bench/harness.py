"""Timing harness: median wall time of ember and of torch on the same workload, and the ratio.

A case is ``(name, make)``: ``make(lib)`` builds the inputs for one library (``lib`` is the
``ember`` or ``torch`` module) and returns a zero-argument callable that runs the workload once.
Inputs are built outside the timed region; each callable is warmed up, then the libraries take
turns timing batches of calls for about ``budget`` seconds each in all; the reported time is the
median batch time per call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


SETTLE = 0.15  # seconds between columns


def _batch_size(fn: Callable[[], object]) -> int:
    """Calls per timed batch (~20 ms, so timer resolution does not matter), after a warm-up
    (first-call caches, allocator)."""
    fn()
    fn()
    t0 = time.perf_counter()
    fn()
    return max(1, int(0.02 / max(time.perf_counter() - t0, 1e-7)))


def _time_batch(fn: Callable[[], object], per_batch: int) -> float:
    t0 = time.perf_counter()
    for _ in range(per_batch):
        fn()
    return (time.perf_counter() - t0) / per_batch


def median_times(fns: dict, budget: float = 0.4, rounds: int = 5) -> dict:
    """Median seconds per call of each callable in ``fns`` (name -> fn). The callables take
    turns: ``rounds`` rounds, each giving every callable about ``budget / rounds`` seconds of
    batches, so load that drifts while the benchmark runs (a shared 2-core machine) falls on
    every column alike instead of on whichever ran during it."""
    sizes = {n: _batch_size(f) for n, f in fns.items()}
    samples: dict = {n: [] for n in fns}
    for _ in range(rounds):
        for n, f in fns.items():
            # the previous column's worker threads (numpy's BLAS busy-waits ~0.1 s after a
            # call, OpenMP ~1 ms) go idle first, and one untimed call warms the caches
            time.sleep(SETTLE)
            f()
            start = time.perf_counter()
            while len(samples[n]) < 1 or time.perf_counter() - start < budget / rounds:
                samples[n].append(_time_batch(f, sizes[n]))
    return {n: statistics.median(s) for n, s in samples.items()}


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
        times = median_times({lib_name: make(lib) for lib_name, lib in libs}, budget)
        ratios = {n: times[n] / times["torch"] for n in names if n != "torch"}
        line = f"{name:34s}" + "".join(f"{fmt_time(times[n]):>14s}" for n in names) + \
            "".join(f"{ratios[n]:{rw - 1}.2f}x" for n in ratios)
        if target is not None:
            line += "  ok" if all(r <= target for r in ratios.values()) else "  MISS"
        print(line, flush=True)
        rows.append((name, times, ratios))
    _ = (ember, torch)
    return rows
