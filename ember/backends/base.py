"""The Backend interface: what the layers above ``backends/`` may ask of a device's arrays.

A Tensor holds a backend array (``_data``) and names its backend (``_backend``); the
dispatcher, Tensor's metadata and the autograd engine ask that backend for everything that
depends on what the array is. Nothing above ``backends/`` tests ``np.ndarray`` to mean "a
tensor's data" or calls numpy for array work on it:

    xp                 the array module op kernels compute with (``impl(xp, ...)``), and
                       ``XP_API``: the names of it the kernels may use
    array_type         the type of this backend's arrays
    overrides          op name -> kernels faster than the generic impl on this backend
                       (registered by the backend, or by a higher layer into it)
    has_data           False where arrays have a layout but no memory (``meta``)
    fused_step         a step of a layer above the op table that this backend runs in one
                       call (an optimizer's update of all its parameters), or None
    check_index / check_probabilities / check_unit_interval
                       data-dependent argument checks (indices in bounds, valid
                       probabilities, values in [0, 1]): eager here, raising PyTorch's error
                       at once; a device backend may record failures on the device and raise
                       at its next synchronising call instead (kernels reach them as
                       ``xp.check_index``, ...)
    empty / from_host / to_host / copy_into   allocation and copies
    strides / storage / storage_offset / data_ptr / writeable / may_share_memory /
    shares_memory      layout and aliasing queries

Backends register themselves by device type (``register``; ``get`` looks them up).
"""

from __future__ import annotations

from collections.abc import Callable

from .. import _device
from .._device import device

BACKENDS: dict[str, Backend] = {}

# What kernels raise on bad input, which the dispatcher turns into PyTorch's errors (each
# backend adds its own: numpy's LinAlgError, ...). Read at each ``except``, so a backend
# registered later takes part.
# the array types of the backends in use (a set, so importers see later additions): what
# kernels test to tell a tensor's array from a Python scalar
ARRAY_TYPES: set = set()
KERNEL_ERRORS: tuple = (ValueError, IndexError, TypeError, FloatingPointError, OverflowError)
LINALG_ERRORS: tuple = ()


class Backend:
    """One device type's arrays. See the module docstring for the contract."""

    name = ""  # the device type
    xp = None
    array_type: type = object
    device_obj: device | None = None
    has_data = True  # False for the meta backend: its arrays are layouts without memory

    def __init__(self):
        # op name -> {kind: kernel}; kinds: "binary" (``f(a, b)`` on two arrays of one float
        # dtype, same result as the impl), "inplace" (``into(self_tensor, args, kwargs) ->
        # bool``: computed in self's memory, False when it does not apply)
        self.overrides: dict[str, dict[str, Callable]] = {}
        # step name ("adam") -> what runs it; its protocol is its caller's (optim/adam.py)
        self.fused_steps: dict[str, object] = {}

    def override(self, op_name: str, kind: str, kernel: Callable) -> None:
        """Register ``kernel`` as this backend's ``kind`` override of op ``op_name``."""
        slot = self.overrides.setdefault(op_name, {})
        if kind in slot:
            raise RuntimeError(f"{self.name}: {kind} override of {op_name!r} registered twice")
        slot[kind] = kernel

    def overrides_of(self, op_name: str) -> dict[str, Callable]:
        return self.overrides.get(op_name, {})

    def offer_step(self, name: str, step) -> None:
        """Register ``step`` as this backend's fused ``name`` step."""
        if name in self.fused_steps:
            raise RuntimeError(f"{self.name}: fused step {name!r} registered twice")
        self.fused_steps[name] = step

    def fused_step(self, name: str):
        """This backend's fused ``name`` step, or None (the caller computes op by op)."""
        return self.fused_steps.get(name)

    # ---------------------------------------------------------------- checks
    def check_index(self, index, lo: int, hi: int, op: str, error, *, what: str = "index",
                    ignore: int | None = None) -> None:
        """Every element of the integer array ``index`` lies in ``[lo, hi)``, those equal to
        ``ignore`` aside; else ``error(first bad value)`` (an exception, PyTorch's for ``op``)
        is raised. ``what`` names the values in a device backend's report ("index",
        "target")."""
        if not index.size:
            return
        flat = index.reshape(-1)
        if ignore is None:
            if flat.min() >= lo and flat.max() < hi:
                return
            bad = (flat < lo) | (flat >= hi)
        else:
            bad = ((flat < lo) | (flat >= hi)) & (flat != ignore)
            if not bad.any():
                return
        raise error(flat[self.xp.argmax(bad)].item())

    def check_probabilities(self, p, totals, op: str) -> None:
        """``p`` holds no negative, NaN or infinite element, and ``totals`` (its row sums)
        are positive; else PyTorch's RuntimeError."""
        xp = self.xp
        if not (p.min() >= 0 and xp.isfinite(totals).all()):  # NaN fails the first test
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if xp.any(totals <= 0):
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")

    def check_unit_interval(self, a, op: str, error, *, what: str = "value") -> None:
        """Every element of the float array ``a`` lies in [0, 1] (NaN does not); else
        ``error(position of the first bad element)`` is raised. ``what`` names the values in
        a device backend's report ("probability")."""
        ok = (a >= 0) & (a <= 1)
        if not ok.all():
            raise error(int(self.xp.argmax(~ok.reshape(-1))))

    # ---------------------------------------------------------------- interface
    def device_of(self, a) -> device:
        return self.device_obj

    def empty(self, shape: tuple, np_dtype, device: device | None = None):
        raise NotImplementedError

    def from_host(self, a, device: device | None = None):
        """A copy of the host (numpy) array ``a`` on this backend's device."""
        raise NotImplementedError

    def to_host(self, a):
        """``a`` as a numpy array (a copy unless ``a`` already lives in host memory)."""
        raise NotImplementedError

    def copy_into(self, dst, src) -> None:
        """Write ``src`` (broadcastable to ``dst``) into ``dst``, casting as needed."""
        raise NotImplementedError

    def strides(self, a) -> tuple:
        """Strides in elements (PyTorch's ``stride()``), from an array's byte strides (numpy's
        and CuPy's); an empty array's are the contiguous ones, as PyTorch reports them
        (numpy's are arbitrary there)."""
        isz = a.itemsize
        if a.size == 0:
            out, acc = [], 1
            for n in reversed(a.shape):
                out.append(acc)
                acc *= max(n, 1)
            return tuple(reversed(out))
        return tuple(s // isz for s in a.strides)

    def storage(self, a):
        """The array owning ``a``'s memory."""
        raise NotImplementedError

    def storage_offset(self, a) -> int:
        raise NotImplementedError

    def uniform_draws(self, shape: tuple, generator, op: str):
        """float64 draws, uniform on [0, 1), of ``shape`` on this backend's device from
        ``generator`` (an ``ember.Generator``; None: the device's default stream)."""
        raise NotImplementedError

    def storage_nbytes(self, a) -> int:
        """The bytes of the storage ``storage_offset`` counts into (PyTorch's
        ``untyped_storage().nbytes()``)."""
        raise NotImplementedError

    def strided_view(self, a, shape: tuple, strides: tuple, offset: int | None = None):
        """A view of ``a``'s storage with ``shape`` and element ``strides``, starting
        ``offset`` elements into the storage (None: where ``a`` starts)."""
        raise NotImplementedError

    def data_ptr(self, a) -> int:
        raise NotImplementedError

    def writeable(self, a) -> bool:
        """False for views where several elements share one memory location."""
        raise NotImplementedError

    def writeable_alias(self, a):
        """A writeable array over the memory of ``a``, a read-only view whose elements do not
        alias each other (numpy's broadcast views); None where there is none."""
        return None

    def may_share_memory(self, a, b) -> bool:
        raise NotImplementedError

    def shares_memory(self, a, b) -> bool:
        raise NotImplementedError


def register(backend: Backend, linalg_errors: tuple = ()) -> Backend:
    """Make ``backend`` the one of its device type; ``linalg_errors``: what its linear algebra
    raises for singular or ill-posed input (PyTorch's RuntimeError)."""
    global KERNEL_ERRORS, LINALG_ERRORS
    if backend.name in BACKENDS:
        raise RuntimeError(f"backend {backend.name!r} registered twice")
    BACKENDS[backend.name] = backend
    _device.AVAILABLE.add(backend.name)
    new = tuple(e for e in linalg_errors if e not in LINALG_ERRORS)
    LINALG_ERRORS += new
    KERNEL_ERRORS += new
    return backend


def unregister(name: str) -> None:
    """Remove the backend of device type ``name`` (a plugin unloading; tests)."""
    BACKENDS.pop(name)
    _device.AVAILABLE.discard(name)


def transfer(a, dst: Backend, device=None, non_blocking: bool = False):
    """A copy of array ``a`` (of any backend) on ``dst``'s ``device`` (``non_blocking``: a
    backend that can copies host memory asynchronously; only the CUDA backend takes it)."""
    src = next((b for b in BACKENDS.values() if isinstance(a, b.array_type)), None)
    if src is dst and hasattr(dst, "to_device"):
        return dst.to_device(a, device)
    host = a if src is None else src.to_host(a)
    if non_blocking:
        return dst.from_host(host, device, non_blocking=True)
    return dst.from_host(host, device)


def scalars_moved(v, backend: Backend):
    """An argument array of a zero-dim CPU tensor (or a list of them) on ``backend``: PyTorch
    takes those beside tensors of another device as scalars."""
    cpu = BACKENDS["cpu"]
    if type(v) is cpu.array_type:
        return backend.from_host(v)
    if isinstance(v, list):
        return [scalars_moved(x, backend) for x in v]
    return v


def of_device(dev) -> Backend:
    """The backend of a ``device=`` argument (a device, a string like "cuda:0", an int)."""
    return get(_device.check_device(dev).type)


def get(device_type: str) -> Backend:
    b = BACKENDS.get(device_type)
    if b is None:
        raise RuntimeError(f"ember: no backend for device type '{device_type}' in this build")
    return b


def contiguous_strides(shape) -> tuple:
    """The element strides of a C-contiguous array of ``shape``."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))
