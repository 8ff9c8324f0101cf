"""``python -m bench dist_cpu``: DistributedDataParallel on CPU, 2 ranks, ember against
PyTorch's gloo DDP side by side: the step time (forward, backward with the gradient
all-reduce, clip, AdamW) of the small GPT of ``bench/train.py`` (each rank its own batch of
16 sequences of 64 tokens). Each library runs under its own launcher (ember's
``python -m ember.distributed.run``, PyTorch's ``torch.distributed.run``), one thread per
rank, alternating for ``ROUNDS`` rounds; the median step time of rank 0 over the timed
steps is reported per round, and the ratio of the medians over rounds.

Target: ember <= 1.2x PyTorch (issue 19).
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
