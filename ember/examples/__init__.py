"""Runnable example programs (``python -m ember.examples.<name>``)."""

from __future__ import annotations

import importlib.util
import os


def load(name: str, backend: str = "ember"):
    """Example ``name`` imported against ``backend`` (a library with PyTorch's API, e.g.
    "ember" or "torch"), as a fresh module: the examples pick their library at import time
    from EMBER_EXAMPLE_BACKEND, so comparing two libraries in one process needs one copy each.
    """
    path = os.path.join(os.path.dirname(__file__), f"{name}.py")
    old = os.environ.get("EMBER_EXAMPLE_BACKEND")
    os.environ["EMBER_EXAMPLE_BACKEND"] = backend
    try:
        spec = importlib.util.spec_from_file_location(f"ember.examples.{name}[{backend}]", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if old is None:
            del os.environ["EMBER_EXAMPLE_BACKEND"]
        else:
            os.environ["EMBER_EXAMPLE_BACKEND"] = old
    return mod
