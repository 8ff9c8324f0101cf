"""CuPy, imported on first use: the CUDA runtime that the backend, the Triton adapter and the
kernels share (below all of them).

Fork safety: CUDA cannot be used in a child forked after its parent initialised it (the
driver's state does not survive ``fork``). ``cupy()`` is where the process initialises CUDA;
the at-fork hook below marks a child forked after that as a bad fork, and from then on
``cupy()`` (and so every CUDA call of ember: the allocator, the kernels, ``ember.cuda``)
raises PyTorch's RuntimeError. ``_STATE`` is the whole state: the hook and ``check_fork``
read and write nothing else."""

from __future__ import annotations

import os

# "cp": CuPy once CUDA is initialised (None before); "count": the device count seen then;
# "bad_fork": this process was forked after its parent initialised CUDA
_STATE: dict = {"cp": None, "count": 0, "bad_fork": False}

# called once, with CuPy, when CUDA is first initialised (the memory module installs its
# allocator here); lower layers cannot import the modules that register them
INIT_HOOKS: list = []

FORK_ERROR = ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
              "multiprocessing, you must use the 'spawn' start method")


def cupy():
    """CuPy, imported on first use; RuntimeError (PyTorch's words) without a usable GPU, or in
    a child forked after the parent initialised CUDA."""
    cp = _STATE["cp"]
    if cp is None or _STATE["bad_fork"]:
        return _initialise()
    return cp


def _initialise():
    check_fork()
    import cupy as cp
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except cp.cuda.runtime.CUDARuntimeError as e:
        raise RuntimeError(f"Found no NVIDIA driver on your system ({e})") from None
    if n == 0:
        raise RuntimeError("No CUDA GPUs are available")
    for hook in INIT_HOOKS:
        hook(cp)
    _STATE["count"] = n
    _STATE["cp"] = cp
    return cp


def initialized() -> bool:
    """Whether this process has initialised CUDA (and may use it: not a bad fork)."""
    return _STATE["cp"] is not None and not _STATE["bad_fork"]


def in_bad_fork() -> bool:
    return _STATE["bad_fork"]


def check_fork() -> None:
    """RuntimeError in a child forked after its parent initialised CUDA."""
    if _STATE["bad_fork"]:
        raise RuntimeError(FORK_ERROR)


def device_count() -> int:
    """The number of GPUs (0 without a driver). A bad fork answers its parent's count without
    touching CUDA, as PyTorch does; the first use of a device then raises."""
    if _STATE["cp"] is not None:
        return _STATE["count"]
    try:
        cupy()
    except (RuntimeError, ImportError):
        return 0
    return _STATE["count"]


def after_fork_in_child() -> None:
    """The at-fork hook of the child: a process forked after CUDA was initialised cannot use
    it."""
    if _STATE["cp"] is not None:
        _STATE["bad_fork"] = True


os.register_at_fork(after_in_child=after_fork_in_child)


def nvidia_library(name: str, what: str):
    """``lib<name>`` of the CUDA wheels (or the toolkit) as a ctypes library, loaded after
    CuPy (which finds the CUDA libraries); RuntimeError naming ``what`` needs it where it is
    missing."""
    import ctypes
    cupy()
    try:
        from cuda import pathfinder
        return ctypes.CDLL(pathfinder.load_nvidia_dynamic_lib(name).abs_path)
    except (ImportError, RuntimeError, OSError, AttributeError):
        for soname in (f"lib{name}.so.13", f"lib{name}.so.12", f"lib{name}.so"):
            try:
                return ctypes.CDLL(soname)
            except OSError:
                continue
    raise RuntimeError(f"{what} needs lib{name}, which was not found: install the CUDA toolkit "
                       "or CuPy's CUDA wheels")
