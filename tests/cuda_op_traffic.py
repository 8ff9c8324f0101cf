"""What each op of the OpInfo table reads back from the GPU, by ember's own counters
(``test_cuda_checks.test_op_table_reads`` runs this file in a child process): it calls every
op of test_opdb.py's ENTRIES on OpInfo's CUDA samples (float32 and int64, two samples each)
and counts, around the op call alone (inputs made and the device drained first, the output
left unread):

    d2h     device-to-host copies through the CUDA backend (``checks.STATS``: ``to_host``,
            which item, tolist, .cpu() and printing use)
    syncs   waits for the device through the backend (``synchronize``, ``to_host``)
    host    results a kernel returned as host values (numpy-only kernels on data read back:
            ember.ops.registry.HOST_RESULTS)

and prints one JSON object: op id -> [d2h, syncs, host] summed over its samples (ops with all
three zero left out), plus "_errors": op id -> the first error (ops that do not run on CUDA).
Reads that CuPy makes inside its own calls (``bool()`` or ``int()`` of a device array) are not
seen: a preloaded counter of CUDA runtime calls sees none of CuPy 14's either (its runtime
reaches the driver through cuGetProcAddress), which would take CUPTI.

Usage: python cuda_op_traffic.py
"""

from __future__ import annotations

import itertools
import json

import torch

import ember
from ember.ops import registry
from test_opdb import ENTRIES, Unconvertible, to_ember

DTYPES = (torch.float32, torch.int64)
SAMPLES = 2


def main() -> dict:
    from ember.backends.cuda import checks

    def now():
        c = checks.STATS
        return c["d2h"], c["syncs"], sum(registry.HOST_RESULTS.values())

    reads, errors = {}, {}
    for name, o, fn in ENTRIES:
        total = [0, 0, 0]
        for dtype in DTYPES:
            if dtype not in o.supported_dtypes("cuda"):
                continue
            torch.manual_seed(0)
            try:
                samples = list(itertools.islice(o.sample_inputs_func(o, "cuda", dtype, False),
                                                SAMPLES))
            except Exception:  # noqa: BLE001  torch cannot build samples for this dtype
                continue
            for s in samples:
                try:
                    o.op(s.input, *s.args, **s.kwargs)
                except Exception:  # noqa: BLE001  torch rejects this sample (as test_opdb)
                    continue
                try:
                    args = to_ember((s.input, *s.args))
                    kwargs = to_ember(s.kwargs)
                except Unconvertible:
                    continue
                try:
                    ember.cuda.synchronize()
                except RuntimeError:
                    pass  # a failure an earlier op recorded
                before = now()
                try:
                    fn(*args, **kwargs)
                except Exception as e:  # noqa: BLE001  an op that does not run on CUDA
                    errors.setdefault(name, f"{type(e).__name__}: {str(e)[:200]}")
                after = now()
                total = [t + b - a for t, a, b in zip(total, before, after)]
        if any(total):
            reads[name] = total
    reads["_errors"] = errors
    return reads


if __name__ == "__main__":
    print(json.dumps(main(), sort_keys=True))
