"""What the profiler costs an op call: the small-op cases of ``bench.ops`` timed with no
profiler, inside ``ember.profiler.profile()`` (CPU, default options) and inside one with
``record_shapes`` and ``profile_memory``; medians of interleaved rounds.

    python -m bench.profiler_overhead

The issue's bound: on, at most 2x the op's unprofiled time. (Off costs nothing new: with no
profiler running the "profiler" interposer is not installed and the op path is the one
without it; compare the "off" column with the same cases on a checkout without the profiler.)
"""

from __future__ import annotations

import sys

from .harness import fmt_time, median_times
from .ops import small_cases


def measure(budget: float = 0.3, rounds: int = 7) -> list:
    """[(case, {column: median seconds per call})]; the columns take turns each round, so
    load that drifts falls on all of them alike."""
    import statistics

    import ember
    from ember.profiler import profile
    columns = (("off", None), ("on", {}),
               ("on+shapes+memory", {"record_shapes": True, "profile_memory": True}))
    rows = []
    for name, make in small_cases():
        fn = make(ember)
        samples: dict = {label: [] for label, _ in columns}
        for _ in range(rounds):
            for label, kw in columns:
                if kw is None:
                    samples[label].append(median_times({label: fn}, budget / rounds, 1)[label])
                    continue
                with profile(**kw):  # one recording spans the batch, as a training loop's
                    samples[label].append(median_times({label: fn}, budget / rounds,
                                                       1)[label])
        rows.append((name, {k: statistics.median(v) for k, v in samples.items()}))
    return rows


def main(argv=None):
    rows = measure()
    print(f"{'case':36s} {'off':>10s} {'on':>10s} {'ratio':>6s} {'on+shapes+mem':>14s} "
          f"{'ratio':>6s}")
    for name, t in rows:
        print(f"{name:36s} {fmt_time(t['off']):>10s} {fmt_time(t['on']):>10s} "
              f"{t['on'] / t['off']:6.2f} {fmt_time(t['on+shapes+memory']):>14s} "
              f"{t['on+shapes+memory'] / t['off']:6.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
