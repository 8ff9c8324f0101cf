"""The array API that op kernels may use: the xp an impl(xp, ...) receives.

numpy and CuPy agree on these names (in their corners they differ: ufunc ``.at``, scalar
promotion, NaN order in sort, integer division by zero; kernels that need those are marked
``# numpy-only`` and use numpy directly, see tests/test_kernels_xp.py). A backend hands its
kernels ``restricted(module)``, a namespace with exactly these names, so a kernel reaching
for anything else fails in every test that runs it, on every backend.
"""

from __future__ import annotations

import types

XP_API = frozenset("""
    abs add all amax amin angle any append arange arccos arccosh arcsin arcsinh arctan
    arctan2 arctanh argmax argmin argpartition argsort array array_equal asarray
    ascontiguousarray atleast_1d bincount bitwise_and bitwise_or bitwise_xor
    broadcast_arrays broadcast_shapes broadcast_to ceil clip concatenate conj copysign
    copyto cos cosh count_nonzero cross cumprod cumsum diagonal diff divide dot einsum empty
    empty_like equal exp exp2 expand_dims expm1 eye flatnonzero flip floor floor_divide fmax
    fmin fmod full greater greater_equal hypot inf isclose isfinite isinf isnan
    isneginf isposinf isreal left_shift less less_equal log log10 log1p log2
    logical_and logical_not logical_or logical_xor matmul max maximum
    may_share_memory min minimum moveaxis multiply nan_to_num nansum negative nonzero
    not_equal ones outer power put_along_axis reciprocal remainder repeat right_shift rint
    roll rot90 round searchsorted sign signbit sin sinh sqrt square squeeze stack subtract
    sum swapaxes take take_along_axis tan tanh tril tril_indices triu triu_indices true_divide
    trunc unique vdot where zeros
""".split())
LINALG = frozenset("cholesky det eigh eigvalsh inv qr svd".split())
# discrete Fourier transforms (numpy.fft and cupy.fft agree on these names and arguments:
# ``s``, ``axes``, ``norm`` in "backward" / "ortho" / "forward"; single precision stays single)
FFT = frozenset("fftn ifftn rfftn irfftn".split())
# library calls every backend's namespace provides: ufunc_at, and the backend's own methods
# (its data-dependent checks, storage geometry, random draws), attached where the backend
# builds its xp
FROM_BACKEND = ("check_index", "check_probabilities", "check_unit_interval", "storage_offset",
                "storage_nbytes", "strided_view", "uniform_draws")
EXTRAS = frozenset(("ufunc_at",) + FROM_BACKEND)
STRIDE_TRICKS = frozenset(("as_strided",))


def restricted(module, name: str, backend=None) -> types.ModuleType:
    """A namespace over module (numpy, cupy) holding only the listed names; ``backend``'s
    methods as ``FROM_BACKEND`` names them (attached later where the backend does not exist
    yet)."""
    ns = types.ModuleType(name, f"{module.__name__}, as op kernels may use it")
    for n in XP_API:
        if hasattr(module, n):  # CuPy lacks a few (see missing())
            setattr(ns, n, getattr(module, n))
    linalg = types.ModuleType(name + ".linalg")
    for n in LINALG:
        if hasattr(module.linalg, n):
            setattr(linalg, n, getattr(module.linalg, n))
    ns.linalg = linalg
    fft = types.ModuleType(name + ".fft")
    for n in FFT:
        if hasattr(module.fft, n):
            setattr(fft, n, getattr(module.fft, n))
    ns.fft = fft
    tricks = types.ModuleType(name + ".lib.stride_tricks")
    for n in STRIDE_TRICKS:
        setattr(tricks, n, getattr(module.lib.stride_tricks, n))
    ns.lib = types.SimpleNamespace(stride_tricks=tricks)
    # library calls beyond the array API, under one name on every backend
    ns.ufunc_at = _ufunc_at(module)
    if backend is not None:
        attach_backend(ns, backend)
    return ns


def _ufunc_at(module):
    def ufunc_at(name: str, a, key, values) -> None:
        """``a[key] = name(a[key], values)`` unbuffered: repeated indices all take effect
        (``name``: add, multiply, maximum, minimum)."""
        getattr(module, name).at(a, key, values)
    return ufunc_at


def attach_backend(ns, backend) -> None:
    """``backend``'s data-dependent argument checks and storage geometry into its kernels'
    namespace ``ns``."""
    for name in FROM_BACKEND:
        setattr(ns, name, getattr(backend, name))


def missing(module) -> list[str]:
    """The listed names ``module`` does not have (kernels using them fail on that backend)."""
    return sorted(n for n in XP_API if not hasattr(module, n)) + \
        sorted("linalg." + n for n in LINALG if not hasattr(module.linalg, n)) + \
        sorted("fft." + n for n in FFT if not hasattr(module.fft, n))
