"""Walk the op table through ``ember.compile(backend="inductor")``: every op, compiled alone and
inside a small graph, equals eager ember, forward and backward.

Each op-table entry gets one driver: the PyTorch OpInfo whose ember callable *is* the op
(``DIRECT``), an OpInfo whose function reaches the op in its forward or backward graph
(``VIA``), or a hand-written call (``HAND``, for ops no OpInfo reaches: internal helpers,
backward-only ops, random and complex ops). ``test_coverage`` asserts that the drivers cover the
whole op table except ``EXCLUDED`` (each with its reason), and every walk asserts that the op
really is a node of the graph it compiled, so no op is silently left out.

Per op, on its first usable sample (eager must accept it), compiled is compared with eager:
    f32, f64      forward, and input gradients when the op is differentiable
    f16, bf16     forward, with half tolerances
    noncontig     the float32 sample with every tensor made a strided (non-contiguous) view
    graph         ``op(x * 1.5 + 0.25, ...) * 2`` (float inputs/outputs): fusion with neighbours
Integer/bool-only ops run the same variants in their own dtype, forward only. The compile must
succeed with ``fullgraph=True`` except for the data-dependent ops in ``DATA_DEPENDENT``, and
must not fall back to running op by op (a C compile error is a finding, not a pass).

Eager against torch is test_opdb.py's job; this file only compares compiled with eager.
"""

from __future__ import annotations

import itertools
import os
import traceback
import warnings

import numpy as np
import pytest
import torch
from oracle import TOL, to_numpy
from test_opdb import ENTRIES, VALUE_FREE, to_ember

import ember
from ember.compiler import Unsupported, pytree
from ember.ops.registry import OPS, OpDef

F32, F64, F16, BF16 = ember.float32, ember.float64, ember.float16, ember.bfloat16
N_SAMPLES = 4  # samples looked at to find a usable one (eager accepts it, ideally >= 2-d)

# ---------------------------------------------------------------------- drivers
_BY_ID = {eid: (o, f) for eid, o, f in ENTRIES}
DIRECT: dict[str, str] = {}  # op name -> OpInfo id whose callable is the OpDef itself
for _eid, _o, _f in ENTRIES:
    if isinstance(_f, OpDef):
        DIRECT.setdefault(_f.name, _eid)

# op name -> OpInfo id whose function reaches the op (in its forward or its backward graph)
VIA = {
    "_avg_pool_adjoint": "nn.functional.avg_pool2d",  # backward
    "_conv_nd": "nn.functional.conv_transpose2d",  # backward (grad of input)
    "_conv_transpose_nd": "nn.functional.conv2d",  # backward (grad of input)
    "_conv_weight_grad": "nn.functional.conv2d",  # backward
    "_fused_rms_norm": "nn.functional.rms_norm",
    "_log_softmax_backward_data": "log_softmax",  # backward
    "_softmax_backward_data": "softmax",  # backward
    "_index_map": "nn.functional.interpolate.nearest",
    "_max_pool_scatter": "nn.functional.max_pool2d",  # backward
    "_max_unpool": "nn.functional.max_unpool2d",
    "_pad_backward": "nn.functional.pad.reflect",  # backward
    "_pool_gather": "nn.functional.max_unpool2d",  # backward
    "_safe_softmax": "nn.functional.scaled_dot_product_attention",
    "_separable_map": "nn.functional.interpolate.bilinear",
    "_to_copy": "double",
    "_view_grad": "as_strided",  # backward
    "adaptive_max_pool1d_with_indices": "nn.functional.adaptive_max_pool1d",
    "adaptive_max_pool2d_with_indices": "nn.functional.adaptive_max_pool2d",
    "adaptive_max_pool3d_with_indices": "nn.functional.adaptive_max_pool3d",
    "adjoint": "mH",
    "as_strided": "as_strided",
    "binary_cross_entropy_op": "nn.functional.binary_cross_entropy",
    "col2im": "nn.functional.unfold",  # backward
    "einsum": "einsum",
    "elu": "nn.functional.elu",
    "embedding": "nn.functional.embedding",
    "embedding_dense_backward": "nn.functional.embedding",  # backward
    "empty_strided": "empty_strided",
    "expand": "expand",
    "gelu_backward": "nn.functional.gelu",  # backward
    "hardsigmoid": "nn.functional.hardsigmoid",
    "hardswish": "nn.functional.hardswish",
    "hardtanh": "nn.functional.hardtanh",
    "im2col": "nn.functional.unfold",
    "index": "__getitem__",
    "leaky_relu": "nn.functional.leaky_relu",
    "linalg_vector_norm": "linalg.vector_norm",
    "max": "max.reduction_with_dim",
    "max_pool1d_with_indices": "nn.functional.max_pool1d",
    "max_pool2d_with_indices": "nn.functional.max_pool2d",
    "max_pool3d_with_indices": "nn.functional.max_pool3d",
    "min": "min.reduction_with_dim",
    "mish": "nn.functional.mish",
    "nll_loss_backward": "nn.functional.nll_loss",  # backward
    "nll_loss_nd": "nn.functional.nll_loss",
    "norm": "norm",
    "polygamma": "polygamma.polygamma_n_1",
    "relu": "nn.functional.relu",
    "repeat": "repeat",
    "silu": "nn.functional.silu",
    "sum_to_size": "sum_to_size",
    "threshold": "nn.functional.threshold",
    "unfold": "unfold",
    "view": "view",
    "where": "where",
}


def _rand(*shape, dtype=F32, seed=0, lo=None):
    a = np.random.default_rng(seed).standard_normal(shape)
    if lo is not None:  # positive values in (lo, lo + 1)
        a = lo + np.abs(a) % 1.0
    return ember.tensor(a.astype(np.float32)).to(dtype)


def _cplx(dt):
    if dt not in (F32, F64):  # no complex32 in ember
        return None
    z = ember.complex(_rand(3, 4, dtype=dt), _rand(3, 4, dtype=dt, seed=1))
    return (z,), {}


F = ember.nn.functional
# op name -> (fn, make(dtype) -> (args, kwargs)); the op is called through ``fn``. Random ops
# are walked here too; their values are compared only for shape and dtype.
def _fused_attention(q, k, v):
    return OPS["_fused_attention"](q, k, v, None, True, 0.5)[0]


def _attention_inputs(dt):
    return (_rand(1, 2, 5, 4, dtype=dt), _rand(1, 2, 6, 4, dtype=dt, seed=1),
            _rand(1, 2, 6, 4, dtype=dt, seed=2)), {}


def _lstm_cell(ig, hg, cx, bi, bh):
    hy, cy, _ = OPS["_thnn_fused_lstm_cell"](ig, hg, cx, bi, bh)
    return hy * 2 + cy


def _gru_cell(ig, hg, hx, bi, bh):
    return OPS["_thnn_fused_gru_cell"](ig, hg, hx, bi, bh)[0]


def _lstm_layer(ig, hx, cx, w):
    out, hy, cy, _, _ = OPS["_lstm_layer"](ig, hx, cx, w, True)
    return out.sum(0) + hy * 2 + cy


def _layer_inputs(dt):
    return (_rand(3, 2, 8, dtype=dt), _rand(2, 2, dtype=dt, seed=1),
            _rand(2, 2, dtype=dt, seed=2), _rand(8, 2, dtype=dt, seed=3)), {}


def _cell_inputs(gates):
    return lambda dt: ((_rand(3, gates * 4, dtype=dt), _rand(3, gates * 4, dtype=dt, seed=1),
                        _rand(3, 4, dtype=dt, seed=2), _rand(gates * 4, dtype=dt, seed=3),
                        _rand(gates * 4, dtype=dt, seed=4)), {})


HAND = {
    "_fused_attention": (_fused_attention, _attention_inputs),
    "_thnn_fused_lstm_cell": (_lstm_cell, _cell_inputs(4)),
    "_thnn_fused_lstm_cell_backward_impl": (_lstm_cell, _cell_inputs(4)),  # backward
    "_thnn_fused_gru_cell": (_gru_cell, _cell_inputs(3)),
    "_thnn_fused_gru_cell_backward": (_gru_cell, _cell_inputs(3)),  # backward
    "_lstm_layer": (_lstm_layer, _layer_inputs),
    "_lstm_layer_backward": (_lstm_layer, _layer_inputs),  # backward
    "_fused_attention_backward": (_fused_attention, _attention_inputs),  # backward
    "_linear_backward": (OPS["_linear_backward"], lambda dt: (
        (_rand(6, 2, dtype=dt), _rand(3, 2, 4, dtype=dt, seed=1), _rand(2, 4, dtype=dt, seed=2),
         True, True), {})),  # eager backward (the compiler captures linear's formula)
    "_norm_backward": (F.layer_norm, lambda dt: (
        (_rand(4, 6, dtype=dt), (6,), _rand(6, dtype=dt, seed=1), _rand(6, dtype=dt, seed=2)),
        {})),  # backward
    "threshold_backward": (F.relu, lambda dt: ((_rand(3, 4, dtype=dt),), {})),  # backward
    "_repeat_interleave_grad": (ember.repeat_interleave,
                                lambda dt: ((_rand(3, 4, dtype=dt), 2), {"dim": 0})),
    "diagonal_backward": (ember.diag, lambda dt: ((_rand(4, 5, dtype=dt),), {"diagonal": 1})),
    "native_batch_norm": (F.batch_norm, lambda dt: (
        (_rand(4, 3, 5, dtype=dt), None, None, _rand(3, dtype=dt), _rand(3, dtype=dt, seed=1)),
        {"training": True})),
    "index_view": (lambda x: x[1:, ::2], lambda dt: ((_rand(4, 6, dtype=dt),), {})),
    "index_view_backward": (lambda x: x[1:, ::2], lambda dt: ((_rand(4, 6, dtype=dt),), {})),
    "cat": (ember.cat, lambda dt: (([_rand(2, 3, dtype=dt), _rand(4, 3, dtype=dt, seed=1)],),
                                   {"dim": 0})),
    "copy": (OPS["copy"], lambda dt: ((_rand(3, 4, dtype=dt), _rand(4, dtype=dt, seed=1)), {})),
    "view_dtype": (lambda x: x.view(ember.int32 if x.dtype.itemsize == 4 else ember.int64
                                    if x.dtype.itemsize == 8 else ember.int16),
                   lambda dt: ((_rand(3, 4, dtype=dt),), {})),
    "range": (lambda: ember.range(0, 5, 0.5), lambda dt: ((), {})),
    "fft_fftfreq": (lambda: ember.fft.fftfreq(5, 0.5), lambda dt: ((), {})),
    "fft_rfftfreq": (lambda: ember.fft.rfftfreq(6, 0.5), lambda dt: ((), {})),
    "imag": (lambda z: ember.imag(z) * 2, lambda dt: _cplx(dt)),
    "view_as_real": (ember.view_as_real, lambda dt: _cplx(dt)),
    # random ops
    "bernoulli": (ember.bernoulli, lambda dt: ((_rand(3, 4, dtype=dt).sigmoid(),), {})),
    "bernoulli_functional": (OPS["bernoulli_functional"],
                             lambda dt: ((_rand(3, 4, dtype=dt),), {"p": 0.3})),
    "cauchy": (OPS["cauchy"], lambda dt: ((_rand(3, 4, dtype=dt),), {})),
    "exponential": (OPS["exponential"], lambda dt: ((_rand(3, 4, dtype=dt),), {})),
    "geometric": (OPS["geometric"], lambda dt: ((_rand(3, 4, dtype=dt), 0.3), {})),
    "log_normal": (OPS["log_normal"], lambda dt: ((_rand(3, 4, dtype=dt),), {})),
    "multinomial": (ember.multinomial, lambda dt: ((_rand(3, 4, dtype=dt, lo=0.1), 2), {})),
    "normal": (ember.normal, lambda dt: ((_rand(3, 4, dtype=dt), _rand(4, dtype=dt, lo=.5)),
                                         {})),
    "normal_functional": (OPS["normal_functional"], lambda dt: ((_rand(3, 4, dtype=dt),), {})),
    "poisson": (ember.poisson, lambda dt: ((_rand(3, 4, dtype=dt, lo=1.0),), {})),
    "rand": (lambda: ember.rand(3, 4), lambda dt: ((), {})),
    "rand_like": (ember.rand_like, lambda dt: ((_rand(3, 4, dtype=dt),), {})),
    "randint": (lambda: ember.randint(0, 10, (3, 4)), lambda dt: ((), {})),
    "randint_like": (ember.randint_like, lambda dt: ((_rand(3, 4, dtype=dt), 0, 10), {})),
    "randn": (lambda: ember.randn(3, 4), lambda dt: ((), {})),
    "randn_like": (ember.randn_like, lambda dt: ((_rand(3, 4, dtype=dt),), {})),
    "random": (OPS["random"], lambda dt: ((_rand(3, 4, dtype=dt), 0, 10), {})),
    "randperm": (lambda: ember.randperm(7), lambda dt: ((), {})),
    "uniform": (OPS["uniform"], lambda dt: ((_rand(3, 4, dtype=dt),), {})),
}
RANDOM = {n for n, d in OPS.items() if "random" in d.tags}

# Ops that are not meaningful to compile on their own.
EXCLUDED = {
    "_to_device": "moves a tensor between devices: a CPU-only run has one device to compile "
                  "for (the compiler's device handling comes with its GPU backend)",
    "_view_take": "only the double backward of _view_grad uses it; double backward through a "
                  "compiled graph is documented as unsupported",
}

# Ops whose output shape or Python result depends on tensor values: a graph break is expected
# (fullgraph=False). Every other op must compile with fullgraph=True.
DATA_DEPENDENT = {
    "allclose": "returns a Python bool computed from the values",
    "equal": "returns a Python bool computed from the values",
    "bincount": "output length is the largest input value + 1",
    "masked_select": "output length is the number of True mask elements",
    "nonzero": "output length is the number of nonzero elements",
    "unique": "output length is the number of distinct values",
    "unique_consecutive": "output length is the number of runs",
    "tensor_split": "OpInfo's first samples split at indices given as a tensor",
    "one_hot": "num_classes=-1 (OpInfo's sample) means the largest value + 1",
}

# Ops whose eager backward rule branches on tensor values, so their backward cannot be one
# static graph: the compiled forward's gradient runs op by op (still compared with eager).
BACKWARD_NEEDS_DATA = {
    "det": "singular matrices take a different formula (tests det == 0)",
    "linalg_eigh": "checks for repeated eigenvalues",
    "linalg_svd": "checks for repeated singular values",
    "masked_scatter": "the gradient of source is masked_select (length = number of Trues)",
}


def _driver(name: str):
    """('opinfo', OpInfo, fn) or ('hand', fn, make) for op ``name``."""
    if name in HAND:
        return ("hand", *HAND[name])
    o, f = _BY_ID[VIA.get(name) or DIRECT[name]]
    return "opinfo", o, f


WALKED = sorted(set(DIRECT) | set(VIA) | set(HAND))


def test_coverage():
    """Every op-table entry is walked, or excluded with a reason; no driver names a non-op."""
    ops = set(OPS)
    assert not set(EXCLUDED) - ops, f"EXCLUDED names non-ops: {set(EXCLUDED) - ops}"
    assert not set(WALKED) - ops, f"drivers for non-ops: {sorted(set(WALKED) - ops)}"
    assert set(WALKED) == ops - set(EXCLUDED), \
        f"op-table entries neither walked nor excluded: {sorted(ops - set(EXCLUDED) - set(WALKED))}"
    assert not set(WALKED) & set(EXCLUDED)
    assert not set(HAND) & set(VIA), "one driver per op"
    # data-dependent ops without a meta rule (one with a meta, repeat_interleave, knows its
    # shape for some arguments and compiles for those)
    tagged = {n for n, d in OPS.items()
              if ("dynamic_shape" in d.tags and d.meta is None) or d.returns == "python"}
    assert tagged <= set(DATA_DEPENDENT), f"untabled: {tagged - set(DATA_DEPENDENT)}"
    missing = {v for v in VIA.values() if v not in _BY_ID}
    assert not missing, f"VIA names OpInfos test_opdb does not run: {missing}"


# ---------------------------------------------------------------------- samples
def _value_free(name: str, drv) -> bool:
    return name in RANDOM or name.startswith("empty") or (
        drv[0] == "opinfo" and drv[1].name in VALUE_FREE)


def _differentiable(drv) -> bool:
    """Whether the driver's function is differentiable (not the op: a backward-only op is
    reached through its forward op's gradient)."""
    return drv[0] == "hand" or drv[1].supports_autograd


def _leaves(args, kw):
    return pytree.flatten((args, kw), ember.Tensor)


def _fresh(leaves, noncontig: bool = False) -> list:
    """New leaf tensors with the same values (and requires_grad); ``noncontig``: each as a
    stride-2 view into a wider buffer."""
    out = []
    for t in leaves:
        rg = t.requires_grad
        t = t.detach()
        if noncontig and t.ndim and t.numel():
            t = ember.stack([t, t], -1).select(-1, 0)
        out.append(t.requires_grad_(rg) if rg else t)
    return out


def _pick(drv, dtype, grad: bool):
    """(fn, args, kwargs) of the first sample eager accepts, preferring an input of >= 2 dims
    (so the non-contiguous variant means something); None when there is none for ``dtype``."""
    if drv[0] == "hand":
        _, fn, make = drv
        made = make(dtype)
        if made is None:
            return None
        args, kw = made
        if grad:
            args, kw = pytree.map_leaves((args, kw), ember.Tensor, lambda t: t.detach()
                                         .requires_grad_(t.dtype.kind in "fc"))
        return fn, args, kw
    _, o, fn = drv
    td = getattr(torch, dtype.name)
    if td not in o.supported_dtypes("cpu"):
        return None
    torch.manual_seed(0)
    try:  # sample_inputs_func directly: OpInfo.sample_inputs walks the stack per call
        samples = list(itertools.islice(o.sample_inputs_func(o, "cpu", td, grad), N_SAMPLES))
    except Exception:  # noqa: BLE001  torch cannot build samples for this dtype
        return None
    usable = []
    for s in samples:
        try:
            args, kw = to_ember((s.input, *s.args)), to_ember(s.kwargs)
            leaves, spec = _leaves(args, kw)
            a, k = pytree.unflatten(spec, _fresh(leaves))
            fn(*a, **k)
        except Exception:  # noqa: BLE001, S112  torch-only objects, or an error sample
            continue
        x = s.input
        big = isinstance(x, torch.Tensor) and x.ndim >= 2 and x.numel() >= 2
        if big:
            return fn, args, kw
        usable.append((fn, args, kw))
    return usable[0] if usable else None


# ---------------------------------------------------------------------- one comparison
def _pre(t):
    return t * 1.5 + 0.25 if t.dtype.is_floating_point else t


def _post(t):
    return t * 2 if t.dtype.kind in "fiu" else t


def _compare(c, e, scale: float, value_free: bool, path: str = "out"):
    if isinstance(e, ember.Tensor):
        assert isinstance(c, ember.Tensor), f"{path}: compiled gave {type(c).__name__}"
        assert tuple(c.shape) == tuple(e.shape), f"{path}: shape {tuple(c.shape)} vs " \
                                                 f"eager {tuple(e.shape)}"
        assert c.dtype is e.dtype, f"{path}: dtype {c.dtype} vs eager {e.dtype}"
        if value_free:
            return
        cn, en = to_numpy(c), to_numpy(e)
        if en.dtype.kind in "fc":
            rtol, atol = TOL[e.dtype.name]
            np.testing.assert_allclose(cn, en, rtol=rtol * scale, atol=atol * scale,
                                       equal_nan=True, err_msg=path)
        else:
            np.testing.assert_array_equal(cn, en, err_msg=path)
    elif isinstance(e, (list, tuple)):
        assert isinstance(c, (list, tuple)) and len(c) == len(e), f"{path}: {c!r} vs {e!r}"
        for k, (a, b) in enumerate(zip(c, e)):
            _compare(a, b, scale, value_free, f"{path}[{k}]")
    elif e is not None:
        same = c == e or (isinstance(e, float) and np.isnan(e) and np.isnan(c))
        assert same, f"{path}: compiled {c!r} vs eager {e!r}"


def _grads(out, ins) -> list | None:
    """Input gradients under a fixed random output gradient (None: nothing to differentiate)."""
    outs = [t for t in pytree.collect(out, ember.Tensor, []) if t.requires_grad]
    wrt = [t for t in ins if t.requires_grad]
    if not outs or not wrt:
        return None
    rng = np.random.default_rng(1)
    gs = [ember.tensor(rng.standard_normal(tuple(t.shape))).to(t.dtype) for t in outs]
    return list(ember.autograd.grad(outs, wrt, gs, allow_unused=True))


def _graph_ops(cf) -> set:
    """Op names in the compiled forward and backward graphs."""
    names = set()
    for e in cf._entries:
        if e.graph is None:
            continue
        graphs = [e.graph]
        bwd = getattr(e.run, "backward", None)
        if getattr(bwd, "graph", None) is not None:
            graphs.append(bwd.graph)
        for g in graphs:
            names |= {n.target.name for n in g.nodes if n.kind == "call"}
    return names


def run_variant(name, sample, variant: str, grad: bool, value_free: bool) -> list[str]:
    """Compile op ``name``'s sample for ``variant`` and compare with eager; failure lines."""
    fn, args, kw = sample
    leaves, spec = _leaves(args, kw)
    graph = variant == "graph"

    def call(*ts):
        a, k = pytree.unflatten(spec, [_pre(t) for t in ts] if graph else list(ts))
        out = fn(*a, **k)
        return pytree.map_leaves(out, ember.Tensor, _post) if graph else out

    def run(f):
        ins = _fresh(leaves, variant == "noncontig")
        ember.manual_seed(0)
        out = f(*ins)
        return out, (_grads(out, ins) if grad else None)

    try:
        want = run(call)
    except Exception as err:  # noqa: BLE001  eager rejects it (e.g. the prologue left the
        want = err            # domain): compiled must reject it the same way
    fails = []
    fullgraph = name not in DATA_DEPENDENT
    for fg in ((True, False) if fullgraph else (False,)):
        cf = ember.compile(call, backend="inductor", fullgraph=fg)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                got = run(cf)
            except Unsupported as err:
                fails.append(f"{variant}: fullgraph=True graph break: {_short(err)}")
                continue
            except Exception as err:  # noqa: BLE001
                got = err
        fails += [f"{variant}: fell back: {_short(w.message)}" for w in caught
                  if "ember.compile" in str(w.message)]
        break
    if isinstance(want, Exception) or isinstance(got, Exception):
        if type(want) is not type(got):
            fails.append(f"{variant}: eager " + (_short(want, True) if isinstance(
                want, Exception) else "ran") + ", compiled " + (_short(got, True) if isinstance(
                    got, Exception) else "ran"))
        return fails
    try:
        _compare(got[0], want[0], 10 if graph else 1, value_free)
        if want[1] is not None or got[1] is not None:
            assert want[1] is not None and got[1] is not None, \
                f"grads: eager {want[1] is not None}, compiled {got[1] is not None}"
            for k, (a, b) in enumerate(zip(got[1], want[1])):
                if b is None or a is None:  # no gradient on one side: zero on the other
                    other = a if b is None else b
                    if other is not None and np.any(to_numpy(other)):
                        who = "eager" if a is None else "compiled"
                        raise AssertionError(f"grad[{k}]: only {who} has a nonzero gradient")
                    continue
                _compare(a, b, 10, value_free and name in RANDOM, f"grad[{k}]")
    except AssertionError as err:
        fails.append(f"{variant}: mismatch: {_short(err)}")
    first = variant in ("f32", "int")
    if first and not fullgraph and all(e.graph is not None for e in cf._entries):
        fails.append(f"{variant}: compiled without a graph break: remove it from DATA_DEPENDENT")
    if first and name in BACKWARD_NEEDS_DATA and grad and \
            any(hasattr(e.run, "backward") for e in cf._entries):
        fails.append(f"{variant}: the backward compiled: remove it from BACKWARD_NEEDS_DATA")
    if first and fullgraph and not fails:
        ops = _graph_ops(cf)
        if name not in ops:
            fails.append(f"{variant}: {name} is not in the compiled graphs (got {sorted(ops)})")
        if grad and any(t.requires_grad for t in leaves) and name not in BACKWARD_NEEDS_DATA \
                and not any(hasattr(e.run, "backward") for e in cf._entries):
            fails.append(f"{variant}: the backward was not compiled (runs op by op)")
    return fails


def _short(x, with_type: bool = False) -> str:
    msg = " ".join(str(x).split())[:400]
    if not with_type:
        return msg
    tb = traceback.extract_tb(x.__traceback__)[-1:] if x.__traceback__ else []
    where = "".join(f" [at {os.path.basename(f.filename)}:{f.lineno} {f.name}]" for f in tb)
    return f"{type(x).__name__}: {msg}{where}"


# ---------------------------------------------------------------------- the walk
VARIANTS = [("f32", F32), ("f64", F64), ("f16", F16), ("bf16", BF16), ("noncontig", F32),
            ("graph", F32)]
INT_DTYPES = (ember.int64, ember.int32, ember.bool, ember.uint8)


def walk(name: str) -> list[str]:
    drv = _driver(name)
    vf, diff = _value_free(name, drv), _differentiable(drv)
    picked: dict = {}

    def sample(dt, grad):
        if (dt, grad) not in picked:
            picked[dt, grad] = _pick(drv, dt, grad)
        return picked[dt, grad]

    variants = [(v, dt, diff and dt in (F32, F64)) for v, dt in VARIANTS]
    if sample(F32, diff) is None:  # an integer/bool op
        dt = next((d for d in INT_DTYPES if sample(d, False) is not None), None)
        if dt is None:
            return ["no usable sample in any dtype"]
        variants = [("int", dt, False), ("noncontig", dt, False), ("graph", dt, False)]
    fails = []
    for variant, dt, grad in variants:
        s = sample(dt, grad)
        if s is not None:
            fails += run_variant(name, s, variant, grad, vf)
    return fails


@pytest.mark.parametrize("name", WALKED)
def test_op_compiled_matches_eager(name):
    fails = walk(name)
    assert not fails, f"{name}:\n" + "\n".join(fails)
