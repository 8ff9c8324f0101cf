"""nn.utils gradient clipping against torch: clip_grad_norm_ (every norm type, the one-dtype
float fast path and the general path), get_total_norm, clip_grads_with_norm_,
clip_grad_value_, non-finite norms and the deprecated alias."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

SHAPES = [(8, 5), (5,), (3, 4, 2), (1,), ()]


def _params(m, dtypes, grads=True, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    ps = []
    for i, s in enumerate(SHAPES):
        dt = dtypes[i % len(dtypes)]
        p = m.zeros(s, dtype=getattr(m, dt), requires_grad=True)
        if grads:
            p.grad = m.tensor((rng.standard_normal(s) * scale).astype(dt))
        ps.append(p)
    return ps


def _same(e, t, rtol=1e-6):
    np.testing.assert_allclose(e.detach().numpy().astype(np.float64),
                               t.detach().numpy().astype(np.float64), rtol=rtol, atol=1e-7)


@pytest.mark.parametrize("norm_type", [2.0, 2, 1.0, float("inf"), 0.5, 3.0, 0])
@pytest.mark.parametrize("dtypes", [["float32"], ["float64"], ["float32", "float64"],
                                    ["float16"]])
@pytest.mark.parametrize("max_norm", [1.0, 1e6])
def test_clip_grad_norm_like_torch(norm_type, dtypes, max_norm):
    pe, pt = _params(ember, dtypes), _params(torch, dtypes)
    ne = ember.nn.utils.clip_grad_norm_(pe, max_norm, norm_type)
    nt = torch.nn.utils.clip_grad_norm_(pt, max_norm, norm_type)
    rtol = 2e-3 if dtypes == ["float16"] else 1e-6
    assert ne.dtype.name == str(nt.dtype).split(".")[1]
    _same(ne, nt, rtol)
    for a, b in zip(pe, pt):
        assert a.grad.dtype.name == str(b.grad.dtype).split(".")[1]
        _same(a.grad, b.grad, rtol)


def test_single_tensor_missing_grads_and_empty():
    pe, pt = _params(ember, ["float32"]), _params(torch, ["float32"])
    pe[1].grad = None
    pt[1].grad = None
    _same(ember.nn.utils.clip_grad_norm_(pe, 0.5), torch.nn.utils.clip_grad_norm_(pt, 0.5))
    _same(ember.nn.utils.clip_grad_norm_(pe[0], 0.1), torch.nn.utils.clip_grad_norm_(pt[0], 0.1))
    for a, b in zip(pe, pt):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            _same(a.grad, b.grad)
    _same(ember.nn.utils.clip_grad_norm_([], 1.0), torch.nn.utils.clip_grad_norm_([], 1.0))
    e = ember.nn.utils.clip_grad_norm_(_params(ember, ["float32"], grads=False), 1.0)
    assert float(e) == 0.0


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_non_finite_norm(bad):
    pe, pt = _params(ember, ["float32"]), _params(torch, ["float32"])
    pe[0].grad[0, 0] = bad
    pt[0].grad[0, 0] = bad
    with pytest.raises(RuntimeError) as et:
        torch.nn.utils.clip_grad_norm_(pt, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped") as ee:
        ember.nn.utils.clip_grad_norm_(pe, 1.0, error_if_nonfinite=True)
    assert str(ee.value) == str(et.value)
    # without the flag, the gradients are scaled by the non-finite norm, as torch does
    ne = ember.nn.utils.clip_grad_norm_(pe, 1.0)
    nt = torch.nn.utils.clip_grad_norm_(pt, 1.0)
    assert np.isnan(float(ne)) == np.isnan(float(nt)) and np.isinf(float(ne)) == np.isinf(float(nt))
    for a, b in zip(pe, pt):
        np.testing.assert_array_equal(np.isnan(a.grad.numpy()), np.isnan(b.grad.numpy()))


def test_total_norm_then_clip_with_norm():
    ge = [p.grad for p in _params(ember, ["float64"])]
    gt = [p.grad for p in _params(torch, ["float64"])]
    te = ember.nn.utils.get_total_norm(ge, 3.0)
    tt = torch.nn.utils.get_total_norm(gt, 3.0)
    _same(te, tt)
    pe, pt = _params(ember, ["float64"]), _params(torch, ["float64"])
    ember.nn.utils.clip_grads_with_norm_(pe, 2.0, te)
    torch.nn.utils.clip_grads_with_norm_(pt, 2.0, tt)
    for a, b in zip(pe, pt):
        _same(a.grad, b.grad)


def test_clip_grad_value_and_deprecated_alias():
    pe, pt = _params(ember, ["float32"]), _params(torch, ["float32"])
    ember.nn.utils.clip_grad_value_(pe, 0.7)
    torch.nn.utils.clip_grad_value_(pt, 0.7)
    for a, b in zip(pe, pt):
        _same(a.grad, b.grad)
    with pytest.warns(FutureWarning, match="deprecated in favor of"):
        ember.nn.utils.clip_grad_norm(pe, 1.0)
