"""Derive PyTorch's autocast op lists by running torch, for ember's ``amp/autocast_lists.py``.

Each case of ``autocast_cases`` runs under ``torch.autocast`` with its float inputs in several
dtypes, and the dtype of its first float output says what autocast did to the call:

    lower     float32 inputs come out in the autocast dtype
    fp32      inputs in the autocast dtype come out in float32 (or complex64) where they would
              not without autocast
    promote   inputs in the *other* half type raise under autocast only (torch promotes
              the float inputs to the widest of them and the autocast dtype, and refuses a
              half type that is not the autocast dtype)
    banned    the call raises under autocast only
    None      autocast leaves the call alone

CPU runs on real tensors. CUDA runs on fake CUDA tensors (``FakeTensorMode``): the CPU build of
torch has the CUDA autocast kernels, so torch's own CUDA behaviour is observed without a GPU;
autocast is switched on with ``torch.set_autocast_enabled`` since ``torch.autocast("cuda")``
refuses without a device.

    python tests/autocast_derive.py         # print the tables
"""

from __future__ import annotations

import contextlib
import warnings

import torch
from autocast_cases import CASES, COMPOSITES, run

HALF = {torch.bfloat16: torch.float16, torch.float16: torch.bfloat16}
NAME = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}


def first_float_dtype(res):
    """The dtype of the first floating or complex tensor in ``res`` (tuples flattened)."""
    if isinstance(res, torch.Tensor):
        return res.dtype if res.is_floating_point() or res.is_complex() else None
    if isinstance(res, (tuple, list)):
        for r in res:
            d = first_float_dtype(r)
            if d is not None:
                return d
    return None


@contextlib.contextmanager
def _autocast(device: str, dtype, on: bool):
    if not on:
        yield
        return
    prev = (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device),
            torch.is_autocast_cache_enabled())
    torch.set_autocast_enabled(device, True)
    torch.set_autocast_dtype(device, dtype)
    torch.set_autocast_cache_enabled(False)
    try:
        yield
    finally:
        torch.set_autocast_enabled(device, prev[0])
        torch.set_autocast_dtype(device, prev[1])
        torch.set_autocast_cache_enabled(prev[2])


def _mode(device: str):
    if device == "cpu":
        return contextlib.nullcontext()
    from torch._subclasses.fake_tensor import FakeTensorMode
    return FakeTensorMode(allow_non_fake_inputs=True)


def observe(name: str, device: str, dtype, floats, on: bool):
    """The first float output dtype of case ``name`` (or the exception it raised)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with _mode(device), _autocast(device, dtype, on):
                return first_float_dtype(run(name, torch, tuple(NAME[f] for f in floats),
                                             device))
        except Exception as e:  # noqa: BLE001 -- any failure is an observation
            return e


def classify(name: str, device: str, dtype) -> str | None:
    """What ``torch.autocast(device, dtype)`` does to case ``name`` (see the module doc)."""
    f32, low, other = torch.float32, dtype, HALF[dtype]
    out = {(f, on): observe(name, device, dtype, (f,), on)
           for f in (f32, low, other) for on in (False, True)}
    err = [isinstance(v, Exception) for v in out.values()]
    if all(isinstance(out[f, True], Exception) for f in (f32, low)) and \
            not isinstance(out[f32, False], Exception):
        return "banned"
    if any(err) and all(isinstance(out[f, True], Exception) for f in (f32, low, other)):
        return None  # the case does not run here (a fake tensor cannot run it)
    if out[f32, True] == low and out[f32, False] == f32:
        return "lower"
    if out[low, True] in (f32, torch.complex64) and out[low, True] != out[low, False]:
        return "fp32"
    if isinstance(out[other, True], Exception) and not isinstance(out[other, False], Exception) \
            and not isinstance(out[low, True], Exception):
        return "promote"
    return None


def derive(device: str, dtype, names=None) -> dict[str, str]:
    """case name -> policy, for the cases autocast changes."""
    names = list(CASES) if names is None else names
    return {n: p for n in names if (p := classify(n, device, dtype)) is not None}


def autocast_kernels(device: str) -> set[str]:
    """The aten op names (without overload) that have a kernel of their own for ``device``'s
    autocast dispatch key: the ops that autocast may change at all."""
    key = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA"}[device]
    C = torch._C
    return {n.split("::")[1].split(".")[0] for n in C._dispatch_get_all_op_names()
            if n.startswith("aten::") and C._dispatch_has_kernel_for_dispatch_key(n, key)}


if __name__ == "__main__":
    for dev, dts in (("cpu", (torch.bfloat16, torch.float16)),
                     ("cuda", (torch.float16, torch.bfloat16))):
        tables = [derive(dev, dt, list(CASES) + list(COMPOSITES)) for dt in dts]
        if tables[0] != tables[1]:
            print(f"# {dev}: the two dtypes differ: ",
                  {k: (tables[0].get(k), tables[1].get(k))
                   for k in set(tables[0]) | set(tables[1]) if tables[0].get(k) !=
                   tables[1].get(k)})
        for policy in ("lower", "fp32", "promote", "banned"):
            print(dev, policy, sorted(k for k, p in tables[0].items() if p == policy))
