"""Shared memory for CPU arrays: memfd blocks mapped ``MAP_SHARED``, passed on by file descriptor.

A block is an anonymous memory file (``memfd_create``) mapped into the process. Its lifetime is
the kernel's reference count on the file: the memory lives while any process holds a mapping or
a descriptor of it and is freed when the last one goes, so nothing is ever left in ``/dev/shm``
and no resource tracker is involved, whichever way the processes exit (crashes and kills
included). A block keeps its one descriptor open for as long as the block is mapped here, so
that it can be sent on; a process that receives one maps it and keeps the received descriptor
the same way. This is PyTorch's ``file_descriptor`` strategy; the cost is one open descriptor
per shared storage.

A forked child inherits the mapping (it is ``MAP_SHARED``, so both sides see each other's
writes) and the descriptor. To other processes the descriptor travels through
``multiprocessing.reduction.DupFd``: passed to a child at spawn, or handed over a Unix socket
by the sender's resource sharer, which needs the sender alive until the receiver unpickles.

Arrays over a block are ordinary numpy arrays: the block's root array has the block's
``ctypes`` buffer as its ``base``, and every other array over the block has the root behind it
(as numpy's ``as_strided`` does), so ``_tensor._root`` finds one root per block.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import weakref

import numpy as np

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value

# (st_dev, st_ino) of a block's file -> weak reference to the root array over it, so a storage
# received twice (or sent back to the process it came from) is mapped once and stays one storage
_ROOTS: dict = {}


def _release(addr: int, size: int, fd: int) -> None:
    _libc.munmap(addr, size)
    os.close(fd)


def _map(fd: int, size: int):
    """Map the memory file ``fd`` (now owned by the block) as a ctypes buffer."""
    addr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    if addr in (None, _MAP_FAILED):
        err = ctypes.get_errno()
        os.close(fd)
        raise OSError(err, f"mmap of a shared block failed: {os.strerror(err)}")
    buf = (ctypes.c_char * size).from_address(addr)
    st = os.fstat(fd)
    buf.ember_block = (fd, size, (st.st_dev, st.st_ino))
    # no atexit run: arrays may still point here while the interpreter shuts down
    weakref.finalize(buf, _release, addr, size, fd).atexit = False
    return buf


def _block(root: np.ndarray):
    b = root.base
    return b if getattr(b, "ember_block", None) is not None else None


def is_shared(root: np.ndarray) -> bool:
    """Whether ``root`` (an array that owns its memory) lies in a shared block."""
    return _block(root) is not None


def _register(root: np.ndarray) -> None:
    key = _block(root).ember_block[2]
    _ROOTS[key] = weakref.ref(root, lambda _, k=key: _ROOTS.pop(k, None))


def share(root: np.ndarray) -> np.ndarray:
    """A copy of ``root`` (with its layout) in a new shared block."""
    lo, hi = np.lib.array_utils.byte_bounds(root)
    size = max(hi - lo, 1)
    fd = os.memfd_create("ember-shared", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
    except OSError:
        os.close(fd)
        raise
    buf = _map(fd, size)
    ctypes.memmove(ctypes.addressof(buf), lo, hi - lo)
    new = np.ndarray(root.shape, root.dtype, buffer=buf, offset=_ptr(root) - lo,
                     strides=root.strides)
    _register(new)
    return new


class _Over:
    """Array interface over part of a root's memory; keeps the root alive as ``base``."""

    def __init__(self, interface: dict, base: np.ndarray):
        self.__array_interface__ = interface
        self.base = base


def _ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def over(root: np.ndarray, offset: int, shape, strides, dtype) -> np.ndarray:
    """The array of ``dtype``, ``shape`` and byte ``strides`` whose first element lies
    ``offset`` bytes after ``root``'s, with ``root`` behind it."""
    dtype = np.dtype(dtype)
    if offset == 0 and tuple(shape) == root.shape and tuple(strides) == root.strides \
            and dtype == root.dtype:
        return root
    a = np.asarray(_Over({"data": (_ptr(root) + offset, False), "shape": tuple(shape),
                          "strides": tuple(strides), "typestr": f"|V{dtype.itemsize}",
                          "version": 3}, root))
    return a.view(dtype)


def rebase(a: np.ndarray, old_root: np.ndarray, new_root: np.ndarray) -> np.ndarray:
    """``a`` (an array over ``old_root``) moved onto ``new_root``, a copy of the old root."""
    return over(new_root, _ptr(a) - _ptr(old_root), a.shape, a.strides, a.dtype)


def handle(a: np.ndarray, root: np.ndarray) -> tuple:
    """What another process needs to map ``a`` (an array over the shared ``root``): the
    block's descriptor (as ``DupFd``), its size, the root's layout and ``a``'s."""
    from multiprocessing.reduction import DupFd
    fd, size, _ = _block(root).ember_block
    buf_ptr = ctypes.addressof(_block(root))
    return (DupFd(fd), size, (_ptr(root) - buf_ptr, root.shape, root.strides, root.dtype),
            (_ptr(a) - _ptr(root), a.shape, a.strides, a.dtype))


def attach(fd_holder, size: int, root_layout: tuple, layout: tuple) -> np.ndarray:
    """Inverse of ``handle``: the array over the block, mapping it unless this process already
    has it mapped."""
    fd = fd_holder.detach()
    st = os.fstat(fd)
    ref = _ROOTS.get((st.st_dev, st.st_ino))
    root = ref() if ref is not None else None
    if root is not None:
        os.close(fd)
    else:
        buf = _map(fd, size)
        off, shape, strides, dtype = root_layout
        root = np.ndarray(shape, dtype, buffer=buf, offset=off, strides=strides)
        _register(root)
    off, shape, strides, dtype = layout
    return over(root, off, shape, strides, dtype)
