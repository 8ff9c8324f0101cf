"""``python -m bench dist_cpu``: DistributedDataParallel on CPU, 2 ranks, ember against
PyTorch's gloo DDP side by side: the step time (forward, backward with the gradient
all-reduce, clip, AdamW) of the small GPT of ``bench/train.py`` (each rank its own batch of
16 sequences of 64 tokens). Each library runs under its own launcher (ember's
``python -m ember.distributed.run``, PyTorch's ``torch.distributed.run``), one thread per
rank, alternating for ``ROUNDS`` rounds; the median step time of rank 0 over the timed
steps is reported per round, and the ratio of the medians over rounds.

Target: ember <= 1.2x PyTorch (issue 19).

Findings (2-core machine shared with other sessions; 2026-11-27)
----------------------------------------------------------------
Calm machine (load 2-3), two runs of 3 rounds: DDP step ember 152.7 / torch gloo 108.4 ms
(1.41x), then 191.6 / 105.9 ms (1.81x); the same step without DDP: 104.3 / 91.6 ms (1.14x),
120.1 / 110.4 ms (1.09x). Under load 7-9: DDP 933 / 209 ms (4.5x), local 794 / 242 ms (3.3x).
So the target is not met: ember's step itself is ~1.1x torch's when the machine is calm, and
DDP adds ~20-70 ms a step in ember against ~0-17 ms in torch (noisy: rounds differ by +-40 ms).
Where it goes (cProfile of rank 0): waiting in Work.wait, mostly in time.sleep between polls.
torch's gloo runs its all-reduces on a background thread, so they progress while backward
computes; MPICH progresses a non-blocking collective only when it is polled, and ember polls
from the main thread (in each gradient hook, then at the end of backward), so most of the
bucket traffic happens in the final wait. MPICH's own progress thread
(MPIR_CVAR_ASYNC_PROGRESS=1) makes it worse here (151 -> 277 ms and 165 -> 239 ms a step):
it spins a core, and there are two cores for two ranks. Polling without sleeping for the first
5 ms of a wait made no difference beyond the noise (145/161 ms before, 148/131 ms after).
Next to try: a polling thread of ember's own that sleeps on a condition between buckets, or
fewer, larger buckets for small models.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

ROUNDS = 3
WARMUP = 3
STEPS = 12
TARGET = 1.2


def worker(lib_name: str, ddp: bool = True) -> None:
    """One rank: time DDP steps of the GPT (without ``ddp``: the same step on the rank's own
    model, no communication but the barrier); rank 0 prints the median step time."""
    if lib_name == "torch":
        import torch as lib
        import torch.distributed as dist
    else:
        import ember as lib
        import ember.distributed as dist
    from bench.train import gpt_step
    dist.init_process_group("gloo")
    wrap = (lambda m: lib.nn.parallel.DistributedDataParallel(m)) if ddp else None
    step = gpt_step(lib, wrap_model=wrap)
    for _ in range(WARMUP):
        step()
    times = []
    for _ in range(STEPS):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        print(f"STEP {statistics.median(times):.6f}", flush=True)
    dist.destroy_process_group()


def _run(lib_name: str, ddp: bool = True) -> float:
    launcher = "ember.distributed.run" if lib_name == "ember" else "torch.distributed.run"
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               EMBER_NUM_THREADS="1", MKL_NUM_THREADS="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", launcher, "--nproc-per-node", "2"]
    if lib_name == "torch":
        cmd += ["--standalone"]
    cmd += ["-m", "bench.dist_cpu", "--worker", lib_name] + ([] if ddp else ["local"])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=root)
    for line in out.stdout.splitlines():
        if line.startswith("STEP "):
            return float(line.split()[1])
    raise RuntimeError(f"{lib_name} DDP run failed:\n{out.stdout}\n{out.stderr}")


def main() -> None:
    print("DDP on CPU, 2 ranks, small GPT (bench/train.py GPT_SHAPE, batch 16 per rank), "
          "median step time of rank 0")
    print("(local: the same step without DDP on each of the 2 processes, so DDP's own cost is "
          "DDP - local)")
    times = {k: [] for k in ("ember", "torch", "ember local", "torch local")}
    for r in range(ROUNDS):
        for key in times:
            times[key].append(_run(key.split()[0], ddp="local" not in key))
        row = {k: v[-1] for k, v in times.items()}
        print(f"  round {r + 1}: DDP ember {row['ember'] * 1000:7.1f} ms, torch gloo "
              f"{row['torch'] * 1000:7.1f} ms, ratio {row['ember'] / row['torch']:.2f}x;  "
              f"local ember {row['ember local'] * 1000:7.1f} ms, torch "
              f"{row['torch local'] * 1000:7.1f} ms", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    e, t = med["ember"], med["torch"]
    verdict = "ok" if e / t <= TARGET else "over the target"
    print(f"median DDP step: ember {e * 1000:.1f} ms, torch gloo {t * 1000:.1f} ms, ratio "
          f"{e / t:.2f}x (target <= {TARGET}x: {verdict})")
    print(f"median local step: ember {med['ember local'] * 1000:.1f} ms, torch "
          f"{med['torch local'] * 1000:.1f} ms, ratio "
          f"{med['ember local'] / med['torch local']:.2f}x; DDP's own cost: ember "
          f"{(e - med['ember local']) * 1000:.1f} ms, torch "
          f"{(t - med['torch local']) * 1000:.1f} ms")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], ddp=sys.argv[3:4] != ["local"])
    else:
        main()
