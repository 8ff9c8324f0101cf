"""Shared by the Triton kernel tests: compiling kernels for a Hopper GPU without one."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest

import ember


def compile_for_sm90(code: str) -> None:
    """Run ``code`` (a script that builds kernels with Triton's compiler and prints "ok") in a
    fresh process without the interpreter: what the interpreter, which runs the Python,
    cannot check (constexpr globals, types, register use). No GPU is needed."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(
        os.path.abspath(ember.__file__))), env.get("PYTHONPATH")]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=600)
    if r.returncode and "ptxas" in r.stderr and "not found" in r.stderr.lower():
        pytest.skip("Triton's ptxas is missing here")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


# the start of a ``compile_for_sm90`` script: ``build(fn, types, **constexprs)`` compiles
# kernel ``fn`` for Hopper, its runtime arguments typed by ``types`` (default i32), ``ACC``
# given as a bool (True: float64); ``WARPS`` (set it after this) the warps per program
SM90_BUILD = r"""
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

WARPS = 4

def build(fn, types, **consts):
    consts = {k: {True: tl.float64, False: tl.float32}[v] if k == "ACC" else v
              for k, v in consts.items()}
    sig = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    triton.compile(ASTSource(fn, signature=sig, constexprs=consts),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": WARPS})
"""


# the marks of a test file that runs Triton kernels in the interpreter: skipped where kernels
# compile for a GPU; the interpreter's numpy warns on NaN/inf edge cases and padding lanes
INTERPRETED = [
    pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                       reason="runs where Triton interprets (TRITON_INTERPRET=1)"),
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
]


def ks_distance(sample, cdf) -> float:
    """The Kolmogorov-Smirnov distance of ``sample`` from the distribution ``cdf``."""
    import numpy as np
    x = np.sort(sample.astype(np.float64))
    f = cdf(x)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


@contextlib.contextmanager
def cpu_overrides(overrides: dict, stats: dict, combine=None):
    """The CPU backend's "kernel" overrides of the ops in ``overrides`` (op name -> kernel)
    set to those kernels, which then run under the interpreter on numpy arrays; the previous
    ones put back after. ``combine(previous, kernel)`` keeps a previous override in front
    (None: replace it). Yields the count of launches (``stats["launches"]``) since entry."""
    from ember.backends import cpu
    from ember.ops.registry import OPS
    saved = {}
    for name, fn in overrides.items():
        kernels = OPS[name]._kernel_overrides
        saved[name] = prev = kernels.get(cpu.BACKEND)
        kernels[cpu.BACKEND] = fn if prev is None or combine is None else combine(prev, fn)
    before = stats["launches"]
    try:
        yield lambda: stats["launches"] - before
    finally:
        for name, fn in saved.items():
            kernels = OPS[name]._kernel_overrides
            if fn is None:
                kernels.pop(cpu.BACKEND, None)
            else:
                kernels[cpu.BACKEND] = fn
