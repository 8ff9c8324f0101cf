"""FlexAttention (issue 16): ember's flex_attention, eager and under ember.compile, against
torch's compiled flex_attention in the same process on the same device.

CPU: causal, B=2 H=8 S=1024 D=64, float32, forward. CUDA (skipped without a GPU): causal,
B=8 H=12 S=2048 D=64, bfloat16, forward and forward+backward, as TFLOP/s (a causal forward
counts half of 4*B*H*S*S*D; the backward 2.5 times the forward). Today ember runs its
reference path (block-sparse, online softmax, ember ops); the fused kernels come with the
compiler's Triton/C backends (issue 15), so the ratios say how far there is to go.
"""

from __future__ import annotations

import numpy as np

from .harness import fmt_time, median_times

CPU_SHAPE = (2, 8, 1024, 64)
CUDA_SHAPE = (8, 12, 2048, 64)


def _causal(b, h, q, kv):
    return q >= kv


def _flex(lib):
    if lib.__name__ == "torch":
        from torch.nn.attention import flex_attention as F
    else:
        from ember.nn.attention import flex_attention as F
    return F


def _inputs(lib, shape, device, dtype, grad=False):
    rng = np.random.default_rng(0)
    out = []
    for _ in range(3):
        t = lib.tensor(rng.standard_normal(shape).astype(np.float32)).to(device)
        t = t.to(getattr(lib, dtype))
        out.append(t.requires_grad_(grad) if grad else t)
    return out


def _torch_compiled_flex():
    """torch.compile(flex_attention), or the reason it is unavailable."""
    import torch
    F = _flex(torch)
    try:
        fn = torch.compile(F.flex_attention, dynamic=False)
        return fn, None
    except Exception as e:  # pragma: no cover - depends on the machine
        return None, f"{type(e).__name__}: {e}"


def _cases(device, shape, dtype, backward):
    """name -> zero-argument callable for ember eager, ember.compile and torch compiled."""
    import torch

    import ember
    B, H, S, D = shape
    sync = (lambda lib: lib.cuda.synchronize()) if device == "cuda" else (lambda lib: None)
    fns = {}
    for label, lib, compiled in (("ember", ember, False), ("ember.compile", ember, True),
                                 ("torch.compile", torch, True)):
        F = _flex(lib)
        bm = F.create_block_mask(_causal, None, None, S, S, device=device)
        q, k, v = _inputs(lib, shape, device, dtype, grad=backward)
        if lib is torch:
            flex, err = _torch_compiled_flex()
            if flex is None:
                print(f"torch.compile(flex_attention) unavailable, column skipped: {err}")
                continue
        elif compiled:
            flex = ember.compile(F.flex_attention)
        else:
            flex = F.flex_attention

        def step(lib=lib, flex=flex, q=q, k=k, v=v, bm=bm):
            out = flex(q, k, v, block_mask=bm)
            if backward:
                out.backward(lib.ones_like(out))
            sync(lib)
        if not backward:
            def step(lib=lib, flex=flex, q=q, k=k, v=v, bm=bm, inner=step):
                with lib.no_grad():
                    inner()
        fns[label] = step
    return fns


def _report(title, fns, flops, budget):
    print(f"\n## {title}")
    for label, fn in list(fns.items()):
        try:
            fn()  # compile / warm up outside the timing
        except Exception as e:
            print(f"{label}: failed ({type(e).__name__}: {str(e)[:200]}), column skipped")
            del fns[label]
    times = median_times(fns, budget=budget, rounds=3)
    ref = times.get("torch.compile")
    print(f"{'column':16s}{'time':>14s}{'TFLOP/s':>10s}{'vs torch.compile':>20s}")
    for label, t in times.items():
        ratio = f"{ref / t:19.3f}x" if ref else f"{'n/a':>20s}"
        print(f"{label:16s}{fmt_time(t):>14s}{flops / t / 1e12:10.3f}{ratio}")
    return times


def main() -> None:
    import torch

    import ember
    B, H, S, D = CPU_SHAPE
    fwd = 4 * B * H * S * S * D / 2
    _report(f"CPU flex_attention causal B={B} H={H} S={S} D={D} float32 forward "
            "(ratio: torch.compile time / column time; >= 1.0 is the target)",
            _cases("cpu", CPU_SHAPE, "float32", backward=False), fwd, budget=3.0)
    if not (ember.cuda.is_available() and torch.cuda.is_available()):
        print("\n## CUDA flex_attention: skipped (needs a GPU, ember's CUDA backend and a CUDA "
              "build of torch)")
        return
    B, H, S, D = CUDA_SHAPE
    fwd = 4 * B * H * S * S * D / 2
    print(f"\n{ember.cuda.get_device_name()}; torch {torch.__version__}")
    _report(f"CUDA flex_attention causal B={B} H={H} S={S} D={D} bfloat16 forward",
            _cases("cuda", CUDA_SHAPE, "bfloat16", backward=False), fwd, budget=3.0)
    _report(f"CUDA flex_attention causal B={B} H={H} S={S} D={D} bfloat16 forward+backward",
            _cases("cuda", CUDA_SHAPE, "bfloat16", backward=True), 3.5 * fwd, budget=3.0)


if __name__ == "__main__":
    main()
