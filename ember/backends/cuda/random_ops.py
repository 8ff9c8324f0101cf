"""The CUDA backend's overrides of the sampling ops: Philox draws (philox.py) in place of
numpy's generator.

    rand, rand_like, randn, randn_like    fresh float16/bfloat16/float32/float64 arrays
    uniform, normal_functional            what ``x.uniform_()`` and ``x.normal_()`` write
    normal                                ``ember.normal`` (float or tensor mean and std)
    bernoulli, bernoulli_functional       0/1 draws (``x.bernoulli_(p)``: dropout's mask)

Each takes the op's arguments as the impl gets them (ops/random.py) and draws from the
``generator=``'s stream, or the device's default one. Where a call is not one it draws for
(complex dtypes, ``bernoulli(input, p)`` with a tensor ``p``) or its arguments are wrong, it
returns None and the impl runs: the impl raises PyTorch's error for bad arguments, so every
valid call of these forms draws from Philox and every invalid one fails as on CPU. A generator
of another device type is PyTorch's RuntimeError.

``make(backend)`` builds them for any backend whose arrays the kernels take: the CUDA
backend's CuPy arrays here, and, in the tests, the CPU backend's numpy arrays under Triton's
interpreter.
"""

from __future__ import annotations

import numbers
import operator

import numpy as np

from ... import _dtype as D
from ..._device import device as _device
from . import philox

_REAL = (float, int)


def _shape(sizes: tuple, size) -> tuple | None:
    """``rand(2, 3)``, ``rand((2, 3))``, ``rand(size=(2, 3))``: the shape, or None where the
    impl's parser would raise."""
    if size is not None:
        if sizes:
            return None
        sizes = (size,)
    if not sizes:
        return None
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    out = []
    for s in sizes:
        if isinstance(s, bool):
            return None
        try:
            s = operator.index(s)
        except TypeError:
            return None
        if s < 0:
            return None
        out.append(s)
    return tuple(out)


def _float_dt(dt) -> D.dtype | None:
    """``dt`` if the kernels draw it (a real float dtype), else None."""
    return dt if isinstance(dt, D.dtype) and np.dtype(dt.np) in philox.DIGITS else None


def _number(v) -> float | None:
    return float(v) if isinstance(v, numbers.Real) and not isinstance(v, np.ndarray) else None


def _index_of(backend, dev=None, array=None) -> int:
    """The device index a call draws on: ``dev``'s, else ``array``'s, else the current one."""
    if dev is not None:
        dev = dev if isinstance(dev, _device) else _device(dev)
        if dev.index is not None:
            return dev.index
    elif array is not None and isinstance(array, backend.array_type):
        index = backend.device_of(array).index
        if index is not None:
            return index
    return backend.current_index() if hasattr(backend, "current_index") else 0


def _state_of(backend, generator, index: int):
    """The stream to draw from; None where the impl should handle ``generator``."""
    if generator is None:
        return philox.default_state(backend, index)
    st = getattr(generator, "_philox", None)
    if st is not None and st.backend is backend:
        if st.index != index:  # its state buffer lives on another device
            raise RuntimeError(f"The generator is on {backend.name}:{st.index}, but the "
                               f"tensor it fills is on {backend.name}:{index}")
        return st
    dev = getattr(generator, "device", None)
    kind = getattr(dev, "type", None)
    if kind is not None and kind != backend.name:
        raise RuntimeError(f"Expected a '{backend.name}' device type for generator but "
                           f"found '{kind}'")
    return None


def _new(backend, shape, dt: D.dtype, index: int):
    return backend.empty(tuple(shape), dt.np, _device(backend.name, index))


def uniform_draws(backend, shape: tuple, generator, op: str):
    """``backend.uniform_draws``: float64 Philox draws on the current device."""
    index = _index_of(backend)
    st = _state_of(backend, generator, index)
    if st is None:
        raise TypeError(f"{op}(): argument 'generator' must be ember.Generator, not "
                        f"{type(generator).__name__}")
    return philox.uniform_(_new(backend, shape, D.float64, index), st)


def make(backend) -> dict:
    """The overrides for ``backend`` (op name -> kernel)."""

    def index_of(dev=None, array=None) -> int:
        return _index_of(backend, dev, array)

    def state_of(generator, index: int):
        return _state_of(backend, generator, index)

    def new(shape, dt: D.dtype, index: int):
        return _new(backend, shape, dt, index)

    def factory(fill):
        def kernel(*sizes, size=None, generator=None, dtype=None, device=None, **_):
            shape = _shape(sizes, size)
            dt = _float_dt(D.get_default_dtype() if dtype is None else dtype)
            if shape is None or dt is None:
                return None
            index = index_of(device)
            st = state_of(generator, index)
            return None if st is None else fill(new(shape, dt, index), st)
        return kernel

    def like(fill):
        def kernel(input, *, generator=None, dtype=None, device=None, **_):
            dt = _float_dt(D.from_np(input.dtype) if dtype is None else dtype)
            if dt is None:
                return None
            index = index_of(device, input)
            st = state_of(generator, index)
            return None if st is None else fill(new(input.shape, dt, index), st)
        return kernel

    def uniform(input, from_=0.0, to=1.0, *, generator=None):
        dt, lo, hi = _float_dt(D.from_np(input.dtype)), _number(from_), _number(to)
        if dt is None or lo is None or hi is None:
            return None
        mx = float(D.finfo(dt).max)
        if not (-mx <= lo <= hi <= mx and hi - lo <= mx):
            return None  # the impl's bound checks raise
        index = index_of(None, input)
        st = state_of(generator, index)
        return None if st is None else philox.uniform_(new(input.shape, dt, index), st, lo,
                                                       hi - lo)

    def normal_functional(input, mean=0.0, std=1.0, *, generator=None):
        dt, m, s = _float_dt(D.from_np(input.dtype)), _number(mean), _number(std)
        if dt is None or m is None or s is None or not s >= 0:
            return None
        index = index_of(None, input)
        st = state_of(generator, index)
        return None if st is None else philox.normal_(new(input.shape, dt, index), st, m, s)

    def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, **_):
        arrays = [a for a in (mean, std) if isinstance(a, backend.array_type)]
        if not arrays:  # normal(mean: float, std: float, size)
            shape = None if size is None else _shape((size,), None)
            dt, m, s = _float_dt(D.get_default_dtype() if dtype is None else dtype), \
                _number(mean), _number(std)
            if shape is None or dt is None or m is None or s is None or not s >= 0:
                return None
            index = index_of(device)
            st = state_of(generator, index)
            return None if st is None else philox.normal_(new(shape, dt, index), st, m, s)
        # tensor mean and/or std: the impl's arithmetic on one standard normal draw
        dt = _float_dt(D.from_np(arrays[0].dtype))
        if size is not None or dt is None or \
                any(D.from_np(a.dtype).kind != "f" for a in arrays):  # bfloat16's numpy kind: V
            return None
        if any(not isinstance(v, backend.array_type) and _number(v) is None
               for v in (mean, std)):
            return None
        xp = backend.xp
        if isinstance(std, backend.array_type):
            if not bool(xp.all(std >= 0)):  # the impl's check (it synchronises)
                return None
        elif not std >= 0:
            return None
        comp = D.float64 if dt is D.float64 else D.float32
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        index = index_of(None, arrays[0])
        st = state_of(generator, index)
        if st is None:
            return None
        noise = philox.normal_(new(shape, comp, index), st)
        if isinstance(mean, backend.array_type):
            mean = mean.astype(np.result_type(comp.np, mean.dtype), copy=False)
        if isinstance(std, backend.array_type):
            std = std.astype(comp.np, copy=False)
        return xp.asarray(mean + std * noise).astype(dt.np, copy=False)

    def draw_bernoulli(input, p, name):
        """0/1 of input's dtype and shape with probability ``p`` (a number, or an array of
        this backend broadcasting to input's shape), or None where the impl decides."""
        if input.dtype.kind == "c":
            return None
        xp = backend.xp
        if isinstance(p, backend.array_type):
            if p.dtype.kind != "f":
                return None
            try:
                # (ascontiguousarray makes a 0-d p 1-d: reshape it back)
                p = xp.ascontiguousarray(xp.broadcast_to(p, input.shape)).reshape(input.shape)
            except ValueError:
                return None
            # on the device: a failure is raised at the next synchronising call
            backend.check_unit_interval(p, name, lambda v: RuntimeError(
                f"{name}(): Expected p_in >= 0 && p_in <= 1 to be true, but got false "
                "(every probability must lie in [0, 1])"), what="probability")
        else:
            p = _number(p)
            if p is None or not 0 <= p <= 1:
                return None
        return p

    def bernoulli_functional(input, p=0.5, *, generator=None):
        return bernoulli_draw(input, p, generator, "bernoulli_")

    def bernoulli_draw(input, p, generator, name):
        p = draw_bernoulli(input, p, name)
        if p is None:
            return None
        index = index_of(None, input)
        st = state_of(generator, index)
        if st is None:
            return None
        return philox.bernoulli_(new(input.shape, D.from_np(input.dtype), index), st, p)

    def bernoulli(input, p=None, *, generator=None):
        if p is None:
            if input.dtype.kind != "f":
                return None
            p = input
        elif not isinstance(p, _REAL):
            return None  # a tensor p: the impl broadcasts it against input
        return bernoulli_draw(input, p, generator, "bernoulli")

    return {"rand": factory(philox.uniform_), "randn": factory(philox.normal_),
            "rand_like": like(philox.uniform_), "randn_like": like(philox.normal_),
            "uniform": uniform, "normal_functional": normal_functional, "normal": normal,
            "bernoulli": bernoulli, "bernoulli_functional": bernoulli_functional}


def register(backend) -> None:
    """Register the overrides on ``backend`` (the CUDA backend, when it exists)."""
    for name, kernel in make(backend).items():
        backend.override(name, "kernel", kernel)
