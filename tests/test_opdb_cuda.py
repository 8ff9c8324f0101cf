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
    "as_strided":
        "numpy-only kernel (as_strided over the storage)",
    "as_strided.partial_views":
        "numpy-only kernel (as_strided over the storage)",
    "bernoulli":
        "random ops draw from numpy's Generator on the host: needs Philox on the device",
    "digamma":
        "special functions are numpy's (backends/special.py): needs CUDA library kernels",
    "histc":
        "dtype support differs by device: torch's CUDA kernel takes a dtype its CPU refuses",
    "index_put":
        "host-side work on the tensor's data (index/embedding writes, searchsorted)",
    "mode":
        "ufunc .at/.accumulate: CuPy lacks it for this ufunc or dtype (numpy-only kernel)",
    "multinomial":
        "random ops draw from numpy's Generator on the host: needs Philox on the device",
    "mvlgamma.mvlgamma_p_1":
        "special functions are numpy's (backends/special.py): needs CUDA library kernels",
    "mvlgamma.mvlgamma_p_3":
        "special functions are numpy's (backends/special.py): needs CUDA library kernels",
    "mvlgamma.mvlgamma_p_5":
        "special functions are numpy's (backends/special.py): needs CUDA library kernels",
    "nn.functional.rrelu":
        "random ops draw from numpy's Generator on the host: needs Philox on the device",
    "nn.functional.softsign":
        "dtype support differs by device: torch's CUDA kernel takes a dtype its CPU refuses",
    "polygamma.polygamma_n_0":
        "special functions are numpy's (backends/special.py): needs CUDA library kernels",
    "polygamma.polygamma_n_1":
        "special functions are numpy's (backends/special.py): needs CUDA library kernels",
    "polygamma.polygamma_n_2":
        "special functions are numpy's (backends/special.py): needs CUDA library kernels",
    "polygamma.polygamma_n_3":
        "special functions are numpy's (backends/special.py): needs CUDA library kernels",
    "polygamma.polygamma_n_4":
        "special functions are numpy's (backends/special.py): needs CUDA library kernels",
    "searchsorted":
        "host-side work on the tensor's data (index/embedding writes, searchsorted)",
    "trace":
        "dtype support differs by device: torch's CUDA kernel takes a dtype its CPU refuses",
    "unfold":
        "numpy-only kernel (as_strided over the storage)",
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
