"""Where a compiled GPT training step spends its time: every kernel, library call (BLAS
through gemm.py), eager step and wrapper helper of the generated wrappers, timed over a number
of steps and summed by kind, then the slowest kernels one by one.

    python -m bench profile [steps]

Not one of the default suites (it compares nothing with PyTorch): a tool for finding the next
thing to speed up. Timing each call adds ~1 us per step of the wrapper.
"""

from __future__ import annotations

import collections
import sys
import time

from .train import gpt_step


def _timed(fn, totals: collections.Counter, key):
    def call(*args):
        t0 = time.perf_counter()
        r = fn(*args)
        totals[key] += time.perf_counter() - t0
        return r
    return call


def _instrument(cg, gi: int, totals: collections.Counter, labels: dict) -> None:
    """Wrap each callable the generated wrapper of compiled graph ``cg`` calls."""
    env = cg._call.__globals__
    kernels = {f"_k_{k.name}": k for k in cg.plan.kernels}
    eager = {f"_eager_{s.node.name}": s.node.target.name for s in cg.plan.steps
             if s.kind == "eager"}
    for name, fn in list(env.items()):
        if name in kernels:
            k = kernels[name]
            labels[(gi, name)] = (f"kernel {k.kind}", [tuple(b.meta.shape) for b in k.outs])
        elif name in eager:
            labels[(gi, name)] = (f"eager {eager[name]}", None)
        elif name.startswith("_gemm_") or name in ("_empty", "_contig", "_view", "_wrap"):
            labels[(gi, name)] = (name.lstrip("_").replace("gemm_", "BLAS "), None)
        else:
            continue
        env[name] = _timed(fn, totals, (gi, name))
    cg._call = _timed(cg._call, totals, (gi, "graph"))
    labels[(gi, "graph")] = ("whole graph", None)


def main(argv=None) -> None:
    import ember
    from ember.compiler import inductor

    argv = sys.argv[2:] if argv is None else argv
    steps = int(argv[0]) if argv else 20
    graphs: list = []
    init = inductor.CompiledGraph.__init__

    def record(self, *a, **k):
        init(self, *a, **k)
        graphs.append(self)
    inductor.CompiledGraph.__init__ = record
    try:
        step = gpt_step(ember, wrap_model=ember.compile)
        step()
        step()
    finally:
        inductor.CompiledGraph.__init__ = init
    totals: collections.Counter = collections.Counter()
    labels: dict = {}
    for gi, cg in enumerate(graphs):
        _instrument(cg, gi, totals, labels)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    per_step = (time.perf_counter() - t0) / steps
    ran = [gi for gi in range(len(graphs)) if totals[(gi, "graph")]]  # not the eager kernels'
    number = {gi: i for i, gi in enumerate(ran)}
    print(f"\n## compiled GPT training step: {per_step * 1e3:.1f} ms a step ({steps} steps; "
          f"g0 is the forward graph, g1 the backward)")
    by_kind: collections.Counter = collections.Counter()
    for key, t in totals.items():
        if key[0] in number:
            by_kind[(number[key[0]], labels[key][0])] += t / steps
    for (gi, label), t in by_kind.most_common(25):
        print(f"g{gi}  {t * 1e3:8.2f} ms  {label}")
    print("\n## slowest kernels")
    kernels = [(t / steps, key) for key, t in totals.items()
               if key[1].startswith("_k_") and key[0] in number]
    for t, (gi, name) in sorted(kernels, reverse=True)[:15]:
        kind, shapes = labels[(gi, name)]
        print(f"g{number[gi]}  {t * 1e6:8.1f} us  {name[3:]}  {shapes}")


if __name__ == "__main__":
    main()
