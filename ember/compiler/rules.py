"""Lowering rules for what is not a pointwise definition: copies (``_to_copy``, ``clone``), the
views the compiler turns into index arithmetic, and the reductions and rows ops (sum, var,
softmax, LayerNorm, their backwards), which build multi-phase rows kernels.

Pointwise ops have no rule here: the compiler lowers each from its op's definition over the
scalar primitives (``OpDef.pointwise_defn``; compiler/lower_pointwise.py), the same function
eager numpy interprets.

A rule of ``RULES`` gets the call node, its arguments by parameter name with tensor operands
already as ``Expr``s of the output shape (Python scalars as ``Const``), and the raw graph
arguments. It returns the output ``Expr``, or None when this call cannot be lowered (it then
runs eagerly).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .. import _dtype as D
from .graph import TensorMeta
from .lower import Const, Op, cast, compute_dtype, loads_of
from .lower_pointwise import fresh


def _to_copy(node, a, raw):
    return fresh(cast(a["self"], a["dtype"]))


def _identity(node, a, raw):
    return fresh(a["input"] if "input" in a else a["self"])


RULES: dict[str, Callable] = {"_to_copy": _to_copy, "clone": _identity}

# views lowered as index arithmetic (the output's element order is row-major of the input's)
RESHAPES = frozenset(["view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze"])
PERMUTES = frozenset(["transpose", "permute", "t", "adjoint"])  # adjoint: of a real tensor
# views at an offset: loads of the source buffer starting further on (fusion.slices)
SLICES = frozenset(["split", "unbind", "narrow", "select"])


# ---------------------------------------------------------------------- reductions
# A reduction rule gets the call node, its arguments and a ``Rows`` builder (fusion.py) whose
# ``x`` is the main input in the rows iteration space (kept dims, then one row of the reduced
# elements). It adds reduction phases (``rows.reduce``: sum / prod / max / min over the row,
# giving a per-row ``RowRef``; ``rows.reduce_pair``: welford / max_sumexp / argmax / argmin,
# giving two) and outputs (``rows.scalar_out``: one value per row; ``rows.row_out``: one per
# element). Every check that can refuse comes before the first phase.
def _all_dims(nd: int) -> list:
    return list(range(nd))


def _wrap_dims(dims, nd: int) -> list:
    if nd == 0:
        return []  # dim 0 / -1 of a 0-dim tensor: a reduction over nothing
    return sorted({d + nd if d < 0 else d for d in dims})


def _dim_list(key: str = "dim") -> Callable:
    """``dim`` as PyTorch's reductions read it: None or () reduces everything."""
    def dims(a: dict, shape: tuple) -> list:
        nd = len(shape)
        d = a.get(key)
        if d is None or (isinstance(d, (tuple, list)) and not d):
            return _all_dims(nd)
        return _wrap_dims([d] if isinstance(d, int) else d, nd)
    return dims


def _moment_dims(a: dict, shape: tuple) -> list:
    d = a.get("dim")
    return _dim_list()({"dim": None if isinstance(d, bool) else d}, shape)


def _trailing(a: dict, shape: tuple) -> list:
    nd = len(shape)
    return list(range(nd - len(a["normalized_shape"]), nd))


def _to_size(a: dict, shape: tuple) -> list:
    """sum_to_size: the leading dims, and those where the target size is 1."""
    size = a["size"]
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    lead = len(shape) - len(size)
    return list(range(lead)) + [lead + i for i, n in enumerate(size)
                                if n == 1 and shape[lead + i] != 1]


def _op(prim: str, args: list, dt: D.dtype, label: str = "") -> Op:
    shape = next((x.shape for x in args if not isinstance(x, Const)), ())
    return Op(prim, args, dt, shape, label=label)


def _short(n) -> bool:
    """A row short enough that LANES partial sums in float32 stay as accurate as the eager
    kernel's pairwise float32 sum (each lane adds at most n / 16 terms of one sign)."""
    return isinstance(n, int) and n <= 1 << 12


def _sum(kind: str) -> Callable:
    """sum / mean: a float64 (floats) or int64 accumulator, as wide as the eager kernels'."""
    def build(node, a, rows):
        out = node.meta.dtype
        x = rows.x if a.get("dtype") is None else cast(rows.x, a["dtype"])
        if kind == "mean" and out.kind != "f":
            return None
        acc = D.float64 if out.kind == "f" else D.int64
        s = rows.reduce("sum", x, acc)
        if kind == "mean":
            s = _op("div", [s, Const(rows.n, acc)], acc)
        return rows.scalar_out(node.meta, s)
    return build


def _prod(node, a, rows):
    out = node.meta.dtype
    x = rows.x if a.get("dtype") is None else cast(rows.x, a["dtype"])
    # the accumulator has the eager kernel's type, so overflow to inf happens as there
    acc = compute_dtype(out) if out.kind == "f" else D.int64
    return rows.scalar_out(node.meta, rows.reduce("prod", x, acc))


def _extreme(prim: str) -> Callable:
    """amax / amin / max / min values (NaN propagates). When ``max(x, dim)``'s indices are
    read, one phase finds the value and the index of its first occurrence (a NaN counts as
    the maximum, as in the eager kernel)."""
    def build(node, a, rows):
        metas = node.meta if isinstance(node.meta, tuple) else (node.meta,)
        if len(metas) > 1 and rows.indices_used:
            x = cast(rows.x, compute_dtype(rows.x.dtype))
            v, i = rows.reduce_pair("arg" + prim, x, D.int64)
            return [rows.scalar_out(metas[0], v), rows.scalar_out(metas[1], i)]
        r = rows.reduce(prim, rows.x, compute_dtype(rows.x.dtype))
        buf = rows.scalar_out(metas[0], r)
        return [buf, None] if len(metas) > 1 else buf
    return build


def _arg(prim: str) -> Callable:
    """argmax / argmin: the index of the first extreme in the row (NaN counts as it); over
    all dims the row is the input in row-major order, so the index is the flat one."""
    def build(node, a, rows):
        if rows.x.dtype is D.bool_:  # the eager op refuses bool
            return None
        _, i = rows.reduce_pair(prim, cast(rows.x, compute_dtype(rows.x.dtype)), D.int64)
        return rows.scalar_out(node.meta, i)
    return build


def _correction(a: dict) -> int:
    unbiased, corr = a.get("unbiased"), a.get("correction")
    if isinstance(a.get("dim"), bool):
        unbiased = a["dim"]
    if corr is None:
        corr = 0 if unbiased is False else 1
    return corr


def _moments(outputs: str) -> Callable:
    """var / std / var_mean / std_mean in one pass over the row: Welford's mean and sum of
    squared deviations (M2) in float64, stable for a large mean and a small spread, with
    PyTorch's divisor max(0, N - correction)."""
    def build(node, a, rows):
        metas = node.meta if isinstance(node.meta, tuple) else (node.meta,)
        out = metas[0].dtype
        if out.kind != "f" or rows.x.dtype.kind != "f":
            return None
        c = compute_dtype(out)
        dof = Const(max(0, rows.n - _correction(a)), D.float64)
        mean, m2 = rows.reduce_pair("welford", cast(rows.x, D.float64), D.float64)
        spread = cast(_op("div", [m2, dof], D.float64, "var"), c)
        if outputs.startswith("std"):
            spread = _op("sqrt", [spread], c, "std")
        first = rows.scalar_out(metas[0], spread)
        if len(metas) == 1:
            return first
        return [first, rows.scalar_out(metas[1], cast(mean, c))]
    return build


# Row length from which softmax finds its max and sum of exp in one blocked pass (online)
# rather than two; None: never. Measured on one core of this machine (AMD EPYC, 1 MB L2,
# 32 MB L3, float32, the kernel alone): the max pass over a row costs little next to exp,
# which online softmax computes twice (sum, row pass), so it ran 1.27-1.40x slower than the
# three passes on 64x262144, 4x4M and 1x16M rows, and log_softmax (one exp either way) ran
# even (16.8 vs 16.5 ms on 64x262144). Set a length where memory, not exp, bounds softmax.
ONLINE_SOFTMAX_MIN: int | None = None


def _online(rows) -> bool:
    """A row long enough that reading it once fewer pays for the rescaling and the second
    exp; unit-stride rows only, so the kernel runs in rows mode (a column-mode softmax keeps
    three passes)."""
    return ONLINE_SOFTMAX_MIN is not None and isinstance(rows.n, int) and \
        rows.n >= ONLINE_SOFTMAX_MIN and any(ld.strides[-1] == 1 for ld in loads_of(rows.x))


def _softmax(kind: str) -> Callable:
    """max, sum of exp(x - max), then the row: three passes over a row that stays in cache,
    or two (the max and the sum online in one) from rows of ONLINE_SOFTMAX_MIN."""
    def build(node, a, rows):
        out = node.meta.dtype
        if out.kind != "f":
            return None
        c = compute_dtype(out)
        x = rows.x if a.get("dtype") is None else cast(rows.x, a["dtype"])
        x = cast(x, c)
        online = _online(rows)
        if online:
            m, s = rows.reduce_pair("max_sumexp", x, D.float64)
        else:
            m = rows.reduce("max", x, c)
        z = _op("sub", [x, m], c)
        e = _op("exp", [z], c)
        if not online:
            s = rows.reduce("sum", e, c if _short(rows.n) else D.float64)
        s = cast(s, c)
        if kind == "log":
            r = _op("sub", [z, _op("log", [s], c)], c, "log_softmax")
        else:
            # times 1 / sum, as PyTorch's CPU kernel rounds it (a division per element ran
            # ~1.1x slower on 4096 rows of 1024)
            r = _op("mul", [e, _op("div", [Const(1, c), s], c)], c, "softmax")
            if kind == "safe":  # rows of -inf only give zeros, not NaN
                r = _op("where", [_op("eq", [m, Const(-math.inf, c)], D.bool_),
                                  Const(0, c), r], c)
        return rows.row_out(node.meta, r)
    return build


def _norm(center: bool) -> Callable:
    """native_layer_norm (y, mean, rstd) / _fused_rms_norm (y, rstd) in one kernel: the mean
    (a float64 sum: its error would shift every output), the centred sum of squares (in the
    compute dtype over short rows, where its error only scales the outputs by a few ulp;
    widening it too made 4096x1024 1.2x slower, at the same accuracy), 1 / sqrt(var + eps),
    then x̂ * w + b in the row pass. A row normalised over a few thousand elements stays in
    cache, so its second pass costs less than Welford's update: measured on 4096x1024
    float32, two passes take 0.88 ms and Welford 0.98-1.04 ms (var / std, whose rows may be
    any length, use Welford)."""
    def build(node, a, rows):
        metas = node.meta
        c = compute_dtype(metas[0].dtype)
        if c.kind != "f":
            return None
        n = Const(rows.n, D.float64)
        if center:
            xc = cast(rows.x, c)
            mean = cast(_op("div", [rows.reduce("sum", xc, D.float64), n], D.float64), c)
            d = _op("sub", [xc, mean], c)
        else:
            d = cast(rows.x, c)
        m2 = rows.reduce("sum", _op("mul", [d, d], c), c if _short(rows.n) else D.float64)
        var = cast(_op("div", [m2, n], D.float64), c)
        rstd = _op("reciprocal", [_op("sqrt", [_op("add", [var, Const(a["eps"], c)], c)], c)],
                   c)
        y = _op("mul", [d, rstd], c, "layer_norm" if center else "rms_norm")
        if rows.args.get("weight") is not None:
            y = _op("mul", [y, cast(rows.args["weight"], c)], c)
        if rows.args.get("bias") is not None:
            y = _op("add", [y, cast(rows.args["bias"], c)], c)
        bufs = [rows.row_out(metas[0], y)]
        if center:
            bufs.append(rows.scalar_out(metas[1], mean))
        bufs.append(rows.scalar_out(metas[-1], rstd))
        return bufs
    return build


def _softmax_backward(kind: str) -> Callable:
    """softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g), as the eager kernels."""
    def build(node, a, rows):
        out = node.meta.dtype
        if out.kind != "f":
            return None
        c = compute_dtype(out)
        g, y = cast(rows.x, c), cast(rows.args["output"], c)
        acc = c if _short(rows.n) else D.float64
        if kind == "log":
            s = cast(rows.reduce("sum", g, acc), c)
            r = _op("sub", [g, _op("mul", [_op("exp", [y], c), s], c)], c,
                    "log_softmax_backward")
        else:
            s = cast(rows.reduce("sum", _op("mul", [g, y], c), acc), c)
            r = _op("mul", [_op("sub", [g, s], c), y], c, "softmax_backward")
        return rows.row_out(node.meta, r)
    return build


def _layer_layout(a: dict, shape: tuple) -> list | None:
    """_norm_backward's statistics dims when they are the trailing ones and the parameters'
    the rest (layer / RMS norm), else None (batch norm's layout runs eagerly)."""
    stat, param = tuple(a["stat_dims"]), tuple(a["param_dims"])
    k, nd = len(stat), len(shape)
    if stat != tuple(range(nd - k, nd)) or param != tuple(range(nd - k)) or not k:
        return None
    return list(stat)


def _norm_backward(node, a, rows):
    """(grad_input, grad_weight, grad_bias) of layer / RMS norm: the input gradient in one rows
    kernel over the normalised dims, the parameter gradients in one column kernel over the
    batch dims; operations in the eager kernel's order."""
    metas = node.meta
    need = a["needs"]
    if any(need[i] and not isinstance(metas[i], TensorMeta) for i in range(3)) or \
            metas[0].dtype.kind != "f":
        return None
    c = compute_dtype(metas[0].dtype)
    cols = rows.over(list(a["param_dims"])) if need[1] or need[2] else None
    out: list = [None, None, None]
    for r, part in ((rows, "x"), (cols, "params")):
        if r is None or (part == "x" and not need[0]):
            continue
        g, x = cast(r.x, c), cast(r.args["input"], c)
        rstd, w, mean = (cast(r.args[p], c) if r.args.get(p) is not None else None
                         for p in ("rstd", "weight", "mean"))
        xhat = _op("mul", [_op("sub", [x, mean], c) if mean is not None else x, rstd], c)
        if part == "params":
            if need[1]:
                out[1] = r.scalar_out(metas[1], r.reduce("sum", _op("mul", [g, xhat], c),
                                                         D.float64))
            if need[2]:
                out[2] = r.scalar_out(metas[2], r.reduce("sum", g, D.float64))
            continue
        gh = _op("mul", [g, w], c) if w is not None else g
        n = Const(r.n, c)
        c2 = cast(r.reduce("sum", _op("mul", [gh, xhat], c), D.float64), c)
        if mean is not None:  # r gh - xhat (sum(gh xhat) r / n) - mean(gh) r
            c2 = _op("mul", [c2, _op("div", [rstd, n], c)], c)
            c1 = _op("mul", [cast(_op("div", [r.reduce("sum", gh, D.float64),
                                              Const(r.n, D.float64)], D.float64), c), rstd], c)
            gx = _op("sub", [_op("sub", [_op("mul", [gh, rstd], c),
                                         _op("mul", [xhat, c2], c)], c), c1], c)
        else:  # (gh - xhat mean(gh xhat)) r
            c2 = _op("div", [c2, n], c)
            gx = _op("mul", [_op("sub", [gh, _op("mul", [xhat, c2], c)], c), rstd], c)
        gx.label = "norm_backward"
        out[0] = r.row_out(metas[0], gx)
    return out


class Reduction:
    """How to lower one reduction op: which dims it reduces, its main tensor argument (the
    one whose layout picks the rows), the other tensor arguments it reads per element, and
    the builder."""

    def __init__(self, dims: Callable, build: Callable, extra: tuple = (), main: str = "input"):
        self.dims, self.build, self.extra, self.main = dims, build, extra, main


REDUCTIONS: dict[str, Reduction] = {
    "sum": Reduction(_dim_list(), _sum("sum")),
    "mean": Reduction(_dim_list(), _sum("mean")),
    "prod": Reduction(_dim_list(), _prod),
    "sum_to_size": Reduction(_to_size, _sum("sum")),
    "amax": Reduction(_dim_list(), _extreme("max")),
    "amin": Reduction(_dim_list(), _extreme("min")),
    "max": Reduction(_dim_list(), _extreme("max")),
    "min": Reduction(_dim_list(), _extreme("min")),
    "argmax": Reduction(_dim_list(), _arg("argmax")),
    "argmin": Reduction(_dim_list(), _arg("argmin")),
    "var": Reduction(_moment_dims, _moments("var")),
    "std": Reduction(_moment_dims, _moments("std")),
    "var_mean": Reduction(_moment_dims, _moments("var_mean")),
    "std_mean": Reduction(_moment_dims, _moments("std_mean")),
    "softmax": Reduction(_dim_list(), _softmax("plain")),
    "_safe_softmax": Reduction(_dim_list(), _softmax("safe")),
    "log_softmax": Reduction(_dim_list(), _softmax("log")),
    "native_layer_norm": Reduction(_trailing, _norm(True), ("weight", "bias")),
    "_fused_rms_norm": Reduction(_trailing, _norm(False), ("weight",)),
    "_norm_backward": Reduction(_layer_layout, _norm_backward,
                                ("input", "mean", "rstd", "weight"), "grad"),
    "_softmax_backward_data": Reduction(_dim_list(), _softmax_backward("plain"), ("output",),
                                        "grad_output"),
    "_log_softmax_backward_data": Reduction(_dim_list(), _softmax_backward("log"), ("output",),
                                            "grad_output"),
}

# library calls (BLAS through numpy) whose ``bias`` add is generated into the next kernel
EPILOGUE_BIAS = frozenset(["linear"])
