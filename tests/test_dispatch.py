"""Per-thread dispatch state (ember/_dispatch.py): what one thread sets (the compiler's capture
hook, tracing depth, grad mode) never changes how another thread's op calls run."""

from __future__ import annotations

import queue
import threading

import numpy as np
import pytest
from compile_util import fresh_compiler  # noqa: F401 (autouse fixture)

import ember


def _in_other_thread(fn):
    """Run ``fn`` in a new thread while the caller waits; its result or its exception."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the other thread hung"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_eager_ops_in_another_thread_while_one_thread_captures():
    """While thread A is inside ``ember.compile``'s capture, thread B's eager
    ``ones(3) + ones(3)`` is a real tensor with data, not a symbolic value of A's graph."""
    seen = queue.SimpleQueue()  # (a list changed inside f would be a side effect: no capture)

    def other():
        y = ember.ones(3) + ember.ones(3)
        z = y.exp().sum()
        return y, z, ember.compiler.is_compiling(), ember.is_grad_enabled()

    def f(x):
        if ember.compiler.is_compiling():
            seen.put(_in_other_thread(other))  # runs while this thread is capturing
        return x * 2

    with ember.no_grad():
        out = ember.compile(f)(ember.ones(3))
    assert seen.qsize() == 1  # captured once
    y, z, compiling, grad = seen.get()
    assert type(y) is ember.Tensor and type(z) is ember.Tensor
    np.testing.assert_array_equal(y.numpy(), [2.0, 2.0, 2.0])
    assert abs(z.item() - 3 * np.exp(2.0)) < 1e-4
    assert compiling is False  # the other thread is not compiling
    assert grad is True  # no_grad here does not reach the other thread
    np.testing.assert_array_equal(out.numpy(), [2.0, 2.0, 2.0])


def test_capture_in_two_threads_at_once():
    """Two threads compiling different functions at the same time each get their own graph."""
    barrier = threading.Barrier(2, timeout=30)

    def make(k):
        def f(x):
            barrier.wait()  # both threads are capturing now
            return x * k + 1
        return ember.compile(f)

    fns = {k: make(k) for k in (2.0, 3.0)}
    results = {}

    def run(k):
        results[k] = fns[k](ember.ones(4)).numpy()
        assert fns[k]._entries, "compiled, not run eagerly"

    threads = [threading.Thread(target=run, args=(k,)) for k in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    for k, r in results.items():
        np.testing.assert_array_equal(r, np.full(4, k + 1.0, np.float32))


_NO_SIDE_EFFECTS = r"""
import os, warnings
import numpy as np
before = np.geterr()
import ember
assert np.geterr() == before, (np.geterr(), before)  # import ember changed no numpy state
with warnings.catch_warnings():
    warnings.simplefilter("error")  # PyTorch never warns on these; neither does ember
    x = ember.tensor([1.0, 0.0, -1.0])
    r = [x / 0, x.log(), ember.tensor([1e308], dtype=ember.float64) * 10, x.div_(0),
         ember.tensor([float("nan")]).to(ember.int64), ember.zeros(3).sqrt() / 0]
    f = ember.compile(lambda t: (t * 2).exp() / t)
    f(ember.randn(64, 64))
    with warnings.catch_warnings(record=True) as w:  # the user's numpy warns as it did
        warnings.simplefilter("always")
        np.ones(1) / np.zeros(1)
    assert [m.category for m in w] == [RuntimeWarning], w
assert np.geterr() == before
assert "GOMP_SPINCOUNT" not in os.environ  # set for ember's OpenMP runtime's load only
print("ok")
"""


def test_import_and_ops_leave_process_state_alone(tmp_path):
    """``import ember`` changes no numpy error state and no environment variable: ember's
    kernels run with numpy's floating-point errors ignored (PyTorch does not warn), the user's
    own numpy code keeps its warnings, and the OpenMP spin setting reaches only the runtime
    ember loads."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env["EMBER_CACHE_DIR"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-c", _NO_SIDE_EFFECTS], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


# ---------------------------------------------------------------------- the interposer stack
def test_interposers_run_in_order_and_hand_calls_on():
    """Two interposers on one thread: the one earlier in ORDER sees a call first and may
    rewrite it; redispatch runs it with only the later ones, then the backend."""
    from ember._dispatch import ORDER, STATE, interposing, redispatch

    assert ORDER.index("autocast") < ORDER.index("profiler")
    seen = []

    def to_double(op, args, kwargs, mode):  # an autocast-like rewrite of float32 tensors
        seen.append(("autocast", op.name))
        args = tuple(a.double() if isinstance(a, ember.Tensor) and a.dtype == ember.float32
                     else a for a in args)
        return redispatch("autocast", op, args, kwargs, mode)

    def profile(op, args, kwargs, mode):
        seen.append(("profiler", op.name, tuple(a.dtype for a in args
                                               if isinstance(a, ember.Tensor))))
        return redispatch("profiler", op, args, kwargs, mode)

    x = ember.ones(2)
    assert STATE.top is None
    with interposing("profiler", profile), interposing("autocast", to_double):
        assert STATE.top is to_double
        y = x + x  # the operator's call path
        z = ember.mul(x, 2)  # the function's
    assert STATE.top is None and not STATE.layers
    assert y.dtype == z.dtype == ember.float64
    assert seen[0] == ("autocast", "add")
    # the handler's own casts reach only the interposers after it
    assert seen[1] == ("profiler", "_to_copy", (ember.float32,))
    assert ("profiler", "add", (ember.float64,) * 2) in seen
    assert ("profiler", "mul", (ember.float64,)) in seen
    # the double() calls inside the autocast handler reached the profiler, never autocast again
    assert [s for s in seen if s[0] == "autocast"] == [("autocast", "add"), ("autocast", "mul")]


def test_interposers_see_in_place_calls_and_are_per_thread():
    from ember._dispatch import interposing, redispatch

    seen = []

    def profile(op, args, kwargs, mode):
        seen.append((op.name, mode, threading.get_ident()))
        return redispatch("profiler", op, args, kwargs, mode)

    x = ember.zeros(3)
    other = []
    t = threading.Thread(target=lambda: other.append(ember.ones(3) + 1))
    with interposing("profiler", profile):
        x.add_(1)
        t.start()
        t.join()
    assert seen == [("add", "inplace", threading.get_ident())]
    assert x.tolist() == [1, 1, 1] and other[0].tolist() == [2, 2, 2]
    with pytest.raises(ValueError, match="unknown interposer kind"):
        with interposing("tracing", profile):
            pass


def test_an_interposer_with_an_op_filter_sees_only_those_ops():
    """``set_interposer(kind, handler, ops=...)`` (autocast's listed ops): calls of other ops
    skip the stack, unless an interposer without a filter is installed as well."""
    from ember._dispatch import STATE, redispatch, set_interposer

    seen = []

    def handler(kind):
        def h(op, args, kwargs, mode):
            seen.append((kind, op.name, mode))
            return redispatch(kind, op, args, kwargs, mode)
        return h

    x, y = ember.ones(2), ember.full((2,), 2.0)
    set_interposer("autocast", handler("autocast"), ops={"mul"})
    try:
        assert (x + y).tolist() == [3, 3] and (x * y).tolist() == [2, 2]
        x.add_(1)
        x.mul_(2)
        assert seen == [("autocast", "mul", "call"), ("autocast", "mul", "inplace")]
        seen.clear()
        set_interposer("profiler", handler("profiler"))  # no filter: sees every op
        try:
            ember.add(x, y)
            x * y
        finally:
            set_interposer("profiler", None)
        assert seen == [("profiler", "add", "call"), ("autocast", "mul", "call"),
                        ("profiler", "mul", "call")]
        assert STATE.top_ops == frozenset({"mul"})
    finally:
        set_interposer("autocast", None)
    assert STATE.top is None
