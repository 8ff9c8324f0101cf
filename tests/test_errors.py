"""Bad input across the op families: ember raises PyTorch's exception type, with a message that
names what was wrong (the op, or the offending shapes/values). Each case runs in both libraries;
``says`` lists words ember's message must contain."""

import numpy as np
import pytest
import torch

import ember


def t(lib, *shape, dtype="float32"):
    return lib.ones(*shape, dtype=getattr(lib, dtype))


CASES = {
    # shapes that do not broadcast / match
    "add broadcast": (lambda m: t(m, 2, 3) + t(m, 4), ["size of tensor a (3)", "(4)"]),
    "mul broadcast": (lambda m: m.mul(t(m, 2, 3), t(m, 2, 2)), ["must match"]),
    "where broadcast": (lambda m: m.where(t(m, 3, dtype="bool"), t(m, 2), t(m, 3)), ["size"]),
    "mm shapes": (lambda m: m.mm(t(m, 2, 3), t(m, 4, 5)), ["2x3", "4x5"]),
    "matmul 1d": (lambda m: m.matmul(t(m, 3), t(m, 4)), ["3", "4"]),
    # operators and methods on same-dtype float tensors take a direct numpy kernel first
    "@ shapes": (lambda m: t(m, 2, 3) @ t(m, 4, 5), ["2x3", "4x5"]),
    "@ 0-d": (lambda m: m.tensor(2.0) @ t(m, 3), ["at least 1D"]),
    "@ batch": (lambda m: t(m, 2, 2, 3, dtype="float64") @ t(m, 3, 3, 2, dtype="float64"),
                ["size of tensor a (2)", "(3)"]),
    "div broadcast": (lambda m: t(m, 2, 3, dtype="float64") / t(m, 2), ["size of tensor a (3)"]),
    "sub method broadcast": (lambda m: t(m, 3).sub(t(m, 4)), ["size of tensor a (3)"]),
    "bmm ndim": (lambda m: m.bmm(t(m, 2, 3), t(m, 3, 2)), ["3"]),
    "cat sizes": (lambda m: m.cat([t(m, 2, 3), t(m, 2, 4)]), ["Sizes of tensors must match"]),
    "stack sizes": (lambda m: m.stack([t(m, 2), t(m, 3)]), ["stack"]),
    "view size": (lambda m: t(m, 2, 3).view(4), ["shape '[4]' is invalid for input of size 6"]),
    "reshape two -1": (lambda m: t(m, 6).reshape(-1, -1), ["only one dimension can be inferred"]),
    "view non-contiguous": (lambda m: t(m, 2, 3).t().view(6), ["view size is not compatible"]),
    "expand": (lambda m: t(m, 2, 3).expand(4, 3), ["expanded size", "(4)", "(2)"]),
    "inplace broadcast": (lambda m: t(m, 3).add_(t(m, 2, 3)), ["doesn't match the broadcast"]),
    "masked_fill mask": (lambda m: t(m, 3).masked_fill(t(m, 4, dtype="bool"), 0), ["size"]),
    "gather dims": (lambda m: m.gather(t(m, 2, 3), 1, m.zeros(2, dtype=m.int64)),
                    ["Index tensor must have the same number of dimensions"]),
    "conv channels": (lambda m: m.nn.functional.conv2d(t(m, 1, 4, 5, 5), t(m, 8, 3, 3, 3)),
                      ["expected input", "3 channels", "4 channels"]),
    "conv ndim": (lambda m: m.nn.functional.conv2d(t(m, 2, 3), t(m, 8, 3, 3, 3)),
                  ["conv2d", "[2, 3]"]),
    "linear shapes": (lambda m: m.nn.functional.linear(t(m, 2, 3), t(m, 4, 5)), ["2x3"]),
    # bad dims
    "sum dim": (lambda m: t(m, 2, 3).sum(dim=2), ["Dimension out of range", "got 2"]),
    "softmax dim": (lambda m: m.softmax(t(m, 2, 3), dim=-3), ["Dimension out of range"]),
    "transpose dim": (lambda m: t(m, 2, 3).transpose(0, 5), ["Dimension out of range"]),
    "cat dim": (lambda m: m.cat([t(m, 2), t(m, 2)], dim=1), ["Dimension out of range"]),
    "permute dims": (lambda m: t(m, 2, 3).permute(0, 0), ["permute"]),
    "squeeze dim": (lambda m: t(m, 2, 3).squeeze(3), ["Dimension out of range"]),
    "size dim": (lambda m: t(m, 2, 3).size(4), ["Dimension out of range"]),
    "sum dup dims": (lambda m: t(m, 2, 3).sum(dim=(0, 0)), ["dim 0 appears multiple times"]),
    # out-of-range indices
    "getitem int": (lambda m: t(m, 3)[5], ["index 5 is out of bounds for dimension 0 with "
                                           "size 3"]),
    "getitem tensor": (lambda m: t(m, 3)[m.tensor([0, 7])], ["out of bounds"]),
    "getitem too many": (lambda m: t(m, 3)[0, 0], ["too many indices"]),
    "getitem neg step": (lambda m: t(m, 3)[::-1], ["step must be greater than zero"]),
    "index_select": (lambda m: m.index_select(t(m, 3), 0, m.tensor([3])), ["out of range"]),
    "embedding": (lambda m: m.nn.functional.embedding(m.tensor([5]), t(m, 3, 2)), ["range"]),
    "cross_entropy target": (lambda m: m.nn.functional.cross_entropy(t(m, 2, 3),
                                                                     m.tensor([0, 3])),
                             ["out of bounds"]),
    # wrong dtypes
    "bool sub": (lambda m: t(m, 2, dtype="bool") - t(m, 2, dtype="bool"), ["Subtraction"]),
    "bool neg": (lambda m: -t(m, 2, dtype="bool"), ["Negation"]),
    "float bitwise": (lambda m: t(m, 2) & t(m, 2), ["bitwise_and"]),
    "mean int": (lambda m: t(m, 2, dtype="int64").mean(), ["mean(): could not infer output "
                                                           "dtype"]),
    "std int": (lambda m: t(m, 3, dtype="int64").std(), ["std and var only support floating "
                                                           "point and complex dtypes"]),
    "var_mean int": (lambda m: m.var_mean(t(m, 3, dtype="int64")), ["var_mean only support"]),
    "int requires_grad": (lambda m: t(m, 2, dtype="int64").requires_grad_(), ["floating point"]),
    "index float": (lambda m: t(m, 3)[m.tensor([0.5])], ["tensors used as indices must be"]),
    "where cond dtype": (lambda m: m.where(t(m, 2), t(m, 2), t(m, 2)), ["where expected "
                                                                         "condition"]),
    "inplace cast": (lambda m: t(m, 2, dtype="int64").add_(t(m, 2)),
                     ["result type Float can't be cast to the desired output type Long"]),
    "mm dtypes": (lambda m: m.mm(t(m, 2, 2), t(m, 2, 2, dtype="float64")), ["dtype"]),
    "int pow negative": (lambda m: m.tensor([2]) ** -1, ["Integers to negative integer powers"]),
    "int div zero": (lambda m: m.tensor([2]) // 0, ["ZeroDivisionError"]),
    # wrong argument types
    "zeros str": (lambda m: m.zeros("a"), []),
    "add str": (lambda m: m.add(t(m, 2), "x"), []),
    "cat tensor": (lambda m: m.cat(t(m, 2)), []),
    "tensor bad": (lambda m: m.tensor([[1, 2], [3]]), []),
    "from_numpy list": (lambda m: m.from_numpy([1, 2]), ["expected np.ndarray"]),
    # invalid sizes and values
    "zeros negative": (lambda m: m.zeros(-1), ["negative dimension -1"]),
    "randn negative": (lambda m: m.randn(2, -3), ["negative dimension"]),
    "arange step 0": (lambda m: m.arange(0, 5, 0), ["step must be nonzero"]),
    "randint empty range": (lambda m: m.randint(5, 5, (3,)), ["from=5 >= to=5"]),
    "multinomial too many": (lambda m: m.multinomial(m.tensor([1.0, 2.0]), 3),
                             ["cannot sample n_sample > prob_dist"]),
    "dropout p": (lambda m: m.nn.functional.dropout(t(m, 2), p=1.5), ["dropout probability"]),
    "clamp none": (lambda m: m.clamp(t(m, 2)), ["At least one of 'min' or 'max'"]),
    "item many": (lambda m: t(m, 3).item(), ["3 elements cannot be converted to Scalar"]),
    "bool many": (lambda m: bool(t(m, 3)), ["ambiguous"]),
    "inv singular": (lambda m: m.linalg.inv(m.zeros(2, 2)), ["singular"]),
    "cholesky not pd": (lambda m: m.linalg.cholesky(-t(m, 2, 2)), ["positive-definite"]),
    "adam lr": (lambda m: m.optim.Adam([t(m, 2).requires_grad_()], lr=-1), ["learning rate"]),
    "split size": (lambda m: t(m, 4).split([1, 2]), ["split_with_sizes"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_like_torch(name):
    fn, says = CASES[name]
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(Exception) as ee:
        fn(ember)
    same = type(ee.value).__name__.lstrip("_") == type(te.value).__name__.lstrip("_")
    assert same, (
        f"ember raised {type(ee.value).__name__}: {ee.value}; torch raised "
        f"{type(te.value).__name__}: {te.value}")
    msg = str(ee.value)
    assert msg, "the error has no message"
    assert "numpy" not in msg.lower() and "ndarray" not in msg or name == "from_numpy list", msg
    for word in says:
        assert word in msg, f"{word!r} not in {msg!r}"


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40


# ---------------------------------------------------------------------- argument types
# A Python value where the op takes a pure Tensor is a TypeError with PyTorch's exact message:
# positions count from 1 for functions, from the first argument after self for methods, and a
# keyword argument has none.
def _np_scalar(m):
    import numpy as np
    return m.exp(np.float32(2.0))


ARG_TYPES = {
    "function float": lambda m: m.exp(2.0),
    "function keyword": lambda m: m.exp(input=2.0),
    "function list": lambda m: m.exp([1.0, 2.0]),
    "function None": lambda m: m.exp(None),
    "function bool": lambda m: m.sum(True),
    "numpy scalar": _np_scalar,
    "second position": lambda m: m.matmul(t(m, 3), 2),
    "second keyword": lambda m: m.matmul(t(m, 3), other=2),
    "first position": lambda m: m.matmul(2, t(m, 3)),
    "method position": lambda m: t(m, 3).matmul(2),
    "method keyword": lambda m: t(m, 3).matmul(other=[1.0, 2.0, 3.0]),
    "method dot": lambda m: t(m, 3).dot(2),
    "operator": lambda m: t(m, 3) @ 2,
    "reflected operator": lambda m: 2 @ t(m, 3),
    "index param": lambda m: m.index_select(t(m, 3), 0, 1),
    "gather list index": lambda m: m.gather(t(m, 3), 0, [0]),
    "optional tensor": lambda m: m.nn.functional.linear(t(m, 3), t(m, 1, 3), 1.0),
    "nn weight": lambda m: m.nn.functional.linear(t(m, 3), 2.0),
    "inplace function": lambda m: m.exp_(2.0),
    "inplace method": lambda m: t(m, 3).atan2_(2.0),
    "inplace method keyword": lambda m: t(m, 3).index_add_(0, index=1, source=t(m, 3)),
    "list element": lambda m: m.cat([t(m, 2), 2]),
    "list None element": lambda m: m.stack((t(m, 2), None)),
    "list not a list": lambda m: m.cat(2),
    "tensor for a list": lambda m: m.stack(t(m, 2, 2)),
    # composite functions (not ops) check their tensor arguments the same way
    "view_as": lambda m: t(m, 3).view_as(3),
    "expand_as list": lambda m: t(m, 3).expand_as([1, 2]),
    "reshape_as": lambda m: t(m, 3).reshape_as(2.0),
    "kron second": lambda m: m.kron(t(m, 3), 2),
    "kron first": lambda m: m.kron(2, t(m, 3)),
    "outer second": lambda m: m.outer(t(m, 3), 2),
    "outer first": lambda m: m.outer(2, t(m, 3)),
    "ger": lambda m: m.ger(t(m, 3), 2),
    "inner": lambda m: m.inner(t(m, 3), 2),
    "einsum operand": lambda m: m.einsum("i,i->", t(m, 3), 2),
    "einsum list operand": lambda m: m.einsum("i->", [1.0]),
}


@pytest.mark.parametrize("name", list(ARG_TYPES))
def test_tensor_argument_types_like_torch(name):
    fn = ARG_TYPES[name]
    with pytest.raises(TypeError) as te:
        fn(torch)
    with pytest.raises(TypeError) as ee:
        fn(ember)
    assert str(ee.value) == str(te.value)


# numbers that PyTorch does take where a tensor may stand
NUMBERS_TAKEN = {
    "copy_": lambda m: t(m, 3, dtype="int64").copy_(2.5),
    "where": lambda m: m.where(t(m, 3) > 0, 1.0, 2.0),
    "lerp weight": lambda m: m.lerp(t(m, 3), t(m, 3) * 3, 0.5),
    "add scalar": lambda m: m.add(t(m, 3), 2),
    "masked_fill": lambda m: t(m, 3).masked_fill(t(m, 3) > 0, 1.5),
}


@pytest.mark.parametrize("name", list(NUMBERS_TAKEN))
def test_numbers_taken_like_torch(name):
    e, tt = NUMBERS_TAKEN[name](ember), NUMBERS_TAKEN[name](torch)
    assert e.tolist() == tt.tolist() and str(e.dtype)[6:] == str(tt.dtype)[6:]


# ---------------------------------------------------------------------- in-place and out= casts
# The result dtype must cast to the written tensor's dtype (same kind or lower); PyTorch checks it
# before anything runs, so the target keeps its values and version.
CASTS = {
    "add_ float scalar": lambda m, x: x.add_(1.5),
    "mul_ float tensor": lambda m, x: x.mul_(t(m, 3)),
    "div_ true division": lambda m, x: x.div_(2),
    "pow_ fractional": lambda m, x: x.pow_(0.5),
    "sqrt_ int": lambda m, x: x.sqrt_(),
    "sigmoid_ int": lambda m, x: x.sigmoid_(),
    "atan2_ int": lambda m, x: x.atan2_(x.clone()),
    "iadd float": lambda m, x: x.__iadd__(1.5),
    "bitwise_and_ float": lambda m, x: x.bitwise_and_(1.5),
    "bitwise_or_ float tensor": lambda m, x: x.bitwise_or_(t(m, 3)),
    "bool add_ int": lambda m, x: x.bool().add_(1),
    "out add": lambda m, x: m.add(x.clone(), 1.5, out=x),
    "out exp": lambda m, x: m.exp(x.clone(), out=x),
    "out bitwise_xor": lambda m, x: m.bitwise_xor(x.clone(), 2.5, out=x),
    "out int32 sin": lambda m, x: m.sin(t(m, 3), out=x.int()),
    # clamp's all-Scalar overload names the target type in C++ ("long int")
    "clamp_ scalars": lambda m, x: x.clamp_(0.5, 1.5),
    "clamp_min_ scalar": lambda m, x: x.clamp_min_(0.5),
    "clamp_max_ scalar": lambda m, x: x.clamp_max_(2.5),
    "clip_ scalars": lambda m, x: x.clip_(0.5, 1.5),
    "clamp_ tensor bound": lambda m, x: x.clamp_(t(m, 3), None),
}


@pytest.mark.parametrize("name", list(CASTS))
def test_inplace_and_out_cast_errors_like_torch(name):
    fn = CASTS[name]
    xs = {m: m.tensor([1, 2, 3]) for m in (ember, torch)}
    with pytest.raises(RuntimeError) as te:
        fn(torch, xs[torch])
    with pytest.raises(RuntimeError) as ee:
        fn(ember, xs[ember])
    assert str(ee.value) == str(te.value)
    assert "can't be cast to the desired output type" in str(ee.value)
    assert xs[ember].tolist() == [1, 2, 3] and xs[ember]._version == xs[torch]._version == 0


# ---------------------------------------------------------------------- missing arguments
MISSING = {
    "addcdiv_": lambda m: t(m, 3).addcdiv_(),
    "addcmul_": lambda m: t(m, 3).addcmul_(),
    "add": lambda m: t(m, 3).add(),
    "sub_": lambda m: t(m, 3).sub_(),
    "lerp": lambda m: t(m, 3).lerp(),
    "lerp one": lambda m: t(m, 3).lerp(t(m, 3)),
    "function": lambda m: m.atan2(t(m, 3)),
    "ones no size": lambda m: m.ones(),
    "zeros no size": lambda m: m.zeros(dtype=m.float64),
    "empty no size": lambda m: m.empty(),
}


@pytest.mark.parametrize("name", list(MISSING))
def test_missing_arguments_are_type_errors(name):
    with pytest.raises(TypeError):
        MISSING[name](torch)
    with pytest.raises(TypeError, match="missing .* required positional argument"):
        MISSING[name](ember)


# ---------------------------------------------------------------------- out= sets the dtype
# sum/prod/cumsum/cumprod with out= and no dtype compute in the out tensor's dtype (the input is
# cast first, so float -> int truncates each element); a dtype that differs from out's is an
# error.
OUT_DTYPE_OPS = {
    "sum": lambda m, x, **kw: m.sum(x, 1, **kw),
    "sum all dims": lambda m, x, **kw: m.sum(x, (0, 1), **kw),
    "prod": lambda m, x, **kw: m.prod(x, 1, **kw),
    "cumsum": lambda m, x, **kw: m.cumsum(x, 1, **kw),
    "cumprod": lambda m, x, **kw: m.cumprod(x, 1, **kw),
}
OUT_DTYPE_PAIRS = [("float32", "int64"), ("float32", "bool"), ("int8", "int8"),
                   ("int8", "float32"), ("float32", "float16"), ("float64", "float32"),
                   ("int64", "float64")]


def _out_dtype_input(m, dtype):
    vals = [[0.6, 0.7, 1.9], [2.5, -1.5, 3.3]] if "float" in dtype else [[100, 100, 100],
                                                                          [3, -4, 5]]
    return m.tensor(vals, dtype=getattr(m, dtype))


@pytest.mark.parametrize("src,dst", OUT_DTYPE_PAIRS)
@pytest.mark.parametrize("name", list(OUT_DTYPE_OPS))
def test_out_sets_the_computation_dtype(name, src, dst):
    if dst == "bool" and name.startswith("cum"):
        return  # PyTorch has no bool kernel for cumsum/cumprod (ember computes one)
    got = {}
    for m in (ember, torch):
        out = m.empty(0, dtype=getattr(m, dst))
        res = OUT_DTYPE_OPS[name](m, _out_dtype_input(m, src), out=out)
        assert res is out
        got[m] = out
    assert str(got[ember].dtype)[6:] == str(got[torch].dtype)[6:]
    e, tt = got[ember].double().numpy(), got[torch].double().numpy()
    assert np.allclose(e, tt, rtol=1e-3), (e, tt)  # float16 results differ in the last bit


@pytest.mark.parametrize("name", list(OUT_DTYPE_OPS))
def test_out_dtype_conflicts_with_dtype_like_torch(name):
    msgs = []
    for m in (ember, torch):
        with pytest.raises(RuntimeError) as e:
            OUT_DTYPE_OPS[name](m, _out_dtype_input(m, "float32"), dtype=m.float64,
                                out=m.empty(0))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] == "Expected out tensor to have dtype double, but got float instead"


# ---------------------------------------------------------------------- out= of the wrong dtype
# Products, max/min over a dim and arg-reductions want an out= tensor of the result's dtype
# exactly (no cast), with PyTorch's message in C++ type names.
def _dbl(m):
    return m.empty(0, dtype=m.float64)


OUT_EXACT = {
    "mm": lambda m: m.mm(t(m, 3, 3), t(m, 3, 3), out=_dbl(m)),
    "bmm": lambda m: m.bmm(t(m, 2, 3, 3), t(m, 2, 3, 3), out=_dbl(m)),
    "matmul": lambda m: m.matmul(t(m, 3, 3), t(m, 3, 3), out=_dbl(m)),
    "mv": lambda m: m.mv(t(m, 3, 3), t(m, 3), out=_dbl(m)),
    "addmm": lambda m: m.addmm(t(m, 3, 3), t(m, 3, 3), t(m, 3, 3), out=_dbl(m)),
    "baddbmm": lambda m: m.baddbmm(t(m, 2, 3, 3), t(m, 2, 3, 3), t(m, 2, 3, 3), out=_dbl(m)),
    "max values": lambda m: m.max(t(m, 3, 3), 1, out=(_dbl(m), m.empty(0, dtype=m.int64))),
    "min indices": lambda m: m.min(t(m, 3, 3), 1, out=(m.empty(0), m.empty(0, dtype=m.int32))),
    "aminmax": lambda m: m.aminmax(t(m, 3, 3), dim=1, out=(_dbl(m), _dbl(m))),
    "argmax": lambda m: m.argmax(t(m, 3, 3), 1, out=m.empty(0, dtype=m.int32)),
    "argmin int8": lambda m: m.argmin(t(m, 3, 3), 1, out=m.empty(0, dtype=m.int8)),
}


@pytest.mark.parametrize("name", list(OUT_EXACT))
def test_out_dtype_must_match_like_torch(name):
    msgs = []
    for m in (ember, torch):
        with pytest.raises(RuntimeError) as e:
            OUT_EXACT[name](m)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    assert msgs[0].startswith("Expected out tensor to have dtype")


def test_out_of_the_result_dtype_still_works():
    for m in (ember, torch):
        o = m.empty(0)
        assert m.matmul(t(m, 2, 3), t(m, 3, 4), out=o) is o and o.shape == (2, 4)
        vals, idx = m.max(t(m, 3, 3), 1, out=(m.empty(0), m.empty(0, dtype=m.int64)))
        assert vals.tolist() == [1.0, 1.0, 1.0] and idx.dtype == m.int64
