"""ember's Triton kernels of the negative log likelihood (backends/cuda/loss_kernels.py,
wrappers losses.py) through Triton's interpreter on CPU, against PyTorch on CPU: cross-entropy
and nll_loss with the CPU backend's "kernel" overrides of nll_loss_nd / nll_loss_backward
swapped for the loss kernels (restored after), values and input gradients over the
reductions, class weights, ignored targets, dtypes and a row count that several programs
share; a target out of range reported by the device check; the kernels compiled for sm_90.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import ember
from triton_util import INTERPRETED, SM90_BUILD, compile_for_sm90, cpu_overrides
from ember.backends.cuda import losses

torch = pytest.importorskip("torch")

pytestmark = INTERPRETED


@pytest.fixture
def launched(monkeypatch):
    monkeypatch.setattr(losses, "BLOCK", 16)  # small blocks: several per program
    monkeypatch.setattr(losses, "PROGRAMS", 3)  # and several programs
    with cpu_overrides(losses.OVERRIDES, losses.STATS) as count:
        yield count


def pair(a, dtype, grad=False):
    e = ember.tensor(a).to(getattr(ember, dtype)).requires_grad_(grad)
    t = torch.tensor(a).to(getattr(torch, dtype)).requires_grad_(grad)
    return e, t


TOL = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 2e-2}


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fn", ["cross_entropy", "nll_loss"])
def test_values_and_grads_match_torch(launched, fn, weighted, reduction, dtype):
    rng = np.random.default_rng(0)
    m, c = 70, 9
    x = rng.standard_normal((m, c)) * 2
    target = rng.integers(0, c, m)
    target[::7] = -100  # ignored positions
    ex, tx = pair(x, dtype, grad=True)
    et, tt = ember.tensor(target), torch.tensor(target)
    kw_e, kw_t = {"reduction": reduction}, {"reduction": reduction}
    if weighted:
        w = rng.uniform(0.5, 2.0, c)
        kw_e["weight"], kw_t["weight"] = pair(w, dtype)
    got = getattr(ember.nn.functional, fn)(ex, et, **kw_e)
    want = getattr(torch.nn.functional, fn)(tx, tt, **kw_t)
    assert launched() >= 2
    tol = TOL[dtype]
    np.testing.assert_allclose(got.detach().double().numpy(), want.detach().double().numpy(),
                               rtol=tol, atol=tol)
    g = rng.standard_normal(want.shape)
    eg, tg = pair(g, dtype)
    before = launched()
    got.backward(eg)
    want.backward(tg)
    assert launched() > before  # the gradient came from the kernels too
    np.testing.assert_allclose(ex.grad.double().numpy(), tx.grad.double().numpy(), rtol=tol,
                               atol=tol)


def test_every_position_ignored_gives_nan_mean_and_zero_grads(launched):
    x = ember.zeros(5, 3, requires_grad=True)
    t = ember.full((5,), -100, dtype=ember.int64)
    loss = ember.nn.functional.cross_entropy(x, t)
    want = torch.nn.functional.cross_entropy(torch.zeros(5, 3), torch.full((5,), -100))
    assert np.isnan(loss.item()) and np.isnan(want.item())
    loss.backward()
    assert not x.grad.numpy().any()


def test_a_target_out_of_range_is_reported(launched, monkeypatch):
    monkeypatch.setitem(os.environ, "EMBER_CUDA_SYNC_CHECKS", "1")
    x = ember.zeros(4, 3)
    with pytest.raises(RuntimeError, match=r"nll_loss: target 3 out of range"):
        ember.nn.functional.cross_entropy(x, ember.tensor([0, 1, 3, 2]))


def test_other_layouts_take_the_generic_impl(launched):
    """Spatial targets ([n, c, d] inputs) are the generic impl's: the kernels decline them,
    and the values still match."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 3))
    t = rng.integers(0, 4, (2, 3))
    got = ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor(t))
    want = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t))
    assert launched() == 0
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)


COMPILE = SM90_BUILD + r"""
from ember.backends.cuda import loss_kernels as K

for dt, f64 in (("fp32", False), ("fp64", True)):
    p = {"x_ptr": "*" + dt, "t_ptr": "*i64", "w_ptr": "*" + dt, "loss_ptr": "*" + dt,
         "part_ptr": "*" + dt, "sum_ptr": "*" + dt, "total_ptr": "*" + dt, "g_ptr": "*" + dt,
         "out_ptr": "*" + dt, "ignore": "i64"}
    for flag in (True, False):
        build(K.nll_partials, p, HAS_X=flag, HAS_W=not flag, EACH=flag, ACC=f64, BLOCK=1024)
        build(K.nll_total, p, MEAN=flag, BLOCK_P=64)
        build(K.nll_grad, p, PER_ROW=flag, MEAN=not flag, HAS_W=flag, ACC=f64, BLOCK=1024)
print("ok")
"""


def test_kernels_compile_for_sm90():
    compile_for_sm90(COMPILE)
