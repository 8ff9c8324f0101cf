"""Host time of the CUDA reductions' Python, without a GPU: ``python -m bench.reduce_host``.

The wrappers of backends/cuda/reductions.py run on numpy arrays dressed as CuPy's (a
``data.ptr``), with the GPU path of triton_adapter taken (no interpreter) and the compiled
launcher replaced by a no-op: what is timed is everything the wrapper and the adapter do per
call (layout, plan, output allocation, argument building, the launcher lookup), not the
kernel. Microseconds per call, the best of several rounds (this machine is shared)."""

from __future__ import annotations

import os
import sys
import time
import types

import numpy as np

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    raise SystemExit("run without TRITON_INTERPRET (the GPU path is what is timed)")


class _Memory:
    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr


_ALIGNED = _Memory(1 << 20)


class DeviceArray(np.ndarray):
    """A numpy array with CuPy's ``data.ptr`` (a fixed, aligned address: nothing runs)."""

    @property
    def data(self):
        return _ALIGNED


def _fake_cupy():
    stream = types.SimpleNamespace(ptr=0)
    device = types.SimpleNamespace(attributes={"MultiProcessorCount": 132})
    cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0),
        get_current_stream=lambda *a: stream, Device=lambda i: device)

    def empty(shape, dtype=float):
        return np.empty(shape, dtype).view(DeviceArray)

    def ascontiguousarray(a):
        return np.ascontiguousarray(a).view(DeviceArray)
    return types.SimpleNamespace(cuda=cuda, empty=empty, ascontiguousarray=ascontiguousarray)


def _install():
    from ember.backends.cuda import runtime, triton_adapter as adapter
    from ember.backends.cuda import reductions, rows
    fake = _fake_cupy()
    runtime._STATE["cp"] = fake
    adapter.interpreting = lambda: False

    def compile_(kernel, device, grid, args, constexprs, options=None):
        return (lambda *a: None), None, None, tuple(constexprs.values())
    adapter._compile = compile_
    xp = lambda a: fake  # noqa: E731 (every array here stands for a CuPy one)
    rows._xp = xp
    if hasattr(reductions, "_xp"):
        reductions._xp = xp
    return reductions


def cases(R):
    import ember
    bf16 = ember.bfloat16.np
    rng = np.random.default_rng(0)

    def dev(shape, dtype):
        return rng.standard_normal(shape).astype(np.float32).astype(dtype).view(DeviceArray)
    acts = dev((16384, 768), bf16)
    acts32 = dev((16384, 768), np.float32)
    wide = dev((16384, 3072), bf16)
    big = dev((4096, 4096), np.float32)
    o = R.OVERRIDES
    return [
        ("sum(-1) 16384x768 bf16", lambda: o["sum"](acts, -1)),
        ("sum(0) 16384x768 bf16 (bench cuda 'sum over rows')", lambda: o["sum"](acts, 0)),
        ("sum() 16M fp32 (full)", lambda: o["sum"](big)),
        ("sum_to_size 16384x768 bf16 -> (768,)", lambda: o["sum_to_size"](acts, (768,))),
        ("sum_to_size 16384x768 fp32 -> (768,)", lambda: o["sum_to_size"](acts32, (768,))),
        ("sum_to_size 16384x3072 bf16 -> (3072,)", lambda: o["sum_to_size"](wide, (3072,))),
        ("mean(-1, keepdim) 16384x768 bf16", lambda: o["mean"](acts, -1, True)),
        ("var(-1) 16384x768 fp32", lambda: o["var"](acts32, -1)),
        ("amax() 16M fp32", lambda: o["amax"](big)),
        ("max(-1) 16384x768 bf16 (values, indices)", lambda: o["max"](acts, -1)),
    ]


def timed(fn, calls=2000, rounds=7) -> float:
    for _ in range(50):
        fn()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls)
    return best * 1e6


def main(argv=None) -> None:
    R = _install()
    before = R.STATS["launches"]
    rows = cases(R)
    for name, fn in rows:
        n0 = R.STATS["launches"]
        fn()
        launches = R.STATS["launches"] - n0
        print(f"{name:55s} {timed(fn):7.2f} us  ({launches} launch{'es' if launches > 1 else ''})")
    assert R.STATS["launches"] > before


if __name__ == "__main__":
    main(sys.argv[1:])
