"""CuPy, imported on first use: the CUDA runtime that the backend, the Triton adapter and the
kernels share (below all of them)."""

from __future__ import annotations

import functools


@functools.cache
def cupy():
    """CuPy, imported on first use; RuntimeError (PyTorch's words) without a usable GPU."""
    import cupy as cp
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except cp.cuda.runtime.CUDARuntimeError as e:
        raise RuntimeError(f"Found no NVIDIA driver on your system ({e})") from None
    if n == 0:
        raise RuntimeError("No CUDA GPUs are available")
    return cp
