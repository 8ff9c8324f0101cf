"""Guards: what a compiled graph assumed about its call, checked before each reuse.

A call is summarised as a flat list of values: the argument structure (container types,
lengths, dict keys), each tensor argument's dtype/shape/strides/requires_grad, each Python
scalar's value, the identity of other objects, grad mode, the default dtype and the training
flags of the compiled module. An entry matches a call when the lists are equal (one C-level
comparison); on a miss, the first unequal value, named by ``guard_names``, is the recompile
reason. Lifted tensors (parameters, buffers, globals) are checked the same way at call time.

An entry compiled with symbolic sizes (dynamic shapes) is checked by a ``DynamicGuard``
instead: the same values except the sizes/strides of its dynamic tensors, plus the shape
environment's guards over the sizes.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ..backends.cpu import _root
from ..autograd.grad_mode import state as _grad_state

_SCALARS = (bool, int, float, complex, str, bytes, type(None), D.dtype)
_TooHard = getattr(np, "exceptions", np).TooHardError


def tensor_key(t: Tensor) -> tuple:
    a = t._data
    # a view's storage offset is guarded too (as_strided reads it); a base array's is 0
    return (t._dtype, a.shape, a.strides, t._leaf_rg or t.grad_fn is not None,
            0 if a.base is None else t.storage_offset())


def _walk(x: Any, path: str, out: list, names: list | None) -> None:
    """Append one guard value per tensor, scalar, container and other object in ``x``
    (and its readable name, when ``names`` is given)."""
    if isinstance(x, Tensor):
        v: Any = tensor_key(x)
    elif isinstance(x, _SCALARS):
        v = (type(x), x)
    elif isinstance(x, (tuple, list)):
        out.append((type(x), len(x)))
        if names is not None:
            names.append(f"{path} length")
        for i, item in enumerate(x):
            _walk(item, f"{path}[{i}]", out, names)
        return
    elif type(x) is dict:
        out.append((dict, tuple(x)))
        if names is not None:
            names.append(f"{path} keys")
        for k, item in x.items():
            _walk(item, f"{path}[{k!r}]", out, names)
        return
    else:
        v = (type(x), id(x))
    out.append(v)
    if names is not None:
        names.append(f"{'tensor' if isinstance(x, Tensor) else 'value'} {path}")


def map_ints(x: Any, fn, path: str = "args") -> Any:
    """``x`` with each Python int (not bool) ``v`` found where ``_walk`` finds scalars
    replaced by ``fn(path, v)``; the ints are visited in guard order."""
    if type(x) is int:
        return fn(path, x)
    if isinstance(x, (tuple, list)) and not isinstance(x, Tensor):
        items = [map_ints(v, fn, f"{path}[{i}]") for i, v in enumerate(x)]
        if type(x) in (tuple, list):
            return type(x)(items)
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    if type(x) is dict:
        return {k: map_ints(v, fn, f"{path}[{k!r}]") for k, v in x.items()}
    return x


def int_leaves(args: tuple, kwargs: dict) -> list[tuple[str, int]]:
    """``(path, value)`` of each Python int argument, in guard order."""
    out: list = []
    map_ints(args, lambda p, v: out.append((p, v)), "args")
    map_ints(kwargs, lambda p, v: out.append((p, v)), "kwargs")
    return out


def int_positions(gv: list, count: int) -> list[int]:
    """The guard-value positions of the first ``count`` Python ints (the arguments')."""
    out = [i for i, v in enumerate(gv) if type(v) is tuple and len(v) == 2 and v[0] is int]
    return out[:count]


def free_variables(fn: Any) -> list[tuple[str, Any]]:
    """The closure cells and module globals ``fn``'s own code reads, as (name, source) pairs
    (a cell, or a ``(globals dict, name)`` pair). Their values are guarded like arguments:
    rebinding a captured scalar or tensor recompiles rather than reusing a stale graph."""
    f = getattr(fn, "__func__", fn)
    code = getattr(f, "__code__", None)
    if code is None:
        return []
    out: list[tuple[str, Any]] = [(f"closure variable {n!r}", c)
                                  for n, c in zip(code.co_freevars, f.__closure__ or ())]
    g = f.__globals__
    out += [(f"global {n!r}", (g, n)) for n in code.co_names if n in g]
    return out


def _free_value(src: Any) -> Any:
    if isinstance(src, tuple):
        v = src[0].get(src[1])
    else:
        try:
            v = src.cell_contents
        except ValueError:  # an empty cell
            return None
    return (type(v), v) if isinstance(v, _SCALARS) else (type(v), id(v))


def _module_key(m) -> tuple:
    return (tuple(s.training for s in m.modules()),
            tuple(id(t) for t in m.parameters()), tuple(id(t) for t in m.buffers()))


def call_guards(args: tuple, kwargs: dict, modules: list, free: list) -> list:
    """The guard values of one call (see the module docstring); compared with ``==``."""
    out: list = []
    _walk(args, "args", out, None)
    _walk(kwargs, "kwargs", out, None)
    out.append(_grad_state.enabled)
    out.append(D.get_default_dtype())
    for m in modules:
        out.append(_module_key(m))
    for _, src in free:
        out.append(_free_value(src))
    return out


def guard_names(args: tuple, kwargs: dict, modules: list, free: list) -> list[str]:
    """The readable name of each value ``call_guards`` returns (for recompile reasons)."""
    names: list[str] = []
    _walk(args, "args", [], names)
    _walk(kwargs, "kwargs", [], names)
    names += ["grad mode", "default dtype"]
    names += [f"module {type(m).__name__} (training flags, parameter and buffer identity)"
              for m in modules]
    names += [n for n, _ in free]
    return names


def first_mismatch(expected: list, actual: list, names: list[str]) -> str | None:
    """A readable reason for the first guard that fails, or None when all pass."""
    if expected == actual:
        return None
    for name, e, a in zip(names, expected, actual):
        if e != a:
            return f"{name}: expected {_fmt(e)}, actual {_fmt(a)}"
    return "argument structure changed"


def lifted_mismatch(tensors: list[Tensor], keys: list[tuple]) -> str | None:
    for i, (t, k) in enumerate(zip(tensors, keys)):
        now = tensor_key(t)
        if now != k:
            return f"lifted tensor c{i}: expected {_fmt(k)}, actual {_fmt(now)}"
    return None


def _fmt(v: Any) -> str:
    if isinstance(v, tuple) and len(v) == 5 and isinstance(v[0], D.dtype):
        st = tuple(s // max(v[0].itemsize, 1) for s in v[2])
        off = f" storage_offset={v[4]}" if v[4] else ""
        return f"{v[0].name}{list(v[1])} strides={st}{off} requires_grad={v[3]}"
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], type):
        return f"{v[0].__name__} {v[1]!r}"
    return repr(v)


# ---------------------------------------------------------------------- dynamic entries
def stride_order(strides: tuple) -> tuple:
    """Dimensions from outermost to innermost by stride (ties: the later dim is inner)."""
    return tuple(sorted(range(len(strides)), key=lambda d: (-strides[d], d)))


def dense_strides(shape: tuple, order: tuple) -> tuple:
    """Strides of a dense layout of ``shape`` whose dims nest as ``order`` (outer first);
    works on symbolic sizes."""
    out: list = [0] * len(shape)
    acc: Any = 1
    for d in reversed(order):
        out[d] = acc
        acc = acc * shape[d]
    return tuple(out)


def dense_order(t: Tensor) -> tuple | None:
    """The nesting order of ``t``'s dims when ``t`` is dense in it (contiguous, transposed,
    permuted), else None: only such tensors get symbolic strides."""
    st = t.stride()
    order = stride_order(st)
    if any(n <= 1 for n in t.shape) and not t.is_contiguous():
        return None  # size-0/1 dims make the order ambiguous
    if dense_strides(tuple(t.shape), order) != tuple(st):
        return None
    return order


class DynamicGuard:
    """The guard of an entry compiled with symbolic sizes: the call's guard values equal the
    entry's except the dynamic tensors', which need the same dtype, rank, static sizes,
    requires_grad and a dense layout in the same dim order; the symbols (read from those
    sizes) satisfy the shape environment's ranges and recorded guards, and the graph's
    fitted sizes are re-checked once per new set of sizes."""

    def __init__(self, guard_values: list, tensor_specs: dict, env, revalidate,
                 int_specs: dict | None = None):
        """``tensor_specs``: flat tensor index -> (symbolic shape, dim order); ``int_specs``:
        guard position of a Python int argument -> the symbol it is (automatic dynamic)."""
        int_specs = int_specs or {}
        positions = [i for i, v in enumerate(guard_values)
                     if isinstance(v, tuple) and len(v) == 5 and isinstance(v[0], D.dtype)]
        self.env = env
        self.patterns = {}
        for flat, (shape, order) in tensor_specs.items():
            pos = positions[flat]
            dt, _, _, rg, _ = guard_values[pos]
            static = tuple(None if not isinstance(n, int) else n for n in shape)
            self.patterns[pos] = (dt, static, order, rg)
        self.ints = {pos: s.as_symbol() for pos, s in int_specs.items()}
        self.static_pos = [i for i in range(len(guard_values))
                           if i not in self.patterns and i not in self.ints]
        self.expected = guard_values
        sources: dict = {}
        for flat, (shape, _) in tensor_specs.items():
            for d, n in enumerate(shape):
                s = n.as_symbol() if not isinstance(n, int) else None
                if s is not None and s not in sources:
                    sources[s] = (positions[flat], d)
        for pos, s in self.ints.items():
            sources.setdefault(s, (pos, None))
        self.sources = [sources.get(s) for s in env.symbols]
        self.check = env.check_function()
        self.revalidate = revalidate
        self.validated: dict[tuple, str | None] = {}
        # the per-call fast path (``ok``): static values compared in one C-level step
        self._static_vals = tuple(guard_values[i] for i in self.static_pos)
        self._get_static = (lambda gv: tuple(gv[i] for i in self.static_pos)) \
            if len(self.static_pos) < 2 else None
        if len(self.static_pos) >= 2:
            self._get_static = operator.itemgetter(*self.static_pos)
        self._fast = [(pos, dt, len(st), [(d, n) for d, n in enumerate(st) if n is not None],
                       order, rg) for pos, (dt, st, order, rg) in self.patterns.items()]

    def ok(self, gv: list) -> bool:
        """``mismatch(gv) is None``, faster (called on every call of the entry)."""
        if len(gv) != len(self.expected) or self._get_static(gv) != self._static_vals:
            return False
        for pos in self.ints:
            if gv[pos][0] is not int:  # an argument's guard value is a tuple, type first
                return False
        for pos, dt, nd, fixed, order, rg in self._fast:
            v = gv[pos]
            if type(v) is not tuple or len(v) != 5 or v[0] is not dt or v[3] != rg:
                return False
            shape, strides = v[1], v[2]
            if len(shape) != nd or any(shape[d] != n for d, n in fixed):
                return False
            acc = dt.itemsize
            for d in reversed(order):
                if strides[d] != acc:
                    return False
                acc *= shape[d]
        vals = self.bindings(gv)
        if vals and not self.check(*vals):
            return False
        bad = self.validated.get(vals, False)
        if bad is False:
            return self.mismatch(gv) is None
        return bad is None

    def bindings(self, gv: list) -> tuple | None:
        vals = []
        for s, src in zip(self.env.symbols, self.sources):
            if src is None:
                vals.append(s.hint)
            else:
                v = gv[src[0]][1]
                vals.append(v if src[1] is None else v[src[1]])
        return tuple(vals)

    def mismatch(self, gv: list, names: list[str] | None = None) -> str | None:
        """None when the entry serves this call, else the first failing guard."""
        if len(gv) != len(self.expected):
            return "argument structure changed"
        exp = self.expected
        for i in self.static_pos:
            if gv[i] != exp[i]:
                return first_mismatch([exp[i]], [gv[i]], [names[i] if names else f"guard {i}"])
        for pos in self.ints:
            if gv[pos][0] is not int:
                name = names[pos] if names else "a dynamic int"
                return f"{name}: expected an int, actual {_fmt(gv[pos])}"
        for pos, (dt, static, order, rg) in self.patterns.items():
            v = gv[pos]
            name = names[pos] if names else "a dynamic tensor"
            if not (isinstance(v, tuple) and len(v) == 5 and v[0] is dt and v[3] == rg
                    and len(v[1]) == len(static)):
                return f"{name}: expected {dt.name} rank {len(static)} requires_grad={rg}, " \
                       f"actual {_fmt(v)}"
            for d, (n, m) in enumerate(zip(static, v[1])):
                if n is not None and n != m:
                    return f"{name} size mismatch at index {d}. expected {n}, actual {m}"
            el = max(dt.itemsize, 1)
            if dense_strides(v[1], order) != tuple(s // el for s in v[2]):
                return f"{name}: not dense in the compiled layout (strides {v[2]})"
        vals = self.bindings(gv)
        if vals and not self.check(*vals):
            env = self.env
            for g in env.all_guards():
                ok = eval(g, {s.name: x for s, x in zip(env.symbols, vals)})
                if not ok:
                    where = ", ".join(f"{s.name}={x} ({s.source})" for s, x in
                                      zip(env.symbols, vals))
                    return f"shape guard {g} failed with {where}"
            return "shape guards failed"
        if vals not in self.validated:
            if len(self.validated) > 1024:
                self.validated.clear()
            self.validated[vals] = self.revalidate(dict(zip(self.env.symbols, vals)))
        bad = self.validated[vals]
        return f"dynamic graph not valid at these sizes: {bad}" if bad else None


# ---------------------------------------------------------------------- input aliasing
def _overlap(a, b) -> bool:
    """Whether arrays ``a`` and ``b`` have an element in common (exact for small problems;
    assumed when numpy finds the exact question too hard)."""
    if not np.may_share_memory(a, b):  # disjoint address ranges
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))
    except _TooHard:
        return True


def written_overlaps(flat: list[Tensor], n_args: int, written: tuple,
                     lifted_too: bool = False) -> tuple:
    """Pairs ``(i, j)`` (``i < j``, indices into ``flat`` = call tensors then lifted tensors)
    of inputs that share memory where at least one is written in place by the graph.

    A graph treats its inputs as independent values: writing one is invisible to another in
    it. Eager code sees the write through every alias, so a compiled entry is valid only for
    calls where no written input overlaps another. Pairs of two lifted tensors (parameters,
    buffers) are only looked for with ``lifted_too`` (at compile time): their layout belongs
    to the module, not to the call."""
    wset = set(written)
    if not lifted_too and all(w >= n_args for w in written):
        return _lifted_writes_meet_args(flat, n_args, written)
    groups: dict[int, list[int]] = {}
    for k in range(len(flat)):
        a = flat[k]._data
        if a.size:
            groups.setdefault(id(_root(a)), []).append(k)
    pairs = []
    for ks in groups.values():
        for x, i in enumerate(ks):
            for j in ks[x + 1:]:
                if (i in wset or j in wset) and (lifted_too or i < n_args or j < n_args) \
                        and _overlap(flat[i]._data, flat[j]._data):
                    pairs.append((i, j))
    return tuple(pairs)


def _lifted_writes_meet_args(flat: list[Tensor], n_args: int, written: tuple) -> tuple:
    """``written_overlaps`` when only lifted tensors are written (the per-call check of a
    module that updates buffers): each written tensor against the call's arguments only."""
    roots: dict[int, list[int]] = {}
    for k in range(n_args):
        a = flat[k]._data
        if a.size:
            roots.setdefault(id(_root(a)), []).append(k)
    if not roots:
        return ()
    pairs = []
    for w in written:
        a = flat[w]._data
        ks = roots.get(id(a) if a.base is None else id(_root(a)))  # owners are their root
        if ks and a.size:
            pairs += [(k, w) for k in ks if _overlap(flat[k]._data, a)]
    return tuple(pairs)


def overlap_text(pairs: tuple, written: tuple, names: list[str]) -> str:
    """``pairs`` of ``written_overlaps`` described with the call tensors' ``names``."""
    def name(k: int) -> str:
        return names[k] if k < len(names) else f"lifted tensor c{k - len(names)}"
    parts = []
    for i, j in pairs:
        w, o = (i, j) if i in written else (j, i)
        parts.append(f"{name(w)} (written in place) shares memory with {name(o)}")
    return "; ".join(parts)
