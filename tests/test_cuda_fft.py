"""``ember.fft`` on the GPU (cuFFT through CuPy's ``cupy.fft``) against torch's CUDA results
(the GPU tier: ``-m cuda``): every transform forward and backward, with padding, truncation,
dims in any order and each norm, in float32, float64 and complex; integer inputs; the
helpers on ``device="cuda"``; empty batches as torch's CUDA build treats them. Each result
must stay on the device, computed there (no host round trip of a numpy-only kernel)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")

pytestmark = GPU_TIER

TRANSFORMS = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
              "irfft2", "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"]
REAL_ONLY = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}
TOL = {"float32": (1e-4, 1e-4), "float64": (1e-10, 1e-10)}


def pair(shape, dtype, complex_=False, seed=0, grad=False):
    """The same random values as an ember and a torch tensor on the GPU."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if complex_:
        a = a + 1j * rng.standard_normal(shape)
    a = a.astype({("float32", True): np.complex64, ("float64", True): np.complex128}.get(
        (dtype, complex_), dtype))
    e, t = ember.tensor(a).cuda(), torch.tensor(a).cuda()
    if grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def same(e, t, rtol, atol):
    assert e.is_cuda, f"result is on {e.device}"
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    scale = max(1.0, float(t.detach().abs().max().cpu())) if t.numel() else 1.0
    np.testing.assert_allclose(e.detach().cpu().numpy(), t.detach().resolve_conj().cpu().numpy(),
                               rtol=rtol, atol=atol * scale)


@pytest.fixture
def on_device():
    """Asserts at the end that no fft op had a host result moved over (numpy-only kernel)."""
    from ember.ops import registry
    before = {k: v for k, v in registry.HOST_RESULTS.items() if k.startswith("fft_")}
    yield
    after = {k: v for k, v in registry.HOST_RESULTS.items() if k.startswith("fft_")}
    assert after == before, f"fft ops computed on the host: {after}"


ARGS_1D = [dict(), dict(n=11), dict(n=3, dim=0), dict(norm="ortho"), dict(norm="forward")]
ARGS_ND = [dict(), dict(s=(3, 9)), dict(dim=(2, 0)), dict(s=(5, -1), dim=(0, 2), norm="ortho"),
           dict(norm="forward")]
# A multi-dim c2r transform (irfft2/n, hfft2/n) reads a one-sided spectrum that must be
# Hermitian along the other dims; on any other input cuFFT's one multi-dim plan (torch) and
# CuPy's sequential transforms (for dims that are not the last ones) may legitimately differ.
# Those cases take the spectrum of a real signal, and sizes that keep it consistent (only the
# last dim padded).
C2R_ND = {"irfft2", "irfftn", "hfft2", "hfftn"}
ARGS_C2R_ND = [dict(), dict(s=(-1, 12)), dict(dim=(2, 0)), dict(norm="ortho"),
               dict(norm="forward")]


def hermitian_pair(name, kw, dtype, seed):
    """A consistent one-sided spectrum (of a real (4, 6, 8) signal) over the op's dims."""
    dims = kw.get("dim") or ((-2, -1) if name.endswith("2") else
                             (0, 1, 2)[-len(kw.get("s", "abc")):])
    a = np.fft.rfftn(np.random.default_rng(seed).standard_normal((4, 6, 8)), axes=dims)
    if name.startswith("h"):
        a = a.conj()
    a = a.astype(np.complex64 if dtype == "float32" else np.complex128)
    e, t = ember.tensor(a).cuda().requires_grad_(), torch.tensor(a).cuda().requires_grad_()
    return e, t


@pytest.mark.parametrize("name", TRANSFORMS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", range(5))
def test_transform_matches_torch_cuda(name, dtype, k, on_device):
    kw = (ARGS_1D if name[-1] not in "2n" else ARGS_C2R_ND if name in C2R_ND else ARGS_ND)[k]
    rtol, atol = TOL[dtype]
    for complex_ in (False, True) if name not in REAL_ONLY | C2R_ND else (False,):
        if name in C2R_ND:
            e, t = hermitian_pair(name, kw, dtype, seed=k)
        else:
            e, t = pair((4, 6, 8), dtype, complex_, seed=k, grad=True)
        ye, yt = getattr(ember.fft, name)(e, **kw), getattr(torch.fft, name)(t, **kw)
        same(ye, yt, rtol, atol)
        g = np.random.default_rng(k + 10).standard_normal(tuple(yt.shape))
        if yt.dtype.is_complex:
            g = g + 1j * np.random.default_rng(k + 20).standard_normal(tuple(yt.shape))
        gt = torch.tensor(g).to(yt.dtype).cuda()
        ge = ember.tensor(gt.cpu().numpy()).cuda()
        (gx_t,) = torch.autograd.grad(yt, t, gt)
        (gx_e,) = ember.autograd.grad(ye, e, ge)
        same(gx_e, gx_t, rtol, atol)


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fftn", "hfft2"])
def test_integer_input(name, on_device):
    a = np.arange(24).reshape(4, 6) % 7
    e, t = ember.tensor(a).cuda(), torch.tensor(a).cuda()
    same(getattr(ember.fft, name)(e), getattr(torch.fft, name)(t), 1e-4, 1e-4)


def test_non_contiguous_input(on_device):
    e, t = pair((6, 8), "float64", True)
    same(ember.fft.fft2(e[::2, 1::2].transpose(0, 1)),
         torch.fft.fft2(t[::2, 1::2].transpose(0, 1)), 1e-10, 1e-10)


def test_out_on_cuda(on_device):
    e, t = pair((3, 5), "float32")
    oe = ember.empty(0, dtype=ember.complex128, device="cuda")
    ot = torch.empty(0, dtype=torch.complex128, device="cuda")
    ember.fft.rfft(e, out=oe)
    torch.fft.rfft(t, out=ot)
    same(oe, ot, 1e-5, 1e-5)


@pytest.mark.parametrize("fn", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_frequencies_cuda(fn, dtype):
    for n, d in [(0, 1.0), (1, 1.0), (7, 0.25), (8, 3.0)]:
        got = getattr(ember.fft, fn)(n, d, dtype=getattr(ember, dtype), device="cuda")
        want = getattr(torch.fft, fn)(n, d, dtype=getattr(torch, dtype), device="cuda")
        assert got.is_cuda
        np.testing.assert_array_equal(got.float().cpu().numpy(), want.float().cpu().numpy())


@pytest.mark.parametrize("fn", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
def test_shifts_cuda(fn, dim, on_device):
    e, t = pair((3, 4, 5), "float32", grad=True)
    ye, yt = getattr(ember.fft, fn)(e, dim=dim), getattr(torch.fft, fn)(t, dim=dim)
    same(ye, yt, 0, 0)
    g = torch.randn(yt.shape, device="cuda")
    same(ember.autograd.grad(ye, e, ember.tensor(g.cpu().numpy()).cuda())[0],
         torch.autograd.grad(yt, t, g)[0], 0, 0)


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "ihfft", "fftn", "hfftn"])
def test_empty_batch_as_torch_cuda(name):
    """An empty batch: whatever torch's CUDA build does (a result, or an error type)."""
    e, t = ember.zeros(0, 4, device="cuda"), torch.zeros(0, 4, device="cuda")
    kw = {"dim": (1,)} if name.endswith("n") else {"dim": 1}
    try:
        want = getattr(torch.fft, name)(t, **kw)
    except Exception as err:  # noqa: BLE001
        with pytest.raises(type(err)):
            getattr(ember.fft, name)(e, **kw)
        return
    same(getattr(ember.fft, name)(e, **kw), want, 0, 0)


def test_half_input_is_refused():
    """ember has no complex32: a Half or BFloat16 input is refused on the GPU too, where
    torch's cuFFT would compute a ComplexHalf result (power-of-two sizes)."""
    e = ember.ones(8, dtype=ember.float16, device="cuda")
    with pytest.raises(RuntimeError, match="Unsupported dtype Half"):
        ember.fft.fft(e)
