"""Argument checks for public functions that are compositions of ops, not table entries.

An op's ``Tensor`` parameters are checked by the dispatcher (registry.py); a composition
declares its tensor parameters with ``@takes_tensors`` and gets the same PyTorch TypeError
("cdist(): argument 'x2' (position 2) must be Tensor, not int") before its body runs, instead
of an AttributeError from somewhere inside it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from .._tensor import Tensor
from .registry import type_name


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
