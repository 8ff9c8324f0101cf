"""save / load in PyTorch's checkpoint format, safe by default.

A checkpoint is a zip archive (records stored uncompressed, each record's data aligned to 64
bytes): ``data.pkl`` is a protocol-2 pickle in which every tensor is
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)`` and
every storage a persistent id ``("storage", torch.<Type>Storage, key, "cpu", numel)`` whose
bytes are the record ``data/<key>``. ember writes those exact names (so ``torch.load`` reads
ember's files) and maps them back to ember objects when loading (so ``ember.load`` reads
PyTorch's).

``load(weights_only=True)`` (the default) never runs code from the file: ``data.pkl`` is
interpreted opcode by opcode, and only an allowlist of globals (containers, tensors, dtypes,
sizes, devices, the rebuild functions, and what the user added with ``add_safe_globals``) can
be referenced.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import pickletools
import struct
import sys
import tempfile
import warnings
import zipfile
from contextlib import contextmanager
from multiprocessing.reduction import ForkingPickler

import numpy as np

from . import _dtype as D
from ._device import device
from ._tensor import Size, Tensor, _wrap
from .backends.cpu import BACKEND as _CPU, _root
from .backends import cpu_shared
from .nn.parameter import Buffer, Parameter

_ALIGN = 64
# PyTorch's typed storages. float8 has none: PyTorch saves its tensors over an UntypedStorage
# (bytes) and rebuilds them with _rebuild_tensor_v3, which names the dtype
_STORAGE_NAME = {d: D.TYPE_NAME[d] + "Storage" for d in D.ALL if not d.is_float8}


# ---------------------------------------------------------------------- plain pickling
def _rebuild_plain(data: np.ndarray, dtype_name: str, requires_grad: bool):
    t = _wrap(data, D._by_name(dtype_name))
    if requires_grad:
        t.requires_grad_()
    return t


def reduce_tensor(t: Tensor, proto: int):
    """``Tensor.__reduce_ex__``, for ``pickle``/``copy``/multiprocessing: a tensor travels as
    its array (copied)."""
    if not t.is_leaf:
        raise RuntimeError("Can't pickle a tensor that requires grad and is not a leaf; use "
                           "tensor.detach()")
    return (_rebuild_plain, (np.ascontiguousarray(t._data), t._dtype.name, t.requires_grad))


Tensor.__reduce_ex__ = reduce_tensor  # the pickler is registered from here: _tensor sits below


# ---------------------------------------------------------------------- between processes
def _rebuild_shared(fd, size, root_layout, layout, dtype_name: str, requires_grad: bool):
    t = _wrap(cpu_shared.attach(fd, size, root_layout, layout), D._by_name(dtype_name))
    if requires_grad:
        t.requires_grad_()
    return t


def reduce_tensor_mp(t: Tensor):
    """multiprocessing's reducer (``ForkingPickler``, used by its queues, pipes and process
    arguments): a tensor whose storage is shared travels as a handle to the same memory (see
    ``backends/cpu_shared``); any other tensor is copied, as by plain pickling. Plain
    ``pickle``, ``copy`` and ``save`` never see this reducer."""
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
            "does not support crossing process boundaries.  If you just want to transfer the "
            "data, call detach() on the tensor before serializing (e.g., putting it on the "
            "queue).")
    root = _root(t._data)
    if not cpu_shared.is_shared(root):
        return reduce_tensor(t, 2)
    return (_rebuild_shared, (*cpu_shared.handle(t._data, root), t._dtype.name,
                              t.requires_grad))


# exact types only (how ForkingPickler looks reducers up); Parameter's own reducer pickles a
# plain Tensor over its data, which comes back here
for _cls in (Tensor, Buffer):
    ForkingPickler.register(_cls, reduce_tensor_mp)


def _rebuild_param(data: Tensor, requires_grad: bool, *args):
    return Parameter(data, requires_grad)


def reduce_parameter(p: Parameter, proto: int):
    """``Parameter.__reduce_ex__``: a plain tensor over its data (pickled by
    ``reduce_tensor``) and its requires_grad."""
    return (_rebuild_param, (_wrap(p._data, p._dtype, p._backend), p.requires_grad))


Parameter.__reduce_ex__ = reduce_parameter  # registered from here, as Tensor's


# ---------------------------------------------------------------------- writing
class _Global:
    """A reference to a PyTorch global, written as a GLOBAL opcode without importing torch."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle requires reduce functions to be callable
        raise TypeError(f"{self.module}.{self.name} is a placeholder for pickling")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_TENSOR_V3 = _Global("torch._utils", "_rebuild_tensor_v3")
_UNTYPED_STORAGE = _Global("torch.storage", "UntypedStorage")
_REBUILD_PARAM = _Global("torch._utils", "_rebuild_parameter")
_ORDERED_DICT = collections.OrderedDict


class _StorageRef:
    def __init__(self, key, dtype, numel, location="cpu"):
        self.key, self.dtype, self.numel, self.location = key, dtype, numel, location


class _Pickler(pickle._Pickler):
    """Pickles ember objects under PyTorch's global names; tensors' data goes to ``storages``."""

    def __init__(self, f, storages: dict):
        super().__init__(f, protocol=2)
        self.storages = storages  # id(root array) -> (key, dtype, byte view, root)

    def save(self, obj, save_persistent_id=True):
        if isinstance(obj, D.dtype):
            obj = _Global("torch", obj.name)
        if type(obj) is _Global:
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
            return
        super().save(obj, save_persistent_id)

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            if obj.dtype not in _STORAGE_NAME:  # untyped: its size in bytes
                return ("storage", _UNTYPED_STORAGE, obj.key, obj.location,
                        obj.numel * obj.dtype.itemsize)
            return ("storage", _Global("torch", _STORAGE_NAME[obj.dtype]), obj.key,
                    obj.location, obj.numel)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            if isinstance(obj, Parameter):
                return (_REBUILD_PARAM, (_wrap(obj._data, obj._dtype, obj._backend), obj.requires_grad,
                                         _ORDERED_DICT()))
            return self._reduce_tensor(obj)
        if type(obj) is Size:
            return (_Global("torch", "Size"), (tuple(obj),))
        if isinstance(obj, device):
            return (_Global("torch", "device"), (str(obj),))
        return NotImplemented

    def _reduce_tensor(self, t: Tensor):
        location = "cpu"
        if t._backend is not _CPU:  # another device's tensor: its host copy, under its device
            location = str(t.device)  # (views of one device storage are saved apart)
            a = t._backend.to_host(t._data)
        else:
            a = t._data
        root = _root(a)
        flat, offset, stride = _storage_view(a, root)
        if flat is None:  # a layout PyTorch cannot express (negative strides): save a copy
            root = np.ascontiguousarray(a)
            flat, offset, stride = root.reshape(-1), 0, _CPU.strides(root)
        entry = self.storages.get(id(root))
        if entry is None:
            entry = (str(len(self.storages)), t._dtype, flat, root, location)
            self.storages[id(root)] = entry
        elif entry[1] is not t._dtype:
            raise RuntimeError("Cannot save multiple tensors or storages that view the same data "
                               "as different types")
        ref = _StorageRef(entry[0], t._dtype, entry[2].size, entry[4])
        args = (ref, offset, Size(a.shape), stride, t.requires_grad, _ORDERED_DICT())
        if t._dtype not in _STORAGE_NAME:
            return (_REBUILD_TENSOR_V3, args + (t._dtype,))
        return (_REBUILD_TENSOR, args)


def _storage_view(a: np.ndarray, root: np.ndarray):
    """The root's memory as a flat array, and ``a``'s element offset and strides into it."""
    isz = a.itemsize
    if root.flags.c_contiguous:
        flat = root.reshape(-1)
    elif root.flags.f_contiguous:
        flat = root.T.reshape(-1)
    else:
        return None, 0, ()
    if root.dtype != a.dtype:  # a dtype view (view_as_real, view(dtype)) of another storage
        return None, 0, ()
    if any(s < 0 for s in a.strides):
        return None, 0, ()
    base = root.__array_interface__["data"][0]
    offset = (a.__array_interface__["data"][0] - base) // isz
    return flat, offset, _CPU.strides(a)


def _record(zf: zipfile.ZipFile, name: str, data: bytes | memoryview) -> None:
    """Write one stored record whose data starts on a 64-byte boundary (PyTorch's layout)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    header = 30 + len(name.encode())
    pos = zf.fp.tell() + header + 4
    pad = (-pos) % _ALIGN
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    with zf.open(info, "w", force_zip64=len(data) > 0x7FFFFFFF) as w:
        w.write(data)


def save(obj, f, pickle_module=pickle, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False) -> None:
    """``ember.save(obj, f)``: write ``obj`` in PyTorch's checkpoint format.

    For a path, the file is written beside the target and renamed over it, so an interrupted
    save leaves the previous checkpoint intact.
    """
    if not _use_new_zipfile_serialization:
        raise NotImplementedError("ember.save writes only the zip checkpoint format")
    buf = io.BytesIO()
    storages: dict = {}
    _Pickler(buf, storages).dump(obj)
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        root = os.path.splitext(os.path.basename(path))[0] or "archive"
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".pt", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                _write_zip(fh, root, buf.getvalue(), storages, _disable_byteorder_record)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    else:
        _write_zip(f, "archive", buf.getvalue(), storages, _disable_byteorder_record)


def _write_zip(fh, root, pkl, storages, no_byteorder):
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        _record(zf, f"{root}/data.pkl", pkl)
        _record(zf, f"{root}/.format_version", b"1")
        _record(zf, f"{root}/.storage_alignment", b"64")
        if not no_byteorder:
            _record(zf, f"{root}/byteorder", sys.byteorder.encode())
        for key, _, flat, *_ in storages.values():
            raw = np.ascontiguousarray(flat).view(np.uint8)  # bytes, whatever the dtype
            _record(zf, f"{root}/data/{key}", memoryview(raw))
        _record(zf, f"{root}/version", b"3\n")
        _record(zf, f"{root}/.data/serialization_id", b"0" * 40)


# ---------------------------------------------------------------------- reading
def _rebuild_tensor(storage: np.ndarray, offset, size, stride, requires_grad=False,
                    hooks=None, metadata=None):
    isz = storage.itemsize
    size, stride = tuple(size), tuple(stride)
    if len(size) and min(size) == 0:
        a = np.empty(size, storage.dtype)
    else:
        # through bytes for one-byte types: as_strided cannot name float8_e5m2 ('<f1')
        raw = storage.view(np.uint8) if isz == 1 else storage
        a = np.lib.stride_tricks.as_strided(raw[offset:], size, [s * isz for s in stride])
        a = a.view(storage.dtype)
    t = _wrap(a, D.from_np(storage.dtype))
    if requires_grad:
        t.requires_grad_()
    return t


def _rebuild_tensor_v3(storage: np.ndarray, offset, size, stride, requires_grad, hooks,
                       dtype, metadata=None):
    """A tensor over an untyped storage (bytes), its dtype named."""
    return _rebuild_tensor(storage.view(dtype.np), offset, size, stride, requires_grad)


def _rebuild_parameter(data, requires_grad, hooks=None, *args):
    return Parameter(data, requires_grad)


class _StorageType:
    def __init__(self, dtype):
        self.dtype = dtype


def _torch_globals() -> dict:
    """The PyTorch names a weights-only checkpoint may reference, and what they mean here."""
    g = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("collections", "Counter"): collections.Counter,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
        ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
        ("torch.storage", "UntypedStorage"): _StorageType(D.uint8),
        ("torch", "UntypedStorage"): _StorageType(D.uint8),
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch.nn.parameter", "Parameter"): Parameter,
        ("torch", "Size"): Size,
        ("torch", "device"): device,
        ("torch", "Tensor"): Tensor,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "bytearray"): bytearray,
        ("builtins", "complex"): complex,
        ("builtins", "slice"): slice,
        ("_codecs", "encode"): _codecs_encode,
    }
    for d in D.ALL:
        g["torch", d.name] = d
    for d, name in _STORAGE_NAME.items():
        g["torch", name] = _StorageType(d)
    for alias, d in D.ALIASES.items():
        g["torch", alias] = d
    return g


def _codecs_encode(s, encoding="latin1"):
    return s.encode(encoding)


_safe_globals: dict[str, object] = {}


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes/functions in weights-only loads (``(obj, "module.Name")`` pairs
    override the name matched)."""
    for g in safe_globals:
        obj, name = (g if isinstance(g, tuple) else (g, f"{g.__module__}.{g.__qualname__}"))
        _safe_globals[name] = obj


def get_safe_globals() -> list:
    return list(_safe_globals.values())


def clear_safe_globals() -> None:
    _safe_globals.clear()


@contextmanager
def safe_globals(globals_list: list):
    saved = dict(_safe_globals)
    add_safe_globals(globals_list)
    try:
        yield
    finally:
        _safe_globals.clear()
        _safe_globals.update(saved)


_BLOCKED = ("sys", "os", "posix", "nt", "subprocess", "builtins.eval", "builtins.exec")
_UNSAFE = ("Weights only load failed. This file can still be loaded, to do so you have two "
           "options, do those steps only if you trust the source of the checkpoint.\n\t(1) "
           "Re-running `ember.load` with `weights_only` set to `False` will likely succeed, but "
           "it can result in arbitrary code execution. Do it only if you got the file from a "
           "trusted source.\n\t(2) Alternatively, to load with `weights_only=True` please check "
           "the recommended steps in the following error message.\n\tWeightsUnpickler error: ")


def _resolve_global(module: str, name: str, allowed: dict):
    if module == "__builtin__":  # protocol 2 spells builtins the Python 2 way
        module = "builtins"
    key = (module, name)
    if key in allowed:
        return allowed[key]
    full = f"{module}.{name}"
    if full in _safe_globals:
        return _safe_globals[full]
    if module.split(".")[0] in _BLOCKED or full in _BLOCKED:
        raise pickle.UnpicklingError(
            f"Trying to load unsupported GLOBAL {full} whose module {module} is blocked.")
    shown = name if module == "builtins" else full
    raise pickle.UnpicklingError(
        f"Unsupported global: GLOBAL {full} was not an allowed global by default. Please use "
        f"`ember.serialization.add_safe_globals([{shown}])` or the "
        f"`ember.serialization.safe_globals([{shown}])` context manager to allowlist this "
        "global if you trust this class/function.")


_MARK = object()


def _weights_only_unpickle(data: bytes, persistent_load):
    """Interpret a pickle without executing anything but allowlisted constructors."""
    allowed = _torch_globals()
    stack: list = []
    metastack: list = []
    memo: dict = {}
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name in ("PROTO", "FRAME"):
            continue
        if name == "STOP":
            break
        if name in ("GLOBAL", "STACK_GLOBAL"):
            if name == "GLOBAL":
                module, gname = arg.split(" ", 1)
            else:
                gname = stack.pop()
                module = stack.pop()
            stack.append(_resolve_global(module, gname, allowed))
        elif name == "REDUCE":
            args = stack.pop()
            fn = stack.pop()
            if not _callable_ok(fn, allowed):
                raise pickle.UnpicklingError(f"Trying to call reduce for unrecognized function "
                                             f"{fn}")
            stack.append(fn(*args))
        elif name == "NEWOBJ":
            args = stack.pop()
            cls = stack.pop()
            if not _callable_ok(cls, allowed):
                raise pickle.UnpicklingError(f"Trying to instantiate unsupported class {cls}")
            stack.append(cls.__new__(cls, *args))
        elif name == "BUILD":
            state = stack.pop()
            inst = stack[-1]
            if not _callable_ok(type(inst), allowed) and not isinstance(inst, (
                    Tensor, collections.OrderedDict)):
                raise pickle.UnpicklingError(f"Trying to set state of unsupported type "
                                             f"{type(inst)}")
            if hasattr(inst, "__setstate__") and not isinstance(inst, Tensor):
                inst.__setstate__(state)
            elif isinstance(state, tuple) and len(state) == 2:
                inst.__dict__.update(state[0] or {})
                for k, v in (state[1] or {}).items():
                    setattr(inst, k, v)
            elif isinstance(state, dict):
                inst.__dict__.update(state)
        elif name == "MARK":
            metastack.append(stack)
            stack = []
        elif name in ("TUPLE", "LIST", "FROZENSET"):
            items = stack
            stack = metastack.pop()
            stack.append({"TUPLE": tuple, "LIST": list, "FROZENSET": frozenset}[name](items))
        elif name == "TUPLE1":
            stack[-1:] = [(stack[-1],)]
        elif name == "TUPLE2":
            stack[-2:] = [tuple(stack[-2:])]
        elif name == "TUPLE3":
            stack[-3:] = [tuple(stack[-3:])]
        elif name == "EMPTY_TUPLE":
            stack.append(())
        elif name == "EMPTY_LIST":
            stack.append([])
        elif name == "EMPTY_DICT":
            stack.append({})
        elif name == "EMPTY_SET":
            stack.append(set())
        elif name == "DICT":
            items = stack
            stack = metastack.pop()
            stack.append(dict(zip(items[::2], items[1::2])))
        elif name == "APPEND":
            v = stack.pop()
            _container(stack[-1], list).append(v)
        elif name == "APPENDS":
            items = stack
            stack = metastack.pop()
            _container(stack[-1], list).extend(items)
        elif name == "SETITEM":
            v, k = stack.pop(), stack.pop()
            _container(stack[-1], dict)[k] = v
        elif name == "SETITEMS":
            items = stack
            stack = metastack.pop()
            d = _container(stack[-1], dict)
            for k, v in zip(items[::2], items[1::2]):
                d[k] = v
        elif name == "ADDITEMS":
            items = stack
            stack = metastack.pop()
            _container(stack[-1], set).update(items)
        elif name in ("NONE", "NEWTRUE", "NEWFALSE"):
            stack.append({"NONE": None, "NEWTRUE": True, "NEWFALSE": False}[name])
        elif name in ("BININT", "BININT1", "BININT2", "LONG1", "LONG4", "BINFLOAT",
                      "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "SHORT_BINSTRING",
                      "BINSTRING", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "INT", "LONG",
                      "FLOAT", "UNICODE"):
            stack.append(arg)
        elif name == "BINPERSID":
            stack.append(persistent_load(stack.pop()))
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            stack.append(memo[arg])
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = stack[-1]
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1]
        elif name == "POP":
            stack.pop()
        elif name == "POP_MARK":
            stack = metastack.pop()
        elif name == "DUP":
            stack.append(stack[-1])
        else:
            raise pickle.UnpicklingError(f"Unsupported operand {op.code!r} ({name})")
    if len(stack) != 1:
        raise pickle.UnpicklingError("corrupt pickle: the stack does not hold one object")
    return stack[0]


def _container(obj, kind):
    if not isinstance(obj, kind):
        raise pickle.UnpicklingError(f"Can only append/set items on a {kind.__name__}, got "
                                     f"{type(obj).__name__}")
    return obj


def _callable_ok(fn, allowed) -> bool:
    return any(fn is v for v in allowed.values()) or any(fn is v for v in _safe_globals.values())


class _FullUnpickler(pickle.Unpickler):
    """``weights_only=False``: ordinary pickle, with PyTorch's names mapped to ember's."""

    def __init__(self, f, persistent_load, **kw):
        super().__init__(f, **kw)
        self._pl = persistent_load
        self._map = _torch_globals()

    def persistent_load(self, pid):
        return self._pl(pid)

    def find_class(self, module, name):
        if (module, name) in self._map:
            return self._map[module, name]
        if module.startswith("torch"):
            raise pickle.UnpicklingError(f"ember cannot load the PyTorch object {module}.{name}")
        return super().find_class(module, name)


def _open_zip(f):
    try:
        return zipfile.ZipFile(f)
    except zipfile.BadZipFile:
        raise RuntimeError("ember.load: the file is not a PyTorch zip checkpoint, or it is "
                           "truncated or corrupt (legacy pre-1.6 checkpoints are not "
                           "supported)") from None


def _record_offset(zf: zipfile.ZipFile, info: zipfile.ZipInfo, raw) -> int:
    raw.seek(info.header_offset)
    head = raw.read(30)
    if head[:4] != b"PK\x03\x04":
        raise RuntimeError(f"ember.load: corrupt record {info.filename}")
    n, m = struct.unpack("<HH", head[26:30])
    return info.header_offset + 30 + n + m


def _weights_only(weights_only: bool | None, pickle_module) -> bool:
    truthy = ("1", "y", "yes", "true")
    force = os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in truthy
    force_no = os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in truthy
    if force and force_no:
        raise RuntimeError("Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or "
                           "`TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` should be set, but both were set.")
    if force:
        return True
    if weights_only is None:
        if force_no:
            warnings.warn("Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected, since "
                          "the `weights_only` argument was not explicitly passed to `torch.load`, "
                          "forcing weights_only=False.", UserWarning, stacklevel=3)
            return False
        return pickle_module is None
    return weights_only


def load(f, map_location=None, pickle_module=None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args):
    """``ember.load(f, map_location=None, *, weights_only=True, mmap=False)``.

    As PyTorch's: ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` (1/y/yes/true) forces ``weights_only``;
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` turns it off where the call did not set it (with a
    warning); both set is an error."""
    weights_only = _weights_only(weights_only, pickle_module)
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is "
                           "specified")
    if map_location is not None:
        from ._device import check_device
        if callable(map_location) or isinstance(map_location, dict):
            pass
        else:
            check_device(map_location)
    if mmap and not isinstance(f, (str, os.PathLike)):
        raise ValueError("f must be a file path in order to use the mmap argument")
    path = os.fspath(f) if isinstance(f, (str, os.PathLike)) else None
    if path is not None and path.endswith(".safetensors"):
        from .utils.safetensors import load_file
        return load_file(path)
    fh = open(path, "rb") if path is not None else f
    try:
        zf = _open_zip(fh)
        names = zf.namelist()
        pkl = next((n for n in names if n.endswith("data.pkl")), None)
        if pkl is None:
            raise RuntimeError("ember.load: the archive has no data.pkl record")
        root = pkl[: -len("data.pkl")]
        mapped = np.memmap(path, dtype=np.uint8, mode="c") if mmap else None
        cache: dict = {}
        targets: dict = {}  # id(storage array) -> the device its tensors go to

        def persistent_load(pid):
            if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage":
                raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
            _, stype, key, _location, numel = pid[:5]
            dtype = stype.dtype if isinstance(stype, _StorageType) else stype
            if not isinstance(dtype, D.dtype):
                raise pickle.UnpicklingError(f"unsupported storage type {stype!r}")
            if key not in cache:
                name = f"{root}data/{key}"
                try:
                    info = zf.getinfo(name)
                except KeyError:
                    raise RuntimeError(f"ember.load: the checkpoint lacks record {name}") from None
                nbytes = numel * dtype.itemsize
                if info.file_size != nbytes:
                    raise RuntimeError(f"ember.load: record {name} holds {info.file_size} bytes,"
                                       f" expected {nbytes}")
                if mapped is not None:
                    start = _record_offset(zf, info, fh)
                    cache[key] = mapped[start:start + nbytes].view(dtype.np)
                else:
                    cache[key] = np.frombuffer(bytearray(zf.read(name)), dtype=dtype.np)
                target = _target_device(_location, map_location)
                if target != "cpu":
                    targets[id(cache[key])] = target
            return cache[key]

        try:
            data = zf.read(pkl)
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise RuntimeError(f"ember.load: corrupt checkpoint ({e})") from None
        if weights_only:
            try:
                return _to_devices(_weights_only_unpickle(data, persistent_load), targets)
            except pickle.UnpicklingError as e:
                raise pickle.UnpicklingError(_UNSAFE + str(e)) from None
            except (ValueError, IndexError, KeyError, TypeError, EOFError) as e:
                raise pickle.UnpicklingError(_UNSAFE + f"corrupt pickle data: {e}") from None
        unpickler = _FullUnpickler(io.BytesIO(data), persistent_load, **pickle_load_args)
        return _to_devices(unpickler.load(), targets)
    finally:
        if path is not None:
            fh.close()


def _target_device(location: str, map_location) -> str:
    """Where a storage saved at ``location`` ("cpu", "cuda:0") loads: PyTorch's rules for
    ``map_location`` None (where it was), a device or string, or a dict of locations."""
    if isinstance(map_location, dict):
        target = map_location.get(location, location)
    elif map_location is None or callable(map_location):
        target = location
    else:
        target = map_location
    target = str(target)
    if target.startswith("cuda"):
        from .backends import base
        if "cuda" not in base.BACKENDS:
            raise RuntimeError("Attempting to deserialize object on a CUDA device but "
                               "torch.cuda.is_available() is False. If you are running on a "
                               "CPU-only machine, please use torch.load with "
                               "map_location=torch.device('cpu') to map your storages to the "
                               "CPU.")
    return target


def _to_devices(obj, targets: dict, seen=None):
    """Move the loaded tensors whose storage belongs on another device there, in place (a
    Parameter stays the same object); walks dicts, lists and tuples."""
    if not targets:
        return obj
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return obj
    seen.add(id(obj))
    if isinstance(obj, Tensor):
        device = targets.get(id(_root(obj._data))) if obj._backend is _CPU else None
        if device is not None:
            obj.data = obj.data.to(device)
    elif isinstance(obj, dict):
        for v in obj.values():
            _to_devices(v, targets, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _to_devices(v, targets, seen)
    return obj


def get_unsafe_globals_in_checkpoint(f) -> list[str]:
    """The GLOBALs in a checkpoint's data.pkl that a weights-only load would refuse."""
    close = isinstance(f, (str, os.PathLike))
    fh = open(f, "rb") if close else f
    try:
        zf = _open_zip(fh)
        pkl = next(n for n in zf.namelist() if n.endswith("data.pkl"))
        allowed = _torch_globals()
        out = []
        for op, arg, _ in pickletools.genops(zf.read(pkl)):
            if op.name == "GLOBAL":
                module, name = arg.split(" ", 1)
                module = "builtins" if module == "__builtin__" else module
                if (module, name) not in allowed and f"{module}.{name}" not in _safe_globals:
                    out.append(f"{module}.{name}")
        return sorted(set(out))
    finally:
        if close:
            fh.close()
