"""Checkpoints: PyTorch's format in both directions, safe loading, corrupt files, atomic save."""

import collections
import io
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch

import ember
from oracle import assert_same, to_numpy, to_torch

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]


def sample(lib, dtype):
    a = (np.arange(12).reshape(3, 4) % 5 - 2)
    return lib.tensor(a).to(getattr(lib, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ember_to_torch_every_dtype(tmp_path, dtype):
    t = sample(ember, dtype)
    ember.save({"t": t, "col": t[:, 1]}, tmp_path / "a.pt")
    got = torch.load(tmp_path / "a.pt")
    assert_same(t, got["t"])
    assert_same(t[:, 1], got["col"])
    assert got["col"].untyped_storage().data_ptr() == got["t"].untyped_storage().data_ptr()
    assert got["col"].stride() == (4,) and got["col"].storage_offset() == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_to_ember_every_dtype(tmp_path, dtype):
    t = sample(torch, dtype)
    torch.save({"t": t, "tt": t.t(), "row": t[1]}, tmp_path / "b.pt")
    got = ember.load(tmp_path / "b.pt")
    assert_same(got["t"], t)
    assert_same(got["tt"], t.t())
    assert_same(got["row"], t[1])
    assert got["tt"].stride() == t.t().stride()


def test_containers_and_metadata_round_trip(tmp_path):
    obj = {"od": collections.OrderedDict(a=ember.ones(2), b=[1, 2.5, "x", None, True]),
           "tup": (ember.zeros(0), 3, (4, 5)), "size": ember.Size([2, 3]),
           "dtype": ember.bfloat16, "dev": ember.device("cpu"), "cnt": collections.Counter("aab"),
           "big": 2 ** 70, "cplx": 1 + 2j, "bytes": b"\x00\xff", "set": {1, 2},
           "param": ember.nn.parameter.Parameter(ember.ones(3))}
    ember.save(obj, tmp_path / "c.pt")
    for back in (torch.load(tmp_path / "c.pt"), ember.load(tmp_path / "c.pt")):
        assert type(back["od"]) is collections.OrderedDict and back["od"]["b"] == [1, 2.5, "x",
                                                                                   None, True]
        assert list(back["size"]) == [2, 3] and back["big"] == 2 ** 70
        assert back["cnt"] == collections.Counter("aab") and back["bytes"] == b"\x00\xff"
        assert str(back["dtype"]).endswith("bfloat16") and str(back["dev"]) == "cpu"
        assert back["set"] == {1, 2} and back["cplx"] == 1 + 2j
        assert back["param"].requires_grad and type(back["param"]).__name__ == "Parameter"
    assert isinstance(ember.load(tmp_path / "c.pt")["size"], ember.Size)


def test_torch_optimizer_state_loads_into_ember(tmp_path):
    w = torch.tensor([[0.5, -1.0], [2.0, 0.1]], requires_grad=True)
    opt = torch.optim.AdamW([w], lr=0.01)
    for _ in range(3):
        opt.zero_grad()
        (w ** 2).sum().backward()
        opt.step()
    torch.save({"w": w.detach(), "opt": opt.state_dict()}, tmp_path / "o.pt")
    ck = ember.load(tmp_path / "o.pt")
    we = ck["w"].clone().requires_grad_()
    eopt = ember.optim.AdamW([we], lr=0.01)
    eopt.load_state_dict(ck["opt"])
    for o, p in ((opt, w), (eopt, we)):
        o.zero_grad()
        (p ** 2).sum().backward()
        o.step()
    assert_same(we.detach(), w.detach(), rtol=1e-6, atol=1e-7)


def test_shared_storage_is_saved_once(tmp_path):
    base = ember.arange(10.0)
    ember.save([base, base[2:5], base.view(2, 5)], tmp_path / "s.pt")
    with zipfile.ZipFile(tmp_path / "s.pt") as zf:
        assert sum(n.split("/")[-2] == "data" for n in zf.namelist() if "/data/" in n) == 1
        offsets = [zf.getinfo(n).header_offset for n in zf.namelist()]
        assert offsets
    a, b, c = ember.load(tmp_path / "s.pt")
    assert b.tolist() == [2.0, 3.0, 4.0] and c.shape == (2, 5)


def test_records_are_64_byte_aligned(tmp_path):
    ember.save({"x": ember.ones(7), "y": ember.zeros(3, dtype=ember.int16)}, tmp_path / "al.pt")
    raw = (tmp_path / "al.pt").read_bytes()
    with zipfile.ZipFile(tmp_path / "al.pt") as zf:
        for info in zf.infolist():
            n, m = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little"), \
                int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
            assert (info.header_offset + 30 + n + m) % 64 == 0, info.filename
            assert info.compress_type == zipfile.ZIP_STORED


def test_mmap_load(tmp_path):
    x = ember.arange(1000.0).reshape(10, 100)
    ember.save({"x": x}, tmp_path / "m.pt")
    got = ember.load(tmp_path / "m.pt", mmap=True)["x"]
    assert_same(got, to_torch(x))
    obj, mapped = got._data, False
    while obj is not None and not mapped:
        mapped = isinstance(obj, np.memmap)
        obj = getattr(obj, "base", None)
    assert mapped, "mmap=True should give tensors backed by a memory map of the file"
    with pytest.raises(ValueError, match="must be a file path"):
        ember.load(io.BytesIO((tmp_path / "m.pt").read_bytes()), mmap=True)


def test_file_objects(tmp_path):
    buf = io.BytesIO()
    ember.save({"x": ember.ones(2)}, buf)
    buf.seek(0)
    assert torch.load(buf)["x"].tolist() == [1.0, 1.0]
    buf2 = io.BytesIO()
    torch.save({"x": torch.ones(2)}, buf2)
    buf2.seek(0)
    assert ember.load(buf2)["x"].tolist() == [1.0, 1.0]


# ---------------------------------------------------------------------- safety
class Config:  # a user class: not allowed by default in a weights-only load
    def __init__(self, n=3):
        self.n = n


def _hostile_checkpoint(path, payload: bytes):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", payload)
        zf.writestr("archive/version", "3\n")


def _reduce_payload(func_module, func_name, arg):
    return (b"\x80\x02c" + f"{func_module}\n{func_name}\n".encode() + b"X" +
            len(arg).to_bytes(4, "little") + arg.encode() + b"\x85R.")


HOSTILE = [("os", "system"), ("posix", "system"), ("builtins", "eval"), ("builtins", "exec"),
           ("subprocess", "getoutput"), ("builtins", "__import__"), ("numpy", "load")]


@pytest.mark.parametrize("module,name", HOSTILE, ids=[f"{m}.{n}" for m, n in HOSTILE])
def test_hostile_pickle_never_runs(tmp_path, module, name):
    marker = tmp_path / "pwned"
    arg = f"open({str(marker)!r}, 'w').write('x')" if name in ("eval", "exec") else \
        f"touch {marker}" if name in ("system", "getoutput") else str(marker)
    path = tmp_path / "evil.pt"
    _hostile_checkpoint(path, _reduce_payload(module, name, arg))
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        ember.load(path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path)
    assert not marker.exists()


def test_user_class_refused_then_allowed(tmp_path):
    path = tmp_path / "cfg.pt"
    ember.save({"cfg": Config(5), "w": ember.ones(2)}, path)
    with pytest.raises(pickle.UnpicklingError) as e:
        ember.load(path)
    msg = str(e.value)
    assert "test_serialization.Config" in msg and "add_safe_globals" in msg
    assert ember.serialization.get_unsafe_globals_in_checkpoint(path) == [
        "test_serialization.Config"]
    with ember.serialization.safe_globals([Config]):
        assert ember.load(path)["cfg"].n == 5
    with pytest.raises(pickle.UnpicklingError):
        ember.load(path)
    assert ember.load(path, weights_only=False)["cfg"].n == 5
    ember.serialization.add_safe_globals([Config])
    try:
        assert ember.load(path)["cfg"].n == 5
    finally:
        ember.serialization.clear_safe_globals()


def test_unsupported_opcode_refused(tmp_path):
    path = tmp_path / "op.pt"
    _hostile_checkpoint(path, b"\x80\x02(cos\nsystem\nX\x02\x00\x00\x00lso.")  # INST-like OBJ
    with pytest.raises(pickle.UnpicklingError):
        ember.load(path)


CORRUPT = [b"", b"not a zip at all", b"PK\x03\x04" + b"\x00" * 40]


@pytest.mark.parametrize("payload", CORRUPT, ids=["empty", "text", "bad-header"])
def test_corrupt_files(tmp_path, payload):
    path = tmp_path / "bad.pt"
    path.write_bytes(payload)
    with pytest.raises(RuntimeError, match="ember.load"):
        ember.load(path)


def test_truncated_file(tmp_path):
    path = tmp_path / "t.pt"
    ember.save({"x": ember.arange(1000.0)}, path)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 30, 100):
        path.write_bytes(data[:cut])
        with pytest.raises((RuntimeError, pickle.UnpicklingError)):
            ember.load(path)


def test_atomic_save_keeps_previous_checkpoint(tmp_path):
    path = tmp_path / "ck.pt"
    ember.save({"step": 1, "w": ember.ones(3)}, path)

    class Boom:
        def __reduce__(self):
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        ember.save({"step": 2, "w": ember.zeros(3), "boom": Boom()}, path)
    assert ember.load(path)["step"] == 1
    assert sorted(os.listdir(tmp_path)) == ["ck.pt"]


def test_weights_only_with_pickle_module_errors(tmp_path):
    ember.save({"x": 1}, tmp_path / "p.pt")
    with pytest.raises(RuntimeError, match="explicit pickle_module"):
        ember.load(tmp_path / "p.pt", pickle_module=pickle, weights_only=True)


def test_safetensors_round_trip(tmp_path):
    from safetensors.torch import load_file as torch_load_file
    from safetensors.torch import save_file as torch_save_file
    tensors = {"w": ember.arange(6.0).reshape(2, 3), "h": ember.ones(4, dtype=ember.bfloat16),
               "i": ember.tensor([1, 2, 3])}
    ember.utils.safetensors.save_file(tensors, tmp_path / "m.safetensors")
    back = torch_load_file(str(tmp_path / "m.safetensors"))
    for k in tensors:
        assert_same(tensors[k], back[k])
    torch_save_file({k: v.contiguous() for k, v in back.items()}, str(tmp_path / "t.safetensors"))
    mine = ember.utils.safetensors.load_file(tmp_path / "t.safetensors")
    for k in tensors:
        assert_same(mine[k], back[k])
    assert to_numpy(ember.load(tmp_path / "t.safetensors")["w"]).sum() == 15


def test_force_weights_only_environment_like_torch(tmp_path, monkeypatch):
    """TORCH_FORCE_WEIGHTS_ONLY_LOAD forces weights-only loading even when the call turns it
    off; TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD turns it off (with a warning) only where the call
    did not say; both set is an error. Checked against torch on the same file."""
    import fractions
    import warnings

    path = tmp_path / "obj.pt"
    ember.save({"w": ember.ones(2), "frac": fractions.Fraction(1, 3)}, path)

    def outcome(m, **kwargs):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                r = m.load(path, **kwargs)
                return "loaded", r["frac"], any("FORCE_NO" in str(x.message) for x in w)
            except Exception as e:  # noqa: BLE001 - the type is compared
                return type(e).__name__, None, False

    cases = [({}, {}), ({"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1"}, {"weights_only": False}),
             ({"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "yes"}, {}),
             ({"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "true"}, {"weights_only": True}),
             ({"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
              {})]
    for env, kwargs in cases:
        for k in ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        got, want = outcome(ember, **kwargs), outcome(torch, **kwargs)
        kinds = {"UnpicklingError": "refused", "WeightsUnpickler error": "refused"}
        assert (kinds.get(got[0], got[0]), got[1], got[2]) == \
            (kinds.get(want[0], want[0]), want[1], want[2]), (env, kwargs, got, want)
