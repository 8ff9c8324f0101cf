"""Compiled training: the small GPT's training step (4 layers, width 128, batch 16, sequence
64, AdamW, gradient clipping) in ember eager, ember.compile, torch eager and torch.compile,
and the cold compile time of that step in each compiler.

The compiled columns compile the model (forward and loss; the backward graph comes with it),
as a PyTorch user writes ``model = torch.compile(model)``; the optimizer runs eagerly in all
four. Cold compile time is measured in a fresh process per compiler with an empty kernel cache
(``EMBER_CACHE_DIR`` / ``TORCHINDUCTOR_CACHE_DIR`` pointing at a new temporary directory): the
time of the first step minus the time of a warm step.

    python -m bench compile_train
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from .harness import run
from .train import gpt_step

TARGET_STEP = 1.0  # ember.compile / torch.compile
TARGET_COLD = 0.5  # ember cold compile / torch cold compile


class _Lib:
    """One column of the table: a library and whether its compiler is used."""

    def __init__(self, mod, compiled: bool):
        self.mod, self.compiled = mod, compiled


def _make(lib: _Lib):
    return gpt_step(lib.mod, wrap_model=lib.mod.compile if lib.compiled else None)


def cold_compile(lib_name: str) -> dict:
    """Run in a fresh process with an empty cache: first-step and warm-step seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, EMBER_CACHE_DIR=tmp, TORCHINDUCTOR_CACHE_DIR=tmp,
                   TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
        out = subprocess.run([sys.executable, "-m", "bench.compile_train", "--cold", lib_name],
                             env=env, capture_output=True, text=True, check=False,
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if out.returncode != 0:
        raise RuntimeError(f"cold compile run for {lib_name} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cold_child(lib_name: str) -> None:
    import importlib
    mod = importlib.import_module(lib_name)
    step = gpt_step(mod, wrap_model=mod.compile)
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    warm = []
    for _ in range(3):
        t0 = time.perf_counter()
        step()
        warm.append(time.perf_counter() - t0)
    print(json.dumps({"first": first, "warm": min(warm)}))


def main() -> None:
    import torch

    import ember

    libs = [("ember", _Lib(ember, False)), ("ember.compile", _Lib(ember, True)),
            ("torch", _Lib(torch, False)), ("torch.compile", _Lib(torch, True))]
    rows = run("compiled GPT training step (4L d128 b16x64, AdamW + clip)",
               [("GPT training step", _make)], libs, budget=3.0)
    _, times, _ = rows[0]
    print(f"ember.compile counters (a graph break would run the step eagerly): "
          f"{dict(ember.compiler.counters)}")
    print(f"ember.compile / torch.compile: {times['ember.compile'] / times['torch.compile']:.2f}x"
          f"  (target <= {TARGET_STEP})")
    print("\n## cold compile of the GPT training step (fresh process, empty cache)")
    cold = {}
    for name in ("ember", "torch"):
        r = cold_compile(name)
        cold[name] = r["first"] - r["warm"]
        print(f"{name + '.compile':16s} first step {r['first']:7.2f} s, warm step "
              f"{r['warm'] * 1e3:7.1f} ms, compile ~{cold[name]:6.2f} s")
    print(f"ember / torch cold compile: {cold['ember'] / cold['torch']:.2f}x  "
          f"(target <= {TARGET_COLD})")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--cold":
        _cold_child(sys.argv[2])
    else:
        main()
