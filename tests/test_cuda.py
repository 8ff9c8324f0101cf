"""The CUDA backend against PyTorch's CUDA results (the GPU tier: ``-m cuda``).

Skips with a reason where no GPU (or no CuPy, or no CUDA torch to compare with) exists. Each
case runs the same program on ember and torch tensors on the GPU and compares values on the
host, plus where the result lives. This first tier covers what the backend runs through
``restricted(cupy)``: pointwise math, reductions, products, shapes and views, indexing,
softmax, autograd, an MLP training step; the op-table-wide run by device comes next.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

# the GPU tier's marks: selected by ``-m cuda``; skipped with the reason where nothing to run on
GPU_TIER = pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not ember.cuda.is_available(),
                       reason="no CUDA device for ember (CuPy and a GPU are needed)"),
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="no CUDA build of torch to compare with"),
]


def pair(*shape, dtype="float32", seed=0, positive=False, low=None, high=None):
    """The same random values as an ember and a torch tensor, both on the GPU."""
    rng = np.random.default_rng(seed)
    if dtype.startswith("int"):
        a = rng.integers(low or -5, high or 5, shape).astype(dtype)
    else:
        a = rng.standard_normal(shape).astype(dtype)
        if positive:
            a = np.abs(a) + 0.1
    return ember.tensor(a).cuda(), torch.tensor(a).cuda()


def same(e, t, rtol=1e-5, atol=1e-6):
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            same(a, b, rtol, atol)
        return
    if not isinstance(t, torch.Tensor):
        assert e == pytest.approx(t, rel=rtol, abs=atol)
        return
    assert e.is_cuda, f"result is on {e.device}, not the GPU"
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(e.cpu().numpy(), t.cpu().numpy(), rtol=rtol, atol=atol)


CASES = {
    "add": lambda m, x, y: x + y,
    "add_scalar": lambda m, x, y: x + 1.5,
    "sub_alpha": lambda m, x, y: m.sub(x, y, alpha=2),
    "mul": lambda m, x, y: x * y,
    "div": lambda m, x, y: x / (y.abs() + 1),
    "exp": lambda m, x, y: x.exp(),
    "log": lambda m, x, y: (x.abs() + 1).log(),
    "tanh": lambda m, x, y: m.tanh(x),
    "sigmoid": lambda m, x, y: m.sigmoid(x),
    "where": lambda m, x, y: m.where(x > 0, x, y),
    "maximum": lambda m, x, y: m.maximum(x, y),
    "clamp": lambda m, x, y: x.clamp(-0.5, 0.5),
    "pow": lambda m, x, y: x.abs() ** 1.5,
    "sum": lambda m, x, y: x.sum(),
    "sum_dim": lambda m, x, y: x.sum(1, keepdim=True),
    "mean": lambda m, x, y: x.mean(0),
    "max_dim": lambda m, x, y: tuple(x.max(1)),
    "argmax": lambda m, x, y: x.argmax(1),
    "var": lambda m, x, y: x.var(1),
    "cumsum": lambda m, x, y: x.cumsum(1),
    "matmul": lambda m, x, y: x @ y.T,
    "bmm": lambda m, x, y: m.bmm(x.reshape(2, 4, 8), y.reshape(2, 8, 4)),
    "linear": lambda m, x, y: m.nn.functional.linear(x, y, y[0]),
    "softmax": lambda m, x, y: x.softmax(1),
    "log_softmax": lambda m, x, y: m.log_softmax(x, 0),
    "layer_norm": lambda m, x, y: m.nn.functional.layer_norm(x, (8,)),
    "gelu": lambda m, x, y: m.nn.functional.gelu(x),
    "relu": lambda m, x, y: m.relu(x),
    "view_t": lambda m, x, y: x.view(4, 16).t().contiguous(),
    "cat": lambda m, x, y: m.cat([x, y], 1),
    "stack": lambda m, x, y: m.stack([x, y]),
    "getitem": lambda m, x, y: x[1:5, ::2],
    "index": lambda m, x, y: x[m.tensor([0, 3, 3], device=x.device)],
    "masked": lambda m, x, y: x[x > 0],
    "gather": lambda m, x, y: x.gather(1, (y.abs() * 3).long().clamp(max=7)),
    "transpose": lambda m, x, y: x.transpose(0, 1) * 2,
    "zeros_like": lambda m, x, y: m.zeros_like(x) + m.ones(8, device=x.device),
    "arange": lambda m, x, y: m.arange(8, device=x.device) * x,
    "cross_entropy": lambda m, x, y: m.nn.functional.cross_entropy(
        x, m.tensor([0, 1, 2, 3, 4, 5, 6, 7], device=x.device)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op_matches_torch_cuda(name):
    fn = CASES[name]
    ex, tx = pair(8, 8, seed=1)
    ey, ty = pair(8, 8, seed=2)
    same(fn(ember, ex, ey), fn(torch, tx, ty), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["add", "mul", "exp", "tanh", "matmul", "softmax", "sum_dim",
                                  "layer_norm", "gelu", "getitem", "cat", "cross_entropy"])
def test_gradients_match_torch_cuda(name):
    fn = CASES[name]
    ex, tx = pair(8, 8, seed=3)
    ey, ty = pair(8, 8, seed=4)
    for t in (ex, ey, tx, ty):
        t.requires_grad_()
    fn(ember, ex, ey).sum().backward()
    fn(torch, tx, ty).sum().backward()
    for e, t in ((ex, tx), (ey, ty)):
        if t.grad is None:
            assert e.grad is None
        else:
            same(e.grad, t.grad, rtol=1e-4, atol=1e-5)


def test_device_bookkeeping():
    x = ember.ones(3, device="cuda")
    assert x.device == ember.device("cuda", 0) and x.is_cuda and x.get_device() == 0
    assert ember.cuda.device_count() >= 1 and ember.cuda.current_device() == 0
    assert isinstance(ember.cuda.get_device_name(), str)
    assert ember.cuda.memory_allocated() > 0
    assert x.cpu().device == ember.device("cpu") and x.cpu().tolist() == [1.0, 1.0, 1.0]
    assert x.sum().item() == 3.0
    assert "device='cuda:0'" in repr(x)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + ember.ones(3)
    assert (x + ember.tensor(2.0)).is_cuda  # a zero-dim CPU tensor is a scalar
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        x.numpy()
    ember.cuda.synchronize()


def test_mlp_training_step_matches_torch_cuda():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((32, 16)).astype(np.float32)
    ys = rng.integers(0, 4, 32)

    def run(m):
        m.manual_seed(0)
        net = m.nn.Sequential(m.nn.Linear(16, 32), m.nn.ReLU(), m.nn.Linear(32, 4))
        w = [p.detach().cpu().numpy().copy() for p in net.parameters()]
        return net, w

    enet, w = run(ember)
    tnet = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    with torch.no_grad():
        for p, a in zip(tnet.parameters(), w):
            p.copy_(torch.tensor(a))
    enet.cuda()
    tnet.cuda()
    eopt = ember.optim.AdamW(enet.parameters(), lr=1e-2)
    topt = torch.optim.AdamW(tnet.parameters(), lr=1e-2)
    ex, tx = ember.tensor(xs).cuda(), torch.tensor(xs).cuda()
    ey, ty = ember.tensor(ys).cuda(), torch.tensor(ys).cuda()
    for _ in range(5):
        losses = []
        for net, opt, x, y, m in ((enet, eopt, ex, ey, ember), (tnet, topt, tx, ty, torch)):
            opt.zero_grad()
            loss = m.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-4)
    for pe, pt in zip(enet.parameters(), tnet.parameters()):
        assert pe.is_cuda
        same(pe.detach(), pt.detach(), rtol=1e-3, atol=1e-4)


def test_the_array_api_cupy_lacks_is_known():
    """Names of the kernels' array API that CuPy does not have: a kernel using one cannot
    run on CUDA yet (each needs a CUDA override or a rewrite)."""
    from ember.backends import xp_api
    from ember.backends.cuda.backend import cupy
    assert xp_api.missing(cupy()) == []


def test_import_ember_imports_no_cupy_and_no_torch():
    """CuPy is imported at the first CUDA use, never by ``import ember``; torch never."""
    import subprocess
    import sys
    code = ("import sys, ember; assert 'cupy' not in sys.modules, 'cupy imported'; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "x = ember.ones(2, device='cuda'); assert 'cupy' in sys.modules; "
            "assert 'torch' not in sys.modules; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


# ---------------------------------------------------------------- generated Triton kernels
TRITON_OPS = ["exp", "tanh", "sigmoid", "erf", "log1p", "atan", "sign", "floor", "neg"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("name", TRITON_OPS)
def test_pointwise_ops_run_as_generated_triton_kernels(name, dtype):
    from ember.backends.cuda import pointwise
    e, t = pair(6, 10, dtype="float32", seed=3)
    e, t = e.to(getattr(ember, dtype)), t.to(getattr(torch, dtype))
    before = pointwise.STATS["launches"]
    for view in (lambda x: x, lambda x: x.t(), lambda x: x[:, ::3], lambda x: x[:1].expand(4, 10)):
        got, want = getattr(ember, name)(view(e)), getattr(torch, name)(view(t))
        tol = 1e-2 if dtype in ("float16", "bfloat16") else 2e-6
        assert got.dtype == getattr(ember, dtype)
        np.testing.assert_allclose(got.float().cpu().numpy(), want.float().cpu().numpy(),
                                   rtol=tol, atol=tol)
    assert pointwise.STATS["launches"] >= before + 4


def test_binary_triton_kernels_broadcast_and_compare():
    x, tx = pair(4, 1, 5)
    y, ty = pair(3, 5, seed=1)
    for name in ("maximum", "atan2", "hypot", "copysign", "lt", "eq"):
        same(getattr(ember, name)(x, y), getattr(torch, name)(tx, ty))
    same(ember.clamp(y, -0.5, 0.25), torch.clamp(ty, -0.5, 0.25))


def test_ember_kernels_and_torch_compile_interleave():
    """A torch.compile'd function (Inductor's Triton kernels, on torch's stream) and ember's
    generated kernels in one process are both correct, in either order."""
    f = torch.compile(lambda a: (a.sin() * 2).cos())
    x, tx = pair(64, 64)
    for _ in range(2):
        same(ember.tanh(x).sigmoid(), torch.tanh(tx).sigmoid())
        torch.testing.assert_close(f(tx), (tx.sin() * 2).cos())


_NCDF_F64 = pytest.mark.xfail(strict=True, reason=(
    "the ncdf primitive's float64 Triton spelling misses the 16-ulp bound somewhere on "
    "[-30, 8] (H200, 2026-11-27, first run of this test; not yet located): issue 15"))


@pytest.mark.parametrize("dtype,approximate", [
    ("float32", "none"), ("float32", "tanh"), pytest.param("float64", "none", marks=_NCDF_F64),
    ("float64", "tanh")])
def test_gelu_tails_through_the_ncdf_primitive(approximate, dtype):
    """GELU and grad * GELU' as generated Triton kernels on the GPU (the primitive ncdf's
    spelling: erfc with the argument's rounding error taken by a real fma, which the
    interpreter cannot check), against the exact values (mpmath) over the lower tail, where
    erfc(-x / sqrt 2) / 2 alone loses ~x^2 / 2 half-ulps."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    from ember.ops.activations import gelu_backward
    x = np.linspace(-12 if dtype == "float32" else -30, 8, 2001).astype(dtype)
    k, c = mp.sqrt(2 / mp.pi), mp.mpf(0.044715)

    def exact(v):
        v = mp.mpf(float(v))
        if approximate == "none":
            return v * mp.ncdf(v), mp.ncdf(v) + v * mp.npdf(v)
        p = 2 / (1 + mp.exp(-2 * k * (v + c * v ** 3)))  # 1 + tanh u
        return 0.5 * v * p, 0.5 * p + 0.5 * v * p * (2 - p) * k * (1 + 3 * c * v * v)
    want = np.array([[float(a) for a in exact(v)] for v in x])
    xe = ember.tensor(x, device="cuda")
    y = ember.nn.functional.gelu(xe, approximate=approximate).cpu().numpy().astype(np.float64)
    g = gelu_backward(ember.ones_like(xe), xe, approximate).cpu().numpy().astype(np.float64)
    eps = np.finfo(dtype).eps
    tiny = np.finfo(dtype).tiny
    ok = np.abs(want[:, 0]) > tiny / eps
    u = np.abs(x.astype(np.float64)) ** 3 * 0.0357 + 1  # tanh form: u's rounding moves exp(-2u)
    scale = 16 * (np.ones_like(u) if approximate == "none" else u)
    assert (np.abs(y - want[:, 0]) <= scale * eps * np.abs(want[:, 0]))[ok].all()
    # the derivative cancels near x = -0.75 by nature: measured against max(|x|, 1)
    assert (np.abs(g - want[:, 1]) <= scale * eps * np.maximum(np.abs(x), 1)).all()
