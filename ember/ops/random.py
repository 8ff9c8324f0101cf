"""Random sampling: factories (rand, randn, randint, randperm, the ``*_like`` forms),
distributions (normal, bernoulli, multinomial, poisson) and the in-place fills (``uniform_``,
``normal_``, ``random_``, ``exponential_``, ``bernoulli_``, ``geometric_``, ``log_normal_``,
``cauchy_``).

Every op draws from ``generator=`` (an ``ember.Generator``, see ``ember/_random.py``) or from
the default generator. Real samples are drawn in float64 for float64 and in float32 for every
other float dtype, then cast: float16/bfloat16 are generated in float32 and rounded, as PyTorch
computes them. A complex dtype draws its real and imaginary parts as independent real samples.

As in PyTorch, sampling has a zero derivative: ``normal`` with tensor mean/std, ``bernoulli``,
``poisson`` and the in-place fills on a tensor with history record a node whose gradient is 0,
so the result still requires grad but nothing flows back through the random draw.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _dtype as D

from .._device import check_device
from .._random import (Generator, default_generator, get_rng_state, initial_seed, manual_seed,
                       numpy_generator, seed, set_rng_state)
from .._tensor import Tensor
from .bind import tensor_method
from .creation import _size
from .registry import call_inplace, op

RANDOM = ("random",)
FACTORY = ("random", "factory")
# factories that allocate on the default device when given none (not the *_like ones)
CONSTRUCTOR = FACTORY + ("default_device",)
PUBLIC = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
          "get_rng_state", "set_rng_state"]

# significand bits: a float dtype holds every integer in [0, 2**digits] exactly
_DIGITS = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}
# the C type names PyTorch's bound checks print
_CNAME = {D.bool_: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short int",
          D.int32: "int", D.int64: "long int", D.float16: "c10::Half",
          D.bfloat16: "c10::BFloat16", D.float32: "float", D.float64: "double"}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


# ---------------------------------------------------------------------- helpers
def _dt(a: np.ndarray) -> D.dtype:
    return D.from_np(a.dtype)


def _not_implemented(kernel: str, dt: D.dtype) -> NotImplementedError:
    return NotImplementedError(f"\"{kernel}\" not implemented for '{D.TYPE_NAME[dt]}'")


def _num(v) -> str:
    """A scalar as PyTorch's messages print it (C's %g for floats)."""
    return f"{v:g}" if isinstance(v, float) else str(v)


def _compute(dt: D.dtype):
    """The numpy dtype real samples of ``dt`` are drawn in."""
    return np.float64 if dt is D.float64 else np.float32


def _sample(xp, shape: tuple, dt: D.dtype, draw) -> np.ndarray:
    """An array of ``dt`` from ``draw(real_dtype, shape)``; a complex dtype takes two real
    draws per element (real and imaginary parts)."""
    if dt.is_complex:
        real = dt.to_real()
        pairs = xp.asarray(draw(real, tuple(shape) + (2,)), dtype=real.np)
        return xp.ascontiguousarray(pairs).view(dt.np)[..., 0]
    return xp.asarray(draw(dt, tuple(shape))).astype(dt.np, copy=False)


# numpy-only: numpy Generator draws (ember's RNG on CUDA is Philox)
def _uniform01(xp, rng: np.random.Generator, dt: D.dtype, shape: tuple) -> np.ndarray:
    """Uniform on [0, 1) at ``dt``'s resolution, so a half dtype never rounds up to 1."""
    if dt is D.float64:
        return rng.random(shape)  # numpy-only: Generator draw
    u = rng.random(shape, dtype=np.float32)  # numpy-only: Generator draw
    d = _DIGITS[dt]
    if d < 24:
        u = xp.floor(u * np.float32(2.0 ** d)) * np.float32(2.0 ** -d)
    return u


# numpy-only: numpy Generator draws (ember's RNG on CUDA is Philox)
def _std_normal(rng: np.random.Generator, dt: D.dtype, shape: tuple) -> np.ndarray:
    return rng.standard_normal(shape, dtype=_compute(dt))  # numpy-only: Generator draw


def _float_dtype(dtype, kernel: str, complex_ok: bool = True) -> D.dtype:
    """``dtype=`` of a continuous factory (the default float when None)."""
    dt = D.get_default_dtype() if dtype is None else dtype
    if not isinstance(dt, D.dtype):
        raise TypeError(f"dtype must be an ember.dtype, not {type(dt).__name__}")
    if not (dt.is_floating_point or complex_ok and dt.is_complex):
        raise _not_implemented(kernel, dt)
    return dt


def _int_arg(name: str, arg: str, v) -> int:
    if isinstance(v, Tensor) and v.dtype.kind in "uib" and v.numel() == 1:
        v = v.item()
    if not isinstance(v, numbers.Integral):
        raise TypeError(f"{name}(): argument '{arg}' must be int, not {type(v).__name__}")
    v = int(v)
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise RuntimeError(f"{name}(): argument '{arg}' = {v} overflows int64 (Overflow when "
                           "unpacking long long)")
    return v


def _bounds(dt: D.dtype) -> tuple:
    if dt.is_floating_point:
        mx = D.finfo(dt).max
        return -mx, mx
    info = D.iinfo(dt)
    return info.min, info.max


def _check_random_bounds(lo: int, hi: int, dt: D.dtype) -> None:
    """The inclusive range [lo, hi] of a discrete draw must be representable in ``dt``."""
    if dt.is_complex:
        raise RuntimeError("check_random_bounds handles only integral, floating-point and "
                           f"boolean types, got {D.TYPE_NAME[dt]}")
    mn, mx = _bounds(dt)
    if not mn <= lo <= mx:
        raise RuntimeError(f"from is out of bounds for {_CNAME[dt]} (from={lo})")
    if not mn <= hi <= mx:
        raise RuntimeError(f"to - 1 is out of bounds for {_CNAME[dt]} (to - 1={hi})")


def _random_from_to(rng, lo: int, to: int, shape: tuple, dt: D.dtype) -> np.ndarray:
    """Discrete uniform on [lo, to) as ``dt`` (randint, randint_like, random_(from, to))."""
    if lo >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} >= "
                           f"to={to}")
    _check_random_bounds(lo, to - 1, dt)
    return _random_ints(rng, lo, to - 1, shape, dt)


def _random_ints(rng, lo: int, hi: int, shape: tuple, dt: D.dtype) -> np.ndarray:
    # numpy-only: Generator draw
    return rng.integers(lo, hi, size=shape, dtype=np.int64, endpoint=True).astype(dt.np)


def _zero_backward(d) -> None:
    """PyTorch's derivative of a random draw: zero for every tensor argument."""
    n = len(d.tensor_params)

    def backward(ctx, g):
        z = g.new_zeros(g.shape)
        return (z,) * n
    d.def_backward(backward)


# ---------------------------------------------------------------------- factories
@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def rand(xp, *sizes, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    """``ember.rand(*size, *, generator=None, dtype=None, ...)``: uniform samples on [0, 1)."""
    check_device(device)
    dt = _float_dtype(dtype, "check_uniform_bounds")
    return _rand(xp, _size(sizes, "rand", size), dt, numpy_generator(generator, "rand"))


def _rand(xp, shape, dt, rng):
    return _sample(xp, shape, dt, lambda real, s: _uniform01(xp, rng, real, s))


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def randn(xp, *sizes, size=None, generator=None, out=None, dtype=None, layout=None,
          device=None, requires_grad=False, pin_memory=False):
    """``ember.randn(*size, *, generator=None, dtype=None, ...)``: standard normal samples
    (complex: real and imaginary parts each of variance 1/2)."""
    check_device(device)
    dt = _float_dtype(dtype, "normal_kernel_cpu")
    return _randn(xp, _size(sizes, "randn", size), dt, numpy_generator(generator, "randn"))


def _randn(xp, shape, dt, rng):
    scale = math.sqrt(0.5) if dt.is_complex else 1.0
    return _sample(xp, shape, dt, lambda real, s: _std_normal(rng, real, s) * scale)


def _randint_range(name: str, low, high) -> tuple:
    """``(high)`` or ``(low, high)`` as checked ints."""
    if high is None:
        if low is None:
            raise TypeError(f"{name}() missing required argument 'high'")
        low, high = 0, low
    return _int_arg(name, "low", low), _int_arg(name, "high", high)


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def randint(xp, low=0, high=None, size=None, *, generator=None, out=None, dtype=None,
            layout=None, device=None, requires_grad=False, pin_memory=False):
    """``ember.randint(low=0, high, size, *, generator=None, dtype=int64, ...)``: integers
    uniform on [low, high)."""
    check_device(device)
    if size is None:  # randint(high, size)
        if high is None:
            raise TypeError("randint() missing 1 required positional argument: 'size'")
        low, high, size = 0, low, high
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not "
                        f"{type(size).__name__}")
    shape = _size((size,))
    low, high = _randint_range("randint", low, high)
    dt = D.int64 if dtype is None else dtype
    return _random_from_to(numpy_generator(generator, "randint"), low, high, shape, dt)


@op(tags=CONSTRUCTOR, method=False, differentiable=False)
def randperm(xp, n, *, generator=None, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """``ember.randperm(n, *, generator=None, dtype=int64, ...)``: a random permutation of
    ``0 .. n-1``."""
    check_device(device)
    n = _int_arg("randperm", "n", n)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    dt = D.int64 if dtype is None else dtype
    if dt.kind in "bc":
        raise _not_implemented("randperm", dt)
    if dt.is_floating_point:
        # every value must be exact; PyTorch allows up to 2**digits + 1 values
        limit = 2 ** _DIGITS[dt] + 1
        if n > limit:
            raise RuntimeError(f"randperm(): n cannot be greater than {limit} for "
                               f"{D.TYPE_NAME[dt]} type, got n={n}")
    elif n - 1 > D.iinfo(dt).max:
        raise RuntimeError(f"randperm(): n={n} does not fit dtype {dt}: value cannot be converted "
                           f"to type {dt.name}_t without overflow")
    # numpy-only: Generator draw
    return numpy_generator(generator, "randperm").permutation(n).astype(dt.np)


def _like_dtype(input: np.ndarray, dtype) -> D.dtype:
    return _dt(input) if dtype is None else dtype


@op(tags=FACTORY, method=False, differentiable=False, out=False)
def rand_like(xp, input: "Tensor", *, generator=None, dtype=None, layout=None, device=None,
              requires_grad=False, memory_format=None):
    """``ember.rand_like(input, *, generator=None, dtype=None, ...)``: ``rand`` of input's
    shape (and dtype)."""
    check_device(device)
    dt = _float_dtype(_like_dtype(input, dtype), "check_uniform_bounds")
    return _rand(xp, input.shape, dt, numpy_generator(generator, "rand_like"))


@op(tags=FACTORY, method=False, differentiable=False, out=False)
def randn_like(xp, input: "Tensor", *, generator=None, dtype=None, layout=None, device=None,
               requires_grad=False, memory_format=None):
    """``ember.randn_like(input, *, generator=None, dtype=None, ...)``: ``randn`` of input's
    shape (and dtype)."""
    check_device(device)
    dt = _float_dtype(_like_dtype(input, dtype), "normal_kernel_cpu")
    return _randn(xp, input.shape, dt, numpy_generator(generator, "randn_like"))


@op(tags=FACTORY, method=False, differentiable=False, out=False)
def randint_like(xp, input: "Tensor", low=0, high=None, *, generator=None, dtype=None,
                 layout=None, device=None, requires_grad=False, memory_format=None):
    """``ember.randint_like(input, low=0, high, *, generator=None, dtype=None, ...)``."""
    check_device(device)
    low, high = _randint_range("randint_like", low, high)
    rng = numpy_generator(generator, "randint_like")
    return _random_from_to(rng, low, high, input.shape, _like_dtype(input, dtype))


# ---------------------------------------------------------------------- distributions
def _check_std(xp, std) -> None:
    if isinstance(std, np.ndarray):
        if not xp.all(std >= 0):  # NaN fails too
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_num(std)}")


@op(tags=FACTORY, method=False, grad_name="NormalBackward3")
def normal(xp, mean: "Scalar|Tensor", std: "Scalar|Tensor" = 1.0, size=None, *,
           generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
           pin_memory=False):
    """``ember.normal(mean, std=1.0, *, generator=None)`` with tensor and/or float mean and
    std (broadcast together; the result has the tensor mean's dtype, else std's), or
    ``ember.normal(mean: float, std: float, size, *, dtype=None, ...)``."""
    rng = numpy_generator(generator, "normal")
    m_arr, s_arr = isinstance(mean, np.ndarray), isinstance(std, np.ndarray)
    if not (m_arr or s_arr):
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments: with a "
                            "float mean and a float std, the size is required")
        check_device(device)
        dt = _float_dtype(dtype, "normal_kernel_cpu")
        shape = _size((size,))
    else:
        if size is not None:
            raise TypeError("normal(): size= is only accepted with a float mean and float std")
        dt = _dt(mean if m_arr else std)
        if dt.kind not in "fc":
            raise _not_implemented("normal_kernel_cpu", dt)
        shape = np.broadcast_shapes(np.shape(mean), np.shape(std))  # numpy-only: host shape query
    _check_std(xp, std)
    comp = _compute(dt.to_real())
    if m_arr:
        mean = mean.astype(np.result_type(comp, mean.dtype), copy=False)
    if s_arr:
        std = std.astype(comp, copy=False)
    noise = _sample(xp, shape, dt.to_complex() if dt.is_complex else D.from_np(comp),
                    lambda real, s: _std_normal(rng, real, s))
    if dt.is_complex:
        noise = noise * math.sqrt(0.5)
    return xp.asarray(mean + std * noise).astype(dt.np, copy=False)


_zero_backward(normal)


def _bernoulli(xp, rng, p, shape: tuple, out_np, name: str) -> np.ndarray:
    """0/1 draws of probability ``p`` (a number, or an array that broadcasts to ``shape``)."""
    if isinstance(p, np.ndarray):
        probs = p.astype(np.float64 if p.dtype == np.float64 else np.float32, copy=False)
        xp.check_unit_interval(probs, name, lambda v: RuntimeError(
            f"{name}(): Expected p_in >= 0 && p_in <= 1 to be true, but got false (every "
            "probability must lie in [0, 1])"), what="probability")
        u = rng.random(shape, dtype=probs.dtype.type)  # numpy-only: Generator draw
    else:
        if isinstance(p, Tensor) or not isinstance(p, numbers.Real):
            raise TypeError(f"{name}(): argument 'p' must be float, not {type(p).__name__}")
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_num(p)}")
        probs = p
        u = rng.random(shape)  # numpy-only: Generator draw
    return (u < probs).astype(out_np)


@op(tags=RANDOM, grad_name="BernoulliBackward0")
def bernoulli(xp, input: "Tensor", p=None, *, generator=None, out=None):
    """``ember.bernoulli(input, *, generator=None)``: 0/1 samples with probabilities ``input``;
    ``bernoulli(input, p)``: samples of probability ``p`` shaped like ``input``."""
    dt = _dt(input)
    rng = numpy_generator(generator, "bernoulli")
    if p is None:
        if dt.kind != "f":
            raise _not_implemented("bernoulli_tensor_cpu_self_" if dt.is_complex
                                   else "bernoulli_tensor_cpu_p_", dt)
        return _bernoulli(xp, rng, input, input.shape, input.dtype, "bernoulli")
    if dt.is_complex:
        raise _not_implemented("bernoulli_scalar_cpu_", dt)
    return _bernoulli(xp, rng, p, input.shape, input.dtype, "bernoulli")


_zero_backward(bernoulli)


def _cumsum(xp, p: np.ndarray) -> np.ndarray:
    """Row-wise cumulative sums in float64 (cast first: numpy's casting cumsum is slow)."""
    c = p.astype(np.float64)
    return xp.cumsum(c, axis=-1, out=c)


def _multinomial_with_replacement(xp, generator, p: np.ndarray, n: int,
                                  cdf=None) -> np.ndarray:
    """Inverse-CDF draws for every row at once: row ``r``'s CDF is shifted by ``r`` so one
    searchsorted serves all rows (exact for one row; within ``r * eps`` otherwise). ``cdf``:
    ``_cumsum(p)``, which this overwrites."""
    rows, k = p.shape
    cdf = _cumsum(xp, p) if cdf is None else cdf
    cdf /= cdf[:, -1:]  # rows end at exactly 1 (x / x), so the shifted rows stay sorted
    off = xp.arange(rows)[:, None]
    cdf += off
    u = xp.uniform_draws((rows, n), generator, "multinomial")
    u += off
    idx = xp.searchsorted(cdf.ravel(), u.ravel(), side="right").reshape(rows, n) - off * k
    # a draw that rounds onto its row's end (r + 1) belongs to the row's last category of
    # nonzero weight
    last = k - 1 - xp.argmax(p[:, ::-1] > 0, axis=-1)  # for every row: no host read
    return xp.where(idx >= k, last[:, None], idx)


@op(tags=RANDOM, differentiable=False)
def multinomial(xp, input: "Tensor", num_samples, replacement=False, *, generator=None,
                out=None):
    """``ember.multinomial(input, num_samples, replacement=False, *, generator=None)``: indices
    drawn from the rows of ``input`` (non-negative weights, need not sum to 1)."""
    dt = _dt(input)
    if dt.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{D.TYPE_NAME[dt]}")
    n = _int_arg("multinomial", "num_samples", num_samples)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim, got {input.ndim} dims")
    k = input.shape[-1]
    if k > 1 << 24:
        raise RuntimeError(f"number of categories cannot exceed 2^24, got {k}")
    if n <= 0:
        raise RuntimeError(f"cannot sample n_sample <= 0 samples (num_samples={n})")
    if not replacement and n > k:
        raise RuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement (n_sample={n}, {k} categories)")
    out_shape = input.shape[:-1] + (n,)
    p = input.reshape(-1, k)
    if p.shape[0] == 0:
        return xp.empty(out_shape, np.int64)
    if k == 0:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    inverse_cdf = replacement or n == 1  # one draw is the same with or without replacement
    cdf = _cumsum(xp, p) if inverse_cdf else None
    totals = cdf[:, -1] if inverse_cdf else p.sum(-1, dtype=np.float64)
    xp.check_probabilities(p, totals, "multinomial")
    if inverse_cdf:
        idx = _multinomial_with_replacement(xp, generator, p, n, cdf)
    else:
        # sequential weighted draws without replacement == the n smallest E_i / p_i with
        # E_i ~ Exp(1) (exponential races), in increasing order; log keys keep tiny weights
        # finite, and zero weights become +inf, so they come last (as in PyTorch)
        keys = xp.log(-xp.log1p(-xp.uniform_draws(p.shape, generator, "multinomial")))
        keys -= xp.log(p.astype(np.float64, copy=False))
        if n < k:  # a top-n selection, linear in k
            idx = xp.argpartition(keys, n - 1, axis=-1)[:, :n]
            keys = xp.take_along_axis(keys, idx, -1)
        else:
            idx = xp.broadcast_to(xp.arange(k), keys.shape)
        idx = xp.take_along_axis(idx, xp.argsort(keys, axis=-1, kind="stable"), -1)
    return idx.reshape(out_shape).astype(np.int64, copy=False)


# rates above this are drawn from the normal approximation (numpy's sampler stops near 1e19)
_POISSON_NORMAL_RATE = 1e15


@op(tags=RANDOM, method=False, out=False, grad_name="PoissonBackward0")
def poisson(xp, input: "Tensor", generator=None):
    """``ember.poisson(input, generator=None)``: Poisson counts with rates ``input``."""
    dt = _dt(input)
    if dt.kind != "f":
        raise _not_implemented("poisson_cpu", dt)
    lam = input.astype(np.float64)
    if not xp.all(lam >= 0):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    rng = numpy_generator(generator, "poisson")
    big = lam > _POISSON_NORMAL_RATE
    if not big.any():
        return xp.asarray(rng.poisson(lam)).astype(dt.np)  # numpy-only: Generator draw
    counts = xp.empty(lam.shape)
    counts[~big] = rng.poisson(lam[~big])  # numpy-only: Generator draw
    lb = lam[big]
    # numpy-only: Generator draw
    approx = xp.rint(lb + xp.sqrt(lb) * rng.standard_normal(lb.shape))
    counts[big] = xp.where(xp.isinf(lb), lb, approx)
    return counts.astype(dt.np)


_zero_backward(poisson)


# ---------------------------------------------------------------------- metas
# Explicit metas: the registry's default evaluates an op on stand-ins, which for a sampling op
# would draw from (and advance) the default generator while only shapes are wanted.
def _same_as_input(input, *args, **kwargs) -> tuple:
    return tuple(input.shape), input.dtype


def _sized_meta(name: str):
    def meta(*sizes, size=None, dtype=None, **kwargs):
        return _size(sizes, name, size), dtype or D.get_default_dtype()
    return meta


def _like_meta(input, *args, dtype=None, **kwargs):
    return tuple(input.shape), dtype or input.dtype


def _randint_meta(low=0, high=None, size=None, *, dtype=None, **kwargs):
    return _size(((high if size is None else size),)), dtype or D.int64


def _randperm_meta(n, *, dtype=None, **kwargs):
    return (int(n),), dtype or D.int64


def _normal_meta(mean, std=1.0, size=None, *, dtype=None, **kwargs):
    # tensors here may be any stand-in with .shape and an ember .dtype
    m_t, s_t = (isinstance(getattr(a, "dtype", None), D.dtype) for a in (mean, std))
    if not (m_t or s_t):
        return _size((size,)), dtype or D.get_default_dtype()
    shape = np.broadcast_shapes(tuple(mean.shape) if m_t else (), tuple(std.shape) if s_t else ())
    return tuple(shape), (mean if m_t else std).dtype


def _multinomial_meta(input, num_samples, *args, **kwargs):
    return tuple(input.shape[:-1]) + (int(num_samples),), D.int64


for _d, _meta in ((rand, _sized_meta("rand")), (randn, _sized_meta("randn")),
                  (randint, _randint_meta), (randperm, _randperm_meta),
                  (rand_like, _like_meta), (randn_like, _like_meta),
                  (randint_like, _like_meta), (normal, _normal_meta),
                  (bernoulli, _same_as_input), (multinomial, _multinomial_meta),
                  (poisson, _same_as_input)):
    _d.def_meta(_meta)


# ---------------------------------------------------------------------- in-place fills
# Each fill is an op computing fresh samples of its input's shape and dtype; the table binds
# ``x.<name>_`` (the registry's in-place path: leaf check, copy into x, version bump, history).
def _fill_op(name: str, grad_name: str, inplace: bool = True):
    return op(name, tags=RANDOM, function=False, method=False, inplace=inplace, out=False,
              grad_name=grad_name)


def _real_float(dt: D.dtype, kernel: str) -> None:
    if dt.kind != "f":
        raise _not_implemented(kernel, dt)


def _continuous_only(dt: D.dtype, what: str) -> None:
    if dt.kind != "f":
        raise RuntimeError(f"{what} distribution is a continuous probability distribution. dtype "
                           f"must be a floating point but you specified {D.TYPE_NAME[dt]}")


@_fill_op("uniform", "UniformBackward0")
def uniform(xp, input: "Tensor", from_=0.0, to=1.0, *, generator=None):
    """``x.uniform_(from=0, to=1, *, generator=None)``: fill with samples uniform on
    [from, to)."""
    dt = _dt(input)
    if dt.kind not in "fc":
        raise _not_implemented("check_uniform_bounds", dt)
    real = dt.to_real()
    mx = D.finfo(real).max
    for arg, v in (("from", from_), ("to", to)):
        if not -mx <= v <= mx:
            raise RuntimeError(f"uniform_(): {arg} is out of bounds for {_CNAME[real]} "
                               f"({arg}={_num(v)})")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={_num(from_)} > to={_num(to)}")
    lo, width = float(from_), float(to) - float(from_)
    if width > mx:
        raise RuntimeError(f"uniform_ expects to-from <= the largest {D.TYPE_NAME[real]}, but "
                           f"found to={_num(to)} and from={_num(from_)}")
    rng = numpy_generator(generator, "uniform_")
    return _sample(xp, input.shape, dt, lambda r, s: _uniform01(xp, rng, r, s) * width + lo)


@_fill_op("normal_functional", "NormalBackward0", inplace=False)  # bound below as normal_
def normal_functional(xp, input: "Tensor", mean=0.0, std=1.0, *, generator=None):
    """The samples ``x.normal_(mean, std)`` writes (complex: each part has std/sqrt(2))."""
    dt = _dt(input)
    if dt.kind not in "fc":
        raise _not_implemented("normal_kernel_cpu", dt)
    _check_std(xp, std)
    scale = std * math.sqrt(0.5) if dt.is_complex else std
    rng = numpy_generator(generator, "normal_")
    return _sample(xp, input.shape, dt, lambda r, s: _std_normal(rng, r, s) * scale + mean)


@tensor_method("normal_")
def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """``x.normal_(mean=0, std=1, *, generator=None)``: fill with normal samples."""
    return call_inplace(normal_functional, self, (mean, std), {"generator": generator})


_UNSET = object()


def _default_high(dt: D.dtype) -> int:
    """The inclusive upper end of ``random_()``: the largest integer ``dt`` holds exactly."""
    if dt.is_floating_point:
        return 2 ** _DIGITS[dt]
    return D.iinfo(dt).max


@_fill_op("random", "RandomBackward0")
def random_(xp, input: "Tensor", *bounds, to=_UNSET, generator=None):
    """``x.random_(from=0, to=None, *, generator=None)`` / ``x.random_(to)``: fill with
    integers uniform on [from, to); without ``to``, up to the largest integer the dtype holds
    exactly (2**mantissa bits for floats)."""
    dt = _dt(input)
    if len(bounds) > 2 or (to is not _UNSET and len(bounds) == 2):
        raise TypeError("random_() takes at most 2 bounds (from, to)")
    if to is not _UNSET:
        bounds = (bounds[0] if bounds else 0, to)
    elif len(bounds) == 1:
        bounds = (0, bounds[0])
    rng = numpy_generator(generator, "random_")
    if not bounds:
        if dt.is_complex:
            raise _not_implemented("random_kernel_cpu", dt)
        return _random_ints(rng, 0, _default_high(dt), input.shape, dt)
    lo = _int_arg("random_", "from", bounds[0])
    if bounds[1] is not None:
        return _random_from_to(rng, lo, _int_arg("random_", "to", bounds[1]), input.shape, dt)
    if dt.is_complex:
        raise _not_implemented("random_from_to", dt)
    hi = _default_high(dt)
    _check_random_bounds(lo, hi, dt)
    if lo > hi:
        raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than or equal to "
                           f"'to_inc' casted to dtype, but got from={lo} > to_inc={hi}")
    return _random_ints(rng, lo, hi, input.shape, dt)


@_fill_op("exponential", "ExponentialBackward0")
def exponential(xp, input: "Tensor", lambd=1.0, *, generator=None):
    """``x.exponential_(lambd=1, *, generator=None)``: fill with Exp(lambd) samples."""
    dt = _dt(input)
    _continuous_only(dt, "Exponential")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_num(lambd)}")
    rng = numpy_generator(generator, "exponential_")
    return _sample(xp, input.shape, dt,
                   # numpy-only: Generator draw
                   lambda r, s: rng.standard_exponential(s, dtype=_compute(r)) / lambd)


@_fill_op("geometric", "GeometricBackward0")
def geometric(xp, input: "Tensor", p, *, generator=None):
    """``x.geometric_(p, *, generator=None)``: fill with the number of Bernoulli(p) trials up
    to the first success (1, 2, ...)."""
    dt = _dt(input)
    if dt.kind in "bc":
        raise _not_implemented("geometric_cpu", dt)
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_num(p)}")
    rng = numpy_generator(generator, "geometric_")
    return rng.geometric(p, input.shape).astype(dt.np)  # numpy-only: Generator draw


@_fill_op("log_normal", "LogNormalBackward0")
def log_normal(xp, input: "Tensor", mean=1.0, std=2.0, *, generator=None):
    """``x.log_normal_(mean=1, std=2, *, generator=None)``: fill with exp(N(mean, std))."""
    dt = _dt(input)
    _real_float(dt, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_num(std)}")
    rng = numpy_generator(generator, "log_normal_")
    return _sample(xp, input.shape, dt, lambda r, s: xp.exp(_std_normal(rng, r, s) * std + mean))


@_fill_op("cauchy", "CauchyBackward0")
def cauchy(xp, input: "Tensor", median=0.0, sigma=1.0, *, generator=None):
    """``x.cauchy_(median=0, sigma=1, *, generator=None)``: fill with Cauchy samples."""
    dt = _dt(input)
    _continuous_only(dt, "Cauchy")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_num(sigma)}")
    rng = numpy_generator(generator, "cauchy_")
    # numpy-only: Generator draw
    return _sample(xp, input.shape, dt, lambda r, s: rng.standard_cauchy(s) * sigma + median)


@_fill_op("bernoulli_functional", "BernoulliBackward1", inplace=False)  # -> bernoulli_
def bernoulli_functional(xp, input: "Tensor", p: "Scalar|Tensor" = 0.5, *, generator=None):
    """The samples ``x.bernoulli_(p)`` writes: 0/1 of x's dtype, ``p`` a float or a float
    tensor broadcasting to x."""
    dt = _dt(input)
    if dt.is_complex:
        raise _not_implemented("bernoulli_scalar_cpu_", dt)
    if isinstance(p, np.ndarray):
        if p.dtype.kind != "f":
            raise _not_implemented("bernoulli_tensor_cpu_p_", _dt(p))
        try:
            p = xp.broadcast_to(p, input.shape)
        except ValueError:
            raise RuntimeError(f"bernoulli_(): the probability tensor of shape {list(p.shape)} "
                               f"cannot be expanded to the tensor's shape "
                               f"{list(input.shape)}") from None
    return _bernoulli(xp, numpy_generator(generator, "bernoulli_"), p, input.shape, input.dtype,
                      "bernoulli_")


@tensor_method("bernoulli_")
def bernoulli_(self, p=0.5, *, generator=None) -> Tensor:
    """``x.bernoulli_(p=0.5, *, generator=None)``: fill with 0/1 samples of probability ``p``
    (a float or a tensor broadcasting to x)."""
    return call_inplace(bernoulli_functional, self, (p,), {"generator": generator})


for _d in (uniform, normal_functional, random_, exponential, geometric, log_normal, cauchy,
           bernoulli_functional):
    _zero_backward(_d)
    _d.def_meta(_same_as_input)

_ = (Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state)
