"""``ember.fft`` against ``torch.fft``: every transform forward and backward (the same random
output gradient through both) on random inputs, with signal sizes that pad and truncate, dims
in any order, each norm; dtype rules; non-contiguous and empty inputs; out=; the helpers
(fftfreq, rfftfreq, fftshift, ifftshift); bad inputs with torch's exception types."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from oracle import assert_same, check, rand, raises_like, to_numpy, to_torch

C2C = ("fft", "ifft")
ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
TWO_D = ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2")
N_D = ("fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")
REAL_ONLY = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}
NORMS = (None, "backward", "ortho", "forward")


def _input(name, shape, complex_=False, seed=0, noncontig=False):
    dtype = ember.complex128 if complex_ and name not in REAL_ONLY else ember.float64
    return rand(*shape, dtype=dtype, requires_grad=True, seed=seed, noncontig=noncontig)


# ---------------------------------------------------------------------- 1-D transforms
# (n, dim) pairs: the default, padding, truncation, another dim, odd and even lengths
ONE_D_ARGS = [dict(), dict(n=9), dict(n=3), dict(n=4, dim=0), dict(dim=0), dict(n=1)]


# (rfft/ihfft refuse complex input: test_bad_inputs)
INPUT_KINDS = [(name, c) for name in ONE_D for c in (False, True) if not c or
               name not in REAL_ONLY]


@pytest.mark.parametrize("name,complex_", INPUT_KINDS,
                         ids=[f"{n}-{'complex' if c else 'real'}" for n, c in INPUT_KINDS])
@pytest.mark.parametrize("kw", ONE_D_ARGS, ids=lambda k: ",".join(f"{a}={v}" for a, v in
                                                                  k.items()) or "default")
def test_1d_forward_backward(name, kw, complex_):
    if kw.get("n") == 1 and name in ("irfft", "hfft"):
        kw = dict(n=2)
    x = _input(name, (5, 6), complex_)
    check(lambda m, x: getattr(m.fft, name)(x, **kw), None, x)


@pytest.mark.parametrize("name", ONE_D)
@pytest.mark.parametrize("norm", NORMS)
def test_1d_norms(name, norm):
    x = _input(name, (3, 7), name not in REAL_ONLY, seed=1)
    check(lambda m, x: getattr(m.fft, name)(x, n=6, norm=norm), None, x)


# ---------------------------------------------------------------------- 2-D and n-D
ND_ARGS = [dict(), dict(s=(3, 5)), dict(s=(5, 8), dim=(0, 2)), dict(dim=(2, 0)),
           dict(s=(-1, 4), dim=(-1, 1)), dict(s=(4,)), dict(dim=1), dict(s=(2, 3, 7))]


@pytest.mark.parametrize("name", N_D)
@pytest.mark.parametrize("kw", ND_ARGS, ids=str)
def test_nd_forward_backward(name, kw):
    x = _input(name, (3, 4, 6), complex_=True, seed=2)
    check(lambda m, x: getattr(m.fft, name)(x, **kw), None, x)


@pytest.mark.parametrize("name", TWO_D)
@pytest.mark.parametrize("kw", [dict(), dict(s=(5, 3)), dict(dim=(0, 2)), dict(dim=(-1, -3)),
                                dict(s=(2, 7), dim=(2, 1))], ids=str)
def test_2d_forward_backward(name, kw):
    x = _input(name, (3, 4, 5), complex_=True, seed=3)
    check(lambda m, x: getattr(m.fft, name)(x, **kw), None, x)


@pytest.mark.parametrize("name", TWO_D + N_D)
@pytest.mark.parametrize("norm", ["ortho", "forward"])
def test_nd_norms(name, norm):
    x = _input(name, (4, 5), complex_=False, seed=4)
    check(lambda m, x: getattr(m.fft, name)(x, s=(3, 6), norm=norm), None, x)


@pytest.mark.parametrize("name", ONE_D + TWO_D + N_D)
def test_noncontiguous_input(name):
    x = _input(name, (4, 6), complex_=name not in REAL_ONLY, seed=5, noncontig=True)
    assert not x.is_contiguous()
    check(lambda m, x: getattr(m.fft, name)(x.transpose(0, 1)), None, x)


@pytest.mark.parametrize("name", ["fft", "irfft", "hfft", "ihfft", "rfftn", "hfftn"])
def test_second_derivative(name):
    """The gradients are ember ops themselves: differentiating them again matches torch."""
    x = _input(name, (3, 6), complex_=name not in REAL_ONLY, seed=6)
    rng = np.random.default_rng(0)

    def run(m, x):
        y = getattr(m.fft, name)(x, norm="ortho")
        g0 = g_full[tuple(slice(k) for k in y.shape)]
        g = m.tensor(g0 if y.dtype.is_complex else g0.real, requires_grad=True)
        (gx,) = m.autograd.grad(y, x, g, create_graph=True)
        w = m.tensor(w0.astype(to_numpy(gx).dtype))
        return m.autograd.grad((gx * w).abs().square().sum(), (x, g), allow_unused=True)

    g_full = rng.standard_normal((3, 12)) + 1j * rng.standard_normal((3, 12))
    w0 = rng.standard_normal((3, 6))
    got = run(ember, x)
    want = run(torch, to_torch(x))
    assert_same(got, want, 1e-7, 1e-9)


# ---------------------------------------------------------------------- dtypes
DTYPE_CASES = [(name, dtype) for name in ONE_D + TWO_D + N_D
               for dtype in ("float32", "int64", "bool", "uint8", "complex64")
               if dtype != "complex64" or name not in REAL_ONLY]


@pytest.mark.parametrize("name,dtype", DTYPE_CASES)
def test_dtypes(name, dtype):
    x = rand(3, 4, dtype=getattr(ember, dtype), seed=7)
    check(lambda m, x: getattr(m.fft, name)(x), None, x, grad=False, rtol=1e-4, atol=1e-4)


def test_integers_take_the_default_dtype():
    x = ember.arange(6)
    old = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    torch.set_default_dtype(torch.float64)
    try:
        check(lambda m, x: (m.fft.fft(x), m.fft.irfft(x)), None, x, grad=False)
    finally:
        ember.set_default_dtype(old)
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("name", ONE_D + ("fft2", "rfftn", "hfftn"))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_types_are_refused(name, dtype):
    """torch's CPU FFTs refuse Half and BFloat16 ("Unsupported dtype Half")."""
    x = ember.ones(2, 4, dtype=getattr(ember, dtype))
    fn = getattr(ember.fft, name)
    e, _ = raises_like(lambda: fn(x), lambda: getattr(torch.fft, name)(to_torch(x)))
    assert str(e) == str(_)


# ---------------------------------------------------------------------- empty and 0-d
def test_empty_where_torch_allows():
    check(lambda m, x: m.fft.fftn(x, dim=()), None, ember.zeros(0, 3), grad=False)
    check(lambda m, x: m.fft.fft(x, n=4, dim=1), None, ember.zeros(3, 0), grad=False)
    check(lambda m, x: m.fft.fftn(x, s=(2, 3)), None, ember.zeros(0, 3), grad=False)
    check(lambda m, x: m.fft.fftshift(x), None, ember.zeros(0, 3), grad=False)
    check(lambda m, x: m.fft.ifftn(x), None, ember.tensor(2.5), grad=False)
    check(lambda m, x: m.fft.fftn(x, s=()), None, ember.tensor(2.5), grad=False)


@pytest.mark.parametrize("name", ONE_D + ("fftn", "rfftn", "irfft2"))
def test_empty_batch_errors_as_torch_cpu(name):
    """torch's CPU FFTs (MKL) refuse an empty batch with a RuntimeError."""
    x = ember.zeros(0, 4)
    raises_like(lambda: getattr(ember.fft, name)(x, dim=(1,) if name[-1] in "n2" else 1),
                lambda: getattr(torch.fft, name)(to_torch(x),
                                                 dim=(1,) if name[-1] in "n2" else 1))


@pytest.mark.parametrize("name", ONE_D + TWO_D + N_D + ("fftshift",))
def test_zero_dim_input(name):
    x = ember.tensor(1.5)
    fe, ft = getattr(ember.fft, name), getattr(torch.fft, name)
    try:
        want = ft(to_torch(x))
    except Exception:  # noqa: BLE001
        e, t = raises_like(lambda: fe(x), lambda: ft(to_torch(x)))
        assert str(e) == str(t)
        return
    assert_same(fe(x), want)


# ---------------------------------------------------------------------- out=
def test_out():
    x = rand(3, 4, dtype=ember.float32, seed=8)
    for name, dtype in [("fft", ember.complex64), ("fft", ember.complex128),
                        ("irfft", ember.float64), ("rfftn", ember.complex64)]:
        out = ember.empty(0, dtype=dtype)
        res = getattr(ember.fft, name)(x, out=out)
        assert res is out
        tout = torch.empty(0, dtype=getattr(torch, dtype.name))
        getattr(torch.fft, name)(to_torch(x), out=tout)
        assert_same(out, tout, 1e-5, 1e-5)
    for name, dtype in [("fft", ember.float32), ("irfft", ember.complex64),
                        ("hfft", ember.int64), ("ihfft", ember.float64)]:
        e, t = raises_like(lambda: getattr(ember.fft, name)(x, out=ember.empty(0, dtype=dtype)),
                           lambda: getattr(torch.fft, name)(
                               to_torch(x), out=torch.empty(0, dtype=getattr(torch, dtype.name))))
        assert str(e) == str(t)


# ---------------------------------------------------------------------- helpers
@pytest.mark.parametrize("fn", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("n", [0, 1, 5, 8])
@pytest.mark.parametrize("d", [1.0, 0.3, 4])
@pytest.mark.parametrize("dtype", [None, "float64", "float16", "bfloat16"])
def test_frequencies(fn, n, d, dtype):
    kw = {} if dtype is None else {"dtype": getattr(ember, dtype)}
    tkw = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    got = getattr(ember.fft, fn)(n, d, **kw)
    want = getattr(torch.fft, fn)(n, d, **tkw)
    assert_same(got, want, 0, 0)


def test_frequencies_options():
    f = ember.fft.fftfreq(4, requires_grad=True)
    assert f.requires_grad and f.is_leaf
    assert_same(ember.fft.fftfreq(5, d=ember.tensor(2.0)), torch.fft.fftfreq(5, d=2.0))
    out = ember.empty(5, dtype=ember.float64)
    assert ember.fft.rfftfreq(8, out=out) is out
    assert_same(out, torch.fft.rfftfreq(8, dtype=torch.float64))
    assert_same(ember.fft.fftfreq(3, 0.0), torch.fft.fftfreq(3, 0.0))
    for n in (-1, -2, -3):  # torch's n / 2 + 1 elements, rounded towards zero
        assert_same(ember.fft.rfftfreq(n), torch.fft.rfftfreq(n))
    for fn in ("fftfreq", "rfftfreq"):
        for e_call, t_call in [
                (lambda: getattr(ember.fft, fn)(4, dtype=ember.int64),
                 lambda: getattr(torch.fft, fn)(4, dtype=torch.int64)),
                (lambda: getattr(ember.fft, fn)(4, out=ember.empty(4, dtype=ember.int32)),
                 lambda: getattr(torch.fft, fn)(4, out=torch.empty(4, dtype=torch.int32))),
                (lambda: getattr(ember.fft, fn)(4, dtype=ember.complex64),
                 lambda: getattr(torch.fft, fn)(4, dtype=torch.complex64)),
                (lambda: getattr(ember.fft, fn)(-4), lambda: getattr(torch.fft, fn)(-4)),
                (lambda: getattr(ember.fft, fn)(4.0), lambda: getattr(torch.fft, fn)(4.0))]:
            e, t = raises_like(e_call, t_call)
            assert str(e).replace("arange_cpu", "") == str(t).replace("arange_cpu", "")


@pytest.mark.parametrize("fn", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 2), [-1], (1, 1), ()])
def test_shifts(fn, dim):
    x = rand(3, 4, 5, dtype=ember.float64, requires_grad=True, seed=9)
    kw = {} if dim is None else {"dim": dim}
    if dim == ():
        raises_like(lambda: getattr(ember.fft, fn)(x, **kw),
                    lambda: getattr(torch.fft, fn)(to_torch(x), **kw), "`shifts` required")
        return
    check(lambda m, x: getattr(m.fft, fn)(x, **kw), None, x)


def test_shifts_take_no_out():
    e, t = raises_like(lambda: ember.fft.fftshift(ember.ones(3), out=ember.empty(3)),
                       lambda: torch.fft.fftshift(torch.ones(3), out=torch.empty(3)))
    assert str(e) == str(t)


def test_shift_integers_and_complex():
    check(lambda m, x: m.fft.fftshift(x), None, ember.arange(7), grad=False)
    check(lambda m, x: m.fft.ifftshift(x, dim=-1), None,
          rand(2, 5, dtype=ember.complex64, seed=10), grad=False)


def test_roundtrips():
    x = rand(4, 6, dtype=ember.float64, seed=11)
    np.testing.assert_allclose(ember.fft.irfftn(ember.fft.rfftn(x), s=x.shape).numpy(),
                               x.numpy(), atol=1e-12)
    np.testing.assert_allclose(ember.fft.ifft(ember.fft.fft(x)).real.numpy(), x.numpy(),
                               atol=1e-12)
    np.testing.assert_allclose(ember.fft.hfft(ember.fft.ihfft(x), n=6).numpy(), x.numpy(),
                               atol=1e-12)
    f = ember.fft.fftshift(ember.fft.fftfreq(6))
    assert_same(ember.fft.ifftshift(f), torch.fft.fftfreq(6))


# ---------------------------------------------------------------------- bad inputs
X = np.random.default_rng(12).standard_normal((4, 5))
C = X + 1j * X[::-1]
BAD = [
    ("norm", "fft", X, dict(norm="bad")),
    ("norm_type", "fft", X, dict(norm=1)),
    ("norm_nd", "rfftn", X, dict(norm="Ortho")),
    ("dim_range", "fft", X, dict(dim=2)),
    ("dim_range_nd", "fftn", X, dict(dim=(0, -3))),
    ("dim_type", "fft", X, dict(dim=(0,))),
    ("dims_type", "fftn", X, dict(dim="a")),
    ("n_zero", "fft", X, dict(n=0)),
    ("n_negative", "rfft", X, dict(n=-2)),
    ("n_type", "ifft", X, dict(n=2.0)),
    ("s_type", "fftn", X, dict(s=(3.0,))),
    ("s_zero", "fftn", X, dict(s=(0, 2))),
    ("s_dim_length", "fftn", X, dict(s=(2,), dim=(0, 1))),
    ("s_dim_length_2d", "hfft2", X, dict(s=(3,))),
    ("s_too_long", "ifftn", X, dict(s=(2, 2, 2))),
    ("dims_unique", "fftn", X, dict(dim=(0, 0))),
    ("dims_unique_wrapped", "fft2", X, dict(dim=(1, -1))),
    ("fft2_of_1d", "fft2", X[0], dict()),
    ("complex_rfft", "rfft", C, dict()),
    ("complex_rfft2", "rfft2", C, dict()),
    ("complex_rfftn", "rfftn", C, dict()),
    ("complex_ihfft", "ihfft", C, dict()),
    ("complex_ihfft2", "ihfft2", C, dict()),
    ("complex_ihfftn", "ihfftn", C, dict()),
    ("irfft_one_point", "irfft", X[:, :1], dict()),
    ("hfftn_one_point", "hfftn", X[:, :1], dict()),
    ("irfftn_n_zero", "irfftn", X, dict(s=(2, 0))),
    ("rfftn_no_axes", "rfftn", X, dict(dim=())),
    ("irfftn_no_axes", "irfftn", X, dict(dim=())),
    ("hfftn_no_axes", "hfftn", X, dict(dim=())),
    ("ihfftn_no_axes", "ihfftn", X, dict(dim=())),
    ("complex_ihfftn_no_axes", "ihfftn", C, dict(dim=())),
    ("complex_rfftn_no_axes", "rfftn", C, dict(dim=())),
    ("norm_no_axes", "fftn", X, dict(dim=(), norm="x")),
    ("empty_signal", "fft", X[:, :0], dict()),
    ("empty_signal_2d", "fft2", X[:0], dict()),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_inputs(case):
    _, name, a, kw = case
    e, t = raises_like(lambda: getattr(ember.fft, name)(ember.tensor(a), **kw),
                       lambda: getattr(torch.fft, name)(torch.tensor(a), **kw))
    assert str(e) == str(t)


@pytest.mark.parametrize("name,kw", [("fft", {}), ("fft", dict(n=0)), ("irfft", {}),
                                     ("hfft", dict(n=-1)), ("ihfft", dict(n=0)),
                                     ("rfft", dict(dim=3)), ("fftn", {}), ("fftn", dict(s=(0,))),
                                     ("rfftn", dict(dim=())), ("fft2", {})])
@pytest.mark.parametrize("shape", [(), (3,)])
def test_error_order_half_inputs(name, kw, shape):
    """Which of two problems torch reports first (the dtype, the dims, the sizes)."""
    x = ember.ones(shape, dtype=ember.float16)
    e, t = raises_like(lambda: getattr(ember.fft, name)(x, **kw),
                       lambda: getattr(torch.fft, name)(to_torch(x), **kw))
    assert str(e) == str(t)


def test_not_a_tensor():
    e, t = raises_like(lambda: ember.fft.fft([1.0, 2.0]), lambda: torch.fft.fft([1.0, 2.0]))
    assert str(e) == str(t)


def test_namespace_matches_torch():
    public = {n for n in dir(torch.fft) if not n.startswith("_") and
              callable(getattr(torch.fft, n))} - {"Tensor"}
    assert public <= set(dir(ember.fft)), public - set(dir(ember.fft))
    assert "fft_fft" not in dir(ember) and not hasattr(ember.Tensor, "fft_fft")
