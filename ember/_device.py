"""Device objects, and which device types have a backend in this process."""

from __future__ import annotations

# what ``with device(...)`` does on entering and leaving: ``_dispatch`` (which sits above)
# registers the per-thread default device's push and pop here
CONTEXT_HOOKS: list = []


class device:
    """``ember.device("cpu")``, ``device("cuda", 0)``, ``device("meta")``. As a context
    manager, the device factories allocate on when given none (on this thread)."""

    __slots__ = ("index", "type")

    def __init__(self, type, index: int | None = None):
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if isinstance(type, int):
            type, index = "cuda", type
        if not isinstance(type, str):
            raise TypeError(f"device(): expected a string or device, got {type!r}")
        name, _, idx = type.partition(":")
        if name not in ("cpu", "cuda", "meta"):
            raise RuntimeError(
                f"Expected one of cpu, cuda, meta device type at start of device string: {type}")
        if idx:
            if index is not None:
                raise RuntimeError(f"device(): index given twice in {type!r}")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(idx)
        self.type, self.index = name, index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        idx = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{idx})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __enter__(self):
        CONTEXT_HOOKS[0](self)
        return self

    def __exit__(self, *exc):
        CONTEXT_HOOKS[1](self)
        return False


CPU = device("cpu")


class OutOfMemoryError(RuntimeError):
    """A device allocation that does not fit (``ember.OutOfMemoryError``, also
    ``ember.cuda.OutOfMemoryError``, as PyTorch's)."""


# the device types with a backend in this process (backends/base.register adds them)
AVAILABLE: set[str] = set()


def check_device(dev) -> device:
    """Resolve a ``device=`` argument; raises for device types without a backend."""
    if dev is None:
        return CPU
    if not isinstance(dev, device):
        dev = device(dev)
    if dev.type not in AVAILABLE:
        have = ", ".join(sorted(AVAILABLE))
        need = " (the CUDA backend needs CuPy, ``pip install ember[cuda]``, and an NVIDIA " \
            "GPU)" if dev.type == "cuda" else ""
        raise RuntimeError(f"ember: device '{dev}' is not available{need}; the backends in "
                           f"this process are: {have}")
    return CPU if dev.type == "cpu" else dev
