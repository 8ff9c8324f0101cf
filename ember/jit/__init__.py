"""``ember.jit``: TorchScript's names. ``script`` and ``trace`` hand the function or Module to
``ember.compile`` (Python semantics: ember has no TorchScript language to check against), the
decorators and queries are markers that change nothing, and a scripted module cannot be
saved as a TorchScript archive (``save``/``load`` raise: use ``ember.save`` of a state_dict,
or ``ember.export``)."""

from __future__ import annotations

import typing

from ..compiler import compile
from ..nn.modules.module import Module

Final = typing.Final

_NO_ARCHIVE = ("ember.jit: TorchScript archives are not supported: ember compiles Python with "
               "ember.compile and writes no TorchScript; save the state_dict with ember.save "
               "(or export the model with ember.export)")


def script(obj, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """A function or Module, compiled with ``ember.compile``; a scripted Module's ``save``
    raises, as ``ember.jit.save`` does."""
    compiled = compile(obj)
    if isinstance(obj, Module):
        compiled.save = _refuse_save
    return compiled


def _refuse_save(*args, **kwargs) -> None:
    raise RuntimeError(_NO_ARCHIVE)


def trace(func, example_inputs=None, optimize=None, check_trace: bool = True,
          check_inputs=None, check_tolerance: float = 1e-5, strict: bool = True, **kwargs):
    """A function or Module, compiled with ``ember.compile`` (the example inputs are not
    needed: compilation happens on the first call, for the shapes of that call)."""
    return compile(func)


def trace_module(mod: Module, inputs, **kwargs):
    return compile(mod)


def _marker(fn=None, **kwargs):
    """``@ignore``, ``@ignore(drop=True)``, ``@unused``, ``@export``: the function unchanged."""
    if fn is None:
        return lambda f: f
    return fn


ignore = unused = export = _marker


def is_scripting() -> bool:
    return False


def is_tracing() -> bool:
    return False


def annotate(the_type, the_value):
    return the_value


def save(m, f, _extra_files=None) -> None:
    _refuse_save()


def load(f, map_location=None, _extra_files=None):
    raise RuntimeError(_NO_ARCHIVE)
