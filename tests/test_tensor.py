"""The Tensor itself: factories, attributes, conversions, repr, memory sharing, dtypes, devices."""

import copy
import pickle

import numpy as np
import pytest
import torch

import ember
from oracle import assert_same, raises_like, to_numpy

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]


def both(fn):
    e, t = fn(ember), fn(torch)
    assert_same(e, t)
    return e


# ---------------------------------------------------------------------- factories
FACTORIES = {
    "tensor ints": lambda m: m.tensor([[1, 2], [3, 4]]),
    "tensor floats": lambda m: m.tensor([1.5, 2]),
    "tensor bools": lambda m: m.tensor([True, False]),
    "tensor complex": lambda m: m.tensor([1 + 2j, 3]),
    "tensor scalar": lambda m: m.tensor(3.5),
    "tensor empty": lambda m: m.tensor([]),
    "tensor nested empty": lambda m: m.tensor([[], []]),
    "tensor dtype": lambda m: m.tensor([1.7, -2.2], dtype=m.int32),
    "tensor of tensors": lambda m: m.tensor([m.tensor(1.0), m.tensor(2.0)]),
    "tensor from numpy f64": lambda m: m.tensor(np.arange(3.0)),
    "zeros": lambda m: m.zeros(2, 3),
    "zeros tuple": lambda m: m.zeros((2, 3), dtype=m.int64),
    "ones size": lambda m: m.ones(m.Size([2, 1])),
    "full float": lambda m: m.full((2, 2), 1.5),
    "full int": lambda m: m.full((2,), 7),
    "full bool": lambda m: m.full((2,), True),
    "zeros_like": lambda m: m.zeros_like(m.ones(2, 3, dtype=m.float64)),
    "ones_like dtype": lambda m: m.ones_like(m.ones(2), dtype=m.int16),
    "full_like": lambda m: m.full_like(m.ones(2, dtype=m.int32), 4),
    "new_zeros": lambda m: m.ones(2, dtype=m.float64).new_zeros(3),
    "new_ones": lambda m: m.ones(2, dtype=m.int8).new_ones((1, 2)),
    "new_full": lambda m: m.ones(2).new_full((2,), 3.0),
    "new_tensor": lambda m: m.ones(2, dtype=m.float64).new_tensor([1, 2]),
    "arange int": lambda m: m.arange(5),
    "arange float": lambda m: m.arange(0, 1, 0.1),
    "arange neg": lambda m: m.arange(5, -3, -2),
    "arange dtype": lambda m: m.arange(0, 5, dtype=m.float64),
    "linspace": lambda m: m.linspace(-1, 1, 7),
    "linspace one": lambda m: m.linspace(2, 3, 1),
    "linspace zero": lambda m: m.linspace(2, 3, 0),
    "linspace f64": lambda m: m.linspace(0, 10, 11, dtype=m.float64),
    "logspace": lambda m: m.logspace(0, 3, 4),
    "logspace base": lambda m: m.logspace(0, 3, 4, base=2.0),
    "eye": lambda m: m.eye(3),
    "eye rect": lambda m: m.eye(2, 4, dtype=m.int64),
    "tril_indices": lambda m: m.tril_indices(4, 3, 1),
    "triu_indices": lambda m: m.triu_indices(3, 4, -1),
    "empty shape": lambda m: m.empty(2, 0, 3).shape,
}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_factory_matches_torch(name):
    both(FACTORIES[name])


def test_empty_and_requires_grad_factories():
    x = ember.zeros(2, requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad_fn is None
    assert ember.empty(3, dtype=ember.float16).dtype is ember.float16
    with pytest.raises(RuntimeError, match="floating point"):
        ember.zeros(2, dtype=ember.int64, requires_grad=True)


def test_default_dtype():
    assert ember.get_default_dtype() is ember.float32
    try:
        ember.set_default_dtype(ember.float64)
        assert ember.tensor([1.5]).dtype is ember.float64 and ember.zeros(1).dtype is \
            ember.float64 and ember.tensor([1j]).dtype is ember.complex128
        assert (ember.ones(1, dtype=ember.int64) * 1.5).dtype is ember.float64
    finally:
        ember.set_default_dtype(ember.float32)
    with pytest.raises(TypeError):
        ember.set_default_dtype(ember.int64)


# ---------------------------------------------------------------------- attributes
def test_attributes_match_torch():
    def attrs(m):
        x = m.arange(24, dtype=m.float32).reshape(2, 3, 4)
        v = x.transpose(0, 2)[1:]
        return (tuple(x.shape), x.size(), x.size(-1), x.dim(), x.ndim, x.numel(), x.stride(),
                x.stride(1), v.stride(), v.storage_offset(), v.is_contiguous(),
                x.is_contiguous(), x.element_size(), x.nbytes, x.itemsize, x.is_leaf,
                x.is_floating_point(), x.is_complex(), len(x), x.T.shape, x[0].mT.shape,
                str(x.device), x.dtype.is_floating_point, x.dtype.itemsize,
                m.tensor(1.0).dim(), m.zeros(0, 3).numel())
    e, t = attrs(ember), attrs(torch)
    assert list(e) == [tuple(a) if isinstance(a, torch.Size) else a for a in t] or \
        [str(a) for a in e] == [str(a).replace("torch.", "ember.") for a in t]


def test_size_type():
    s = ember.zeros(2, 3).shape
    assert isinstance(s, ember.Size) and isinstance(s, tuple) and s == (2, 3)
    assert repr(s) == "ember.Size([2, 3])" and s.numel() == 6
    assert isinstance(s[0:1], ember.Size)


# ---------------------------------------------------------------------- conversions
@pytest.mark.parametrize("target", ["float", "double", "half", "bfloat16", "int", "long", "bool",
                                    "short", "char", "byte"])
def test_cast_methods(target):
    both(lambda m: getattr(m.tensor([-1.7, 0.0, 2.5, 300.0]), target)())


def test_to_variants():
    both(lambda m: m.tensor([1.5, 2.5]).to(m.float64))
    both(lambda m: m.tensor([1.5, 2.5]).to("cpu", m.int32))
    both(lambda m: m.tensor([1.5, 2.5]).to(m.ones(1, dtype=m.float16)))
    both(lambda m: m.tensor([1.5, 2.5]).to(dtype=m.bfloat16))
    both(lambda m: m.tensor([1, 2]).type_as(m.ones(1, dtype=m.float64)))
    x = ember.ones(2)
    assert x.to(ember.float32) is x and x.to(ember.float32, copy=True) is not x
    assert x.type() == "ember.FloatTensor"
    assert x.type(ember.float64).dtype is ember.float64


def test_item_tolist_python_numbers():
    assert ember.tensor([[1, 2]]).tolist() == [[1, 2]]
    assert ember.tensor(2.5).item() == 2.5 and isinstance(ember.tensor(3).item(), int)
    assert ember.tensor([True]).item() is True
    assert ember.tensor([1.5], dtype=ember.bfloat16).tolist() == [1.5]
    assert float(ember.tensor([2.0])) == 2.0 and int(ember.tensor(7.9)) == 7
    assert complex(ember.tensor(1 + 2j)) == 1 + 2j
    assert [10, 20, 30][ember.tensor(1)] == 20
    assert bool(ember.tensor([0.0])) is False
    with pytest.raises(TypeError):
        [1, 2][ember.tensor(1.0)]
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value"):
        bool(ember.ones(2))


def test_iteration_and_len():
    x = ember.arange(6).reshape(3, 2)
    rows = list(x)
    assert len(rows) == 3 and rows[1].tolist() == [2, 3]
    with pytest.raises(TypeError):
        len(ember.tensor(1.0))
    with pytest.raises(TypeError):
        iter(ember.tensor(1.0))
    assert 3 in x and 9 not in x


def test_numpy_shares_memory():
    a = np.arange(4.0)
    t = ember.from_numpy(a)
    a[0] = 10
    assert t[0].item() == 10
    t.add_(1)
    assert a[1] == 2
    assert np.shares_memory(t.numpy(), a)
    arr = np.asarray(ember.ones(3))
    assert arr.dtype == np.float32
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        ember.ones(2, requires_grad=True).numpy()
    with pytest.raises(TypeError, match="can't convert np.ndarray of type"):
        ember.from_numpy(np.array(["a"]))
    assert ember.as_tensor(a) is not None and np.shares_memory(ember.as_tensor(a).numpy(), a)


def test_dlpack_both_ways():
    e = ember.arange(6.0).reshape(2, 3)
    t = torch.from_dlpack(e)
    assert t.tolist() == e.tolist()
    t[0, 0] = 42
    assert e[0, 0].item() == 42  # zero-copy
    back = ember.from_dlpack(torch.arange(4, dtype=torch.int32))
    assert back.dtype is ember.int32 and back.tolist() == [0, 1, 2, 3]
    with pytest.raises(RuntimeError):
        ember.ones(2, requires_grad=True).__dlpack__()


def test_clone_contiguous_detach():
    x = ember.arange(6.0).reshape(2, 3).t()
    c = x.contiguous()
    assert c.is_contiguous() and not x.is_contiguous() and c.tolist() == x.tolist()
    assert c.contiguous() is c
    y = x.clone()
    y[0, 0] = 100
    assert x[0, 0].item() == 0
    w = ember.ones(2, requires_grad=True)
    d = w.detach()
    assert not d.requires_grad and np.shares_memory(d.numpy(), w.detach().numpy())
    assert w.data.requires_grad is False


def test_copy_and_pickle():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = copy.deepcopy(x)
    assert y.requires_grad and y.tolist() == [1.0, 2.0] and y is not x
    z = pickle.loads(pickle.dumps(ember.arange(3, dtype=ember.int16)))
    assert z.dtype is ember.int16 and z.tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError, match="deepcopy"):
        copy.deepcopy(x * 2)


# ---------------------------------------------------------------------- repr
REPRS = [
    lambda m: m.tensor([1.0, 2.0, 3.0]),
    lambda m: m.tensor([1.5, -2.25]),
    lambda m: m.tensor([[1, 2], [3, 40]]),
    lambda m: m.tensor([True, False]),
    lambda m: m.tensor(3.0),
    lambda m: m.tensor([1e-5, 1.0]),
    lambda m: m.tensor([1.0, 2.0], dtype=m.float64),
    lambda m: m.tensor([1, 2], dtype=m.int32),
    lambda m: m.zeros(2, 0),
    lambda m: m.tensor([]),
    lambda m: m.tensor([float("nan"), float("inf"), 1.0]),
    lambda m: m.arange(2000.0),
    lambda m: m.tensor([1.0, 2.0], requires_grad=True),
    lambda m: m.tensor([1.0, 2.0], requires_grad=True) * 2,
    lambda m: m.tensor([1.0, 2.0], requires_grad=True).sum(),
]


@pytest.mark.parametrize("k", range(len(REPRS)))
def test_repr_like_torch(k):
    e, t = repr(REPRS[k](ember)), repr(REPRS[k](torch))
    assert e == t.replace("torch.", "ember."), f"\n{e}\n{t}"


# ---------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_promote_types_table(a, b):
    e = ember.promote_types(getattr(ember, a), getattr(ember, b))
    t = torch.promote_types(getattr(torch, a), getattr(torch, b))
    assert e.name == str(t).split(".")[1]


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_can_cast_table(a, b):
    assert ember.can_cast(getattr(ember, a), getattr(ember, b)) == \
        torch.can_cast(getattr(torch, a), getattr(torch, b))


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo(name):
    e, t = ember.finfo(getattr(ember, name)), torch.finfo(getattr(torch, name))
    for k in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(e, k) == getattr(t, k), k


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo(name):
    e, t = ember.iinfo(getattr(ember, name)), torch.iinfo(getattr(torch, name))
    assert (e.bits, e.min, e.max) == (t.bits, t.min, t.max)


def test_dtype_objects():
    assert ember.float is ember.float32 and ember.long is ember.int64 and ember.half is \
        ember.float16 and ember.double is ember.float64
    assert repr(ember.bfloat16) == "ember.bfloat16"
    assert ember.complex64.is_complex and not ember.int8.is_floating_point
    assert pickle.loads(pickle.dumps(ember.float16)) is ember.float16
    with pytest.raises(TypeError):
        ember.finfo(ember.int32)


def test_result_type_categories():
    for fn in (lambda m: m.result_type(m.ones(2, dtype=m.int32), 2.5),
               lambda m: m.result_type(m.ones(2, dtype=m.float16), m.tensor(1.0, dtype=m.float64)),
               lambda m: m.result_type(m.ones(2, dtype=m.uint8), m.tensor(1, dtype=m.int64)),
               lambda m: m.result_type(m.tensor(1, dtype=m.int8), 1j),
               lambda m: m.result_type(2, 3.0)):
        assert str(fn(ember)).split(".")[1] == str(fn(torch)).split(".")[1]


# ---------------------------------------------------------------------- devices
def test_devices():
    d = ember.device("cpu")
    assert d.type == "cpu" and d.index is None and str(d) == "cpu" and d == "cpu"
    assert ember.device("cuda:1").index == 1 and repr(ember.device("cpu")) == "device(type='cpu')"
    x = ember.zeros(2, device="cpu")
    assert x.device == ember.device("cpu") and x.cpu() is x
    with pytest.raises(RuntimeError, match="CUDA backend"):
        ember.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="not available"):
        ember.ones(2).to("cuda")
    with pytest.raises(RuntimeError):
        ember.device("tpu")
    with pytest.raises(RuntimeError, match="not available"):
        ember.ones(2).cuda()


def test_version_and_views_of_numpy_results():
    x = ember.arange(12.0).reshape(3, 4)
    v = x[1:, ::2]
    assert v._base is x._base and v.storage_offset() == 4 and v.stride() == (4, 2)
    v.fill_(0)
    assert to_numpy(x)[1:, ::2].sum() == 0 and x._version == 1


def test_num_threads():
    n = ember.get_num_threads()
    assert n >= 1
    x = ember.randn(1024, 512)  # large enough to split into row blocks
    ref = ember.softmax(x, -1)
    try:
        ember.set_num_threads(1)
        assert ember.get_num_threads() == 1
        assert ember.equal(ember.softmax(x, -1), ref)  # same result on one thread
        for bad in (0, -2, 1.5):
            _, err = raises_like(lambda: ember.set_num_threads(bad),
                                 lambda: torch.set_num_threads(bad))
            with pytest.raises(type(err), match=str(err)):
                ember.set_num_threads(bad)
    finally:
        ember.set_num_threads(n)
    assert ember.get_num_threads() == n
