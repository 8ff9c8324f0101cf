"""ember's random numbers on CUDA: Philox 4x32-10 streams whose state lives on the device.

A ``PhiloxState`` is one stream: a 64-bit seed and a 64-bit offset (the next counter) kept in
a small device buffer, int64 ``[seed, offset]``. The kernels (philox_kernels.py) read both
from the buffer, and after each draw a one-program kernel adds the number of counters used
to the offset, on the same stream: nothing is read back to the host, so a CUDA graph that
captured a draw advances the stream on every replay and draws new numbers each time. The
host keeps the seed (``initial_seed``) and reads the offset back only for ``get_state``
(which synchronises, as PyTorch's ``get_rng_state`` does). Element ``i`` of a draw uses the
counter ``offset + i``: values depend on (seed, offset, i) only, not on the block size or
the grid, and a draw of ``n`` values moves the offset by ``n``.

The buffer is allocated on first use, so seeding touches no device. Each device has a
default state (``default_state``), seeded non-deterministically unless ``manual_seed_all``
chose a seed (``ember.manual_seed`` does); ``ember.Generator(device="cuda")`` owns its own
state (ember/_random.py).

The launch wrappers (``uniform_``, ``normal_``, ``bernoulli_``) fill a preallocated
contiguous array and neither allocate nor synchronise, so they can run inside a CUDA graph
capture. They take CuPy arrays, or numpy arrays under Triton's interpreter (CI, no GPU). This
module imports neither Triton nor CuPy until a draw or a device buffer is needed.
"""

from __future__ import annotations

import contextlib
import secrets
import struct

import numpy as np

from ... import _dtype as D
from ..._device import device as _device
from . import runtime
from . import triton_adapter as adapter

BLOCK = 1024
_U64 = 1 << 64
# significand bits of the uniform values drawn for each output dtype
DIGITS = {np.dtype(np.float16): 11, np.dtype(D.bfloat16.np): 8, np.dtype(np.float32): 24,
          np.dtype(np.float64): 53}


class PhiloxState:
    """One Philox stream of ``backend``'s device ``index``: its seed on the host, its seed and
    offset in a device buffer (int64 ``[seed, offset]``) that every draw reads and advances."""

    __slots__ = ("backend", "index", "seed", "_buffer")

    def __init__(self, backend, index: int, seed: int):
        self.backend, self.index, self.seed = backend, index, seed
        self._buffer = None

    @property
    def buffer(self):
        """The device buffer, allocated (holding the seed and offset 0) on first use."""
        if self._buffer is None:
            with self.on_device():
                buf = self.backend.empty((2,), np.int64, _device(self.backend.name, self.index))
                self._write(buf, self.seed, 0)
                self._buffer = buf
        return self._buffer

    def on_device(self):
        """A context making this state's device the current one (launches go there)."""
        if self.backend.name == "cuda":
            from .runtime import cupy
            return cupy().cuda.Device(self.index)
        return contextlib.nullcontext()

    def _write(self, buf, seed: int, offset: int) -> None:
        words = np.array([seed - _U64 if seed >= 1 << 63 else seed, offset], np.int64)
        with self.on_device():  # ordered on the current stream, after the draws queued there
            self.backend.copy_into(buf, words)

    def manual_seed(self, seed: int) -> None:
        """Restart the stream at ``seed`` (an int in [0, 2**64)), offset 0."""
        self.seed = seed
        if self._buffer is not None:
            self._write(self._buffer, seed, 0)

    def get(self) -> tuple[int, int]:
        """``(seed, offset)``; reads the device buffer back (waits for the queued draws)."""
        if self._buffer is None:
            return self.seed, 0
        with self.on_device():
            words = self.backend.to_host(self._buffer)
        return int(words[0]) % _U64, int(words[1])

    def set(self, seed: int, offset: int) -> None:
        """Continue the stream of ``seed`` from counter ``offset``."""
        self.seed = seed
        self._write(self.buffer, seed, offset)

    def __repr__(self) -> str:
        return f"PhiloxState({self.backend.name}:{self.index}, seed={self.seed})"


# ---------------------------------------------------------------------- default states
_DEFAULTS: dict = {}  # (backend name, device index) -> PhiloxState
_SEED_ALL: list = [None]  # the seed manual_seed_all chose: where new default states start


def default_state(backend, index: int) -> PhiloxState:
    """The default stream of ``backend``'s device ``index`` (what ``generator=None`` draws
    from), created on first use."""
    key = (backend.name, index)
    st = _DEFAULTS.get(key)
    if st is None:
        seed = _SEED_ALL[0] if _SEED_ALL[0] is not None else secrets.randbits(64)
        st = _DEFAULTS.setdefault(key, PhiloxState(backend, index, seed))
    return st


def manual_seed_all(seed: int) -> None:
    """Seed every device's default stream, those not created yet included. In a child forked
    after CUDA was initialised (a DataLoader worker seeding itself) the device cannot be
    reached: the seed is recorded and nothing else is done, as PyTorch defers the call."""
    _SEED_ALL[0] = seed
    if runtime.in_bad_fork():
        return
    for st in list(_DEFAULTS.values()):
        st.manual_seed(seed)


def snapshot(which) -> dict:
    """The ``(seed, offset)`` of the default streams whose key (backend name, device index)
    ``which`` accepts (``fork_rng`` restores them)."""
    return {key: st.get() for key, st in list(_DEFAULTS.items()) if which(key)}


def restore(saved: dict, which) -> None:
    """Put the default streams ``which`` accepts back where ``snapshot`` found them; one made
    since starts over (its seed, offset 0), as if it had not drawn."""
    for key, st in list(_DEFAULTS.items()):
        if key in saved:
            st.set(*saved[key])
        elif which(key):
            st.manual_seed(st.seed)


# ---------------------------------------------------------------------- draws
def _kernels():
    from . import philox_kernels
    return philox_kernels


def _ptr(a):
    return a if adapter.interpreting() else adapter.Pointer(a.data.ptr, a.dtype)


def _float_words(x: float) -> tuple[int, int]:
    """The float64 ``x`` as (upper word, signed; lower word, unsigned): Triton would pass a
    Python float as float32."""
    bits = struct.unpack("<q", struct.pack("<d", float(x)))[0]
    return bits >> 32, bits & 0xFFFFFFFF


def _target(out):
    """``out`` as the kernels write it (bool as uint8); ValueError unless contiguous."""
    if not out.flags.c_contiguous:
        raise ValueError("Philox draws fill contiguous arrays")
    return out.view(np.uint8) if out.dtype == np.bool_ else out


def _launch(kernel, n: int, args: list, state: PhiloxState, block: int | None,
            **constexprs) -> None:
    """``kernel`` over ``n`` elements (``args``: its runtime arguments, the state buffer and
    ``n`` included) in blocks of ``block`` (``BLOCK`` when None; the values do not depend on
    it), then the state's offset moved on by ``n``: two launches on the current stream of the
    state's device."""
    if n == 0:
        return
    block = block or BLOCK
    with state.on_device():
        adapter.launch(kernel, ((n + block - 1) // block,), args, BLOCK=block, **constexprs)
        adapter.launch(_kernels().advance_kernel, (1,), [_ptr(state.buffer), n])


def uniform_(out, state: PhiloxState, low: float = 0.0, width: float = 1.0,
             block: int | None = None):
    """Fill ``out`` (contiguous, float16/bfloat16/float32/float64) with ``low + width * u``,
    ``u`` uniform on [0, 1) at the dtype's precision; computed in float32 (float64 for a
    float64 ``out``). Returns ``out``."""
    target = _target(out)
    args = [_ptr(target), _ptr(state.buffer), out.size, *_float_words(low),
            *_float_words(width)]
    _launch(_kernels().uniform_kernel, out.size, args, state, block,
            DIGITS=DIGITS[np.dtype(out.dtype)])
    return out


def normal_(out, state: PhiloxState, mean: float = 0.0, std: float = 1.0,
            block: int | None = None):
    """Fill ``out`` (contiguous float) with ``mean + std * z``, ``z`` standard normal; computed
    in float32 (float64 for a float64 ``out``). Returns ``out``."""
    target = _target(out)
    args = [_ptr(target), _ptr(state.buffer), out.size, *_float_words(mean), *_float_words(std)]
    digits = 53 if np.dtype(out.dtype) == np.float64 else 24
    _launch(_kernels().normal_kernel, out.size, args, state, block, DIGITS=digits)
    return out


def bernoulli_(out, state: PhiloxState, p, block: int | None = None):
    """Fill ``out`` (contiguous, any real or bool dtype) with 1 with probability ``p`` and 0
    otherwise: ``p`` a number in [0, 1], or a contiguous float array of ``out``'s shape.
    Returns ``out``."""
    target = _target(out)
    n = out.size
    k = _kernels()
    if isinstance(p, (int, float)):
        threshold = min(int(float(p) * 4294967296.0 + 0.5), 1 << 32)  # P(word < t) = t/2**32
        _launch(k.bernoulli_scalar_kernel, n, [_ptr(target), _ptr(state.buffer), n, threshold],
                state, block)
        return out
    if p.shape != out.shape or not p.flags.c_contiguous:
        raise ValueError("bernoulli_: p must be contiguous and of out's shape")
    digits = 53 if np.dtype(p.dtype) == np.float64 else 24
    _launch(k.bernoulli_tensor_kernel, n, [_ptr(target), _ptr(p), _ptr(state.buffer), n],
            state, block, DIGITS=digits)
    return out
