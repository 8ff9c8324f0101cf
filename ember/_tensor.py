"""Tensor: metadata over a numpy array plus autograd state.

Every operation is bound onto this class from the op table (``ember/ops``) when ember is
imported, and so are the autograd entry points (``backward``, ``register_hook``,
``retain_grad``: ``ember/autograd/engine.py``) and the pickler (``ember/serialization.py``),
which sit in higher layers; what is written here are attributes and conversions.
"""

from __future__ import annotations

import gc

import numpy as np

from . import _dtype as D
from ._stream import Stream as _Stream
from .backends import base as _backends_base
from .backends import cpu_shared
from .backends.cpu import BACKEND as _CPU


class Size(tuple):
    """``ember.Size``: a tuple of ints, as ``tensor.shape`` returns."""

    def __repr__(self):
        return f"ember.Size([{', '.join(map(str, self))}])"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))


class _Named:
    """Memory formats and layouts (``ember.channels_last``, ``ember.strided``): named markers.
    ember's tensors are always strided, and a memory format only asks for a copy's order."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):
        return (_named, (self.name,))


def _named(name):
    return MEMORY_FORMATS[name]


MEMORY_FORMATS = {n: _Named(n) for n in ("preserve_format", "contiguous_format",
                                         "channels_last", "channels_last_3d", "strided")}


class Tensor:
    """An n-dimensional array on a device, with autograd history.

    Internal state: ``_data`` (the backend's array, possibly a view), ``_backend`` (the
    Backend of its device, ``ember/backends/base.py``: every question about the array's memory
    goes to it), ``_dtype``, ``_vc`` (the version
    counter, a one-item list shared by every tensor over the same storage), ``_base`` (the
    tensor a view was taken from), ``grad_fn``/``_out_idx`` (the autograd node and which of its
    outputs this is), ``_leaf_rg`` (a leaf that requires grad).
    """

    # class-level defaults keep tensor creation cheap: only what differs is set per instance
    grad = None
    grad_fn = None
    _out_idx = 0
    _leaf_rg = False
    _base = None
    _vc = None
    _acc = None  # the AccumulateGrad node of a leaf, made on first use
    _retains_grad = False
    _traced = False  # True on the compiler's traced values (metadata only, no data to read)
    _backend = _CPU  # a class default: set per tensor only on other devices
    __array_priority__ = 1000  # numpy defers binary operators to Tensor

    def __init__(self, *args, **kwargs):
        pass  # ``Tensor(...)`` is built by __new__: PyTorch's legacy constructor (ops/creation)

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim, "size")]

    @property
    def dtype(self) -> D.dtype:
        return self._dtype

    @property
    def device(self):
        return self._backend.device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        return self._backend.name == "cuda"

    is_sparse = False
    is_quantized = False

    @property
    def is_meta(self) -> bool:
        return self._backend.name == "meta"
    layout = MEMORY_FORMATS["strided"]

    def get_device(self) -> int:
        d = self.device
        return -1 if d.index is None else d.index

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    def element_size(self) -> int:
        return self._dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.size * self._dtype.itemsize

    def stride(self, dim: int | None = None):
        a = self._data
        st = self._backend.strides(a)
        return st if dim is None else st[_wrap_dim(dim, a.ndim, "stride")]

    def storage_offset(self) -> int:
        return self._backend.storage_offset(self._data)

    def data_ptr(self) -> int:
        return self._backend.data_ptr(self._data)

    def untyped_storage(self):
        return self._backend.storage(self._data)

    def is_contiguous(self, memory_format=None) -> bool:
        a = self._data
        if a.size <= 1:
            return True
        expect = 1
        for n, s in zip(reversed(a.shape), reversed(self._backend.strides(a))):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return self._dtype.is_complex

    def is_signed(self) -> bool:
        return self._dtype.is_signed

    def is_shared(self) -> bool:
        """Whether the storage lies in shared memory (``share_memory_``, or received from
        another process)."""
        return self._backend is _CPU and cpu_shared.is_shared(_CPU.storage(self._data))

    def is_pinned(self, device=None) -> bool:
        """Whether the storage lies in page-locked host memory (``pin_memory``)."""
        if self._backend is not _CPU:
            return False
        cuda = _backends_base.BACKENDS.get("cuda")
        return cuda is not None and cuda.is_pinned(self._data)

    def pin_memory(self, device=None) -> "Tensor":
        """A copy in page-locked host memory (``self`` when pinned already), from which
        ``.to("cuda", non_blocking=True)`` copies asynchronously; needs a GPU."""
        if self._backend is not _CPU:
            raise RuntimeError(f"cannot pin 'ember.{self._backend.name}.{D.TYPE_NAME[self._dtype]}"
                               "Tensor' only dense CPU tensors can be pinned")
        cuda = _backends_base.BACKENDS.get("cuda")
        if cuda is None or not cuda.usable():
            raise RuntimeError("Cannot access accelerator device when none is available.")
        if cuda.is_pinned(self._data):
            return self
        return _wrap(cuda.pinned_copy(self._data), self._dtype)

    def record_stream(self, stream) -> None:
        """Tell the allocator that ``stream`` (an ``ember.cuda.Stream``) uses this tensor's
        storage: when it is freed, its memory is reused only after the work queued on
        ``stream`` by then has completed."""
        if isinstance(stream, _Stream) and stream._impl is not None:
            stream = stream._impl  # ember.Stream("cuda"): the ember.cuda.Stream it wraps
        if getattr(getattr(stream, "device", None), "type", None) != "cuda" or \
                not isinstance(getattr(stream, "cuda_stream", None), int):
            raise RuntimeError("unknown parameter type")
        if self._backend.name != "cuda":
            raise RuntimeError(f"record_stream: expected a CUDA tensor, but got a tensor on "
                               f"{self.device}")
        self._backend.record_stream(self._data, stream)

    @property
    def _version(self) -> int:
        return 0 if self._vc is None else self._vc[0]

    def _version_counter(self) -> list:
        vc = self._vc
        if vc is None:
            vc = self._vc = [0]
        return vc

    def _bump(self) -> None:
        vc = self._vc
        if vc is None:
            self._vc = [1]
        else:
            vc[0] += 1

    def _is_view(self) -> bool:
        return self._base is not None

    # ------------------------------------------------------------------ autograd state
    @property
    def requires_grad(self) -> bool:
        return self._leaf_rg or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if self.grad_fn is not None:
            if flag:
                return
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach().")
        if flag and not (self._dtype.is_floating_point or self._dtype.is_complex):
            raise RuntimeError("only Tensors of floating point and complex dtype can require "
                               "gradients")
        self._leaf_rg = bool(flag)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if requires_grad and not (self._dtype.is_floating_point or self._dtype.is_complex):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def detach(self) -> "Tensor":
        t = _wrap(self._data, self._dtype, self._backend)
        t._vc = self._version_counter()  # shares storage, but is no autograd view
        return t

    def detach_(self) -> "Tensor":
        self.grad_fn = None
        self._leaf_rg = False
        return self

    @property
    def data(self) -> "Tensor":
        return self.detach()

    @data.setter
    def data(self, new: "Tensor") -> None:
        if not isinstance(new, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(new).__name__}")
        self._data = new._data
        self._dtype = new._dtype
        self._backend = new._backend
        self._vc = new._version_counter()

    # ------------------------------------------------------------------ conversions
    def item(self):
        if not self._backend.has_data:
            n = self._data.size
            raise RuntimeError(f"a Tensor with {n} elements cannot be converted to Scalar"
                               if n != 1 else "Tensor.item() cannot be called on meta tensors")
        a = self._backend.to_host(self._data)
        if a.size != 1:
            raise RuntimeError(
                f"a Tensor with {a.size} elements cannot be converted to Scalar")
        v = a.reshape(()).item() if self._dtype is not D.bfloat16 else float(a.reshape(()))
        return v

    def tolist(self):
        a = self._backend.to_host(self._data)
        if self._dtype is D.bfloat16:
            a = a.astype(np.float32)
        return a.tolist()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        if self._backend is not _CPU:
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use "
                            "Tensor.cpu() to copy the tensor to host memory first.")
        return self._data.copy() if force else self._data

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def _scalar_check(self, what: str):
        if self._data.size != 1:
            raise RuntimeError(f"{what}: a Tensor with {self._data.size} elements cannot be "
                               "converted to Scalar")

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous"
                               if self._data.size else
                               "Boolean value of Tensor with no values is ambiguous")
        return bool(self.item())

    def __float__(self) -> float:
        self._scalar_check("float()")
        return float(self.item())

    def __int__(self) -> int:
        self._scalar_check("int()")
        return int(self.item())

    def __complex__(self) -> complex:
        self._scalar_check("complex()")
        return complex(self.item())

    def __index__(self) -> int:
        if self._dtype.kind not in "uib" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self):
        return id(self)

    def __reversed__(self):
        return self.flip(0)

    def __contains__(self, element):
        return bool((self == element).any())

    def __format__(self, spec):
        if self._data.ndim == 0 and self._backend.has_data:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __repr__(self, *, tensor_contents=None) -> str:
        from ._print import tensor_repr
        return tensor_repr(self)

    __str__ = __repr__

    def __dlpack__(self, stream=None, **kwargs):
        if self.requires_grad:
            raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
        return self._data.__dlpack__(**({} if stream is None else {"stream": stream}))

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment.")
        t = _wrap(self._data.copy(), self._dtype, self._backend)
        t._leaf_rg = self._leaf_rg
        if self.grad is not None:
            t.grad = self.grad.__deepcopy__(memo)
        if type(self) is not Tensor:
            t.__class__ = type(self)
            t.__dict__.update({k: v for k, v in self.__dict__.items()
                               if k not in ("_data", "_vc", "grad", "_acc")})
        memo[id(self)] = t
        return t

    def share_memory_(self) -> Tensor:
        """Move the storage into shared memory, in place; a no-op when it is shared already."""
        share_memory([self])
        return self


def share_memory(tensors) -> None:
    """Move the storages of ``tensors`` into shared memory blocks (``backends/cpu_shared``).

    As in PyTorch the storage moves, not the tensor: every tensor over one of these storages
    (views taken before, the tensor a Parameter was made from) is moved onto the new block with
    its offset and strides, so views keep aliasing their base. The tensors over a storage are
    found by one walk over the garbage collector's objects, which costs a few milliseconds per
    call; ``Module.share_memory`` moves all its tensors in one call."""
    old = {}
    for t in tensors:
        if t._backend is not _CPU:
            continue
        r = _CPU.storage(t._data)
        if not cpu_shared.is_shared(r):
            old[id(r)] = r
    if not old:
        return
    new = {k: cpu_shared.share(r) for k, r in old.items()}
    for o in gc.get_objects() + list(tensors):
        if issubclass(type(o), Tensor):  # type(): some objects warn when asked __class__
            a = o.__dict__.get("_data")
            if type(a) is np.ndarray:
                r = _CPU.storage(a)
                if old.get(id(r)) is r:
                    o._data = cpu_shared.rebase(a, r, new[id(r)])


def factory_result(t: Tensor, kwargs: dict) -> Tensor:
    """A factory's result ``t`` under its ``pin_memory=`` and ``requires_grad=`` arguments."""
    if kwargs.get("pin_memory"):
        t = pinned_result(t)
    if kwargs.get("requires_grad"):
        if not (t._dtype.is_floating_point or t._dtype.is_complex):
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        t.requires_grad_()
    return t


def pinned_result(t: Tensor) -> Tensor:
    """A factory's result under ``pin_memory=True``: ``t`` in page-locked memory."""
    if t._backend is not _CPU:
        raise RuntimeError("Only dense CPU tensors can be pinned")
    cuda = _backends_base.BACKENDS.get("cuda")
    if cuda is None or not cuda.usable():
        raise RuntimeError("pin_memory=True requires a CUDA or other accelerator backend; no "
                           "pinned memory allocator is available on this system.")
    return t.pin_memory()


def _wrap_dim(dim: int, ndim: int, op: str = "") -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim + n if dim < 0 else dim


def _wrap(data, dtype: D.dtype, backend=_CPU) -> Tensor:
    """Make a tensor over a backend array (no copy). The single constructor every op uses."""
    t = object.__new__(Tensor)
    t._data = data
    t._dtype = dtype
    if backend is not _CPU:
        t._backend = backend
    return t


def wrap_np(data: np.ndarray) -> Tensor:
    return _wrap(data, D.from_np(data.dtype))


__all__ = ["Tensor", "Size"]
