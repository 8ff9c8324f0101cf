"""Training-step benchmarks: ember eager against PyTorch eager on three small models.

Findings (2-core machine shared with other test runs; cProfile of ember, one BLAS thread)
-----------------------------------------------------------------------------------------
Threads. Under this machine's load (5-10 runnable processes on 2 cores) both libraries'
default 2-thread pools (torch's OpenMP, numpy's OpenBLAS) stall when a thread is descheduled:
a 1024x128 @ 128x512 sgemm takes 25 ms on 2 threads against 4 ms on 1, and torch's GPT step
ranged from 62 ms to 4.9 s between runs. Default-thread ratios are therefore mostly scheduling
luck; ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench train`` is the stable
comparison. There: MLP ember 27-36 ms / torch 23-28 ms (~1.4x); GPT 410-585 / 230-250 ms
(~1.7-2.4x); CNN 74-104 / 33-40 ms (~2-3x).

Where the time goes (own time under cProfile, per step):
  GPT  op kernels 84% (numpy: BLAS 96 ms, erf for GELU 113 ms, other elementwise),
       dispatch (registry/bind/_tensor) 8%, autograd engine 5%, built-ins 2%.
  MLP  op kernels 70% (BLAS 10 ms, AdamW's elementwise passes 11 ms), dispatch 18%,
       built-ins 5%, optimizer Python 3%, autograd engine 3%.
Python overhead is ~8 us of own time per op call (GPT: ~1260 op calls and ~100 backward
nodes per step); it is not the bottleneck yet, missing fused kernels are. The matmuls cost
what torch's do (numpy and torch sgemm within 20% at these shapes).

Top 10 hotspots, GPT step (own time per step): nn_ops.py linear 82 ms (BLAS, fwd+bwd, at the
floor); special.py _poly 54 ms, _erf 27 ms, apply 12 ms, _exp_neg_sq 8 ms (erf in float64 for
GELU: 8 calls, 113 ms in all); binary.py mul 22 ms (225 calls, mostly GELU and LayerNorm
backward rules); linalg.py _gemm 14 ms (attention); activations.py _softmax_kernel 11 ms;
registry.py OpDef.__call__ 10 ms; activations.py gelu 9 ms; ufunc reduce 8 ms; engine.py
run_backward 7 ms. MLP step: linear 10.4 ms; binary.py lerp 5.5 ms, addcdiv 2.0 ms, mul
1.9 ms, addcmul 1.4 ms (AdamW); registry __call__ 1.8 ms; write_inplace 1.3 ms (copying each
in-place result back); adam.py _update 1.1 ms; bind.py method 1.0 ms; _wrap_one 0.9 ms.
Per op at GPT shapes, fwd+bwd, ember/torch: gelu 16x64x512 50 / 1.5 ms (34x); layer_norm
1.6 / 0.33 ms; causal sdpa 16x4x64x32 7.6 / 3.2 ms; cross_entropy 1024x96 0.74 / 0.23 ms.
AdamW.step over the MLP's 670k parameters: ember 13.3 ms, torch 4.8 ms, in-place numpy 1.2 ms.

Suggestions, largest win first:
1. GELU (ops/activations.py gelu and its backward; backends/special.py erf): give float32
   input its own erf (one branch-free rational approximation on clamped |x|, in float32, no
   float64 cast, masks or blocks: ~15 in-place passes, ~1 ms per 512k elements against ~9 ms
   now), and make the backward one op ``gelu_backward(grad, input, approximate)`` with a fused
   numpy impl (its own backward keeps double backward) instead of ~8 ember ops that recompute
   erf. Worth ~150 ms of the ~450 ms GPT step.
2. AdamW (optim/adam.py Adam._update): when not ``differentiable``, update p/exp_avg/
   exp_avg_sq arrays in place with ``out=`` ufuncs and one scratch array per parameter, then
   bump the version counters: 1.2 ms instead of 13 ms, MLP to ~1.1x. Generally:
   binary.py lerp with a Python-number weight should choose its formula in Python, not
   ``xp.where`` over both; registry.call_inplace could let pointwise ops write into
   ``self._data`` (``out=``) instead of computing out of place and copying (write_inplace).
3. Fused first-order backward kernels for LayerNorm/BatchNorm (normalization.py
   _input_grad: ~7 full-size ember ops) and sdpa (nn_ops.py): e.g. an optional numpy-only
   backward on OpDef that engine Node.apply uses when create_graph is False, the ember-op rule
   staying for higher order. Node.apply also fills unused outputs' grads with zeros
   (layer_norm's mean/rstd) that _live then scans with .any(); pass None instead.
4. CNN: pooling.py _running_max: a fast path for non-overlapping windows (kernel == stride,
   no padding/dilation, divisible sizes) as reshape to (N, C, H/k, k, W/k, k) + max/argmax,
   backward a scatter through the same view. activations.py relu backward
   ``where(out <= 0, 0, g)``: np.where over a random mask costs 1.9 ms per 512k elements,
   ``g * (out > 0)`` 0.14 ms (differs only for non-finite g at clamped positions). conv.py
   im2col (``win.transpose(perm).reshape``) copies cost ~4 ms per step.
5. Dispatch (registry.py OpDef.__call__, _promote, _wrap_one): matters once 1-4 land; ~60k
   isinstance calls per GPT step are the first target.

Reproduce a profile: ``python -c "from bench.train import profile; profile('gpt')"``.

Method
------
Each workload is one program written against the torch API and run with ``lib = ember`` or
``lib = torch``. The torch model is built under a fixed seed; the ember model copies its
``state_dict`` (through numpy), so both libraries start from identical weights and do the same
arithmetic. Before timing, a few steps run in both libraries and the losses are compared, so a
table row cannot hide a model that quietly does different work. Both libraries run at their
default thread counts (printed first); the table repeats in rounds and ends with the median
ratio per workload.

    python -m bench train
"""

from __future__ import annotations

import os

import numpy as np

from .harness import run

TARGET = 1.5  # ember time / torch time
BUDGET = 1.0  # seconds of timing per workload, library and round (a step takes 20-500 ms)
ROUNDS = 3


# ---------------------------------------------------------------------- models
def mlp(lib):
    """3-layer MLP for 28x28 images flattened to 784 features."""
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def cnn(lib):
    """Two conv blocks (Conv2d + BatchNorm2d + ReLU + MaxPool2d) and a linear head, 3x32x32."""
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def gpt(lib, vocab: int, block: int, n_layer: int, n_head: int, d: int):
    """The model of ember/examples/train_gpt.py itself, built against ``lib``."""
    from ember.examples import load
    return load("train_gpt", lib.__name__).GPT(vocab, block, n_layer, n_head, d)


# ---------------------------------------------------------------------- same weights
def _to_lib(lib, t):
    """A torch tensor as a ``lib`` tensor (a copy, through numpy)."""
    return lib.from_numpy(t.detach().cpu().numpy().copy())


def build(lib, builder):
    """``builder(lib)`` with torch's seeded initial weights, whichever library ``lib`` is."""
    import torch
    torch.manual_seed(0)
    ref = builder(torch)
    if lib is torch:
        return ref
    model = builder(lib)
    state = {k: _to_lib(lib, v) for k, v in ref.state_dict().items()}
    # strict=False, then our own check: ember's strict load counts a parameter registered as
    # None (Linear(bias=False)'s bias) as missing, where torch skips it
    keys = model.load_state_dict(state, strict=False)
    unset = {n for n, p in _named_slots(model) if p is None}
    bad = [k for k in keys.missing_keys if k not in unset] + list(keys.unexpected_keys)
    if bad:
        raise RuntimeError(f"{type(model).__name__}: state_dict keys do not match: {bad}")
    return model


def _named_slots(model):
    """(qualified name, value) of every parameter slot, None ones included."""
    for prefix, m in model.named_modules():
        for name, p in m._parameters.items():
            yield (f"{prefix}.{name}" if prefix else name), p


# ---------------------------------------------------------------------- workloads
def _batch(lib, *arrays):
    return [lib.from_numpy(a.copy()) for a in arrays]


def mlp_step(lib):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    model = build(lib, mlp)
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    xb, yb = _batch(lib, x, y)
    F = lib.nn.functional

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss
    return step


GPT_SHAPE = {"vocab": 96, "block": 64, "n_layer": 4, "n_head": 4, "d": 128}
GPT_BATCH = 16


def gpt_step(lib, wrap_model=None):
    """One training step of the demo's GPT; ``wrap_model`` (e.g. ``lib.compile``) wraps the
    model after its weights are set."""
    rng = np.random.default_rng(2)
    shape = (GPT_BATCH, GPT_SHAPE["block"])
    idx = rng.integers(0, GPT_SHAPE["vocab"], shape)
    tgt = rng.integers(0, GPT_SHAPE["vocab"], shape)
    model = build(lib, lambda m: gpt(m, **GPT_SHAPE))
    fwd = wrap_model(model) if wrap_model is not None else model
    # parameter groups exactly as in train_gpt.py: no weight decay on biases and norms
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = lib.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                           {"params": no_decay, "weight_decay": 0.0}], lr=3e-3)
    xb, yb = _batch(lib, idx, tgt)
    clip = lib.nn.utils.clip_grad_norm_

    def step():
        _, loss = fwd(xb, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        clip(model.parameters(), 1.0)
        opt.step()
        return loss
    return step


def cnn_step(lib):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, 32)
    model = build(lib, cnn)
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xb, yb = _batch(lib, x, y)
    F = lib.nn.functional

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss
    return step


CASES = [
    ("MLP 784-512-512-10 b128 AdamW", mlp_step),
    ("GPT 4L d128 h4 b16x64 AdamW+clip", gpt_step),
    ("CNN 2xconv+BN b32 3x32x32 SGD", cnn_step),
]


# ---------------------------------------------------------------------- report
def check_same(libs, steps: int = 3) -> None:
    """Run a few steps of every workload in every library; print the largest loss difference
    from torch (the work is identical only if the losses agree to float32 rounding)."""
    print(f"\nloss agreement over {steps} steps (max |loss - torch loss|):")
    for name, make in CASES:
        losses = {}
        for lib_name, lib in libs:
            fn = make(lib)
            losses[lib_name] = [float(fn().item()) for _ in range(steps)]
        ref = np.array(losses["torch"])
        diffs = "  ".join(f"{n} {np.abs(np.array(v) - ref).max():.1e}"
                          for n, v in losses.items() if n != "torch")
        print(f"  {name:34s} torch losses {', '.join(f'{v:.4f}' for v in ref)};  {diffs}")


def print_threads() -> None:
    import torch
    env = {k: os.environ[k] for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                      "MKL_NUM_THREADS") if k in os.environ}
    print(f"threads: torch intra-op {torch.get_num_threads()}, cpus {os.cpu_count()}; "
          f"numpy BLAS env {env or 'unset (library default)'}")


# ---------------------------------------------------------------------- profiling
# tottime by where it is spent; first match wins (numpy's C calls count as kernel time)
_AREAS = [("dispatch (op table, Tensor wrapping, binding)",
           ("ops/registry.py", "ops/bind.py", "_tensor.py", "_dtype.py")),
          ("autograd engine", ("autograd/",)),
          ("nn modules and functional", ("nn/",)),
          ("optimizer Python", ("optim/",)),
          ("op kernels (impls, backward rules, numpy)",
           ("ember/ops/", "ember/backends/", "/numpy/", "{numpy")),
          ("Python built-ins (isinstance, len, getattr, ...)", ("{builtin",)),
          ]


def profile(name: str = "gpt", steps: int = 5, top: int = 12) -> None:
    """cProfile ``steps`` ember training steps of workload ``name`` (mlp, gpt, cnn): the time
    per area of the code base, then the hotspots by own time and by cumulative time.

        python -c "from bench.train import profile; profile('gpt')"
    """
    import cProfile
    import pstats
    import time

    import ember
    make = {"mlp": mlp_step, "gpt": gpt_step, "cnn": cnn_step}[name]
    fn = make(ember)
    fn(), fn()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    plain = (time.perf_counter() - t0) / steps
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    areas = dict.fromkeys([a for a, _ in _AREAS] + ["other"], 0.0)
    for (path, _line, func), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():
        path = path.replace(os.sep, "/")
        if path == "~":  # a C function: numpy's count as kernels, the rest as Python overhead
            path = "{numpy" if "numpy" in func else "{builtin"
        area = next((a for a, keys in _AREAS if any(k in path for k in keys)), "other")
        areas[area] += tottime
    total = sum(areas.values())
    print(f"\n## ember {name} step: {plain * 1e3:.1f} ms unprofiled, "
          f"{total / steps * 1e3:.1f} ms under cProfile")
    for area, t in areas.items():
        print(f"  {area:48s} {t / steps * 1e3:9.1f} ms  {100 * t / total:5.1f}%")
    stats.strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top * 2)


def main() -> None:
    import torch

    import ember
    libs = [("ember", ember), ("torch", torch)]
    print_threads()
    check_same(libs)
    # several rounds, each timing ember and torch back to back: on a shared machine a burst
    # of load then slows both libraries of a round, and the median ratio over rounds ignores it
    ratios = {name: [] for name, _ in CASES}
    for i in range(ROUNDS):
        title = f"Training steps (zero_grad, forward, backward, step), round {i + 1}/{ROUNDS}"
        rows = run(title, CASES, libs, budget=BUDGET, target=TARGET)
        for name, _times, r in rows:
            ratios[name].append(r["ember"])
    print(f"\n## Median ember/torch ratio over {ROUNDS} rounds  (target: ratio <= {TARGET})")
    for name, rs in ratios.items():
        med = float(np.median(rs))
        print(f"{name:34s}{med:15.2f}x  {'ok' if med <= TARGET else 'MISS'}   "
              f"(rounds: {', '.join(f'{r:.2f}' for r in rs)})")


if __name__ == "__main__":
    main()
