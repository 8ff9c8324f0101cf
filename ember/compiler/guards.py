"""Guards: what a compiled graph assumed about its call, checked before each reuse.

A call is summarised as a flat list of values: the argument structure (container types,
lengths, dict keys), each tensor argument's dtype/shape/strides/requires_grad, each Python
scalar's value, the identity of other objects, grad mode, the default dtype and the training
flags of the compiled module. An entry matches a call when the lists are equal (one C-level
comparison); on a miss, the first unequal value, named by ``guard_names``, is the recompile
reason. Lifted tensors (parameters, buffers, globals) are checked the same way at call time.
"""

from __future__ import annotations

from typing import Any

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd.grad_mode import state as _grad_state

_SCALARS = (bool, int, float, complex, str, bytes, type(None), D.dtype)


def tensor_key(t: Tensor) -> tuple:
    a = t._data
    return (t._dtype, a.shape, a.strides, t._leaf_rg or t.grad_fn is not None)


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
    if isinstance(v, tuple) and len(v) == 4 and isinstance(v[0], D.dtype):
        st = tuple(s // max(v[0].itemsize, 1) for s in v[2])
        return f"{v[0].name}{list(v[1])} strides={st} requires_grad={v[3]}"
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], type):
        return f"{v[0].__name__} {v[1]!r}"
    return repr(v)
