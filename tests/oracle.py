"""PyTorch as the oracle: convert tensors both ways and compare results and gradients.

Every op test goes through ``check``: it runs the same function in ember and in torch on the
same inputs, compares outputs (values, dtype, shape), then backpropagates the same random
gradient through both and compares the input gradients.
"""

from __future__ import annotations

import numpy as np
import torch

import ember

TOL = {  # (rtol, atol) per dtype
    "float64": (1e-7, 1e-9), "float32": (1e-5, 1e-6), "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2), "complex64": (1e-5, 1e-6), "complex128": (1e-7, 1e-9),
}


def tdtype(d: ember.dtype) -> torch.dtype:
    return getattr(torch, d.name)


def edtype(d: torch.dtype) -> ember.dtype:
    return getattr(ember, str(d).split(".")[1])


def to_torch(x, requires_grad=None):
    """ember tensor (or nested list/tuple of them, or any value) -> torch equivalent."""
    if isinstance(x, ember.Tensor):
        a = x.detach()._data
        if x.dtype is ember.bfloat16:
            t = torch.from_numpy(a.astype(np.float32).copy()).to(torch.bfloat16)
        else:
            t = torch.from_numpy(np.array(a, copy=True))
        rg = x.requires_grad if requires_grad is None else requires_grad
        return t.requires_grad_(rg) if rg else t
    if isinstance(x, (list, tuple)):
        return type(x)(to_torch(v, requires_grad) for v in x)
    if isinstance(x, dict):
        return {k: to_torch(v, requires_grad) for k, v in x.items()}
    if isinstance(x, ember.dtype):
        return tdtype(x)
    return x


def to_numpy(x) -> np.ndarray:
    if isinstance(x, ember.Tensor):
        a = x.detach().cpu()._data
        return a.astype(np.float32) if x.dtype is ember.bfloat16 else np.asarray(a)
    if isinstance(x, torch.Tensor):
        x = x.detach().resolve_conj().cpu()  # lazy conjugate views refuse .numpy()
        if x._is_zerotensor():  # torch's symbolic zero gradients have no storage
            return np.zeros(tuple(x.shape), dtype=x.new_empty(0).numpy().dtype)
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def product_bound(a, b, bias=None, a_err=None) -> np.ndarray:
    """How far a floating-point ``a @ b`` (``+ bias``) may lie from the exact product, element
    by element, whatever the order its dot products are summed in (a BLAS's blocking and
    vector width, a CPU's FMA): gamma_k * (|a| @ |b| + |bias|) with gamma_k = k*u / (1 - k*u)
    for k terms (the inner length, plus one for a bias) and u the unit roundoff of their
    dtype. ``a_err`` is a bound on ``a``'s own error (an earlier product's), carried through
    as ``a_err @ |b|``. Twice this bounds two correct results of the same product; use it
    wherever a test compares results that BLAS or vectorised sums computed, so the test holds
    on every CPU and not only on the one whose rounding it was written against."""
    dtype = np.result_type(to_numpy(a).dtype, to_numpy(b).dtype)
    a, b = (np.abs(to_numpy(v)).astype(np.float64) for v in (a, b))
    k = a.shape[-1] + (bias is not None)
    u = np.finfo(dtype).eps / 2
    terms = a @ b
    if bias is not None:
        terms = terms + np.abs(to_numpy(bias)).astype(np.float64)
    bound = (k * u / (1 - k * u)) * terms
    if a_err is not None:
        bound = bound + np.asarray(a_err, np.float64) @ b
    return bound


def assert_within(got, want, bound, rtol=None, path="out") -> None:
    """``|got - want| <= bound`` element by element (``bound`` broadcasts, e.g. from
    ``product_bound``), plus the dtype's usual tolerance for the rounding of what follows
    the products. Reports the worst element."""
    g, w = to_numpy(got).astype(np.float64), to_numpy(want).astype(np.float64)
    assert g.shape == w.shape, f"{path}: shape {g.shape} vs {w.shape}"
    r, a = TOL[str(to_numpy(want).dtype)] if rtol is None else (rtol, 0.0)
    allowed = np.asarray(bound, np.float64) + a + r * np.abs(w)
    diff = np.abs(g - w)
    bad = ~((diff <= allowed) | (np.isnan(g) & np.isnan(w)))
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, diff - allowed, -np.inf)), bad.shape)
        raise AssertionError(f"{path}: {bad.sum()} of {bad.size} elements outside the bound; "
                             f"worst at {i}: {g[i]} vs {w[i]}, allowed {allowed[i]:.3g}")


def assert_same(e, t, rtol=None, atol=None, check_dtype=True, path="out", equal_nan=True):
    """Compare an ember result with a torch result (tensors, tuples, scalars)."""
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"{path}: expected a Tensor, got {type(e)}"
        assert tuple(e.shape) == tuple(t.shape), f"{path}: shape {tuple(e.shape)} vs " \
                                                 f"{tuple(t.shape)}"
        if check_dtype:
            assert e.dtype.name == str(t.dtype).split(".")[1], f"{path}: dtype {e.dtype} vs " \
                                                               f"{t.dtype}"
        r, a = TOL.get(str(t.dtype).split(".")[1], (0, 0))
        r = r if rtol is None else rtol
        a = a if atol is None else atol
        en, tn = to_numpy(e), to_numpy(t)
        if en.dtype.kind in "fc" or tn.dtype.kind in "fc":
            np.testing.assert_allclose(en, tn, rtol=r, atol=a, equal_nan=equal_nan,
                                       err_msg=path)
        else:
            np.testing.assert_array_equal(en, tn, err_msg=path)
    elif isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)) and len(e) == len(t), f"{path}: {e!r} vs {t!r}"
        for k, (a_, b_) in enumerate(zip(e, t)):
            assert_same(a_, b_, rtol, atol, check_dtype, f"{path}[{k}]")
    elif isinstance(t, float):
        assert np.isclose(e, t, rtol=rtol or 1e-6, atol=atol or 1e-8, equal_nan=True), \
            f"{path}: {e} vs {t}"
    else:
        assert e == t, f"{path}: {e!r} vs {t!r}"


def _flat_tensors(x, out):
    if isinstance(x, (ember.Tensor, torch.Tensor)):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flat_tensors(v, out)
    return out


def check(fn_e, fn_t=None, *args, grad=True, rtol=None, atol=None, grad_rtol=None,
          grad_atol=None, check_dtype=True, seed=0, **kwargs):
    """Run ``fn_e(*args)`` in ember and ``fn_t(*targs)`` in torch; compare forward and backward.

    ``args`` are ember tensors (set requires_grad on those to differentiate) or plain values;
    ``fn_t`` defaults to ``fn_e`` (a lambda written against the ``torch``-like API works in
    both when called with the module: ``check(lambda m, x: m.exp(x), None, x)``).
    """
    mod_call = fn_t is None
    targs = to_torch(args)
    tkw = to_torch(kwargs)
    if mod_call:
        out_e = fn_e(ember, *args, **kwargs)
        out_t = fn_e(torch, *targs, **tkw)
    else:
        out_e = fn_e(*args, **kwargs)
        out_t = fn_t(*targs, **tkw)
    assert_same(out_e, out_t, rtol, atol, check_dtype)
    if not grad:
        return out_e, out_t
    ins_e = [a for a in _flat_tensors(list(args), []) if a.requires_grad]
    ins_t = [a for a in _flat_tensors(list(targs), []) if a.requires_grad]
    outs_e = [o for o in _flat_tensors(out_e, []) if o.requires_grad]
    outs_t = [o for o in _flat_tensors(out_t, []) if o.requires_grad]
    assert len(outs_e) == len(outs_t), "different number of differentiable outputs"
    if not ins_e or not outs_t:
        return out_e, out_t
    rng = np.random.default_rng(seed)
    gouts_e, gouts_t = [], []
    for o in outs_t:
        g = rng.standard_normal(tuple(o.shape))
        if o.dtype.is_complex:
            g = g + 1j * rng.standard_normal(tuple(o.shape))
        gt = torch.from_numpy(np.asarray(g)).to(o.dtype)
        gouts_t.append(gt)
        gouts_e.append(ember.tensor(to_numpy(gt), dtype=edtype(o.dtype)))
    g_t = torch.autograd.grad(outs_t, ins_t, gouts_t, allow_unused=True)
    g_e = ember.autograd.grad(outs_e, ins_e, gouts_e, allow_unused=True)
    for k, (a, b) in enumerate(zip(g_e, g_t)):
        if b is None:
            assert a is None or not np.any(to_numpy(a)), f"grad[{k}]: ember has a gradient"
            continue
        assert a is not None, f"grad[{k}]: ember gave no gradient"
        assert_same(a, b, grad_rtol or rtol, grad_atol or atol, check_dtype, f"grad[{k}]")
    return out_e, out_t


def rand(*shape, dtype=ember.float32, requires_grad=False, low=-2.0, high=2.0, seed=None,
         noncontig=False):
    """A random ember tensor; ``noncontig`` returns a same-shaped non-contiguous view."""
    rng = np.random.default_rng(seed if seed is not None else abs(hash(shape)) % 2**31)
    full = tuple(shape[:-1]) + ((shape[-1] * 2,) if noncontig and shape else tuple(shape[-1:]))
    if dtype.is_floating_point:
        a = rng.uniform(low, high, full)
    elif dtype.is_complex:
        a = rng.uniform(low, high, full) + 1j * rng.uniform(low, high, full)
    elif dtype is ember.bool:
        a = rng.integers(0, 2, full).astype(bool)
    else:
        lo = 0 if dtype is ember.uint8 else int(low * 5)
        a = rng.integers(lo, int(high * 5) + 1, full)
    t = ember.tensor(a, dtype=dtype)
    if noncontig and shape:
        t = t[..., ::2]
    if requires_grad:
        t.requires_grad_()
    return t


def raises_like(fn_e, fn_t, match=None):
    """Both libraries raise; ember's exception has torch's type; message contains ``match``."""
    import pytest
    with pytest.raises(Exception) as te:
        fn_t()
    with pytest.raises(type(te.value)) as ee:
        fn_e()
    if match:
        assert match in str(ee.value), f"message {str(ee.value)!r} lacks {match!r}"
    return ee.value, te.value
