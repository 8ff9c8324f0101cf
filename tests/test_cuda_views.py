"""Views over a CUDA tensor's storage (the CUDA backend's ``strided_view`` /
``storage_offset`` / ``storage_nbytes``) against PyTorch's CUDA tensors (the GPU tier):
as_strided with and without a storage offset, of a slice and of another as_strided view,
unfold, their writes and gradients, and the bounds error.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")

pytestmark = GPU_TIER


def pair(n=40):
    a = np.arange(n, dtype=np.float32) * 0.5 - 3
    return ember.tensor(a).cuda(), torch.tensor(a).cuda()


def same(e, t, rtol=0.0):
    """Geometry and values (exact, or within ``rtol``: gradients summed in another order)."""
    assert e.is_cuda and tuple(e.shape) == tuple(t.shape)
    assert e.stride() == t.stride() and e.storage_offset() == t.storage_offset()
    np.testing.assert_allclose(e.detach().cpu().numpy(), t.detach().cpu().numpy(), rtol=rtol)


def test_as_strided_geometry_and_values():
    e, t = pair()
    same(e[3:].as_strided((3, 4), (2, 1)), t[3:].as_strided((3, 4), (2, 1)))
    same(e[3:].as_strided((3, 4), (2, 1), 7), t[3:].as_strided((3, 4), (2, 1), 7))
    ve, vt = e[5:].as_strided((4, 3), (5, 2)), t[5:].as_strided((4, 3), (5, 2))
    same(ve, vt)
    same(ve.as_strided((2, 2), (1, 3), 9), vt.as_strided((2, 2), (1, 3), 9))
    same(e[::2].unfold(0, 4, 3), t[::2].unfold(0, 4, 3))
    same(e.view(5, 8).t().unfold(1, 2, 2), t.view(5, 8).t().unfold(1, 2, 2))
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 160"):
        e.as_strided((4, 4), (10, 1), 10)


def test_writes_reach_the_storage():
    e, t = pair()
    e.as_strided((3, 2), (4, 1), 2).mul_(10)
    t.as_strided((3, 2), (4, 1), 2).mul_(10)
    same(e, t)
    e.unfold(0, 5, 5)[1:3].zero_()
    t.unfold(0, 5, 5)[1:3].zero_()
    same(e, t)


def test_gradients():
    e, t = pair()
    e.requires_grad_()
    t.requires_grad_()
    we = ember.arange(9.0).cuda()
    wt = torch.arange(9.0).cuda()
    (e.as_strided((3, 3), (1, 2), 4).reshape(-1) * we).sum().backward()
    (t.as_strided((3, 3), (1, 2), 4).reshape(-1) * wt).sum().backward()
    same(e.grad, t.grad)
    e.grad = t.grad = None
    e.unfold(0, 6, 4).pow(2).sum().backward()
    t.unfold(0, 6, 4).pow(2).sum().backward()
    same(e.grad, t.grad, rtol=1e-6)


def test_copy_between_devices():
    """copy_ takes a source on the other device both ways; gradients go back to its device."""
    src = ember.arange(6.0).cuda().requires_grad_()
    host = ember.zeros(2, 3)
    host.copy_((src * 2).view(2, 3))
    np.testing.assert_array_equal(host.detach().numpy(), np.arange(6.0).reshape(2, 3) * 2)
    host.sum().backward()
    assert src.grad.is_cuda and np.array_equal(src.grad.cpu().numpy(), np.full(6, 2.0))
    dev = ember.zeros(3, dtype=ember.float16).cuda()
    dev.copy_(ember.tensor([1.5, 2.5, 3.5], dtype=ember.float64))
    assert dev.is_cuda and dev.dtype is ember.float16
    np.testing.assert_array_equal(dev.cpu().numpy(), [1.5, 2.5, 3.5])
