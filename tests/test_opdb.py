"""A broad correctness net: every PyTorch OpInfo whose op ember has, run on OpInfo's own samples.

For each OpInfo in ``torch.testing._internal.common_methods_invocations.op_db`` that resolves to
a callable in ember (``ember.<name>``, ``ember.linalg.*``, ``ember.nn.functional.*``, a Tensor
method or property, or OpInfo's own ``lambda`` with ``torch`` rebound to ember), this file takes
a few samples per dtype, converts them to ember, and compares ember with torch: output values,
dtypes and shapes; for differentiable float samples the input gradients under the same random
output gradient; and ``OPS[name].run_meta`` on metadata-only stand-ins against the eager output.

A sample on which torch itself raises is skipped (that sample only). Ops that still differ are
listed, with the reason, in ``KNOWN_MISMATCH``: their test asserts that they still fail, so an
entry that starts passing fails the suite and must be removed.
"""

from __future__ import annotations

import itertools
import sys
import types
import unittest

import numpy as np
import pytest
import torch

import ember
from ember.autograd.engine import TensorMeta
from ember.ops.registry import OpDef
from oracle import assert_same, edtype, to_numpy

try:  # common_utils imports expecttest only for its TestCase base class
    import expecttest  # noqa: F401
except ImportError:
    _stub = types.ModuleType("expecttest")
    _stub.TestCase, _stub.ACCEPT = unittest.TestCase, False
    sys.modules["expecttest"] = _stub

from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402  (slow: ~10 s)

MAX_SAMPLES = {torch.float64: 6, torch.float32: 6, torch.int64: 6, torch.bool: 6}
# (rtol, atol): two implementations of the same math differ by more than one rounding
FWD_TOL = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-7, 1e-8)}
# (op, dtype) -> (rtol, atol) where a sample is ill-conditioned for any implementation
FWD_TOL_OVERRIDE: dict = {
    # integer samples transform in float32 (torch's default float): entries of size ~1e2 sum
    # into near-cancelled ones, where two FFT algorithms (MKL, pocketfft) differ by ~1e-5
    # absolute, as the float32 samples (FWD_TOL's atol 1e-5) allow
    **{(f"fft.{kind}{suffix}", torch.int64): (1e-5, 1e-4)
       for kind in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft") for suffix in ("", "2", "n")},
}
GRAD_TOL = {torch.float32: (1e-3, 1e-4), torch.float64: (1e-6, 1e-7)}
# Samples that are ill-conditioned in float32 for any implementation: torch's own float32
# gradient is as far from the float64 truth as ember's.
GRAD_TOL_OVERRIDE = {
    # a 1e4 entry among O(1) ones: both lose ~3e-3 absolute to cancellation
    ("logcumsumexp", torch.float32): (1e-2, 1e-2),
}

# Output values are random or uninitialised: compare shapes and dtypes only.
VALUE_FREE = {"bernoulli", "multinomial", "normal", "rand_like", "randn", "randn_like", "randint",
              "randint_like", "empty", "empty_like", "empty_strided", "new_empty",
              "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
              "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
              "nn.functional.rrelu", "uniform", "exponential", "geometric", "cauchy",
              "log_normal"}

# op id -> why ember still differs from torch (see the module docstring).
KNOWN_MISMATCH: dict[str, str] = {
}


# ---------------------------------------------------------------------- resolving ops
def _lookup(mod, name: str):
    obj = mod
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _rebind(fn):
    """OpInfo's wrapper ``fn`` (e.g. ``lambda x, *a: x.expand(*a)``) with its globals
    ``torch``/``F`` pointing at ember instead; None if it closes over torch objects."""
    if not isinstance(fn, types.FunctionType) or fn.__closure__:
        return None
    g = dict(fn.__globals__, torch=ember, F=ember.nn.functional)
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__)


def ember_callable(o):
    """The ember counterpart of OpInfo ``o``'s function variant, or None."""
    fn = _lookup(ember, o.name)
    if fn is not None and o.op is _lookup(torch, o.name):
        return fn
    mname = getattr(o.op, "__name__", "")
    if isinstance(o.op, (types.MethodDescriptorType, types.WrapperDescriptorType)) or (
            mname.startswith("__") and hasattr(torch.Tensor, mname)):
        if hasattr(ember.Tensor, mname):
            return lambda x, *a, **k: getattr(x, mname)(*a, **k)
        return None
    if fn is None and not hasattr(ember.Tensor, o.name):
        return None
    return _rebind(o.op)


def op_id(o) -> str:
    return o.name + ("." + o.variant_test_name if o.variant_test_name else "")


ENTRIES = [(op_id(o), o, f) for o in op_db if (f := ember_callable(o)) is not None
           and set(MAX_SAMPLES) & o.supported_dtypes("cpu")]


# ---------------------------------------------------------------------- conversion
class Unconvertible(Exception):
    """A sample holds a torch object ember has no counterpart for."""


def to_ember(x):
    """torch sample value -> ember equivalent (the inverse of oracle.to_torch); a CUDA
    tensor becomes the same view of a copy of its storage on ember's GPU."""
    if isinstance(x, torch.Tensor) and x.is_cuda:
        if x.dtype.is_complex or x.layout != torch.strided:
            raise Unconvertible(f"{x.dtype}/{x.layout} tensor")
        # the whole storage to the GPU, then the same view of it (as_strided on CUDA)
        flat = torch.empty(0, dtype=x.dtype, device=x.device).set_(x.untyped_storage())
        base = to_ember(flat.cpu()).detach().cuda()
        t = base.as_strided(tuple(x.shape), x.stride(), x.storage_offset())
        return t.detach().requires_grad_() if x.requires_grad else t
    if isinstance(x, torch.Tensor):
        if x.dtype.is_complex or x.layout != torch.strided:
            raise Unconvertible(f"{x.dtype}/{x.layout} tensor")
        # the same view of a copy of the whole storage: keeps strides (non-contiguous inputs)
        # and what as_strided may address outside the view
        flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage())
        if x.dtype == torch.bfloat16:  # numpy has no bfloat16: go through float32 (exact)
            base = ember.tensor(flat.float().numpy()).to(ember.bfloat16)
        else:
            base = ember.tensor(flat.numpy().copy(), dtype=edtype(x.dtype))
        t = base.as_strided(tuple(x.shape), x.stride(), x.storage_offset())
        return t.detach().requires_grad_() if x.requires_grad else t  # a leaf, as in torch
    if isinstance(x, torch.Size):
        return ember.Size(x)
    if isinstance(x, (list, tuple)):
        return type(x)(to_ember(v) for v in x)
    if isinstance(x, dict):
        return {k: to_ember(v) for k, v in x.items()}
    if isinstance(x, torch.dtype):
        return edtype(x)
    if isinstance(x, torch.device):
        return ember.device(str(x))
    if isinstance(x, torch.nn.Module):  # a parameter-free module (e.g. PairwiseDistance)
        cls = getattr(ember.nn, type(x).__name__, None)
        if cls is None or any(True for _ in x.parameters()):
            raise Unconvertible(f"torch module {type(x).__name__}")
        m = cls.__new__(cls)
        ember.nn.Module.__init__(m)
        for k, v in vars(x).items():
            if not k.startswith("_"):
                setattr(m, k, to_ember(v))
        return m
    if isinstance(x, (torch.memory_format, torch.layout, torch.Generator)):
        name = str(x).split(".")[-1]
        if not hasattr(ember, name):
            raise Unconvertible(f"ember has no {x}")
        return getattr(ember, name)
    return x


def _flat(x, out):
    if isinstance(x, (ember.Tensor, torch.Tensor)):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flat(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _flat(v, out)
    return out


def _metas(x):
    if isinstance(x, ember.Tensor):
        return TensorMeta(x)
    if isinstance(x, (list, tuple)) and not isinstance(x, ember.Size):
        return type(x)(_metas(v) for v in x)
    if isinstance(x, dict):
        return {k: _metas(v) for k, v in x.items()}
    return x


def _shape_dtype(e, t, path="out"):
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"{path}: expected a Tensor, got {type(e)}"
        assert tuple(e.shape) == tuple(t.shape), f"{path}: shape {tuple(e.shape)} vs {t.shape}"
        assert e.dtype is edtype(t.dtype), f"{path}: dtype {e.dtype} vs {t.dtype}"
    elif isinstance(t, (list, tuple)):
        assert isinstance(e, (list, tuple)) and len(e) == len(t), f"{path}: {e!r} vs {t!r}"
        for k, (a, b) in enumerate(zip(e, t)):
            _shape_dtype(a, b, f"{path}[{k}]")


# ---------------------------------------------------------------------- one sample
# Decompositions defined up to a sign or phase per vector (LAPACK builds may pick either).
GAUGE = {"linalg.eigh", "linalg.svd", "svd", "linalg.qr", "qr", "linalg.eig"}
# Ops returning indices of equal elements may pick any of the tied indices (torch's sort is not
# stable unless asked): compare values, and what the indices select. op -> position of ``dim``
# in the sample's args (default -1).
TIE_DIM_ARG = {"sort": 0, "argsort": 0, "topk": 1, "kthvalue": 1, "mode": 0, "median": 0,
               "nanmedian": 0, "msort": None, "max": 0, "min": 0}


def same_up_to_ties(o, sample, e_out, t_out, rtol, atol):
    """Values equal, and ember's indices select the same elements as torch's."""
    pos = TIE_DIM_ARG[o.name]
    if pos is None:  # msort: always dim 0
        dim = 0
    else:
        dim = sample.kwargs.get("dim", sample.args[pos] if len(sample.args) > pos else -1)
    x = sample.input.detach()
    if x.ndim == 0:
        raise AssertionError("indices differ on a 0-d input")
    e_idx = e_out if isinstance(e_out, ember.Tensor) else e_out[-1]
    t_idx = t_out if isinstance(t_out, torch.Tensor) else t_out[-1]
    if not isinstance(t_out, torch.Tensor):
        assert_same(e_out[0], t_out[0], rtol, atol, path="values")
    _shape_dtype(e_idx, t_idx, "indices")
    if t_idx.shape != x.shape and t_idx.ndim == x.ndim - 1:  # a reduced dim was dropped
        t_idx, e_idx = t_idx.unsqueeze(dim), e_idx.unsqueeze(dim)
    picked_e = x.gather(dim, torch.from_numpy(to_numpy(e_idx)).to(x.device))
    np.testing.assert_array_equal(to_numpy(picked_e), to_numpy(x.gather(dim, t_idx)),
                                  err_msg="elements the indices select")


def run_sample(o, fn, sample, dtype, grad: bool) -> str | None:
    """Compare ember with torch on one sample; returns "skip" when torch itself refuses."""
    t_args = (sample.input, *sample.args)
    t_kw = sample.kwargs
    try:
        t_out = o.op(*t_args, **t_kw)
    except Exception:  # noqa: BLE001  torch rejects this sample: nothing to compare
        return "skip"
    e_args, e_kw = to_ember(t_args), to_ember(t_kw)
    e_out = fn(*e_args, **e_kw)
    if o.name in VALUE_FREE or t_kw.get("dropout_p", 0) > 0:
        _shape_dtype(e_out, t_out)
        return None
    rtol, atol = FWD_TOL_OVERRIDE.get((o.name, dtype)) or FWD_TOL.get(dtype, (None, None))
    # (int/bool inputs: None picks oracle's tolerance for the output dtype)
    e_cmp, t_cmp = e_out, t_out
    if o.name in GAUGE:  # compare what OpInfo's sample declares well-defined
        t_cmp = sample.output_process_fn_grad(t_out)
        e_cmp = (_rebind(sample.output_process_fn_grad) or sample.output_process_fn_grad)(e_out)
    try:
        assert_same(e_cmp, t_cmp, rtol, atol)
    except AssertionError:
        if o.name not in TIE_DIM_ARG:
            raise
        same_up_to_ties(o, sample, e_out, t_out, rtol, atol)
    check_meta(o, fn, e_args, e_kw, e_out)
    if grad:
        check_grad(o, sample, dtype, t_args, t_kw, t_out, e_args, e_kw, e_out)
    return None


def check_meta(o, fn, e_args, e_kw, e_out):
    d = fn  # only when the sample's arguments are the op's own (not a wrapper's)
    if not isinstance(d, OpDef) or d.tags & {"random", "dynamic_shape"}:
        return
    if not isinstance(e_out, ember.Tensor) and not (
            isinstance(e_out, tuple) and all(isinstance(v, ember.Tensor) for v in e_out)):
        return
    try:
        got = d.run_meta(*_metas(e_args), **_metas(e_kw))
    except RuntimeError as e:
        if "depend" in str(e):  # the op says its output shape depends on tensor values
            return
        raise
    want = ((tuple(e_out.shape), e_out.dtype) if isinstance(e_out, ember.Tensor)
            else tuple((tuple(v.shape), v.dtype) for v in e_out))
    assert got == want, f"run_meta gave {got}, eager {want}"


def check_grad(o, sample, dtype, t_args, t_kw, t_out, e_args, e_kw, e_out):
    process = sample.output_process_fn_grad
    e_process = _rebind(process) or process
    try:
        t_res = process(t_out)
    except Exception:  # noqa: BLE001
        return
    e_res = e_process(e_out)
    ins_t = [a for a in _flat([t_args, t_kw], []) if a.requires_grad]
    ins_e = [a for a in _flat([e_args, e_kw], []) if a.requires_grad]
    outs_t, outs_e = _flat(t_res, []), _flat(e_res, [])
    assert len(outs_t) == len(outs_e), "different number of outputs after output_process"
    pairs = [(a, b) for a, b in zip(outs_e, outs_t) if b.requires_grad]
    if not ins_t or not pairs:
        return
    rng = np.random.default_rng(0)
    g_t = [torch.from_numpy(rng.standard_normal(tuple(b.shape))).to(b.dtype).to(b.device)
           for _, b in pairs]
    g_e = [ember.tensor(to_numpy(g), dtype=edtype(g.dtype), device=str(a.device))
           for (a, _), g in zip(pairs, g_t)]
    try:
        want = torch.autograd.grad([b for _, b in pairs], ins_t, g_t, allow_unused=True)
    except Exception:  # noqa: BLE001  torch has no derivative here
        return
    for k, (a, _) in enumerate(pairs):
        assert a.requires_grad, f"output {k} does not require grad in ember"
    got = ember.autograd.grad([a for a, _ in pairs], ins_e, g_e, allow_unused=True)
    rtol, atol = GRAD_TOL_OVERRIDE.get((o.name, dtype), GRAD_TOL[dtype])
    for k, (a, b) in enumerate(zip(got, want)):
        if b is None:
            assert a is None or not np.any(to_numpy(a)), f"grad[{k}]: ember has a gradient"
            continue
        assert a is not None, f"grad[{k}]: ember gave no gradient"
        if b._is_zerotensor():
            b = torch.zeros(b.shape, dtype=b.dtype)
        assert_same(a, b, rtol, atol, path=f"grad[{k}]")


# ---------------------------------------------------------------------- one op
def _short(x):
    if isinstance(x, torch.Tensor):
        return f"T{list(x.shape)}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in x) + "]"
    return repr(x)


def describe(s) -> str:
    kw = ", ".join(f"{k}={_short(v)}" for k, v in s.kwargs.items())
    return f"({_short(s.input)}, {', '.join(_short(a) for a in s.args)}; {kw})"


def op_failures(o, fn, device: str = "cpu") -> list[str]:
    """Every sample failure of OpInfo ``o`` on ``device`` as 'dtype sample#k: error' lines."""
    failures, compared = [], 0
    supported = o.supported_dtypes(device)
    for dtype, n in MAX_SAMPLES.items():
        if dtype not in supported:
            continue
        grad = dtype.is_floating_point and o.supports_autograd
        torch.manual_seed(0)
        try:  # sample_inputs_func directly: OpInfo.sample_inputs walks the stack per call
            samples = list(itertools.islice(o.sample_inputs_func(o, device, dtype, grad), n))
        except Exception:  # noqa: BLE001  torch cannot build samples for this dtype
            continue
        for k, s in enumerate(samples):
            try:
                compared += run_sample(o, fn, s, dtype, grad) != "skip"
            except Unconvertible:
                continue
            except Exception as e:  # noqa: BLE001  any ember error is a finding
                msg = str(e).strip().splitlines()
                failures.append(f"{dtype} sample {k} {describe(s)}: {type(e).__name__}: "
                                f"{' '.join(msg)[:300]}")
    if not compared and not failures:
        failures.append("no sample could be compared")
    return failures + (method_failures(o) if device == "cpu" else [])


class _Variant:
    """OpInfo ``o`` with its ``op`` replaced (to run a method variant through run_sample)."""

    def __init__(self, o, op):
        self._o, self.op = o, op

    def __getattr__(self, k):
        return getattr(self._o, k)


def method_failures(o, n: int = 2) -> list[str]:
    """The Tensor-method variant (``x.op(...)``) on the first samples, forward only."""
    mv = o.method_variant
    name = getattr(mv, "__name__", "")
    if getattr(torch.Tensor, name, None) is not mv or not hasattr(ember.Tensor, name):
        return []
    dtype = next(d for d in MAX_SAMPLES if d in o.supported_dtypes("cpu"))
    torch.manual_seed(0)
    try:
        samples = list(itertools.islice(o.sample_inputs_func(o, "cpu", dtype, False), n))
    except Exception:  # noqa: BLE001  torch cannot build samples for this dtype
        return []
    failures = []
    for k, s in enumerate(samples):
        try:
            run_sample(_Variant(o, mv), lambda x, *a, **kw: getattr(x, name)(*a, **kw), s,
                       dtype, False)
        except Unconvertible:
            continue
        except Exception as e:  # noqa: BLE001
            failures.append(f"method Tensor.{name} {dtype} sample {k} {describe(s)}: "
                            f"{type(e).__name__}: {' '.join(str(e).split())[:300]}")
    return failures


@pytest.mark.parametrize("entry", ENTRIES, ids=[e[0] for e in ENTRIES])
def test_op_matches_torch(entry):
    name, o, fn = entry
    failures = op_failures(o, fn)
    if name in KNOWN_MISMATCH:
        assert failures, f"{name} now matches torch: remove it from KNOWN_MISMATCH"
        return
    assert not failures, f"{name}:\n" + "\n".join(failures)


def test_known_mismatches_are_covered_ops():
    names = {e[0] for e in ENTRIES}
    stale = sorted(set(KNOWN_MISMATCH) - names)
    assert not stale, f"KNOWN_MISMATCH names ops this file does not run: {stale}"


def test_net_is_broad():
    assert len(ENTRIES) > 300
