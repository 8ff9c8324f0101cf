"""Random number generators: ``ember.Generator``, the default generator, and the functions of
``ember.random`` (PyTorch's ``torch.random``: ``manual_seed``, ``seed``, ``initial_seed``,
``get_rng_state``, ``set_rng_state``, ``fork_rng``).

A Generator wraps numpy's ``np.random.Generator`` over a PCG64 bit generator. Its state is
exported as a uint8 tensor (PyTorch's ByteTensor convention) holding a format tag, the initial
seed and the PCG64 state, so ``set_state(get_state())`` restores the stream exactly and also
restores ``initial_seed()``, as PyTorch's CPU generator does.

A CUDA generator (``Generator("cuda")``, and each device's default one, ``cuda_generator``)
is a Philox stream whose seed and offset live in a device buffer (backends/cuda/philox.py);
its state is PyTorch's 16 bytes, the seed then the offset. The CUDA backend's sampling kernels
draw from it (backends/cuda/random_ops.py), and so do the ops drawing through
``xp.uniform_draws`` (multinomial); the other sampling ops without a Philox kernel (randint,
randperm, ...) draw from a numpy generator it carries, seeded alongside.
``manual_seed`` and ``seed`` seed the CPU generator and every CUDA device's default stream.

Sampling ops (``ember/ops/random.py``) draw from ``numpy_generator(generator, op)``.
"""

from __future__ import annotations

import contextlib
import numbers
import secrets
from collections.abc import Iterator

import numpy as np

from . import _dtype as D
from ._device import check_device, device as _device_cls
from ._tensor import Tensor, _wrap
from .backends import base as _backends
from .backends.cuda import philox as _philox

# PyTorch seeds every new CPU generator with this constant (the default generator itself gets a
# non-deterministic seed at startup).
DEFAULT_SEED = 67280421310721

# state layout: tag (8) | initial seed (8) | PCG64 state (16) | increment (16) |
# has_uint32 (1) | buffered uint32 (4); integers little-endian
_TAG = b"emPCG64\x01"  # bit generator name + format version
_STATE_SIZE = 8 + 8 + 16 + 16 + 1 + 4
_U64 = 1 << 64
_PHILOX_STATE_SIZE = 16  # a CUDA generator's state: seed (uint64) | offset (int64), PyTorch's


def _seed_value(seed) -> int:
    """PyTorch's seed rule: any int in [-2**63, 2**64); negatives wrap to unsigned 64-bit."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
    seed = int(seed)
    if not -(1 << 63) <= seed < _U64:
        raise ValueError(f"Overflow when unpacking long long: seed {seed} is outside "
                         "[-2**63, 2**64)")
    return seed % _U64


class Generator:
    """``ember.Generator(device='cpu')``: a random number generator object.

    Pass it as ``generator=`` to any sampling op to draw from it instead of the default
    generator. A new generator starts from PyTorch's default seed (67280421310721), so two new
    generators produce the same numbers.
    """

    def __init__(self, device: str | _device_cls = "cpu") -> None:
        self._device = check_device(device)
        self._philox = None  # a CUDA generator's Philox stream
        if self._device.type == "cuda":
            backend = _backends.get("cuda")
            index = self._device.index
            if index is None:
                index = backend.current_index()
            self._device = _device_cls("cuda", index)
            self._philox = _philox.PhiloxState(backend, index, DEFAULT_SEED)
        self._reseed(DEFAULT_SEED)

    @classmethod
    def _of_stream(cls, dev: _device_cls, stream) -> "Generator":
        """A generator over an existing Philox stream (a device's default one)."""
        g = cls.__new__(cls)
        g._device, g._philox = dev, stream
        g._reseed_numpy(stream.seed)
        return g

    def _reseed(self, seed: int) -> None:
        self._reseed_numpy(seed)
        if self._philox is not None:
            self._philox.manual_seed(seed)

    def _reseed_numpy(self, seed: int) -> None:
        self._seed = seed
        self._bitgen = np.random.PCG64(seed)
        self._np = np.random.Generator(self._bitgen)

    @property
    def device(self) -> _device_cls:
        """The device whose tensors this generator fills."""
        return self._device

    def manual_seed(self, seed: int) -> "Generator":
        """Seed the generator (an int in [-2**63, 2**64)); returns the generator itself."""
        self._reseed(_seed_value(seed))
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the 64-bit seed chosen."""
        s = secrets.randbits(64)
        self._reseed(s)
        return s

    def initial_seed(self) -> int:
        """The seed this generator was last seeded with."""
        return self._seed if self._philox is None else self._philox.seed

    def get_state(self) -> Tensor:
        """The generator's state as a uint8 tensor (restore it with ``set_state``)."""
        return _wrap(np.frombuffer(self._state_bytes(), np.uint8).copy(), D.uint8)

    def set_state(self, new_state: Tensor) -> "Generator":
        """Restore a state from ``get_state``; returns the generator itself."""
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a ember.ByteTensor, but got {type(new_state).__name__}")
        if new_state.dtype is not D.uint8:
            raise TypeError(f"RNG state must be a ember.ByteTensor (uint8), but got a tensor of "
                            f"dtype {new_state.dtype}")
        raw = np.ascontiguousarray(new_state._data).reshape(-1).tobytes()
        self._load_state_bytes(raw)
        return self

    def clone_state(self) -> "Generator":
        """A new generator with this one's device and current state."""
        if self._philox is not None:
            p = self._philox
            g = Generator._of_stream(self._device, _philox.PhiloxState(p.backend, p.index, 0))
        else:
            g = Generator(self._device)
        g._load_state_bytes(self._state_bytes())
        return g

    def _state_bytes(self) -> bytes:
        if self._philox is not None:
            seed, offset = self._philox.get()
            return seed.to_bytes(8, "little") + offset.to_bytes(8, "little", signed=True)
        st = self._bitgen.state
        pcg = st["state"]
        return (_TAG + self._seed.to_bytes(8, "little") + pcg["state"].to_bytes(16, "little")
                + pcg["inc"].to_bytes(16, "little") + bytes([st["has_uint32"]])
                + int(st["uinteger"]).to_bytes(4, "little"))

    def _load_state_bytes(self, raw: bytes) -> None:
        if self._philox is not None:
            if len(raw) != _PHILOX_STATE_SIZE:
                raise RuntimeError(f"RNG state is wrong size: expected a CUDA generator state "
                                   f"of {_PHILOX_STATE_SIZE} bytes, got {len(raw)}")
            seed = int.from_bytes(raw[:8], "little")
            self._reseed_numpy(seed)
            self._philox.set(seed, int.from_bytes(raw[8:], "little", signed=True))
            return
        if len(raw) != _STATE_SIZE:
            raise RuntimeError(f"Expected an ember PCG64 generator state of size {_STATE_SIZE} "
                               f"but found the input RNG state size to be {len(raw)}")
        state = int.from_bytes(raw[16:32], "little")
        inc = int.from_bytes(raw[32:48], "little")
        has_uint32 = raw[48]
        # PCG64's increment is always odd; anything else is not a state get_state made
        if raw[:8] != _TAG or inc % 2 == 0 or has_uint32 > 1:
            raise RuntimeError("Invalid PCG64 generator state: the tensor was not produced by "
                               "ember.Generator.get_state()")
        self._seed = int.from_bytes(raw[8:16], "little")
        self._bitgen.state = {
            "bit_generator": "PCG64", "state": {"state": state, "inc": inc},
            "has_uint32": has_uint32, "uinteger": int.from_bytes(raw[49:53], "little"),
        }

    def __reduce__(self):
        return (_rebuild, (str(self._device), self._state_bytes()))

    def __repr__(self) -> str:
        return f"<ember.Generator device={self._device} initial_seed={self._seed}>"


def _rebuild(device: str, state: bytes) -> Generator:
    g = Generator(device)
    g._load_state_bytes(state)
    return g


def numpy_generator(generator: Generator | None, op: str) -> np.random.Generator:
    """The numpy generator an op draws from: ``generator``'s, or the default one's."""
    if generator is None:
        return default_generator._np
    if isinstance(generator, Generator):
        return generator._np
    raise TypeError(f"{op}(): argument 'generator' must be ember.Generator, not "
                    f"{type(generator).__name__}")


# ---------------------------------------------------------------------- the default generator
default_generator = Generator()
_backends.get("cpu").default_generator = default_generator  # what uniform_draws draws from
default_generator.seed()  # as in PyTorch, the process-wide generator starts non-deterministic


def manual_seed(seed) -> Generator:
    """``ember.manual_seed(seed)``: seed the default generator and every CUDA device's;
    returns the CPU one."""
    g = default_generator.manual_seed(int(seed))
    _philox.manual_seed_all(g.initial_seed())
    return g


def seed() -> int:
    """Seed the default generator non-deterministically, and every CUDA device's with the same
    seed; returns the seed."""
    s = default_generator.seed()
    _philox.manual_seed_all(s)
    return s


_CUDA_DEFAULTS: dict = {}  # device index -> the Generator over that device's default stream


def cuda_generator(index: int) -> Generator:
    """The default generator of CUDA device ``index`` (``ember.cuda.default_generators``):
    what CUDA sampling ops without ``generator=`` draw from."""
    g = _CUDA_DEFAULTS.get(index)
    if g is None:
        stream = _philox.default_state(_backends.get("cuda"), index)
        g = _CUDA_DEFAULTS.setdefault(index, Generator._of_stream(_device_cls("cuda", index),
                                                                   stream))
    return g


def initial_seed() -> int:
    """The default generator's initial seed."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state as a uint8 tensor."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator's state from ``get_rng_state()``."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: str | None = None) -> Iterator[None]:
    """Context manager: the default generator's state is restored on exit, and so are the
    CUDA devices' default streams (those of ``devices``; all when None)."""
    if not enabled:
        yield
        return
    state = default_generator._state_bytes()
    wanted = None if devices is None else {_cuda_index(d) for d in devices}

    def forked(key) -> bool:
        return key[0] == "cuda" and (wanted is None or key[1] in wanted)
    cuda = _philox.snapshot(forked)
    try:
        yield
    finally:
        default_generator._load_state_bytes(state)
        _philox.restore(cuda, forked)


def _cuda_index(d) -> int:
    if isinstance(d, numbers.Integral):
        return int(d)
    d = d if isinstance(d, _device_cls) else _device_cls(d)
    return d.index or 0


def thread_safe_generator() -> Generator | None:
    """PyTorch's hook for DataLoader thread workers; ember's workers use the default generator."""
    return None


__all__ = ["set_rng_state", "get_rng_state", "manual_seed", "seed", "initial_seed", "fork_rng",
           "thread_safe_generator", "Generator", "default_generator"]
