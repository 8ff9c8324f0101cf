"""Data-dependent argument checks on the GPU without a host synchronisation.

An op whose arguments can only be validated by looking at their values (indices in bounds for
embedding / gather / index_select / indexing, class targets of the losses, probabilities of
multinomial) asks its backend to check them (``Backend.check_index`` /
``check_probabilities``). The CPU backend looks at once and raises PyTorch's error. Here a
small Triton kernel (``check_kernels.check``) runs after the op's own work on the same
stream and records the first failure in the device's error flag (four int64 words, one
array per device); the host is not waited for. The next call that synchronises anyway
(``Tensor.item``, ``.cpu()``, ``.tolist()``, printing, ``ember.cuda.synchronize``) reads the
flag of each device with checks pending (``raise_pending``), clears it, and raises PyTorch's
``RuntimeError`` ("CUDA error: device-side assert triggered") naming the op and the bad value.
With ``EMBER_CUDA_SYNC_CHECKS=1`` the flag is read right after each check, so the error
comes from the op itself (PyTorch's ``CUDA_LAUNCH_BLOCKING=1`` debugging mode).

The wrappers take CuPy arrays on the GPU and numpy arrays under Triton's interpreter (CI),
where the flag is a numpy array too.

``STATS`` counts what reaches across to the host: ``d2h`` (device-to-host copies the CUDA
backend makes: ``to_host`` and its callers), ``syncs`` (host waits for the device: copies
to the host and ``synchronize``), ``flag_reads`` (reads of an error flag, each inside a call
that synchronises anyway) and ``checks`` (check kernels launched).
"""

from __future__ import annotations

import os

import numpy as np

from . import triton_adapter as adapter
from .runtime import cupy

STATS = {"d2h": 0, "syncs": 0, "flag_reads": 0, "checks": 0}
BLOCK = 1024
INDEX, PROBABILITIES, TOTALS, UNIT = 0, 1, 2, 3

# code -> (op name, message template); code 0 means "no error". A template is formatted with
# the recorded value ``v`` and the bounds ``lo``, ``hi``.
_MESSAGES: list = [None]
_CODES: dict = {}
_FLAGS: dict = {}  # device key -> the flag array
_PENDING: set = set()  # device keys with checks launched since their flag was last read


def sync_checks() -> bool:
    """Whether each check is read at its op (``EMBER_CUDA_SYNC_CHECKS=1``): read per call, so
    it can be switched on in a running process."""
    return os.environ.get("EMBER_CUDA_SYNC_CHECKS", "0") not in ("", "0")


def kernels():
    """The Triton kernel module (check_kernels.py), imported at its first use."""
    return adapter.kernel_module("check_kernels")


def _code(op: str, template: str) -> int:
    key = (op, template)
    code = _CODES.get(key)
    if code is None:
        code = _CODES[key] = len(_MESSAGES)
        _MESSAGES.append(key)
    return code


def _key(a):
    return "host" if isinstance(a, np.ndarray) else a.device.id


def flag(a):
    """The error flag of the device holding ``a`` (created cleared on first use)."""
    key = _key(a)
    f = _FLAGS.get(key)
    if f is None:
        if key == "host":
            f = np.zeros(4, np.int64)
        else:
            with a.device:
                f = cupy().zeros(4, np.int64)
        f = _FLAGS.setdefault(key, f)
    return f


def launch(a, kind: int, op: str, template: str, lo: int = 0, hi: int = 0,
           ignore: int | None = None) -> None:
    """Check every element of ``a`` on its device (``kind``: INDEX, in ``[lo, hi)`` unless
    equal to ``ignore``; PROBABILITIES, not negative / NaN / inf; TOTALS, greater than 0;
    UNIT, in [0, 1]);
    the first failure goes into the device's flag under ``op`` and ``template``. No host
    synchronisation, except with ``EMBER_CUDA_SYNC_CHECKS=1``, which raises here."""
    if a.size == 0:
        return
    flat = a.reshape(-1)
    if not flat.flags.c_contiguous:
        flat = flat.copy()
    f = flag(flat)
    code = _code(op, template)
    if adapter.interpreting():
        ptrs = [flat, f]
    else:
        ptrs = [adapter.Pointer(flat.data.ptr, flat.dtype), adapter.Pointer(f.data.ptr, f.dtype)]
    args = [ptrs[0], flat.size, lo, hi, 0 if ignore is None else ignore, ptrs[1], code]
    STATS["checks"] += 1
    # on the current device and stream, where the op that made ``a`` ran
    adapter.launch(kernels().check, (-(-flat.size // BLOCK),), args, num_warps=4, KIND=kind,
                   HAS_IGNORE=ignore is not None, BLOCK=BLOCK)
    key = _key(flat)
    _PENDING.add(key)
    if sync_checks():
        raise_pending(key, at_op=True)


def check_index(index, lo: int, hi: int, op: str, what: str = "index",
                ignore: int | None = None) -> None:
    """The device side of ``Backend.check_index``: every element of ``index`` in
    ``[lo, hi)`` (``ignore`` aside), reported as ``op``'s ``what``."""
    template = f"{what} {{v}} out of range for size {{hi}}" if lo == 0 else \
        f"{what} {{v}} out of range [{{lo}}, {{hi}})"
    launch(index, INDEX, op, template, lo, hi, ignore)


def check_probabilities(p, totals, op: str) -> None:
    """The device side of ``Backend.check_probabilities``, in PyTorch's order: a negative,
    NaN or infinite weight or row sum, then a row sum that is not positive."""
    bad = "probability tensor contains either `inf`, `nan` or element < 0"
    launch(p, PROBABILITIES, op, bad + " (element {v} of the rows)")
    launch(totals, PROBABILITIES, op, bad + " (the sum of row {v})")
    launch(totals, TOTALS, op,
           "invalid multinomial distribution (sum of probabilities <= 0) (row {v})")


def check_unit_interval(a, op: str, what: str) -> None:
    """The device side of ``Backend.check_unit_interval``: every element of ``a`` in [0, 1],
    reported as ``op``'s ``what`` (NaN fails)."""
    launch(a, UNIT, op, f"{what} (element {{v}}) is not in [0, 1]")


def message(words, at_op: bool = False) -> str:
    """PyTorch's words for a device-side failure, from a flag's four words."""
    code, v, lo, hi = (int(w) for w in words)
    op, template = _MESSAGES[code]
    detail = template.format(v=v, lo=lo, hi=hi)
    where = ("" if at_op else " The check ran on the device and is reported at the first "
             "call that synchronises after it; set EMBER_CUDA_SYNC_CHECKS=1 to raise at the op.")
    return f"CUDA error: device-side assert triggered: {op}: {detail}.{where}"


def raise_pending(key=None, at_op: bool = False) -> None:
    """Read (and clear) the flag of device ``key`` (every device with checks pending when
    None); RuntimeError naming the first recorded failure. A device without checks launched
    since its last read is not read."""
    keys = [key] if key is not None else list(_PENDING)
    for k in keys:
        if k not in _PENDING:
            continue
        _PENDING.discard(k)
        f = _FLAGS[k]
        STATS["flag_reads"] += 1
        if k == "host":
            words = f.copy()
        else:
            with cupy().cuda.Device(k):
                words = f.get()
        if words[0]:
            f[...] = 0
            raise RuntimeError(message(words, at_op))
