"""``ember.utils.flop_counter.FlopCounterMode``: count the floating-point operations of the
matrix products, convolutions and attention a region runs, as PyTorch counts them.

Inside ``with FlopCounterMode() as fc:`` each op-table call of the thread passes the
"flop_counter" interposer (``ember/_dispatch.py``); an op with a formula here adds its count
(2 per multiply-add) under "Global" and under each module whose forward is running (module
names as PyTorch's ModuleTracker gives them: the outer module's class name, then
``.child`` per level); backward calls count under the modules whose outputs have their
gradient and whose inputs not yet (gradient hooks, as the tracker's).

ember's ops are counted where PyTorch counts the aten op they amount to: mm, addmm, bmm,
baddbmm; matmul and linear of operands with two or more dimensions (PyTorch folds those into
mm/bmm; its mv and dot, the vector products, count 0); the convolutions and their two
backward ops; the fused attention and its backward (with the recomputation of the scores,
as PyTorch's formula). The dict keys are the op-table entries (``ember.mm``; PyTorch's are
``torch.ops.aten.mm``).
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict

from .._dispatch import redispatch, set_interposer
from .._tensor import Tensor
from ..ops.registry import OPS

__all__ = ["FlopCounterMode", "register_flop_formula", "get_flop_counts_formulas"]

_suffixes = ["", "K", "M", "B", "T"]


def _prod(xs) -> int:
    return math.prod(int(x) for x in xs)


def _mm(a, b, out):
    return 2 * a[0] * a[1] * b[1]


def _bmm(a, b, out):
    return 2 * a[0] * a[1] * a[2] * b[2]


def _matmul(a, b, out):
    if len(a) < 2 or len(b) < 2:
        return 0  # matrix-vector and dot products (PyTorch's mv / dot: no formula)
    return 2 * _prod(out) * a[-1]


def _linear(x, w, out):
    return 0 if len(x) < 2 else 2 * _prod(out) * x[-1]


def _conv(x, w, out):
    return 2 * x[0] * _prod(out[2:]) * _prod(w)


def _conv_transpose(x, w, out):
    return 2 * x[0] * _prod(x[2:]) * _prod(w)


def _conv_weight_grad(x, g, out):
    # PyTorch's grad_weight formula: the convolution of x^T with grad_out^T
    return 2 * _prod(out[2:]) * _prod(g[2:]) * x[1] * g[1] * x[0]


def _attention(q, k, v):
    """(batch * query heads, query length, key length, query dim, value dim)."""
    return _prod(q[:-2]), q[-2], k[-2], q[-1], v[-1]


def _sdpa(q, k, v, out):
    bh, sq, sk, dq, dv = _attention(q, k, v)
    return 2 * bh * sq * sk * dq + 2 * bh * sq * sk * dv


def _sdpa_backward(g, q, k, v, out):
    bh, sq, sk, dq, dv = _attention(q, k, v)
    # the scores again, then grad of scores, of v, of q, of k
    return 2 * bh * (sq * dq * sk + sq * dv * sk + sk * sq * dv + sq * sk * dq + sk * sq * dq)


# op name -> (formula over the shapes of the named tensor arguments and of the output,
# the names of those arguments)
_FORMULAS = {
    "mm": (_mm, ("input", "mat2")),
    "addmm": (lambda m1, m2, out: _mm(m1, m2, out), ("mat1", "mat2")),
    "bmm": (_bmm, ("input", "mat2")),
    "baddbmm": (lambda b1, b2, out: _bmm(b1, b2, out), ("batch1", "batch2")),
    "matmul": (_matmul, ("input", "other")),
    "linear": (_linear, ("input", "weight")),
    **{f"conv{n}d": (_conv, ("input", "weight")) for n in (1, 2, 3)},
    **{f"conv_transpose{n}d": (_conv_transpose, ("input", "weight")) for n in (1, 2, 3)},
    "_conv_nd": (_conv, ("input", "weight")),
    "_conv_transpose_nd": (_conv_transpose, ("input", "weight")),
    "_conv_weight_grad": (_conv_weight_grad, ("input", "grad_output")),
    "_fused_attention": (_sdpa, ("query", "key", "value")),
    "_fused_attention_backward": (_sdpa_backward, ("grad_out", "query", "key", "value")),
}


def get_flop_counts_formulas() -> dict:
    """{op-table entry: formula} of the ops counted."""
    return {OPS[name]: f for name, (f, _) in _FORMULAS.items() if name in OPS}


def register_flop_formula(targets, get_raw=False):
    """Decorator: count ``targets`` (op-table entries) with the decorated formula, called as
    ``formula(*arg_shapes, out_shape=...)`` (or on the values themselves with ``get_raw``)."""
    targets = targets if isinstance(targets, (list, tuple)) else [targets]

    def register(fn):
        for t in targets:
            _CUSTOM[t] = (fn, get_raw)
        return fn
    return register


_CUSTOM: dict = {}


def _shape(x):
    if isinstance(x, Tensor):
        return tuple(x.shape)
    if isinstance(x, (list, tuple)):
        return type(x)(_shape(v) for v in x)
    return x


def _argument(op, args, kwargs, name):
    i = op.param_index.get(name)
    if i is None:
        return None
    if i < len(args):
        return args[i]
    return kwargs.get(name)


class FlopCounterMode:
    """``with FlopCounterMode(display=False) as fc:`` ... ``fc.get_total_flops()``."""

    def __init__(self, mods=None, depth: int = 2, display: bool = True,
                 custom_mapping: dict | None = None):
        self.flop_counts: dict = defaultdict(lambda: defaultdict(int))
        self.depth = depth
        self.display = display
        if mods is not None:
            warnings.warn("mods argument is not needed anymore, you can stop passing it",
                          stacklevel=2)
        self.custom = dict(custom_mapping or {})
        self._parents = ["Global"]
        self._names: dict = {}
        self._prev = None
        self._handles: list = []

    # results
    def get_total_flops(self) -> int:
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self) -> dict:
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth=None) -> str:
        depth = self.depth if depth is None else depth
        if depth is None:
            depth = 999999
        total = self.get_total_flops()
        suffix = _suffixes[max(0, min(len(_suffixes) - 1, (len(str(total)) - 2) // 3))]
        scale = 1000 ** _suffixes.index(suffix)

        def pct(n):
            return "0%" if total == 0 else f"{n / total:.2%}"

        def rows_of(mod, pad):
            counts = self.flop_counts[mod]
            n = sum(counts.values())
            rows = [[" " * pad + mod, f"{n / scale:.3f}{suffix}", pct(n)]]
            rows += [[" " * pad + " - " + _op_label(k), f"{v / scale:.3f}{suffix}", pct(v)]
                     for k, v in counts.items()]
            return rows, n
        rows, subsumed = [], False
        for mod in sorted(self.flop_counts):
            if mod == "Global" or mod.count(".") + 1 > depth:
                continue
            r, n = rows_of(mod, mod.count("."))
            subsumed |= n >= total
            rows += r
        if "Global" in self.flop_counts and not subsumed:
            rows = rows_of("Global", 0)[0] + [[" " + r[0], r[1], r[2]] for r in rows]
        if not rows:
            rows = [["Global", "0", "0%"]]
        header = ["Module", "FLOP", "% Total"]
        w = [max(len(str(r[i])) for r in rows + [header]) for i in range(3)]
        lines = [f"{header[0]:<{w[0]}}  {header[1]:>{w[1]}}  {header[2]:>{w[2]}}",
                 f"{'-' * w[0]}  {'-' * w[1]}  {'-' * w[2]}"]
        lines += [f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:>{w[2]}}" for r in rows]
        return "\n".join(lines)

    # counting
    def _handle(self, op, args, kwargs, mode):
        out = redispatch("flop_counter", op, args, kwargs, mode)
        n = self._count(op, args, kwargs, out)
        if n:
            for p in set(self._parents):
                self.flop_counts[p][op] += n
        return out

    def _count(self, op, args, kwargs, out) -> int:
        custom = self.custom.get(op) or _CUSTOM.get(op)
        if custom is not None:
            fn, raw = custom if isinstance(custom, tuple) else (custom, False)
            if raw:
                return fn(*args, **kwargs, out_val=out)
            return fn(*_shape(args), **_shape(kwargs), out_shape=_shape(out))
        entry = _FORMULAS.get(op.name)
        if entry is None:
            return 0
        fn, names = entry
        shapes = [_shape(_argument(op, args, kwargs, n)) for n in names]
        res = out[0] if isinstance(out, tuple) else out
        return int(fn(*shapes, _shape(res)))

    # module names, as PyTorch's ModuleTracker gives them
    def _pre(self, mod, inputs):
        name = self._names.get(mod) or type(mod).__name__
        self._names[mod] = name
        for child_name, child in mod.named_children():
            self._names.setdefault(child, f"{name}.{child_name}")
        self._parents.append(name)
        self._on_grads(inputs, self._pop, name)  # backward leaves the module at its inputs

    def _post(self, mod, inputs, output):
        name = self._names.get(mod)
        self._pop(name)
        self._on_grads(output, self._push, name)  # and enters it at its outputs

    def _push(self, name):
        self._parents.append(name)

    def _pop(self, name):
        if name in self._parents:
            k = len(self._parents) - 1 - self._parents[::-1].index(name)
            del self._parents[k]

    def _on_grads(self, tensors, fn, name):
        """Call ``fn(name)`` once, when the first of ``tensors`` that require grad gets its
        gradient in a backward pass."""
        ts = [t for t in (tensors if isinstance(tensors, (tuple, list)) else (tensors,))
              if isinstance(t, Tensor) and t.requires_grad]
        if not ts:
            return
        state = {"done": False}

        def hook(grad):
            if not state["done"]:
                state["done"] = True
                fn(name)
        for t in ts:
            self._handles.append(t.register_hook(hook))

    def __enter__(self):
        from ..nn.modules import module as _module
        self.flop_counts.clear()
        self._parents = ["Global"]
        self._names = {}
        self._handles = [_module.register_module_forward_pre_hook(self._pre),
                         _module.register_module_forward_hook(self._post)]
        self._prev = set_interposer("flop_counter", self._handle)
        return self

    def __exit__(self, *exc):
        set_interposer("flop_counter", self._prev)
        self._prev = None
        for h in self._handles:
            h.remove()
        self._handles = []
        if self.display:
            print(self.get_table(self.depth))
        return False


def _op_label(op) -> str:
    return f"aten.{op.name}" if hasattr(op, "name") else str(op)
