"""Per-thread dispatch state: what decides how an op call runs on the calling thread.

PyTorch keeps grad mode, inference mode and the compiler's tracing state per thread, so a
thread that runs ``ember.compile`` does not turn another thread's eager ops into symbolic
ones. All of it lives in one ``threading.local`` here, below every layer that reads it:

    enabled, inference   grad mode and inference mode (``ember.autograd.grad_mode``)
    capture              the compiler's capture hook, ``handler(op, args, kwargs, mode)``
                         (mode "call", "inplace" or "out"), or None: every op-table call on
                         this thread goes to it instead of the eager path
    tracing              how many traces are active on this thread (``is_compiling()``)
    shape_envs           the stack of symbolic shape environments recording guards; its
                         bottom entry is None (no environment)

Reading an attribute of ``STATE`` is the one check an op call pays when nothing intercepts it.
"""

from __future__ import annotations

import threading


class _State(threading.local):
    enabled = True
    inference = False
    capture = None
    tracing = 0

    def __init__(self):  # runs once in each thread that touches STATE
        self.shape_envs = [None]


STATE = _State()


def is_tracing() -> bool:
    """Whether the compiler is capturing a graph on this thread."""
    return STATE.tracing > 0
