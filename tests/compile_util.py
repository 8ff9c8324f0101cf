"""Shared helpers of the compiler tests: a fresh compiler state per test, seeded inputs, and
the comparison of a compiled result with eager ember's.

Import the fixture to use it (``from compile_util import fresh_compiler``): it is autouse, so
importing it into a test module applies it to every test there.
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle import TOL, assert_same, to_torch

import ember
from ember.compiler import reset


@pytest.fixture(autouse=True)
def fresh_compiler(tmp_path_factory, monkeypatch):
    """Every test starts with no compiled entries and a session-wide kernel cache directory
    (so tests never read or fill the user's cache)."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ember_cache"))
    reset()
    yield
    reset()


def rand(*shape, dtype=ember.float32, seed=0) -> ember.Tensor:
    """Standard normal values from numpy's seeded generator (the same for every library)."""
    a = np.random.default_rng(seed).standard_normal(shape)
    return ember.tensor(a.astype(np.float32)).to(dtype)


def close(a, b, scale: float = 1.0) -> None:
    """Compiled ``a`` against eager ember ``b`` (tensors or nested tuples/lists), within the
    dtype's tolerance times ``scale``. Eager ember itself is checked against torch by the op
    tests."""
    if isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b)
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, scale)
        return
    rtol, atol = TOL.get(b.dtype.name, (0, 0))
    assert_same(a, to_torch(b.detach()), rtol=rtol * scale, atol=atol * scale)
