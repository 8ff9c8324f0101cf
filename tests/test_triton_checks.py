"""The device-side argument checks (backends/cuda/checks.py, check_kernels.py) through Triton's
interpreter on CPU: the check kernel on numpy arrays records the first failure in a numpy
error flag without raising; reading the flag raises PyTorch's "device-side assert"
RuntimeError naming the op and the value, and clears it. Then ember's ops on CPU with the
CPU backend's checks swapped for the device ones (restored after): the failure is deferred to
the next read, as on a GPU. Last, the kernel compiles for sm_90.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from triton_util import INTERPRETED, compile_for_sm90
from ember.backends import cpu
from ember.backends.cuda import checks

pytestmark = INTERPRETED


@pytest.fixture(autouse=True)
def clear_flag(monkeypatch):
    """Each test starts and ends with no failure pending, in the deferred mode."""
    monkeypatch.delenv("EMBER_CUDA_SYNC_CHECKS", raising=False)
    _drain()
    yield
    _drain()


def _drain():
    try:
        checks.raise_pending("host")
    except RuntimeError:
        pass


def pending_error() -> str | None:
    """The message of the recorded failure (cleared), or None."""
    try:
        checks.raise_pending("host")
    except RuntimeError as e:
        return str(e)
    return None


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_indices_in_range_record_nothing(dtype):
    before = checks.STATS["checks"]
    checks.check_index(np.array([0, 4, 2, 4], dtype), 0, 5, "embedding")
    assert checks.STATS["checks"] == before + 1
    assert "host" in checks._PENDING
    assert pending_error() is None
    assert "host" not in checks._PENDING  # read once, then nothing is pending


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_an_index_out_of_range_is_recorded_not_raised(dtype):
    checks.check_index(np.array([1, 7, 9], dtype), 0, 5, "embedding")  # no exception here
    msg = pending_error()
    assert msg.startswith("CUDA error: device-side assert triggered: embedding: index 7 out of "
                          "range for size 5.")
    assert "EMBER_CUDA_SYNC_CHECKS=1" in msg
    assert pending_error() is None  # the flag was cleared
    checks.check_index(np.array([1, 2], dtype), 0, 5, "embedding")
    assert pending_error() is None  # and later checks work


def test_negative_indices_and_their_range():
    checks.check_index(np.array([-5, 4, -1]), -5, 5, "index")
    assert pending_error() is None
    checks.check_index(np.array([0, -6]), -5, 5, "index")
    assert "index: index -6 out of range [-5, 5)" in pending_error()


def test_the_first_bad_element_across_blocks():
    """Programs run in order under the interpreter: the first bad element of the array."""
    a = np.zeros(3 * checks.BLOCK + 5, np.int64)
    a[checks.BLOCK + 17] = 11
    a[2 * checks.BLOCK] = 12
    a[-1] = -3
    checks.check_index(a, 0, 10, "gather")
    assert "gather: index 11 out of range for size 10" in pending_error()
    a[:] = 9
    checks.check_index(a, 0, 10, "gather")
    assert pending_error() is None


def test_the_first_failure_is_kept_until_read():
    checks.check_index(np.array([3]), 0, 2, "gather")
    checks.check_index(np.array([-1]), 0, 2, "index_select")
    msg = pending_error()
    assert "gather: index 3" in msg and "index_select" not in msg
    assert pending_error() is None


def test_ignored_targets_pass():
    t = np.array([0, -100, 2, -100], np.int64)
    checks.check_index(t, 0, 3, "nll_loss", what="target", ignore=-100)
    assert pending_error() is None
    checks.check_index(np.append(t, -7), 0, 3, "nll_loss", what="target", ignore=-100)
    assert "nll_loss: target -7 out of range for size 3" in pending_error()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("bad", [-0.5, np.nan, np.inf])
def test_probabilities(dtype, bad):
    p = np.array([[0.2, 0.3, 0.0], [1.0, 2.0, 3.0]], dtype)
    checks.check_probabilities(p, p.sum(-1, dtype=np.float64), "multinomial")
    assert pending_error() is None
    p[1, 1] = bad
    checks.check_probabilities(p, p.sum(-1, dtype=np.float64), "multinomial")
    assert pending_error() == (
        "CUDA error: device-side assert triggered: multinomial: probability tensor contains "
        "either `inf`, `nan` or element < 0 (element 4 of the rows). The check ran on the "
        "device and is reported at the first call that synchronises after it; set "
        "EMBER_CUDA_SYNC_CHECKS=1 to raise at the op.")


def test_row_sums():
    p = np.array([[0.2, 0.3], [0.0, 0.0]], np.float32)
    checks.check_probabilities(p, p.sum(-1, dtype=np.float64), "multinomial")
    assert "invalid multinomial distribution (sum of probabilities <= 0) (row 1)" in \
        pending_error()
    big = np.full((1, 4), 1e308)  # finite weights whose sum overflows
    checks.check_probabilities(big, big.sum(-1), "multinomial")
    assert "element < 0 (the sum of row 0)" in pending_error()


def test_sync_mode_raises_at_the_check(monkeypatch):
    monkeypatch.setenv("EMBER_CUDA_SYNC_CHECKS", "1")
    checks.check_index(np.array([0, 1]), 0, 2, "embedding")
    with pytest.raises(RuntimeError) as e:
        checks.check_index(np.array([0, 2]), 0, 2, "embedding")
    assert str(e.value) == ("CUDA error: device-side assert triggered: embedding: index 2 out of "
                            "range for size 2.")
    assert pending_error() is None


def test_message_decoding():
    code = checks._code("take", "index {v} out of range [{lo}, {hi})")
    assert checks._code("take", "index {v} out of range [{lo}, {hi})") == code  # one code
    words = np.array([code, -9, -4, 4], np.int64)
    assert checks.message(words, at_op=True) == (
        "CUDA error: device-side assert triggered: take: index -9 out of range [-4, 4).")
    assert checks.message(words).endswith("set EMBER_CUDA_SYNC_CHECKS=1 to raise at the op.")


def test_an_empty_array_launches_nothing():
    before = checks.STATS["checks"]
    checks.check_index(np.zeros((0, 3), np.int64), 0, 1, "gather")
    assert checks.STATS["checks"] == before


def test_a_strided_index_is_checked_by_value():
    a = np.arange(12).reshape(3, 4)[:, ::2]  # 0 2 4 6 8 10
    checks.check_index(a, 0, 11, "gather")
    assert pending_error() is None
    checks.check_index(a.T, 0, 9, "gather")  # order 0 4 8 2 6 10
    assert "index 10 out of range" in pending_error()


# ---------------------------------------------------------------------- through ember's ops
@pytest.fixture
def deferred(monkeypatch):
    """The CPU backend's checks replaced by the device ones: ops record, nothing raises until
    the flag is read."""
    xp = cpu.BACKEND.xp
    monkeypatch.setattr(xp, "check_index", lambda index, lo, hi, op, error, what="index",
                        ignore=None: checks.check_index(index, lo, hi, op, what, ignore))
    monkeypatch.setattr(xp, "check_probabilities", checks.check_probabilities)


OPS = {
    "embedding": (lambda: ember.nn.functional.embedding(ember.tensor([[1, 6]]),
                                                        ember.randn(5, 3)), "index 6"),
    "gather": (lambda: ember.randn(3, 4).gather(1, ember.tensor([[0, 4]])), "index 4"),
    "index_select": (lambda: ember.randn(3, 4).index_select(0, ember.tensor([2, -1])),
                     "index -1"),
    "index": (lambda: ember.randn(3, 4)[ember.tensor([0, 3])], "index 3"),
    "take": (lambda: ember.take(ember.randn(2, 2), ember.tensor([-5])), "index -5"),
    "scatter": (lambda: ember.zeros(3).scatter(0, ember.tensor([3]), 1.0), "index 3"),
    "index_add": (lambda: ember.zeros(3).index_add(0, ember.tensor([9]), ember.ones(1)),
                  "index 9"),
    "nll_loss": (lambda: ember.nn.functional.cross_entropy(ember.randn(2, 3),
                                                           ember.tensor([1, 3])), "target 3"),
    "one_hot": (lambda: ember.nn.functional.one_hot(ember.tensor([0, 4]), 3),
                "class value 4"),
    "multinomial": (lambda: ember.multinomial(ember.tensor([0.5, float("nan")]), 1),
                    "probability tensor contains"),
}


@pytest.mark.parametrize("name", list(OPS))
def test_ops_defer_their_data_checks(deferred, name):
    """Each op hands its data-dependent check to the backend's hook, under its name."""
    fn, what = OPS[name]
    try:
        fn()  # the check raises nothing here
    except (IndexError, RuntimeError) as e:
        # numpy's own indexing, after the check, refuses the index that a GPU kernel would
        # not look at
        assert "device-side" not in str(e)
    msg = pending_error()
    assert f"device-side assert triggered: {name}: {what}" in msg
    assert pending_error() is None


def test_cross_entropy_backward_with_ignored_targets_records_nothing(deferred):
    x = ember.randn(4, 3, requires_grad=True)
    ember.nn.functional.cross_entropy(x, ember.tensor([0, -100, 2, 1])).backward()
    assert pending_error() is None


COMPILE = """
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ember.backends.cuda import check_kernels as K

def build(types, **consts):
    sig = {a: "constexpr" if a in consts else types.get(a, "i32") for a in K.check.arg_names}
    triton.compile(ASTSource(K.check, signature=sig, constexprs=consts),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})

for x in ("*i64", "*i32", "*u8"):
    for ignore in (True, False):
        build({"x_ptr": x, "flag_ptr": "*i64", "ignore": "i64", "hi": "i64"}, KIND=0,
              HAS_IGNORE=ignore, BLOCK=1024)
# Triton makes an integer argument equal to 1 a constant: a one-element index, a size-1
# dim, the first registered code
build({"x_ptr": "*i64", "flag_ptr": "*i64", "lo": "i64"}, n=1, hi=1, code=1, KIND=0,
      HAS_IGNORE=True, BLOCK=1024)
for x in ("*fp32", "*fp64", "*fp16", "*bf16"):
    for kind in (1, 2):
        build({"x_ptr": x, "flag_ptr": "*i64"}, KIND=kind, HAS_IGNORE=False, BLOCK=1024)
print("ok")
"""


def test_check_kernel_compiles_for_sm90():
    """Every kind and index / float dtype through Triton's compiler to a Hopper cubin."""
    compile_for_sm90(COMPILE)
