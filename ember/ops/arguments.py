"""PyTorch's argument errors: for op-table entries (``arg_type_error``, renumbered for methods
by ``method_arg_error``), for kernels' own errors (``translate_error``, ``broadcast_error``),
and for public functions that are compositions of ops, not table entries.

An op's ``Tensor`` parameters are checked by the dispatcher (registry.py); a composition
declares its tensor parameters with ``@takes_tensors`` and gets the same PyTorch TypeError
("cdist(): argument 'x2' (position 2) must be Tensor, not int") before its body runs, instead
of an AttributeError from somewhere inside it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._tensor import Tensor
from ..backends import base as backends_base

if TYPE_CHECKING:
    from .registry import OpDef


def takes_tensors(*params: str, name: str | None = None) -> Callable[[Callable], Callable]:
    """Decorator for a public function that is not an op (a composition): the parameters
    ``params`` must hold Tensors, as an op's ``Tensor`` parameters do; anything else is
    PyTorch's TypeError, raised before the body runs (not an AttributeError from inside it).
    A name ending in ``?`` may also be None; one ending in ``[]`` takes a sequence of Tensors.
    ``name`` is the function name PyTorch's message uses (default: the function's).
    Positions count from 1 over the Python signature; ``bind.tensor_method`` renumbers them
    for a Tensor method (which does not count ``self``)."""
    def decorate(fn):
        sig = inspect.signature(fn).parameters
        names = list(sig)
        checks = tuple((names.index(p.rstrip("?[]")), p.rstrip("?[]"), p[-1]) for p in params)
        # a ``*tensors`` parameter: the sequence is every positional argument from there on
        varargs = {i for i, pname, _ in checks if sig[pname].kind == sig[pname].VAR_POSITIONAL}
        fname = name or fn.__name__

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            n = len(args)
            for i, pname, kind in checks:
                if i in varargs:
                    v, keyword = args[i:], False
                elif i < n:
                    v, keyword = args[i], False
                elif pname in kwargs:
                    v, keyword = kwargs[pname], True
                else:
                    continue
                if not isinstance(v, Tensor) and not (kind == "?" and v is None):
                    _composite_arg_error(fn, fname, i, pname, keyword, kind, v)
            return fn(*args, **kwargs)
        checked.tensor_checks = checks
        return checked
    return decorate


def _composite_arg_error(fn, fname, i, pname, keyword, kind, v) -> None:
    if kind == "]":
        if isinstance(v, (list, tuple)):
            for j, x in enumerate(v):
                if not isinstance(x, Tensor):
                    raise TypeError(f"expected Tensor as element {j} in argument {i}, but got "
                                    f"{type_name(x)}")
            return
        what = f"tuple of Tensors, not {type_name(v)}"
    else:
        what = f"Tensor, not {type_name(v)}"
    e = TypeError(_composite_message(fname, pname, None if keyword else i + 1, what))
    e.ember_composite = (fn, fname, pname, None if keyword else i + 1, what)
    raise e


def _composite_message(fname, pname, position, what) -> str:
    where = "" if position is None else f" (position {position})"
    return f"{fname}(): argument '{pname}'{where} must be {what}"


def composite_method_error(e: TypeError, fn: Callable) -> TypeError | None:
    """``e`` renumbered for a Tensor method bound to the ``takes_tensors`` function ``fn``;
    None when ``e`` is not ``fn``'s own argument error."""
    info = getattr(e, "ember_composite", None)
    if info is None or info[0] is not inspect.unwrap(fn):
        return None
    _, fname, pname, position, what = info
    return TypeError(_composite_message(fname, pname, position and position - 1, what))


# ---------------------------------------------------------------------- op-table entries
def type_name(v) -> str:
    """A value's type as PyTorch's argument errors print it (``float``, ``numpy.ndarray``)."""
    if isinstance(v, Tensor):
        return "Tensor"
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def arg_type_error(op: OpDef, index: int, keyword: bool, what: str,
                   name: str = "") -> TypeError:
    """PyTorch's "op(): argument 'x' (position n) must be Tensor, not float" for parameter
    ``index`` of ``op``. Positions count from 1 in a function call; a Tensor method does not
    count ``self``, so the method binders renumber it with ``method_arg_error``. A keyword
    argument has no position."""
    e = TypeError(_arg_message(op, index, keyword, what, name or op.name, index + 1))
    e.ember_arg = (op, index, keyword, what)
    return e


def method_arg_error(e: TypeError, op: OpDef, name: str = "") -> TypeError | None:
    """``e`` renumbered for the Tensor method ``name`` of ``op``; None when ``e`` is not
    ``op``'s own argument error (an error from an op called inside it stays as it is)."""
    info = getattr(e, "ember_arg", None)
    if info is None or info[0] is not op:
        return None
    _, index, keyword, what = info
    return TypeError(_arg_message(op, index, keyword, what, name or op.name, index))


def _arg_message(op, index, keyword, what, name, position) -> str:
    where = "" if keyword else f" (position {position})"
    return f"{name}(): argument '{op.params[index]}'{where} must be {what}"


def translate_error(op: OpDef, e: Exception, args, kwargs) -> Exception:
    """Turn an error raised inside a numpy kernel into PyTorch's type with the op's name.
    An impl that already raised PyTorch's exact error marks it ``_ember_final``."""
    if getattr(e, "_ember_final", False):
        return e
    msg = str(e)
    if isinstance(e, backends_base.LINALG_ERRORS):
        return RuntimeError(f"{op.name}: {msg}")
    if isinstance(e, ValueError) and ("broadcast" in msg or "operands could not" in msg):
        shapes = [tuple(a.shape) for a in args if isinstance(a, Tensor)]
        return RuntimeError(broadcast_error(shapes) or f"{op.name}(): {msg}")
    if isinstance(e, (ValueError, FloatingPointError, OverflowError)):
        return RuntimeError(f"{op.name}(): {msg}")
    if isinstance(e, IndexError):
        return IndexError(msg if msg.startswith(op.name) or "out of" in msg
                          else f"{op.name}(): {msg}")
    if isinstance(e, TypeError) and "argument" in msg and op.name not in msg:
        return TypeError(f"{op.name}(): {msg}")
    return e


def broadcast_error(shapes) -> str | None:
    """PyTorch's message for the first pair of sizes that do not broadcast."""
    if len(shapes) < 2:
        return None
    nd = max(len(s) for s in shapes)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
    for d in range(nd):
        sizes = {p[d] for p in padded} - {1}
        if len(sizes) > 1:
            a, b = [p[d] for p in padded if p[d] != 1][:2]
            return (f"The size of tensor a ({a}) must match the size of tensor b ({b}) at "
                    f"non-singleton dimension {d}")
    return None
