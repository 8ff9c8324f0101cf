"""The OpInfo net of test_opdb.py on the GPU: every OpInfo whose op ember has, on OpInfo's
own CUDA samples, against torch's CUDA results (part of the GPU tier: ``-m cuda``).

``KNOWN_CUDA`` lists the ops that do not run on ember's CUDA backend yet, with the first
error: kernels marked ``# numpy-only`` (ufunc ``.at``, numpy's Generator, ...), host-side
work on tensor data. An entry that starts passing fails the suite and must be removed, so
the list is the backend's honest inventory.
"""

from __future__ import annotations

import pytest

from test_cuda import GPU_TIER
from test_opdb import ENTRIES, op_failures

pytestmark = GPU_TIER

KNOWN_CUDA: dict[str, str] = {
    "__rmod__":
        "integer division by zero: ember raises as torch's CPU does; torch's CUDA does not",
    "abs":
        "dtype support differs by device: torch's CUDA kernel takes a dtype its CPU refuses",
    "histc":
        "dtype support differs by device: torch's CUDA kernel takes a dtype its CPU refuses",
    "mode":
        "ties: torch's CUDA mode returned 2 where its CPU rule (the smallest modal value, "
        "ember's) gives 1 (measured on the H200)",
    "nn.functional.softsign":
        "dtype support differs by device: torch's CUDA kernel takes a dtype its CPU refuses",
    "trace":
        "dtype support differs by device: torch's CUDA kernel takes a dtype its CPU refuses",
}


@pytest.fixture(autouse=True)
def ieee_convolutions(monkeypatch):
    """Convolutions in IEEE float32 on both sides (ember's kernels and torch's cuDNN default
    to TF32, whose roundings differ by more than the float32 tolerance)."""
    import ember
    import torch
    monkeypatch.setattr(ember.backends.cudnn, "allow_tf32", False)
    # (torch's test utilities freeze the global flags: the context manager is what is left)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        yield


@pytest.mark.parametrize("entry", ENTRIES, ids=[e[0] for e in ENTRIES])
def test_op_matches_torch_cuda(entry):
    name, o, fn = entry
    failures = op_failures(o, fn, "cuda")
    if name in KNOWN_CUDA:
        assert failures, f"{name} now matches torch on CUDA: remove it from KNOWN_CUDA"
        return
    assert not failures, f"{name}:\n" + "\n".join(failures)


def test_known_cuda_names_are_ops():
    stale = sorted(set(KNOWN_CUDA) - {e[0] for e in ENTRIES})
    assert not stale, f"KNOWN_CUDA names ops this file does not run: {stale}"
