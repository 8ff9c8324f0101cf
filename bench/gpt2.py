"""GPT-2 124M training step on one GPU, ember eager against PyTorch eager: the model of the
main job (ember/examples/train_gpt.py, loaded once per library so both run the same program)
at GPT-2 small's shape with vocabulary 50304, batch 16 x 1024 random token ids, bf16 autocast
and fused AdamW on both sides. Each library is timed in its own phase (the pool is emptied in
between); the phases alternate, and the median step time, the ratio and each library's peak
memory are printed. ``python -m bench gpt2`` (``BENCH_GPT2_BATCH`` sets the batch, default 16)."""

from __future__ import annotations

import gc
import importlib.util
import os
import statistics
import time

VOCAB, BLOCK, LAYERS, HEADS, WIDTH = 50304, 1024, 12, 12, 768
ROUNDS, STEPS = 3, 4  # phases per library, timed steps per phase


def example(lib_name: str):
    """A fresh copy of the main job's module bound to ``lib_name`` ("ember" or "torch")."""
    path = os.path.join(os.path.dirname(__file__), "..", "ember", "examples", "train_gpt.py")
    spec = importlib.util.spec_from_file_location(f"train_gpt_{lib_name}", path)
    module = importlib.util.module_from_spec(spec)
    saved = os.environ.get("EMBER_EXAMPLE_BACKEND")
    os.environ["EMBER_EXAMPLE_BACKEND"] = lib_name
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del os.environ["EMBER_EXAMPLE_BACKEND"]
        else:
            os.environ["EMBER_EXAMPLE_BACKEND"] = saved
    return module


def build(lib_name: str, batch: int):
    """(step, state) for one library: ``step()`` runs one synchronised training step."""
    m = example(lib_name)
    lib = m.torch
    lib.manual_seed(0)
    model = m.GPT(VOCAB, BLOCK, LAYERS, HEADS, WIDTH).cuda()
    opt = lib.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=True)
    x = lib.randint(0, VOCAB, (batch, BLOCK), device="cuda")
    y = lib.randint(0, VOCAB, (batch, BLOCK), device="cuda")

    def step():
        with lib.autocast("cuda", dtype=lib.bfloat16):
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        lib.cuda.synchronize()
        return loss
    return lib, step, (model, opt, x, y)


def phase(lib, step) -> list:
    """Seconds of ``STEPS`` steps each, after one warm-up step."""
    step()
    times = []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    import ember
    import torch
    batch = int(os.environ.get("BENCH_GPT2_BATCH", "16"))
    if not ember.cuda.is_available() or not torch.cuda.is_available():
        print("\n## gpt2: skipped (needs a GPU, ember's CUDA backend and a CUDA build of torch)")
        return
    print(f"\n## GPT-2 124M training step, batch {batch} x {BLOCK}, vocab {VOCAB}, bf16 autocast, "
          f"fused AdamW; {ember.cuda.get_device_name()}; torch {torch.__version__}")
    samples = {"ember": [], "torch": []}
    peak = {}
    for _ in range(ROUNDS):
        for name in ("ember", "torch"):
            lib, step, state = build(name, batch)
            lib.cuda.reset_peak_memory_stats()
            samples[name] += phase(lib, step)
            peak[name] = max(peak.get(name, 0), lib.cuda.max_memory_allocated())
            loss = float(step())
            n_params = sum(p.numel() for p in state[0].parameters())
            del step, state
            gc.collect()
            lib.cuda.empty_cache()
    med = {n: statistics.median(s) for n, s in samples.items()}
    tok = batch * BLOCK
    for n in ("ember", "torch"):
        print(f"{n:6s} {med[n] * 1e3:8.1f} ms/step  {tok / med[n]:10,.0f} tok/s  "
              f"peak {peak[n] / 2**30:6.2f} GiB  (steps: "
              + ", ".join(f"{t * 1e3:.0f}" for t in samples[n]) + " ms)")
    print(f"ember/torch {med['ember'] / med['torch']:.2f}x  (target <= 1.25x); "
          f"{n_params:,} parameters; last loss {loss:.3f}")
