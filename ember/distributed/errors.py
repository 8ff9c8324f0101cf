"""The exception classes of ``ember.distributed`` (PyTorch's names and hierarchy: every one a
RuntimeError, so code that catches RuntimeError still catches them)."""


class DistError(RuntimeError):
    """An error in the distributed package."""


class DistBackendError(DistError):
    """A collective or point-to-point operation failed or timed out in the engine."""


class DistStoreError(DistError):
    """A key-value store operation failed or timed out."""


class DistNetworkError(DistError):
    """A network error (connecting to a store, for example)."""
