"""Triton without torch: the one module that knows Triton's runtime internals.

Everything here is pinned to the Triton minor versions in ``TESTED`` (the driver classes, the
JIT function's per-device caches and the compiled kernel's ``run`` argument order move between
minors; reference/gpu-stack.md section 1). Three things:

- ``install_driver()``: on a GPU, Triton's own NVIDIA driver imports torch to learn the current
  device and stream. When no driver is active yet, ember installs a subclass that answers those
  queries from CuPy (ember's current stream is CuPy's), and from torch when torch is in the
  process and ember has no stream of its own selected (so a user's ``torch.compile`` kernels
  keep running on torch's stream; ``current_stream_handle``). It replaces Triton's own driver
  if torch made that one first; any other active driver is left alone.
  The backend installs it when its first CUDA array is made, so a user's own ``@triton.jit``
  kernel launched with ``kernel[grid](...)`` on ember's CUDA tensors (which Triton reads
  through ``data_ptr()`` and ``dtype``) runs on ember's current stream.
- ``launch(kernel, grid, args, stream)``: ember's own launches name their stream explicitly
  and go straight to the compiled kernel (the JIT's cache lookup, then ``CompiledKernel.run``),
  which skips the per-launch driver queries and launch-metadata bookkeeping of ``kernel[grid]``.
- Under Triton's interpreter (``TRITON_INTERPRET=1``, CPU, numpy buffers) ``launch`` wraps each
  numpy array in ``HostArray``, the storage protocol the interpreter reads (it was written for
  torch tensors): CI runs every generated kernel this way without a GPU.

Pointer arguments on the GPU are ``Pointer(address, dtype)``: all Triton reads of a tensor
argument are ``data_ptr()`` and a hashable ``dtype`` whose ``str`` it knows (numpy's names, and
ml_dtypes' bfloat16 and float8 types).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import os
import sys
import threading

import numpy as np

from .runtime import cupy as _cupy

TESTED = ("3.6",)


@functools.cache
def interpreting() -> bool:
    """Whether Triton kernels run in Triton's CPU interpreter: ``TRITON_INTERPRET``, read
    once (Triton itself reads it when a kernel is defined, so it cannot change later)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.cache
def triton():
    """The ``triton`` module; ImportError or RuntimeError naming what to install."""
    try:
        import triton as t
    except ImportError:
        raise ImportError("ember's CUDA kernels need Triton: pip install 'ember[cuda]' "
                          f"(triton=={TESTED[-1]}.*)") from None
    minor = ".".join(t.__version__.split(".")[:2])
    if minor not in TESTED and not os.environ.get("EMBER_TRITON_UNTESTED"):
        raise RuntimeError(
            f"ember is tested with Triton {', '.join(TESTED)}, and this process has Triton "
            f"{t.__version__}: install triton=={TESTED[-1]}.* (or set EMBER_TRITON_UNTESTED=1 "
            "to try this version anyway)")
    return t


def jit(fn=None, **options):
    """``triton.jit``, imported when the first kernel is defined (``import ember`` stays free
    of Triton)."""
    if fn is None:
        return lambda f: triton().jit(f, **options)
    return triton().jit(fn, **options)


@functools.cache
def kernel_module(name: str):
    """``ember.backends.cuda.<name>``, a module of ``@jit`` kernels, imported at its first use
    after the version check (``import ember`` loads no Triton)."""
    triton()
    return importlib.import_module(f"{__package__}.{name}")


# ------------------------------------------------------------------ arguments
class Pointer:
    """A device address Triton takes as a pointer argument of element type ``dtype``."""

    __slots__ = ("ptr", "dtype")

    def __init__(self, ptr: int, dtype):
        self.ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        return self.ptr


def pointers(arrays) -> list:
    """The pointer arguments of ``arrays``: ``Pointer(address, dtype)`` of CuPy's (``Pointer``s
    pass through); under the interpreter the (numpy) arrays themselves, which ``launch``
    wraps."""
    if interpreting():
        return list(arrays)
    return [a if type(a) is Pointer else Pointer(a.data.ptr, a.dtype) for a in arrays]


class _HostStorage:
    """The bytes an interpreted kernel may touch, as a uint8 array over that memory."""

    __slots__ = ("raw",)

    def __init__(self, raw: np.ndarray):
        self.raw = raw

    def data_ptr(self) -> int:
        return self.raw.__array_interface__["data"][0]

    def cpu(self):
        return self  # already host memory: the kernel works on it in place

    def copy_(self, other) -> None:
        if other.data_ptr() != self.data_ptr():  # the interpreter copies it onto itself
            raise AssertionError("a host buffer is only ever copied onto itself")


class HostArray:
    """A numpy array in the storage protocol of Triton's interpreter (``untyped_storage``,
    ``set_``, ...). Its storage is the memory the array spans, aliased, so the interpreter
    reads and writes the caller's memory directly."""

    __slots__ = ("a", "dtype", "_storage")

    def __init__(self, a: np.ndarray, storage: _HostStorage | None = None):
        self.a, self.dtype, self._storage = a, a.dtype, storage

    def data_ptr(self) -> int:
        return self.a.__array_interface__["data"][0]

    def untyped_storage(self) -> _HostStorage:
        if self._storage is None:
            a = self.a
            lo = hi = self.data_ptr()
            for n, s in zip(a.shape, a.strides):
                if n > 1:
                    lo, hi = (lo, hi + (n - 1) * s) if s >= 0 else (lo + (n - 1) * s, hi)
            span = hi - lo + a.itemsize if a.size else 0
            raw = np.ctypeslib.as_array((ctypes.c_uint8 * span).from_address(lo)) if span \
                else np.empty(0, np.uint8)
            self._storage = _HostStorage(raw)
        return self._storage

    def storage_offset(self) -> int:
        return (self.data_ptr() - self.untyped_storage().data_ptr()) // self.a.itemsize

    def size(self):
        return self.a.shape

    def stride(self):
        return tuple(s // self.a.itemsize for s in self.a.strides)

    def new_empty(self, n, device=None):
        return HostArray(np.empty(n, self.dtype))

    def set_(self, storage: _HostStorage, offset, size, stride) -> None:
        item = self.dtype.itemsize
        self.a = np.ndarray(tuple(size), self.dtype, buffer=storage.raw, offset=offset * item,
                            strides=tuple(s * item for s in stride))
        self._storage = storage


def host_args(args) -> list:
    return [HostArray(a) if isinstance(a, np.ndarray) else a for a in args]


# ------------------------------------------------------------------ the driver
_install_lock = threading.Lock()
_installed = False


def install_driver() -> None:
    """Make Triton's active driver ember's (one that works without torch), unless a driver
    other than Triton's own NVIDIA one is active. Triton's own (made when torch launched a
    Triton kernel first) is replaced: ember's answers as it does where ember has selected no
    stream of its own."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        from triton.runtime import driver as config
        from triton.backends.nvidia.driver import CudaDriver
        active = getattr(config, "_active", None)
        if active is None or type(active) is CudaDriver:
            config.set_active(_driver_class()())
        _installed = True


@functools.cache
def _driver_class():
    from triton.backends.nvidia.driver import CudaDriver, CudaLauncher, CudaUtils

    class EmberCudaDriver(CudaDriver):
        """Triton's NVIDIA driver, with device and stream queries answered by torch when it
        is in the process and by CuPy otherwise (GPUDriver.__init__ imports torch, so it is
        not called)."""

        def __init__(self):
            self.utils = CudaUtils()
            self.launcher_cls = CudaLauncher

        @staticmethod
        def _torch():
            t = sys.modules.get("torch")
            return t if t is not None and t.cuda.is_initialized() else None

        def get_current_device(self):
            t = self._torch()
            if t is not None:
                return t.cuda.current_device()
            from .runtime import cupy
            return cupy().cuda.runtime.getDevice()

        def set_current_device(self, index):
            t = self._torch()
            if t is not None:
                t.cuda.set_device(index)
            from .runtime import cupy
            cupy().cuda.runtime.setDevice(index)

        def get_current_stream(self, index=None):
            return current_stream_handle(index, self._torch())

        def get_device_capability(self, index=None):
            from .runtime import cupy
            cp = cupy()
            dev = cp.cuda.Device(index if index is not None else cp.cuda.runtime.getDevice())
            return divmod(int(dev.compute_capability), 10)

        @staticmethod
        def is_active():
            return True

    return EmberCudaDriver


_DEFAULT_HANDLES = (0, 2)  # the legacy and the per-thread default streams


def current_stream_handle(index=None, torch_module=None) -> int:
    """The stream a ``kernel[grid](...)`` launch runs on: ember's current stream (CuPy's)
    where ember has selected one other than the default (``with ember.cuda.stream(s):``);
    otherwise torch's current stream when ``torch_module`` (torch, with CUDA initialised) is
    given, so that torch's own kernels keep their order; otherwise ember's (the default)."""
    from .runtime import cupy
    ours = cupy().cuda.get_current_stream(-1 if index is None else index).ptr
    if ours in _DEFAULT_HANDLES and torch_module is not None:
        return torch_module.cuda.current_stream(index).cuda_stream
    return ours


# ------------------------------------------------------------------ launching
def current_device() -> int:
    """The calling thread's current CUDA device (what a launch compiles and runs for)."""
    return _cupy().cuda.runtime.getDevice()


def current_stream() -> int:
    """The handle of the current device's current stream: ember's launches run on it."""
    return _cupy().cuda.get_current_stream().ptr


def _signature(args) -> tuple:
    """What Triton specialises a launch on, per runtime argument: a pointer's dtype and 16-byte
    alignment; an integer's width (32 or 64 bits), whether it is 1, and whether 16 divides it;
    a float or bool's type."""
    sig = []
    for a in args:
        t = type(a)
        if t is Pointer:
            sig.append((a.dtype, a.ptr % 16 == 0))
        elif t is int:
            sig.append((-2**31 <= a < 2**31, a == 1, a % 16 == 0))
        else:
            sig.append(t)
    return tuple(sig)


_LAUNCHERS: dict = {}
_KEPT: dict = {}  # id -> kernel, for the kernels _LAUNCHERS's keys name by id


def launch(kernel, grid: tuple, args, stream: int | None = None, *, num_warps: int | None = None,
           num_stages: int | None = None, enable_fp_fusion: bool | None = None,
           **constexprs) -> None:
    """Run ``kernel`` (a ``@jit`` function) over ``grid`` on ``stream`` (a CUDA stream
    handle; the device's current stream when None). ``args`` are its runtime arguments in
    order: ``Pointer``s (numpy arrays under the interpreter) and Python numbers;
    ``constexprs`` its compile-time ones, by name (they follow the runtime ones);
    ``num_warps`` / ``num_stages`` / ``enable_fp_fusion`` Triton's compile options (its
    defaults when None; the interpreter has no use for them; ``enable_fp_fusion=False`` keeps
    each multiply and add rounded on its own, as the CPU's kernels round them).

    The compiled kernel is looked up by what Triton specialises on (``_signature``), so a
    launch after the first is one dictionary lookup and the launcher's C call."""
    if interpreting():
        _patch_interpreter()
        kernel[grid](*host_args(args), **constexprs)
        return
    from .runtime import cupy
    cp = cupy()
    if stream is None:
        stream = cp.cuda.get_current_stream().ptr
    c, fixed, tail = _launcher(kernel, cp.cuda.runtime.getDevice(), grid, args, constexprs,
                               num_warps, num_stages, enable_fp_fusion)
    g = tuple(grid) + (1, 1)
    # the launcher takes a pointer as a plain int (an object's data_ptr() costs a call and a
    # driver query per argument)
    c(g[0], g[1], g[2], stream, *fixed, *[a.ptr if type(a) is Pointer else a for a in args],
      *tail)


def prepare(kernel, grid: tuple, args, *, num_warps: int | None = None,
            num_stages: int | None = None, enable_fp_fusion: bool | None = None, **constexprs):
    """``go(stream, *args)``: ``kernel`` compiled for the signature of ``args`` (as
    ``launch`` takes them), launched over ``grid`` with runtime arguments whose pointers are
    plain int addresses. For a loop of launches that differ only in addresses: the caller
    keeps every launch in the signature it was prepared for (each pointer's 16-byte alignment
    no better than the example's; the same integers) and on the device it was prepared on.
    None under the interpreter."""
    if interpreting():
        return None
    from .runtime import cupy
    c, fixed, tail = _launcher(kernel, cupy().cuda.runtime.getDevice(), grid, args,
                               constexprs, num_warps, num_stages, enable_fp_fusion)
    g = tuple(grid) + (1, 1)
    g0, g1, g2 = g[0], g[1], g[2]

    def go(stream: int, *a) -> None:
        c(g0, g1, g2, stream, *fixed, *a, *tail)
    return go


class Site:
    """One launch of ``kernel`` over ``grid`` whose runtime numbers (``numbers``, after the
    pointers), compile-time arguments and options are fixed: calls pass only the pointer
    arguments, which differ between calls in their addresses alone (a wrapper keeps one Site
    per plan of shapes and dtypes). ``site(operands)`` takes arrays (CuPy's; numpy's under
    the interpreter) or ``Pointer``s. The first call whose addresses are all 16-byte aligned
    prepares Triton's C launcher for that signature; later aligned calls on that device are
    that one C call. Other calls take ``launch``."""

    __slots__ = ("kernel", "grid", "numbers", "options", "constexprs", "go", "device")

    def __init__(self, kernel, grid: tuple, numbers=(), *, num_warps: int | None = None,
                 num_stages: int | None = None, enable_fp_fusion: bool | None = None,
                 **constexprs):
        self.kernel, self.grid, self.numbers = kernel, tuple(grid), tuple(numbers)
        self.options = {"num_warps": num_warps, "num_stages": num_stages,
                        "enable_fp_fusion": enable_fp_fusion}
        self.constexprs = constexprs
        self.go = self.device = None

    def __call__(self, operands) -> None:
        if self.go is not None:
            addresses = [p.ptr if type(p) is Pointer else p.data.ptr for p in operands]
            bits = 0
            for a in addresses:
                bits |= a
            if not bits & 15 and _cupy().cuda.runtime.getDevice() == self.device:
                self.go(_cupy().cuda.get_current_stream().ptr, *addresses, *self.numbers)
                return
        args = pointers(operands) + list(self.numbers)
        launch(self.kernel, self.grid, args, **self.options, **self.constexprs)
        if self.go is None and not interpreting() and \
                not any(a.ptr & 15 for a in args[:len(operands)]):
            self.device = _cupy().cuda.runtime.getDevice()
            self.go = prepare(self.kernel, self.grid, args, **self.options, **self.constexprs)


def scratch(xp, dtype, sizes) -> tuple:
    """``(buffer, pieces)``: one allocation holding consecutive pieces of ``sizes`` elements of
    ``dtype``, each starting 16-byte aligned, and the pieces as pointer arguments:
    ``Pointer``s into the buffer on the GPU (no CuPy view made), numpy views of it under the
    interpreter (which reads arrays). The caller keeps ``buffer`` while kernels use it."""
    item = np.dtype(dtype).itemsize
    step = max(1, 16 // item)
    starts, at = [], 0
    for n in sizes:
        starts.append(at)
        at += -(-n // step) * step
    buffer = xp.empty(max(at, 1), dtype)
    if interpreting():
        return buffer, [buffer[a:a + n] for a, n in zip(starts, sizes)]
    base, dt = buffer.data.ptr, buffer.dtype
    return buffer, [Pointer(base + a * item, dt) for a in starts]


def _launcher(kernel, device, grid, args, constexprs, num_warps, num_stages, enable_fp_fusion):
    """``(c, fixed, tail)`` for a launch of ``kernel`` with these arguments: the call is
    ``c(gx, gy, gz, stream, *fixed, *runtime arguments, *tail)``, looked up by what Triton
    specialises on (``_signature``) and compiled on the first call."""
    # the kernel by identity (a JITFunction hashes its source key under a lock); _KEPT holds
    # every kernel with a launcher, so no other object takes its id
    key = (id(kernel), device, _signature(args), tuple(constexprs.items()), num_warps,
           num_stages, enable_fp_fusion)
    hit = _LAUNCHERS.get(key)
    if hit is None:
        options = {k: v for k, v in (("num_warps", num_warps), ("num_stages", num_stages),
                                     ("enable_fp_fusion", enable_fp_fusion)) if v is not None}
        hit = _LAUNCHERS[key] = _compile(kernel, device, grid, args, constexprs, options)
        _KEPT[id(kernel)] = kernel
    return hit


@functools.cache
def _patch_interpreter() -> None:
    """Triton 3.6's interpreter keeps bfloat16 blocks as their uint16 bits and multiplies those
    bits in ``tl.dot``: its dot widens bfloat16 operands to float32 first here (exact, as a GPU's
    bfloat16 products are). Its float32 -> bfloat16 cast truncates: here it rounds to nearest
    even, as the GPU's ``cvt.rn.bf16.f32``."""
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle
    import ml_dtypes
    tl = triton().language
    dot = InterpreterBuilder.create_dot
    cast = InterpreterBuilder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            bits = src.data.astype(ml_dtypes.bfloat16).view(np.uint16)
            return TensorHandle(bits, tl.bfloat16)
        return cast(self, src, dst_type)

    InterpreterBuilder.cast_impl = cast_impl

    def widened(h):
        if h.dtype.scalar != tl.bfloat16:
            return h
        bits = h.data.astype(np.uint32) << np.uint32(16)
        return TensorHandle(bits.view(np.float32), tl.float32)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return dot(self, widened(a), widened(b), d, input_precision, max_num_imprecise_acc)

    InterpreterBuilder.create_dot = create_dot


def _compile(kernel, device, grid, args, constexprs, options=None):
    """The compiled kernel of one signature as ``_launcher`` returns it."""
    install_driver()
    from triton import knobs
    names = kernel.arg_names
    rest = names[len(args):]
    if sorted(rest) != sorted(constexprs) or any(n in constexprs for n in names[:len(args)]):
        raise TypeError(f"{kernel.__name__}: launch() takes the runtime arguments in order, "
                        f"then the constexprs by name ({names})")
    # the options JITFunction.run adds before binding, so its cache key agrees
    kwargs = dict(constexprs, debug=kernel.debug or knobs.runtime.debug,
                  instrumentation_mode=knobs.compilation.instrumentation_mode)
    compiled = kernel.run(*args, grid=grid, warmup=True, **kwargs, **(options or {}))
    run = compiled.run  # loads the module on first use
    tail = tuple(constexprs[n] for n in rest)
    hooks = (compiled.packed_metadata, None, None, None)  # no launch metadata, no hooks
    if getattr(run, "global_scratch_size", 1) == 0 and getattr(run, "profile_scratch_size", 1) == 0:
        # the C launcher itself: Triton's Python __call__ around it only allocates scratch
        # memory, which this kernel does not use
        fixed = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None)
        return run.launch, fixed + hooks, tail
    return run, (compiled.function,) + hooks, tail


# ------------------------------------------------------------------ libdevice
def libdevice():
    """Triton's libdevice module; under the interpreter (which cannot run libdevice's extern
    functions) a stand-in computing the same functions with numpy."""
    return _libdevice(interpreting())


@functools.cache
def _libdevice(interpret: bool):
    if not interpret:
        from triton.language.extra import libdevice as ld
        return ld
    import types
    from .. import special
    shim = types.ModuleType("ember_interpreter_libdevice")
    numpy_names = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2",
                   "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh", "pow": "power"}
    extra = {"rsqrt": lambda x: 1 / np.sqrt(x), "erf": special.erf, "erfc": special.erfc}
    for name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "rsqrt", "pow", "sin",
                 "cos", "tan", "asin", "acos", "atan", "atan2", "hypot", "sinh", "cosh",
                 "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "floor", "ceil", "trunc",
                 "copysign"):
        fn = extra.get(name) or getattr(np, numpy_names.get(name, name))
        setattr(shim, name, _on_handles(fn))
    return shim


def _on_handles(fn):
    """``fn`` on the numpy data of interpreter blocks, as an interpreter block of the first
    operand's type."""
    def apply(*blocks):
        from triton.runtime.interpreter import TensorHandle
        tl = triton().language
        first = blocks[0]
        data = fn(*(b.handle.data for b in blocks))
        data = np.asarray(data, dtype=first.handle.data.dtype)
        return tl.core.tensor(TensorHandle(data, first.dtype.scalar), first.type)
    return apply
