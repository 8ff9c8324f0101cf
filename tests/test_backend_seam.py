"""The Backend seam: a tensor names its backend, and the dispatcher asks that backend for
everything about its arrays. A second backend here is the CPU one under another device's
name, so what the dispatcher does with two devices is tested without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember._tensor import _wrap
from ember.backends import base
from ember.backends.cpu import BACKEND as CPU, CPUBackend
from ember.ops.registry import OPS


class OtherBackend(CPUBackend):
    name = "cuda"
    device_obj = ember.device("cuda", 1)


OTHER = OtherBackend()


@pytest.fixture(autouse=True)
def other_device():
    """OTHER is the backend of device type "cuda" while a test here runs (standing in for
    the real one where CuPy is installed)."""
    real = base.BACKENDS.get("cuda")
    if real is not None:
        base.unregister("cuda")
    base.register(OTHER)
    yield
    base.unregister("cuda")
    if real is not None:
        base.register(real)


def other(*shape, dtype=ember.float32):
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype.np)
    return _wrap(a, dtype, OTHER)


def test_cpu_is_registered_and_tensors_name_it():
    assert base.get("cpu") is CPU
    x = ember.ones(2)
    assert x._backend is CPU and x.device == ember.device("cpu")
    with pytest.raises(RuntimeError, match="no backend for device type 'xla'"):
        base.get("xla")


@pytest.mark.parametrize("call", [
    lambda a, b: a + b, lambda a, b: ember.add(a, b), lambda a, b: a.mul(b),
    lambda a, b: ember.where(a > 0, a, b), lambda a, b: ember.cat([a, b]),
    lambda a, b: a @ b, lambda a, b: ember.add(a, b, alpha=2)])
def test_results_stay_on_the_inputs_backend(call):
    a, b = other(3, 3), other(3, 3)
    r = call(a, b)
    assert r._backend is OTHER and r.device == ember.device("cuda", 1)
    ref = call(ember.tensor(a._data), ember.tensor(b._data))
    np.testing.assert_array_equal(r._data, ref._data)


@pytest.mark.parametrize("call", [
    lambda x: x.exp(), lambda x: ember.exp(x), lambda x: x.sum(1), lambda x: x.view(9),
    lambda x: x[1], lambda x: x.t(), lambda x: -x, lambda x: x.softmax(0)])
def test_unary_paths_keep_the_backend(call):
    x = other(3, 3)
    r = call(x)
    assert r._backend is OTHER
    np.testing.assert_array_equal(r._data, call(ember.tensor(x._data))._data)


def test_views_of_another_backend_alias_their_base():
    x = other(3, 3)
    v = x.view(9)
    assert v._base is x and v._backend is OTHER
    x.add_(1)
    assert v._version == x._version == 1


@pytest.mark.parametrize("call", [
    lambda a, b: a + b, lambda a, b: ember.add(a, b), lambda a, b: a.mul(b),
    lambda a, b: ember.cat([a, b]), lambda a, b: a @ b, lambda a, b: a.add_(b),
    lambda a, b: ember.add(a, b, out=ember.empty(3, 3))])
def test_two_devices_in_one_op_is_pytorchs_error(call):
    a, b = other(3, 3), ember.ones(3, 3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, "
                                           "but found at least two devices, cuda:1 and cpu"):
        call(a, b)


def test_zero_dim_cpu_tensors_pass_as_scalars():
    a = other(3, 3)
    s = ember.tensor(2.0)
    for r in (a + s, ember.add(a, s), a.mul(s), ember.where(a > 0, a, s)):
        assert r._backend is OTHER
    np.testing.assert_array_equal((a * s)._data, a._data * 2)
    a.add_(s)  # in place: the target's device
    assert a._backend is OTHER
    with pytest.raises(RuntimeError, match="same device"):
        other(3) + ember.ones(3)


def test_autograd_through_another_backend():
    a = other(3, 3).requires_grad_()
    (a * a).sum().backward()
    assert a.grad._backend is OTHER
    np.testing.assert_allclose(a.grad._data, 2 * a._data)
    (a.exp() * 2).sum().backward()  # accumulates in place
    assert a.grad._backend is OTHER
    b = other(4).requires_grad_()
    c = b * 1
    c[1:3].mul_(2)  # an in-place write into a view rebases the base's history
    c.sum().backward()
    assert b.grad._backend is OTHER
    np.testing.assert_array_equal(b.grad._data, [1, 2, 2, 1])


def test_factories_follow_device_and_like():
    for t in (ember.zeros(2, device="cuda:1"), ember.ones(2, device=ember.device("cuda", 1)),
              ember.full((2,), 3.0, device="cuda"), ember.zeros_like(ember.ones(2), device="cuda"),
              other(2).new_zeros(3), other(2).new_full((3,), 1.0), ember.empty(2, device="cuda"),
              ember.ones_like(other(2))):
        assert t._backend is OTHER, t
    assert ember.ones(2)._backend is CPU and other(2).new_ones(2, device="cpu")._backend is CPU
    base.unregister("cuda")
    try:
        with pytest.raises(RuntimeError, match="device 'cuda' is not available"):
            ember.zeros(2, device="cuda")
    finally:
        base.register(OTHER)


def test_overrides_are_registered_by_the_backend():
    assert CPU.overrides_of("add").keys() == {"binary", "kernel", "inplace"}
    assert OPS["add"].overrides["binary"][CPU] is CPU.overrides["add"]["binary"]
    assert OTHER not in OPS["add"].overrides["binary"]  # the other backend runs the generic impl
    with pytest.raises(RuntimeError, match="registered twice"):
        CPU.override("add", "binary", np.add)
    assert CPU.fused_step("adam") is not None and OTHER.fused_step("adam") is None


# calls of the CPU backend's "kernel" overrides that have a numpy path of their own (threads,
# blocks): with the generated kernels off they give the generic impl's bits, which OTHER runs
_KERNEL_OVERRIDES = {
    "gelu": lambda x, g: ember.nn.functional.gelu(x),
    "gelu_tanh": lambda x, g: ember.nn.functional.gelu(x, approximate="tanh"),
    "gelu_backward": lambda x, g: OPS["gelu_backward"](g, x),
    "gelu_backward_tanh": lambda x, g: OPS["gelu_backward"](g, x, "tanh"),
    "softmax": lambda x, g: ember.softmax(x, -1),
    "softmax_mid": lambda x, g: ember.softmax(x, 1),
    "softmax_half": lambda x, g: ember.softmax(x.half(), -1),
    "softmax_dtype": lambda x, g: ember.softmax(x.half(), -1, dtype=ember.float64),
    "log_softmax": lambda x, g: ember.log_softmax(x, -1),
    "safe_softmax": lambda x, g: OPS["_safe_softmax"](x, -1),
}


def test_cpu_kernel_overrides_are_the_backends():
    """Native kernels, threads and blocks are the CPU backend's, registered as "kernel"
    overrides: another backend's tensors run the op's generic impl."""
    for name in ("gelu", "gelu_backward", "softmax", "log_softmax", "_safe_softmax",
                 "_softmax_backward_data", "_log_softmax_backward_data",
                 "embedding_dense_backward"):
        assert OPS[name].overrides["kernel"][CPU] is CPU.overrides_of(name)["kernel"], name
        assert OTHER not in OPS[name].overrides["kernel"], name


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("name", _KERNEL_OVERRIDES)
def test_cpu_kernel_overrides_give_the_impls_bits(name, dtype, monkeypatch):
    """With the generated kernels off, the CPU overrides' numpy paths (rows and blocks split
    among threads) compute the generic impl's values bit for bit; rows of -inf, NaN, +-0."""
    monkeypatch.setenv("EMBER_EAGER_KERNELS", "0")
    fn = _KERNEL_OVERRIDES[name]
    x = other(600, 3, 160, dtype=dtype)  # above the thread split (cpu.PARALLEL_MIN)
    x._data *= 4
    x._data[0, 0, :] = -np.inf
    x._data[1, 1, :3] = [np.nan, 0.0, -0.0]
    g = other(600, 3, 160, dtype=dtype)
    r = fn(x, g)
    assert r._backend is OTHER
    want = fn(ember.tensor(x._data), ember.tensor(g._data))
    assert want.dtype == r.dtype
    np.testing.assert_array_equal(r._data, want._data)


def test_adam_asks_the_parameters_backend_for_its_fused_step():
    """The CPU backend's fused Adam step (one native call) and another backend's op-by-op
    numpy step give the same bits."""
    p = other(300, 70).requires_grad_()
    q = ember.tensor(p._data.copy()).requires_grad_()
    opts = [ember.optim.AdamW([t], lr=1e-2) for t in (p, q)]
    for k in range(3):
        p.grad = other(300, 70) * (k - 1.5)
        q.grad = ember.tensor(p.grad._data)
        for opt in opts:
            opt.step()
    assert p._backend is OTHER and q._backend is CPU
    np.testing.assert_array_equal(p._data, q._data)


def test_function_method_and_operator_share_one_call_path():
    add = OPS["add"]
    assert type(add).__call__ is not type(OPS["cat"]).__call__  # specialised at registration
    assert ember.Tensor.__add__ is add.operator
    x = ember.ones(2)
    with pytest.raises(TypeError, match=r"add\(\): argument 'other' \(position 1\) must be "
                                        r"Tensor, not str"):
        x.add("a")
    with pytest.raises(TypeError, match=r"add\(\): argument 'other' \(position 2\) must be "
                                        r"Tensor, not str"):
        ember.add(x, "a")
    assert (x + "a" if False else None) is None
    with pytest.raises(TypeError, match="unsupported operand"):
        x @ "a"


def test_to_moves_between_backends_with_gradients():
    x = ember.randn(3, 4, requires_grad=True)
    y = x.to("cuda:1")
    assert y._backend is OTHER and y.device == ember.device("cuda", 1) and y.is_cuda
    assert y.get_device() == 1 and x.get_device() == -1 and not x.is_cuda
    z = (y * 2).cpu()
    assert z._backend is CPU
    z.sum().backward()
    assert x.grad._backend is CPU
    np.testing.assert_array_equal(x.grad._data, np.full((3, 4), 2.0, np.float32))
    assert x.to("cpu") is x and x.cpu() is x
    assert "device='cuda:1'" in repr(y)
    with pytest.raises(TypeError, match="can't convert cuda:1 device type tensor to numpy"):
        y.detach().numpy()
    d = x.to("cuda:1", ember.float64)
    assert d._backend is OTHER and d.dtype == ember.float64


def test_save_and_load_tensors_of_another_device(tmp_path):
    """A device tensor is saved as its host copy under its device's location ("cuda:1", as
    PyTorch writes it); loading puts it back there, or where map_location says."""
    import torch

    x = ember.randn(3, 4).to("cuda:1")
    p = ember.nn.Parameter(ember.randn(2).to("cuda:1"))
    f = tmp_path / "t.pt"
    ember.save({"x": x, "p": p, "c": ember.ones(2)}, f)
    back = ember.load(f)
    assert back["x"]._backend is OTHER and back["p"]._backend is OTHER
    assert isinstance(back["p"], ember.nn.Parameter) and back["c"]._backend is CPU
    np.testing.assert_array_equal(back["x"].cpu().numpy(), x.cpu().numpy())
    on_cpu = ember.load(f, map_location="cpu")
    assert on_cpu["x"]._backend is CPU
    np.testing.assert_array_equal(on_cpu["x"].numpy(), x.cpu().numpy())
    mapped = ember.load(f, map_location={"cuda:1": "cpu"})
    assert mapped["x"]._backend is CPU
    t = torch.load(f, map_location="cpu")  # PyTorch reads the location it wrote
    np.testing.assert_array_equal(t["x"].numpy(), x.cpu().numpy())
    base.unregister("cuda")
    try:
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA "
                                               "device"):
            ember.load(f)
    finally:
        base.register(OTHER)


def test_to_other_takes_its_dtype_and_device():
    y = other(2).double()
    x = ember.ones(3).to(y)
    assert x._backend is OTHER and x.dtype == ember.float64
