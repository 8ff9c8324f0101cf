"""``ember.compiler.set_stance``: how compiled functions behave globally (PyTorch 2.6+)."""

from __future__ import annotations

import functools
from collections.abc import Callable

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")

# the active stance: read by every compiled function call
STATE = {"stance": "default", "force_backend": None}
# raises for an unknown ``force_backend``: api.py, which owns the backend table, installs its
# check here (api imports this module, so this one does not import api)
check_backend: Callable | None = None


class set_stance:  # PyTorch's name; also a context manager and decorator
    """set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None)

    "default" compiles as usual; "force_eager" runs every compiled function's original
    Python; "eager_on_recompile" uses existing compiled entries but runs eagerly instead of
    compiling anew; "fail_on_recompile" raises instead of compiling. ``force_backend``
    (default stance only) makes every compiled function use that backend. Applies at once
    and stays; as a context manager or decorator, the previous stance is restored after.
    An unknown stance raises on the next compiled call, as PyTorch's does.
    """

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
                 force_backend: str | Callable | None = None):
        if force_backend is not None and stance != "default":
            raise RuntimeError("non-default stance cannot have force_backend set")
        if skip_guard_eval_unsafe:
            raise NotImplementedError("set_stance(skip_guard_eval_unsafe=True) is not "
                                      "supported by ember.compile yet")
        if force_backend is not None:
            check_backend(force_backend)
        self.prev = dict(STATE)
        self.new = {"stance": stance, "force_backend": force_backend}
        STATE.update(self.new)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.update(self.prev)
        return False

    def __call__(self, fn: Callable) -> Callable:
        STATE.update(self.prev)  # as a decorator, the stance applies only inside calls
        new = self.new

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = dict(STATE)
            STATE.update(new)
            try:
                return fn(*args, **kwargs)
            finally:
                STATE.update(prev)
        return wrapper


def check() -> str:
    """The active stance, validated (raises RuntimeError for an unknown one)."""
    s = STATE["stance"]
    if s not in STANCES:
        raise RuntimeError(f"invalid ember.compile stance {s!r}")
    return s
