"""The meta device, the default device and the device context, against PyTorch on the same
calls: meta tensors have shape, dtype and strides but no data; factories follow
``with device(...)`` / ``set_default_device`` per thread; ``to_empty`` and
``load_state_dict(assign=True)`` materialise a meta-built model."""

import threading
import warnings

import numpy as np
import pytest
import torch

import ember
from oracle import raises_like


def same_meta(e, t):
    """Meta results alike: meta device, shape, dtype, strides, storage offset."""
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            same_meta(a, b)
        return
    assert e.is_meta and t.is_meta, (e.device, t.device)
    assert tuple(e.shape) == tuple(t.shape), (e.shape, t.shape)
    assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1], (e.dtype, t.dtype)
    assert e.stride() == t.stride(), (e.stride(), t.stride())
    assert e.storage_offset() == t.storage_offset()
    assert e.requires_grad == t.requires_grad


def both(fn):
    """``fn(lib)`` on ember and on torch, results compared as meta tensors."""
    same_meta(fn(ember), fn(torch))


# ---------------------------------------------------------------------- factories
FACTORIES = {
    "empty": lambda L: L.empty(2, 3, device="meta"),
    "empty_size_kw": lambda L: L.empty(size=(4,), dtype=L.float16, device="meta"),
    "zeros": lambda L: L.zeros((2, 3), dtype=L.int32, device="meta"),
    "ones": lambda L: L.ones(5, device=L.device("meta")),
    "full": lambda L: L.full((2, 2), 3, device="meta"),
    "full_float": lambda L: L.full((2,), 1.5, device="meta"),
    "randn": lambda L: L.randn(3, 4, device="meta"),
    "rand": lambda L: L.rand(3, dtype=L.float64, device="meta"),
    "randint": lambda L: L.randint(0, 5, (3, 2), device="meta"),
    "randperm": lambda L: L.randperm(7, device="meta"),
    "arange": lambda L: L.arange(10, device="meta"),
    "arange_float": lambda L: L.arange(0, 1, 0.25, device="meta"),
    "linspace": lambda L: L.linspace(0, 1, 5, device="meta"),
    "eye": lambda L: L.eye(3, 4, device="meta"),
    "empty_strided": lambda L: L.empty_strided((2, 3), (1, 2), device="meta"),
    "tensor": lambda L: L.tensor([[1, 2], [3, 4]], device="meta"),
    "tensor_float": lambda L: L.tensor([1.0, 2.0], dtype=L.float16, device="meta"),
    "requires_grad": lambda L: L.zeros(2, 2, device="meta", requires_grad=True),
    "empty_like": lambda L: L.empty_like(L.empty(2, 3, device="meta").t()),
    "zeros_like_dtype": lambda L: L.zeros_like(L.empty(2, device="meta"), dtype=L.int64),
    "ones_like_to_meta": lambda L: L.ones_like(L.ones(2, 3), device="meta"),
    "full_like": lambda L: L.full_like(L.empty(3, device="meta"), 7),
    "randn_like": lambda L: L.randn_like(L.empty(2, 5, device="meta")),
    "new_zeros": lambda L: L.empty(2, device="meta").new_zeros(3, 4),
    "new_full": lambda L: L.empty(2, device="meta").new_full((2,), 1.0),
    "to_meta": lambda L: L.randn(3, 4).to("meta"),
    "to_meta_transposed": lambda L: L.randn(3, 4).t().to("meta"),
    "to_meta_dtype": lambda L: L.randn(3, 4).to("meta", L.float64),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_factories(name):
    both(FACTORIES[name])


def test_meta_tensor_attributes():
    e, t = ember.empty(2, 3, device="meta"), torch.empty(2, 3, device="meta")
    assert e.device == ember.device("meta") and str(e.device) == str(t.device) == "meta"
    assert e.is_meta and not ember.ones(1).is_meta
    assert e.data_ptr() == t.data_ptr() == 0
    assert e.numel() == 6 and e.element_size() == 4 and e.nbytes == t.nbytes
    assert e.is_contiguous() and e.t().is_contiguous() == t.t().is_contiguous()
    assert e.get_device() == t.get_device()
    assert e.to("meta") is e


# ---------------------------------------------------------------------- ops
def M(L, *shape, dtype=None, rg=False):
    return L.randn(*shape, device="meta", dtype=dtype or L.float32, requires_grad=rg)


OPS = {
    # pointwise, broadcasting, promotion, layout kept from the input
    "add": lambda L: M(L, 2, 3) + M(L, 3),
    "mul_scalar": lambda L: M(L, 2, 3) * 2.5,
    "int_plus_float": lambda L: L.zeros(2, 3, dtype=L.int64, device="meta") + 1.5,
    "int_div": lambda L: L.ones(4, dtype=L.int32, device="meta") / 2,
    "compare": lambda L: M(L, 2, 3) > M(L, 2, 1),
    "exp_transposed": lambda L: M(L, 3, 4).t().exp(),
    "add_transposed": lambda L: M(L, 3, 4).t() + M(L, 4, 1),
    "where": lambda L: L.where(M(L, 2, 3) > 0, M(L, 2, 3), 0.0),
    "half": lambda L: M(L, 2, 3, dtype=L.float16).sigmoid(),
    "zero_dim_cpu": lambda L: M(L, 2, 3) * L.tensor(2.0),
    # products
    "matmul": lambda L: M(L, 2, 3) @ M(L, 3, 4),
    "bmm_broadcast": lambda L: L.matmul(M(L, 5, 2, 3), M(L, 3, 4)),
    "mv": lambda L: L.mv(M(L, 2, 3), M(L, 3)),
    "linear": lambda L: L.nn.functional.linear(M(L, 4, 3), M(L, 5, 3), M(L, 5)),
    # reductions
    "sum": lambda L: M(L, 2, 3).sum(),
    "sum_dim": lambda L: M(L, 2, 3, 4).sum(1, keepdim=True),
    "mean_dims": lambda L: M(L, 2, 3, 4).mean((0, 2)),
    "max_dim": lambda L: tuple(M(L, 2, 3).max(1)),
    "argmax": lambda L: M(L, 2, 3).argmax(0),
    "any": lambda L: (M(L, 2, 3) > 0).any(),
    "int_sum": lambda L: L.ones(3, dtype=L.int32, device="meta").sum(),
    "var": lambda L: M(L, 4, 5).var(1),
    "norm": lambda L: L.linalg.norm(M(L, 3, 4)),
    "cumsum": lambda L: M(L, 3, 4).cumsum(1),
    "sort": lambda L: tuple(M(L, 3, 4).sort(1)),
    "topk": lambda L: tuple(M(L, 3, 4).topk(2)),
    # views (strides and offsets)
    "transpose": lambda L: M(L, 2, 3, 4).transpose(0, 2),
    "permute": lambda L: M(L, 2, 3, 4).permute(2, 0, 1),
    "slice": lambda L: M(L, 5, 6)[1:4, ::2],
    "select": lambda L: M(L, 5, 6)[2],
    "view": lambda L: M(L, 4, 6).view(2, 12),
    "reshape_view": lambda L: M(L, 4, 6).reshape(24),
    "reshape_copy": lambda L: M(L, 4, 6).t().reshape(24),
    "flatten": lambda L: M(L, 2, 3, 4).flatten(1),
    "unsqueeze": lambda L: M(L, 3, 4).unsqueeze(1),
    "squeeze": lambda L: M(L, 3, 1, 4).squeeze(),
    "expand": lambda L: M(L, 3, 1).expand(3, 5),
    "narrow": lambda L: M(L, 6, 4).narrow(0, 2, 3),
    "diagonal": lambda L: M(L, 4, 4).diagonal(1),
    "unbind": lambda L: M(L, 3, 4).unbind(1),
    "split": lambda L: M(L, 7, 2).split(3),
    "chunk": lambda L: M(L, 6, 4).chunk(2, 1),
    "as_strided": lambda L: M(L, 4, 4).as_strided((2, 2), (1, 4), 3),
    "unfold": lambda L: M(L, 10).unfold(0, 3, 2),
    "view_dtype": lambda L: M(L, 2, 4).view(L.int32),
    "contiguous": lambda L: M(L, 3, 4).t().contiguous(),
    "clone_keeps_layout": lambda L: M(L, 3, 4).t().clone(),
    "to_dtype_keeps_layout": lambda L: M(L, 3, 4).t().to(L.float64),
    # joining, indexing
    "cat": lambda L: L.cat([M(L, 2, 3), M(L, 4, 3)]),
    "cat_dim1": lambda L: L.cat([M(L, 2, 3), M(L, 2, 1)], 1),
    "stack": lambda L: L.stack([M(L, 2, 3), M(L, 2, 3)], 1),
    "index_list": lambda L: M(L, 5, 3)[[0, 2, 4]],
    "index_tensor": lambda L: M(L, 5, 3)[L.tensor([1, 1], device="meta")],
    "index_select": lambda L: M(L, 5, 3).index_select(0, L.tensor([0, 4], device="meta")),
    "gather": lambda L: M(L, 4, 3).gather(1, L.zeros(4, 2, dtype=L.int64, device="meta")),
    # nn
    "softmax": lambda L: M(L, 2, 3, 4).softmax(-1),
    "softmax_transposed": lambda L: M(L, 3, 4).t().softmax(0),
    "log_softmax": lambda L: L.log_softmax(M(L, 2, 5), 1),
    "relu": lambda L: L.relu(M(L, 2, 3)),
    "gelu": lambda L: L.nn.functional.gelu(M(L, 2, 3)),
    "conv2d": lambda L: L.nn.functional.conv2d(M(L, 2, 3, 8, 8), M(L, 4, 3, 3, 3), M(L, 4),
                                               stride=2, padding=1),
    "conv1d": lambda L: L.nn.functional.conv1d(M(L, 1, 2, 9), M(L, 3, 2, 4)),
    "max_pool2d": lambda L: L.nn.functional.max_pool2d(M(L, 1, 2, 8, 8), 2),
    "embedding": lambda L: L.nn.functional.embedding(
        L.zeros(2, 5, dtype=L.int64, device="meta"), M(L, 10, 4)),
    "layer_norm": lambda L: L.nn.functional.layer_norm(M(L, 2, 3, 4), (4,), M(L, 4), M(L, 4)),
    "cross_entropy": lambda L: L.nn.functional.cross_entropy(
        M(L, 4, 5), L.zeros(4, dtype=L.int64, device="meta")),
    "cross_entropy_none": lambda L: L.nn.functional.cross_entropy(
        M(L, 4, 5), L.zeros(4, dtype=L.int64, device="meta"), reduction="none"),
    "mse_loss": lambda L: L.nn.functional.mse_loss(M(L, 3, 2), M(L, 3, 2)),
    "dropout": lambda L: L.nn.functional.dropout(M(L, 3, 4), 0.5),
    "sdpa": lambda L: L.nn.functional.scaled_dot_product_attention(
        M(L, 2, 4, 5, 8), M(L, 2, 4, 5, 8), M(L, 2, 4, 5, 8)),
    # autograd records on meta
    "grad_fn_output": lambda L: M(L, 2, 3, rg=True) * 2,
}


@pytest.mark.parametrize("name", OPS)
def test_ops(name):
    both(OPS[name])


def test_in_place_ops_keep_the_tensor():
    for L in (ember, torch):
        x = L.empty(2, 3, device="meta")
        assert x.add_(1) is x and x.mul_(M(L, 3)) is x and x.uniform_() is x
        assert x.copy_(L.ones(2, 3)) is x and x.zero_() is x
        x[0] = 1.0
        x[:, 1] = L.ones(2, device="meta")
        assert x.shape == (2, 3) and x.is_meta


# ---------------------------------------------------------------------- autograd
def _mlp_grads(L):
    L.manual_seed(0)
    m = L.nn.Sequential(L.nn.Linear(4, 8), L.nn.ReLU(), L.nn.Linear(8, 3)).to("meta")
    x = L.randn(5, 4, device="meta", requires_grad=True)
    loss = L.nn.functional.cross_entropy(m(x), L.zeros(5, dtype=L.int64, device="meta"))
    loss.backward()
    return [loss, x.grad] + [p.grad for p in m.parameters()]


def test_mlp_forward_backward_on_meta():
    got, want = _mlp_grads(ember), _mlp_grads(torch)
    assert got[0].grad_fn is not None
    for e, t in zip(got[1:], want[1:]):
        same_meta(e, t)


def test_conv_layer_norm_backward_on_meta():
    def run(L):
        x = L.randn(2, 3, 8, 8, device="meta", requires_grad=True)
        conv = L.nn.Conv2d(3, 4, 3, padding=1, device="meta")
        norm = L.nn.LayerNorm(8, device="meta")
        norm(conv(x)).pow(2).mean().backward()
        return [x.grad, conv.weight.grad, conv.bias.grad, norm.weight.grad]
    same_meta(run(ember), run(torch))


def test_grads_accumulate_on_meta():
    for L in (ember, torch):
        w = L.randn(3, device="meta", requires_grad=True)
        (w * 2).sum().backward()
        (w * 3).sum().backward()
        assert w.grad.is_meta and w.grad.shape == (3,)


def test_a_model_larger_than_memory_trains_a_step_on_meta():
    """20 GB of parameters, forward and backward: shapes only, no memory (a kernel run on
    stand-ins anywhere on the path would need it)."""
    import resource
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with ember.device("meta"):
        nn = ember.nn
        m = nn.Sequential(nn.Linear(100_000, 50_000), nn.GELU(), nn.LayerNorm(50_000),
                          nn.Linear(50_000, 100_000))
        x = ember.randn(64, 100_000, requires_grad=True)
    y = m(x).softmax(-1)
    loss = ember.nn.functional.cross_entropy(y, ember.zeros(64, dtype=ember.int64,
                                                             device="meta"))
    loss.backward()
    assert [tuple(p.grad.shape) for p in m.parameters()] == [tuple(p.shape)
                                                            for p in m.parameters()]
    assert x.grad.shape == (64, 100_000) and x.grad.is_meta
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 1 << 20, f"the meta step allocated {grown_kb >> 10} MB"


# ---------------------------------------------------------------------- materialising
def _small_model(L):
    return L.nn.Sequential(L.nn.Linear(4, 6), L.nn.LayerNorm(6), L.nn.GELU(),
                           L.nn.Linear(6, 2))


def test_meta_init_to_empty_load_state_dict_round_trip():
    ember.manual_seed(0)
    ref = _small_model(ember)
    with ember.device("meta"):
        m = _small_model(ember)
    assert all(p.is_meta for p in m.parameters())
    m.to_empty(device="cpu")
    assert all(not p.is_meta and type(p) is ember.nn.Parameter and p.requires_grad
               for p in m.parameters())
    state = ref.state_dict()
    m.load_state_dict(state, assign=True)
    assert m[0].weight.data_ptr() == state["0.weight"].data_ptr()  # assigned, not copied
    x = ember.randn(3, 4)
    assert ember.equal(m(x), ref(x))


def test_load_state_dict_assign_straight_onto_meta():
    ref = ember.nn.Linear(3, 2)
    with ember.device("meta"):
        m = ember.nn.Linear(3, 2)
    m.weight.requires_grad_(False)
    m.load_state_dict(ref.state_dict(), assign=True)
    assert type(m.weight) is ember.nn.Parameter and not m.weight.requires_grad
    assert m.bias.requires_grad and not m.weight.is_meta
    x = ember.randn(4, 3)
    assert ember.equal(m(x), ref(x))


def test_load_state_dict_assign_takes_the_state_dicts_dtype_like_torch():
    def run(L):
        m = L.nn.Linear(2, 2, device="meta")
        sd = {"weight": L.ones(2, 2, dtype=L.float64), "bias": L.zeros(2)}
        m.load_state_dict(sd, assign=True)
        return str(m.weight.dtype).split(".")[1], m.weight.device.type, m.weight.requires_grad
    assert run(ember) == run(torch)


def test_load_state_dict_into_meta_without_assign_warns_like_torch():
    msgs = []
    for L in (ember, torch):
        m = L.nn.Linear(2, 2, device="meta")
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            m.load_state_dict({"weight": L.ones(2, 2), "bias": L.zeros(2)})
        msgs.append([str(w.message) for w in ws])
        assert m.weight.is_meta
    assert msgs[0] == msgs[1] and len(msgs[0]) == 2


def test_reset_parameters_after_to_empty():
    with ember.device("meta"):
        m = ember.nn.Linear(8, 4)
    m.to_empty(device="cpu")
    m.reset_parameters()
    bound = 1 / np.sqrt(8)
    assert float(m.weight.abs().max()) <= bound and float(m.bias.abs().max()) <= bound
    assert float(m.weight.abs().sum()) > 0


def test_to_empty_keeps_buffers_and_dtypes_like_torch():
    def run(L):
        m = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.BatchNorm1d(2)).to("meta")
        m.to_empty(device="cpu")
        bn = m[1]
        return [(k, str(v.dtype).split(".")[1], v.device.type, tuple(v.shape))
                for k, v in m.state_dict().items()] + [type(bn.weight).__name__]
    assert run(ember) == run(torch)


def test_to_empty_onto_meta_and_keyword_only():
    m = ember.nn.Linear(2, 3)
    assert m.to_empty(device="meta").weight.is_meta
    raises_like(lambda: ember.nn.Linear(2, 2).to_empty("cpu"),
                lambda: torch.nn.Linear(2, 2).to_empty("cpu"), "positional argument")


# ---------------------------------------------------------------------- default device
def test_device_context_and_default_device():
    assert ember.get_default_device() == ember.device("cpu")
    with ember.device("meta") as d:
        assert d == ember.device("meta")
        assert ember.get_default_device() == ember.device("meta")
        for t in (ember.ones(2), ember.zeros(2, 3), ember.empty(1), ember.full((2,), 1.0),
                  ember.randn(2), ember.rand(2), ember.arange(3), ember.eye(2),
                  ember.tensor([1.0]), ember.as_tensor([1, 2]), ember.linspace(0, 1, 3),
                  ember.randint(0, 3, (2,)), ember.randperm(3)):
            assert t.is_meta, t
        layer = ember.nn.Linear(4, 4)
        assert layer.weight.is_meta and layer.bias.is_meta
        assert ember.ones(2, device="cpu").device.type == "cpu"  # explicit device wins
    assert ember.get_default_device() == ember.device("cpu") and not ember.ones(1).is_meta


def test_which_factories_follow_the_default_device_like_torch():
    calls = {
        "zeros_like": lambda L, x: L.zeros_like(x),
        "randn_like": lambda L, x: L.randn_like(x),
        "new_zeros": lambda L, x: x.new_zeros(3),
        "from_numpy": lambda L, x: L.from_numpy(np.ones(2)),
        "to_dtype": lambda L, x: x.to(L.float64),
        "as_tensor_tensor": lambda L, x: L.as_tensor(x),
        "full": lambda L, x: L.full((2,), 1.0),
    }
    for name, fn in calls.items():
        devs = []
        for L in (ember, torch):
            with L.device("meta"):
                devs.append(fn(L, L.ones(2, device="cpu")).device.type)
        assert devs[0] == devs[1], (name, devs)


def test_device_context_nesting_and_set_default_device():
    try:
        for L in (ember, torch):
            seen = []
            with L.device("meta"):
                with L.device("cpu"):
                    seen.append(str(L.get_default_device()))
                    seen.append(L.ones(1).device.type)
                seen.append(L.ones(1).device.type)
            L.set_default_device("meta")
            seen.append(str(L.get_default_device()))
            seen.append(L.zeros(1).device.type)
            with L.device("cpu"):
                seen.append(L.zeros(1).device.type)
            seen.append(L.zeros(1).device.type)
            L.set_default_device(None)
            seen.append(str(L.get_default_device()))
            seen.append(L.zeros(1).device.type)
            if L is ember:
                mine = seen
        assert mine == seen
    finally:
        ember.set_default_device(None)
        torch.set_default_device(None)


def test_default_device_is_per_thread():
    for L in (ember, torch):
        seen = []

        def other(L=L, seen=seen):
            seen.append((str(L.get_default_device()), L.ones(1).device.type))
        try:
            L.set_default_device("meta")
            with L.device("meta"):
                t = threading.Thread(target=other)
                t.start()
                t.join()
            assert L.ones(1).is_meta
        finally:
            L.set_default_device(None)
        assert seen == [("cpu", "cpu")], (L.__name__, seen)


def test_set_default_device_bad_name():
    raises_like(lambda: ember.set_default_device("foo"),
                lambda: torch.set_default_device("foo"), "device type at start of device string")


# ---------------------------------------------------------------------- errors
ERRORS = {
    "item": lambda L: L.empty((), device="meta").item(),
    "item_many": lambda L: L.empty(2, 3, device="meta").item(),
    "bool": lambda L: bool(L.empty(1, device="meta")),
    "int": lambda L: int(L.empty((), device="meta")),
    "sum_item": lambda L: L.empty(2, device="meta").sum().item(),
    "numpy": lambda L: L.empty(2, device="meta").numpy(),
    "asarray": lambda L: np.asarray(L.empty(2, device="meta")),
    "tolist": lambda L: L.empty(2, device="meta").tolist(),
    "cpu": lambda L: L.empty(2, device="meta").cpu(),
    "to_cpu": lambda L: L.empty(2, device="meta").to("cpu"),
    "to_cpu_dtype": lambda L: L.empty(2, device="meta").to("cpu", L.float64),
    "copy_out": lambda L: L.ones(2).copy_(L.empty(2, device="meta")),
    "module_to_cpu": lambda L: L.nn.Linear(2, 2, device="meta").to("cpu"),
    "module_cpu": lambda L: L.nn.Linear(2, 2, device="meta").cpu(),
    "meta_plus_cpu": lambda L: L.empty(2, device="meta") + L.ones(2),
    "cpu_plus_meta": lambda L: L.ones(2) + L.empty(2, device="meta"),
    "dot_mixed": lambda L: L.empty(2, device="meta") @ L.ones(2),
    "cat_mixed": lambda L: L.cat([L.empty(2, device="meta"), L.ones(2)]),
    "grad_to_cpu": lambda L: L.ones(3, requires_grad=True).to("meta").sum().backward(),
    "nonzero": lambda L: L.empty(3, device="meta").nonzero(),
    "unique": lambda L: L.empty(3, device="meta").unique(),
    "equal": lambda L: L.equal(L.empty(3, device="meta"), L.empty(3, device="meta")),
    "allclose": lambda L: L.allclose(L.empty(3, device="meta"), L.empty(3, device="meta")),
    "broadcast": lambda L: L.empty(2, 3, device="meta") + L.empty(4, device="meta"),
    "matmul_shapes": lambda L: L.empty(2, 3, device="meta") @ L.empty(4, 2, device="meta"),
    "negative_size": lambda L: L.empty(-1, device="meta"),
    "bad_view": lambda L: L.empty(4, 6, device="meta").t().view(24),
    "conv_channels": lambda L: L.nn.functional.conv2d(L.empty(1, 3, 5, 5, device="meta"),
                                                      L.empty(2, 4, 3, 3, device="meta")),
}

# where ember's message differs from PyTorch's meta kernels (their Python meta registrations
# word some errors their own way), the words ember's message must still hold
MATCH = {"nonzero": "nonzero", "unique": "unique", "equal": "equal",
         "cpu_plus_meta": "Tensor on device meta is not on the expected device cpu!",
         "meta_plus_cpu": "Tensor on device cpu is not on the expected device meta!",
         "cat_mixed": "Tensor on device cpu is not on the expected device meta!",
         "dot_mixed": "Tensor on device cpu is not on the expected device meta!"}


@pytest.mark.parametrize("name", ERRORS)
def test_errors(name):
    e, t = raises_like(lambda: ERRORS[name](ember), lambda: ERRORS[name](torch),
                       MATCH.get(name))
    # ember's shape errors are its CPU kernels' (PyTorch's CPU words, not its meta ones)
    if name not in MATCH and name not in ("broadcast", "matmul_shapes", "conv_channels"):
        assert str(e) == str(t)


def test_repr_like_torch():
    cases = [lambda L: L.empty(2, 3, device="meta"),
             lambda L: L.empty((), dtype=L.int64, device="meta"),
             lambda L: L.empty(0, 3, device="meta"),
             lambda L: L.empty(2, 3, dtype=L.float16, device="meta").requires_grad_(),
             lambda L: L.empty(2, device="meta", requires_grad=True) * 2,
             lambda L: L.empty(4, dtype=L.bool, device="meta")]
    for fn in cases:
        got = repr(fn(ember)).replace("ember.", "torch.")
        want = repr(fn(torch))
        if "grad_fn" in want:  # the node names differ (ember has no AddmmBackward0 kernels)
            got, want = got.split("grad_fn")[0], want.split("grad_fn")[0]
        assert got == want


def test_unavailable_device_message():
    with pytest.raises(RuntimeError, match="device 'cuda' is not available") as info:
        if "cuda" in ember._device.AVAILABLE:
            pytest.skip("this machine has the CUDA backend")
        ember.zeros(2, device="cuda")
    msg = str(info.value)
    assert "CuPy" in msg and "GPU" in msg and "meta" in msg and "cpu" in msg
    assert "arrives with its own issue" not in msg
