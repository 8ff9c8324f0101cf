"""float8_e4m3fn and float8_e5m2 against PyTorch 2.13's CPU build: conversions bit for bit,
finfo, printing, the promotion error, which ops run on float8 (and the error of those that do
not), save/load and the compiler."""

import warnings

import numpy as np
import pytest
import torch

import ember

NAMES = ["float8_e4m3fn", "float8_e5m2"]
OTHER = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
         "uint8", "bool", "complex64"]
ALL_CODES = np.arange(256, dtype=np.uint8)


def bits(t):
    """A tensor's bit patterns (its values for bool), from either library."""
    if t.dtype in (torch.bool, ember.bool):
        return np.asarray(t.tolist())
    n = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}[t.element_size()]
    lib = torch if isinstance(t, torch.Tensor) else ember
    return np.asarray(t.contiguous().view(getattr(lib, n)).tolist())


def both(name):
    return getattr(torch, name), getattr(ember, name)


def edge_values(tdt) -> np.ndarray:
    """float32 values that probe a float8 conversion: random over many scales, random bit
    patterns (NaN payloads, subnormals), the ties between neighbouring float8 values and their
    neighbours, the extremes and beyond."""
    rng = np.random.default_rng(0)
    scaled = np.concatenate([rng.standard_normal(2000).astype(np.float32) * s
                             for s in (1e-5, 1e-3, 0.1, 1, 10, 1e3, 1e5)])
    random_bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(
        np.float32)
    fin = torch.from_numpy(ALL_CODES).view(tdt).float().numpy()
    fin = np.unique(fin[np.isfinite(fin)])
    ties = ((fin[1:].astype(np.float64) + fin[:-1]) / 2).astype(np.float32)
    special = np.array([0.0, np.inf, np.nan, 448, 449, 464, 480, 57344, 61439, 61440, 65504,
                        1e30, 3.4e38, 2.0**-9, 2.0**-10, 2.0**-17, 2.0**-18], np.float32)
    v = np.concatenate([scaled, random_bits, ties, np.nextafter(ties, np.inf),
                        np.nextafter(ties, -np.inf), special])
    return np.concatenate([v, -v])


# ---------------------------------------------------------------------- dtype objects
@pytest.mark.parametrize("name", NAMES)
def test_dtype_attributes(name):
    tdt, edt = both(name)
    assert repr(edt) == f"ember.{name}"
    assert edt.itemsize == tdt.itemsize == 1
    assert edt.is_floating_point is tdt.is_floating_point is True
    assert edt.is_complex is tdt.is_complex is False
    assert edt.is_signed is tdt.is_signed
    assert ember.tensor([1.0], dtype=edt).is_floating_point()
    assert ember.tensor([1.0], dtype=edt).element_size() == 1


@pytest.mark.parametrize("name", NAMES)
def test_finfo(name):
    tdt, edt = both(name)
    t, e = torch.finfo(tdt), ember.finfo(edt)
    for k in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(e, k) == getattr(t, k), k
    assert repr(e) == repr(t)


def test_finfo_unchanged_for_other_floats():
    for name in ("float32", "float64", "float16", "bfloat16"):
        tdt, edt = both(name)
        assert repr(ember.finfo(edt)) == repr(torch.finfo(tdt))
        assert ember.finfo(edt).resolution == torch.finfo(tdt).resolution


# ---------------------------------------------------------------------- conversions
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("target", OTHER + NAMES)
def test_widening_every_bit_pattern(name, target):
    """float8 -> every dtype, all 256 patterns (NaNs included), bit for bit."""
    tdt, edt = both(name)
    ttg, etg = both(target)
    t = torch.from_numpy(ALL_CODES.copy()).view(tdt).to(ttg)
    e = ember.tensor(ALL_CODES.tolist(), dtype=ember.uint8).view(edt).to(etg)
    assert e.dtype is etg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(bits(e), bits(t))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("source", OTHER + NAMES)
def test_narrowing_bit_exact(name, source):
    """every dtype -> float8: round to nearest even, e4m3fn saturating (inf too), e5m2
    overflowing to inf, NaN as PyTorch's pattern."""
    tdt, edt = both(name)
    tsrc, esrc = both(source)
    v = edge_values(tdt)
    if source in ("int64", "int32", "int16", "int8", "uint8"):
        info = np.iinfo(source)
        v = np.clip(np.nan_to_num(v), info.min, info.max)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.from_numpy(v).to(tsrc)
        e = ember.tensor(v).to(esrc)
        if source in NAMES or source in ("float16", "bfloat16"):  # a source the same in both
            e = ember.tensor(bits(t).tolist(), dtype=ember.from_numpy(
                np.zeros(0, {1: np.uint8, 2: np.int16}[t.element_size()])).dtype).view(esrc)
        np.testing.assert_array_equal(bits(e), bits(t))
        np.testing.assert_array_equal(bits(e.to(edt)), bits(t.to(tdt)))


@pytest.mark.parametrize("name", NAMES)
def test_creation(name):
    tdt, edt = both(name)
    vals = [1.0, 2.5, -0.1, 1000.0, float("inf"), float("-inf"), float("nan"), -0.0, 1e-3]
    np.testing.assert_array_equal(bits(ember.tensor(vals, dtype=edt)),
                                  bits(torch.tensor(vals, dtype=tdt)))
    for make in ("zeros", "ones", "empty"):
        e = getattr(ember, make)(2, 3, dtype=edt)
        assert e.dtype is edt and e.shape == (2, 3)
    np.testing.assert_array_equal(bits(ember.full((3,), 3.3, dtype=edt)),
                                  bits(torch.full((3,), 3.3, dtype=tdt)))
    np.testing.assert_array_equal(bits(ember.full((1,), 1000.0, dtype=edt)),
                                  bits(torch.full((1,), 1000.0, dtype=tdt)))
    x = ember.tensor([1.0, 2.0], dtype=edt)
    np.testing.assert_array_equal(bits(x.clone().fill_(0.3)),
                                  bits(torch.tensor([1.0, 2.0], dtype=tdt).fill_(0.3)))
    assert x.tolist() == [1.0, 2.0] and x[1].item() == 2.0 and float(x[1]) == 2.0
    assert x.float().dtype is ember.float32 and x.half().dtype is ember.float16
    assert x.bfloat16().dtype is ember.bfloat16 and x.double().dtype is ember.float64
    assert x.type() == torch.tensor([1.0], dtype=tdt).type().replace("torch.", "ember.")


# ---------------------------------------------------------------------- promotion
PROMOTION = "Promotion for Float8 Types is not supported, attempted to promote {} and {}"


@pytest.mark.parametrize("name", NAMES)
def test_promotion_refused(name):
    tdt, edt = both(name)
    for other in OTHER + [n for n in NAMES if n != name]:
        tot = getattr(torch, other)
        for pair in ((tdt, tot), (tot, tdt)):
            with pytest.raises(RuntimeError) as te:
                torch.promote_types(*pair)
            with pytest.raises(RuntimeError, match="^Promotion for Float8") as ee:
                ember.promote_types(*(getattr(ember, str(d).split(".")[1]) for d in pair))
            assert str(ee.value) == str(te.value)
    assert ember.promote_types(edt, edt) is edt
    assert ember.result_type(ember.ones(2, dtype=edt), 2.5) is edt
    assert ember.can_cast(edt, ember.float32) and not ember.can_cast(edt, ember.int32)
    with pytest.raises(RuntimeError, match=f"^Unknown Complex ScalarType for "
                                           f"{name.capitalize()}$"):
        ember.result_type(ember.ones(2, dtype=edt), 1j)


# ---------------------------------------------------------------------- the op matrix
def _set(t, k, v):
    t[k] = v
    return t


def cases(T, dt):
    """Calls on float8 tensors; PyTorch runs some and refuses the others (SUPPORTED below)."""
    x = T.tensor([[1.0, -2.5, 0.1, 448], [3.0, 0.25, -0.0, 7.0]]).to(dt)
    y = T.tensor([[2.0, 1.5, -1.0, 0.5], [1.0, 1.0, 2.0, 3.0]]).to(dt)
    y3 = T.ones(2, 2, 4).to(dt)
    i = T.tensor([0, 1])
    m = T.tensor([[True, False, True, False]] * 2)
    f32 = T.ones(2, 4)
    return {
        # views, copies, joins, indexing
        "view": lambda: x.view(4, 2), "t": lambda: x.t(), "contiguous": lambda: x.t().contiguous(),
        "clone": lambda: x.clone(), "copy_": lambda: x.clone().copy_(y),
        "copy_from_f32": lambda: x.clone().copy_(f32 * 1000), "copy_to_f32":
        lambda: T.empty(2, 4).copy_(x), "cat": lambda: T.cat([x, y]), "stack": lambda: T.stack([x, y]),
        "index": lambda: x[i], "slice": lambda: x[1:, ::2], "mask_index": lambda: x[m],
        "setitem": lambda: _set(x.clone(), i, y), "index_select": lambda: x.index_select(0, i),
        "index_put": lambda: x.clone().index_put_((i,), T.ones(2, 4, dtype=dt)),
        "masked_select": lambda: x.masked_select(m), "repeat": lambda: x.repeat(2, 1),
        "roll": lambda: x.roll(1), "flip_first": lambda: x.flip(0), "flip_last": lambda: x.flip(1),
        "rot90": lambda: x.rot90(), "rot90_3d": lambda: y3.rot90(1, (0, 1)),
        "repeat_interleave": lambda: x.repeat_interleave(2, 0), "diag": lambda: x[0].diag(),
        "pad": lambda: T.nn.functional.pad(x, (1, 1)),
        "pad_reflect": lambda: T.nn.functional.pad(x, (1, 1), mode="reflect"),
        "where": lambda: T.where(m, x, y), "where_scalar": lambda: T.where(m, x, 0.5),
        "fill_": lambda: x.clone().fill_(2), "zero_": lambda: x.clone().zero_(),
        # pointwise
        "eq": lambda: x == y, "eq_scalar": lambda: x == 1.0, "ne": lambda: x != y,
        "abs": lambda: x.abs(), "isnan": lambda: x.isnan(), "isinf": lambda: x.isinf(),
        "isfinite": lambda: x.isfinite(), "isreal": lambda: x.isreal(), "positive": lambda: +x,
        "mul": lambda: x * y, "mul_saturates": lambda: x * (y * y),
        "mul_0d_first": lambda: y[0, 0] * x, "mul_0d_second": lambda: x * y[0, 0],
        "mul_scalar": lambda: x * 2, "rmul": lambda: 2 * x, "mul_": lambda: x.clone().mul_(y),
        "f32_times_0d": lambda: f32 * x[0, 0], "add": lambda: x + y, "sub": lambda: x - y,
        "div": lambda: x / y, "div_scalar": lambda: x / 2, "neg": lambda: -x, "lt": lambda: x < y, "exp": lambda: x.exp(),
        "sqrt": lambda: x.sqrt(), "floor": lambda: x.floor(), "sign": lambda: x.sign(),
        "clamp": lambda: x.clamp(0, 1), "relu": lambda: T.relu(x), "pow": lambda: x ** 2,
        "maximum": lambda: T.maximum(x, y), "masked_fill": lambda: x.masked_fill(m, 1.0),
        "nan_to_num": lambda: x.nan_to_num(), "isclose": lambda: T.isclose(x, y),
        # reductions, sorting, scans, scatter/gather
        "all": lambda: x.all(), "any": lambda: x.any(), "sum": lambda: x.sum(),
        "mean": lambda: x.mean(), "max": lambda: x.max(), "argmax": lambda: x.argmax(),
        "sort": lambda: x.sort(), "topk": lambda: x.topk(2), "cumsum": lambda: x.cumsum(0),
        "nonzero": lambda: x.nonzero(), "gather": lambda: x.gather(0, T.zeros(2, 4, dtype=T.long)),
        "tril": lambda: x.tril(), "equal": lambda: T.equal(x, y), "equal_self": lambda: T.equal(x, x),
        # products
        "mm": lambda: T.mm(x, y.t()), "mm_saturates": lambda: T.mm(x * x, x.t()),
        "matmul_3d_2d": lambda: y3 @ x.t(), "bmm": lambda: y3 @ y3.transpose(1, 2),
        "dot": lambda: x[0] @ y[0], "mv": lambda: x @ y[0], "addmm": lambda: T.addmm(x[:, :2], x, y.t()),
        "linear": lambda: T.nn.functional.linear(y3, x), "softmax": lambda: x.softmax(0),
        # factories
        "arange": lambda: T.arange(3, dtype=dt), "linspace": lambda: T.linspace(0, 1, 3, dtype=dt),
        "rand": lambda: T.rand(2, dtype=dt), "randn": lambda: T.randn(2, dtype=dt),
        "eye": lambda: T.eye(2, dtype=dt), "full_like": lambda: T.full_like(x, 2.0),
        # promotion
        "add_f32": lambda: x + f32, "eq_f32": lambda: x == f32, "cat_f32": lambda: T.cat([x, f32]),
        "where_f32": lambda: T.where(m, x, f32), "mul_bool": lambda: x * m,
        "int_times_0d": lambda: T.ones(2, dtype=T.int32) * x[0, 0],
        "mm_mixed": lambda: T.mm(x, y.t().float()),
    }


# what PyTorch 2.13 runs on float8 CPU tensors, of the cases above (the rest raise)
SUPPORTED = {
    "view", "t", "contiguous", "clone", "copy_", "copy_from_f32", "copy_to_f32", "cat", "stack",
    "index", "slice", "mask_index", "setitem", "index_select", "index_put", "masked_select",
    "repeat", "roll", "flip_first", "rot90_3d", "repeat_interleave", "diag", "pad", "where",
    "where_scalar", "fill_", "zero_", "eq", "eq_scalar", "ne", "abs", "isnan", "isreal",
    "positive", "mul", "mul_saturates", "mul_0d_first", "mul_", "f32_times_0d", "all", "any",
    "equal", "mm", "mm_saturates", "matmul_3d_2d", "addmm", "linear", "eye", "full_like",
}
E5M2_ONLY = {"isinf", "isfinite"}  # e4m3fn has no infinity and no kernel for these


def outcome(lib, f):
    try:
        r = f()
    except Exception as e:  # noqa: BLE001 - the exception is the result compared
        return ("raises", type(e).__name__, str(e).replace("torch.", "").replace("ember.", ""))
    if isinstance(r, (tuple, list)):
        return tuple(outcome(lib, lambda v=v: v) for v in r)
    if isinstance(r, lib.Tensor):
        return ("tensor", str(r.dtype).split(".")[1], tuple(r.shape), bits(r).tolist())
    return ("value", r)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", sorted(cases(torch, torch.float32)))
def test_op_matrix(name, case):
    """The op runs in both with the same bits, or raises the same error in both."""
    tdt, edt = both(name)
    expected = outcome(torch, cases(torch, tdt)[case])
    got = outcome(ember, cases(ember, edt)[case])
    runs = case in SUPPORTED or (case in E5M2_ONLY and name == "float8_e5m2")
    assert (expected[0] != "raises") == runs, expected  # the matrix as written down
    if case in ("rand", "randn") and runs:
        return
    assert got == expected


# ---------------------------------------------------------------------- printing
@pytest.mark.parametrize("name", NAMES)
def test_repr(name):
    tdt, edt = both(name)

    def reprs(T, dt):
        x = T.tensor([[1.0, -2.5, 0.1, 448], [3.0, 0.25, -0.0, 7.0]]).to(dt)
        return [x, x[0, 0], T.tensor([1.0, 2.0], dtype=dt), T.tensor([1e-3, 100.0], dtype=dt),
                T.tensor([float("nan"), 1.0], dtype=dt), T.zeros(2, 0, dtype=dt),
                T.empty(0, dtype=dt), x.clone().requires_grad_()]

    for t, e in zip(reprs(torch, tdt), reprs(ember, edt)):
        assert repr(e) == repr(t).replace("torch.", "ember.")


# ---------------------------------------------------------------------- files
@pytest.mark.parametrize("name", NAMES)
def test_save_load(name, tmp_path):
    tdt, edt = both(name)
    codes = ALL_CODES.tolist()
    e = ember.tensor(codes, dtype=ember.uint8).view(edt)
    ember.save({"a": e, "b": e[3:9]}, tmp_path / "e.pt")
    back = ember.load(tmp_path / "e.pt")
    assert back["a"].dtype is edt and bits(back["a"]).tolist() == codes
    assert bits(back["b"]).tolist() == codes[3:9]
    t = torch.load(tmp_path / "e.pt")  # PyTorch reads ember's file
    assert t["a"].dtype is tdt and bits(t["a"]).tolist() == codes
    torch.save({"a": t["a"], "b": t["a"][5:7]}, tmp_path / "t.pt")  # and ember PyTorch's
    for weights_only in (True, False):
        back = ember.load(tmp_path / "t.pt", weights_only=weights_only)
        assert back["a"].dtype is edt and bits(back["a"]).tolist() == codes
        assert bits(back["b"]).tolist() == codes[5:7]


@pytest.mark.parametrize("name", NAMES)
def test_safetensors_save(name, tmp_path):
    pytest.importorskip("safetensors")
    from safetensors.torch import load_file

    from ember.utils.safetensors import save_file
    tdt, edt = both(name)
    e = ember.tensor(ALL_CODES.tolist(), dtype=ember.uint8).view(edt)
    save_file({"w": e}, tmp_path / "w.safetensors")
    t = load_file(tmp_path / "w.safetensors")["w"]
    assert t.dtype is tdt and bits(t).tolist() == ALL_CODES.tolist()


# ---------------------------------------------------------------------- the compiler
def test_compile_float8_matches_eager():
    """The C compiler has no float8: a compiled function on float8 tensors gives eager's
    results and errors."""
    x = ember.tensor([1.0, 2.5, -3.0, 448.0], dtype=ember.float8_e4m3fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = ember.compile(lambda a, b: (a.float() * b.float() + 1).to(ember.float8_e4m3fn))
        np.testing.assert_array_equal(bits(f(x, x)), bits((x.float() * x.float() + 1).to(
            ember.float8_e4m3fn)))
        g = ember.compile(lambda a: a + a)
        with pytest.raises(NotImplementedError, match="add_stub"):
            g(x)
