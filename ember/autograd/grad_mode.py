"""Grad mode: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local)."""

from __future__ import annotations

import functools
import inspect
from .._dispatch import STATE as state  # per thread: .enabled, .inference


def is_grad_enabled() -> bool:
    return state.enabled


def is_inference_mode_enabled() -> bool:
    return state.inference


class _Mode:
    """Base of the grad-mode context managers; each also works as a decorator."""

    def _set(self):  # returns the previous (enabled, inference)
        raise NotImplementedError

    def __enter__(self):
        self._prev = (state.enabled, state.inference)
        self._set()
        return self

    def __exit__(self, *exc):
        state.enabled, state.inference = self._prev
        return False

    def clone(self):
        return type(self)()

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen(*args, **kwargs):
                it = fn(*args, **kwargs)
                with self.clone():
                    value = next(it)
                while True:
                    try:
                        sent = yield value
                    except GeneratorExit:
                        it.close()
                        raise
                    with self.clone():
                        value = it.send(sent)
            return gen

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_Mode):
    def __init__(self, orig_func=None):
        self._orig = orig_func

    def _set(self):
        state.enabled = False


class enable_grad(_Mode):
    def __init__(self, orig_func=None):
        pass

    def _set(self):
        state.enabled = True


class set_grad_enabled(_Mode):
    """Sets grad mode at once when called; as a context manager it restores the old mode."""

    def __init__(self, mode: bool):
        self._prev = (state.enabled, state.inference)
        self.mode = bool(mode)
        state.enabled = self.mode

    def _set(self):
        state.enabled = self.mode

    def clone(self):
        return set_grad_enabled(self.mode)

    def __enter__(self):
        return self


class inference_mode(_Mode):
    """Like no_grad; ember's tensors carry no separate inference flag."""

    def __init__(self, mode: bool = True):
        if callable(mode) and not isinstance(mode, bool):  # used as @inference_mode
            raise TypeError("use @ember.inference_mode() with parentheses")
        self.mode = bool(mode)

    def _set(self):
        if self.mode:
            state.enabled = False
            state.inference = True

    def clone(self):
        return inference_mode(self.mode)
