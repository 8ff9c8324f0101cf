"""The meta backend: tensors with shape, dtype and strides but no data (``device="meta"``).

PyTorch users build large models on ``meta`` and materialise them later (``to_empty``,
``load_state_dict(..., assign=True)``). A meta tensor's array is a ``MetaArray``: the layout
numpy would report (shape, numpy dtype, strides, offset) over a ``MetaStorage`` that holds a
size and nothing else. No kernel runs on the meta device: the dispatcher computes an op's
results from the op table's ``meta`` rules (``ember/ops/meta_rule.py``); this module only
answers the Backend interface's layout and aliasing questions, and refuses to hand out data.

A view op needs its output's strides, which only the op's impl knows: ``probe`` gives numpy
arrays with a meta array's exact layout over address space that holds no memory (an
anonymous, read-only, never-touched mapping), so the impl can compute the view's layout
without any data existing.
"""

from __future__ import annotations

import mmap

import numpy as np

from .._device import device
from .base import ARRAY_TYPES, Backend, contiguous_strides, register

NO_DATA = "Cannot copy out of meta tensor; no data!"


class MetaStorage:
    """The storage of meta tensors: a size in bytes, no memory."""

    __slots__ = ("__weakref__", "nbytes")

    def __init__(self, nbytes: int):
        self.nbytes = nbytes

    def __repr__(self):
        return f"MetaStorage(nbytes={self.nbytes})"


class MetaArray:
    """What a meta tensor holds in place of an array: its layout over a ``MetaStorage``.
    Strides and offset count elements (PyTorch's ``stride()``/``storage_offset()``)."""

    __slots__ = ("dtype", "elem_strides", "offset", "shape", "storage")

    def __init__(self, shape, dtype, strides=None, offset: int = 0, storage=None):
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.elem_strides = contiguous_strides(self.shape) if strides is None else \
            tuple(int(s) for s in strides)
        self.offset = int(offset)
        if storage is None:
            storage = MetaStorage(self.span() * self.dtype.itemsize)
        self.storage = storage

    # the array attributes the layers above read
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple:
        """Byte strides, as numpy reports them."""
        return tuple(s * self.dtype.itemsize for s in self.elem_strides)

    def span(self) -> int:
        """Elements from the storage's start to one past the last element reached."""
        if self.size == 0:
            return self.offset
        return self.offset + 1 + sum((n - 1) * s for n, s in zip(self.shape, self.elem_strides))

    def astype(self, dtype, copy: bool = True) -> MetaArray:
        return MetaArray(self.shape, dtype, dense_like(self.shape, self.elem_strides))

    def copy(self) -> MetaArray:
        return MetaArray(self.shape, self.dtype)

    def reshape(self, shape, copy=None) -> MetaArray:
        """numpy's ``reshape`` (``copy=False``: a view or ValueError), on the layout."""
        return from_probe(probe(self).reshape(shape, copy=copy), [self])

    def __repr__(self):
        return f"MetaArray(shape={self.shape}, dtype={self.dtype}, strides={self.elem_strides})"


def dense_like(shape: tuple, strides: tuple) -> tuple:
    """The strides of a fresh tensor laid out like one of ``shape`` and ``strides`` (PyTorch's
    preserve_format): the same when they are dense and non-overlapping, else that dimension
    order made dense."""
    order = sorted(range(len(shape)), key=lambda d: (-strides[d], -d))
    out = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        out[d] = acc
        acc *= max(shape[d], 1)
    return tuple(out)


class MetaBackend(Backend):
    """Arrays without data; see the module docstring."""

    name = "meta"
    array_type = MetaArray
    device_obj = device("meta")
    has_data = False

    def empty(self, shape, np_dtype, device=None):
        return MetaArray(shape, np_dtype)

    def from_host(self, a, device=None):
        a = np.asarray(a)
        return MetaArray(a.shape, a.dtype)

    def to_host(self, a):
        raise NotImplementedError(NO_DATA)

    def copy_into(self, dst, src) -> None:
        pass  # a write into a meta tensor keeps nothing (the caller checked the shapes)

    def strides(self, a) -> tuple:
        if a.size == 0:
            return contiguous_strides(a.shape)
        return a.elem_strides

    def storage(self, a):
        return a.storage

    def storage_offset(self, a) -> int:
        return a.offset

    def data_ptr(self, a) -> int:
        return 0  # PyTorch's meta tensors report a null pointer

    def writeable(self, a) -> bool:
        return True  # nothing is written; PyTorch's meta kernels skip the overlap check

    def may_share_memory(self, a, b) -> bool:
        return isinstance(b, MetaArray) and a.storage is b.storage

    def shares_memory(self, a, b) -> bool:
        """Whether two layouts over one storage reach a common element (numpy's exact
        answer, on probes)."""
        if not self.may_share_memory(a, b) or a.size == 0 or b.size == 0:
            return False
        return bool(np.shares_memory(probe(a), probe(b)))


# ---------------------------------------------------------------------- probes
_BUFFERS: dict = {}  # id(storage) -> (storage, its bytes): the storages probed lately


def _bytes(storage: MetaStorage) -> np.ndarray:
    """The storage as a read-only uint8 array over an anonymous mapping of its size: address
    space, never memory (nothing writes it, and reads of untouched pages see the kernel's
    shared zero page)."""
    hit = _BUFFERS.get(id(storage))
    if hit is not None and hit[0] is storage:
        return hit[1]
    mm = mmap.mmap(-1, max(storage.nbytes, 1), flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    if len(_BUFFERS) >= 64:
        _BUFFERS.clear()
    buf = np.frombuffer(mm, np.uint8)
    _BUFFERS[id(storage)] = (storage, buf)
    return buf


def probe(a: MetaArray) -> np.ndarray:
    """A read-only numpy array with ``a``'s layout over memory that holds nothing (its base
    is the whole storage, as a CPU view's is): view ops compute their output's layout on it."""
    return np.ndarray(a.shape, a.dtype, _bytes(a.storage), a.offset * a.itemsize, a.strides)


def from_probe(r: np.ndarray, sources: list) -> MetaArray:
    """The meta array of a view op's result computed on probes of the meta arrays
    ``sources``: a view of the storage whose memory it lies in, else a fresh array (the op
    copied)."""
    ptr = r.__array_interface__["data"][0]
    isz = r.dtype.itemsize
    for a in sources:
        base = _bytes(a.storage).__array_interface__["data"][0]
        if base <= ptr < base + max(a.storage.nbytes, 1) or (r.size == 0 and ptr == base):
            strides = tuple(s // isz for s in r.strides) if r.size else \
                contiguous_strides(r.shape)
            return MetaArray(r.shape, r.dtype, strides, (ptr - base) // max(isz, 1), a.storage)
    return MetaArray(r.shape, r.dtype)


BACKEND = register(MetaBackend())
ARRAY_TYPES.add(MetaArray)
