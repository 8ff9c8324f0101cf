"""Helpers for the nn module tests: build a module in ember and in torch from the same weights,
run both on the same inputs, compare outputs, input gradients, parameter gradients and
buffers."""

from __future__ import annotations

import numpy as np
import torch
from oracle import assert_same, edtype, tdtype, to_numpy, to_torch

import ember


def from_torch(t: torch.Tensor, requires_grad: bool = False) -> ember.Tensor:
    """torch tensor -> ember tensor (same dtype and values)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        e = ember.tensor(t.float().numpy()).to(ember.bfloat16)
    else:
        e = ember.tensor(t.numpy().copy(), dtype=edtype(t.dtype))
    return e.requires_grad_() if requires_grad else e


def copy_state(src: torch.nn.Module, dst: ember.nn.Module) -> None:
    """Load torch's state_dict into the ember module (strict: the keys must agree)."""
    dst.load_state_dict({k: from_torch(v) for k, v in src.state_dict().items()})


def pair(name: str, *args, dtype=ember.float64, seed: int = 0, **kwargs):
    """(ember module, torch module) of class ``name`` with torch's initial weights in both."""
    torch.manual_seed(seed)
    targs = to_torch(args)
    tkw = to_torch(kwargs)
    tm = getattr(torch.nn, name)(*targs, **tkw).to(tdtype(dtype))
    em = getattr(ember.nn, name)(*args, **kwargs).to(dtype)
    assert [(k, tuple(v.shape)) for k, v in em.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    copy_state(tm, em)
    return em, tm


def _flat(x, out):
    if isinstance(x, (ember.Tensor, torch.Tensor)):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flat(v, out)
    return out


def run_both(em, tm, inputs, call=None, train: bool = True, rtol=None, atol=None,
             grad_rtol=None, grad_atol=None, seed: int = 0, check_buffers: bool = True):
    """Call both modules (``call(m, *inputs)``, default ``m(*inputs)``) in train or eval mode;
    compare outputs, then backpropagate one random output gradient and compare the gradients
    of the inputs that require grad and of every parameter; finally compare the buffers."""
    em.train(train)
    tm.train(train)
    call = call or (lambda m, *xs: m(*xs))
    tin = to_torch(list(inputs))
    out_e = call(em, *inputs)
    out_t = call(tm, *tin)
    assert_same(out_e, out_t, rtol, atol)
    outs_e = [o for o in _flat(out_e, []) if o.requires_grad]
    outs_t = [o for o in _flat(out_t, []) if o.requires_grad]
    assert len(outs_e) == len(outs_t), "different number of differentiable outputs"
    ins_e = [x for x in _flat(list(inputs), []) if x.requires_grad]
    ins_t = [x for x in _flat(tin, []) if x.requires_grad]
    pe = dict(em.named_parameters())
    pt = dict(tm.named_parameters())
    names = [n for n in pt if pt[n].requires_grad]
    if outs_t and (ins_t or names):
        rng = np.random.default_rng(seed)
        gt = [torch.from_numpy(rng.standard_normal(tuple(o.shape))).to(o.dtype) for o in outs_t]
        ge = [from_torch(g) for g in gt]
        wrt_t = ins_t + [pt[n] for n in names]
        wrt_e = ins_e + [pe[n] for n in names]
        g_t = torch.autograd.grad(outs_t, wrt_t, gt, allow_unused=True)
        g_e = ember.autograd.grad(outs_e, wrt_e, ge, allow_unused=True)
        labels = [f"input{k}" for k in range(len(ins_t))] + names
        for label, a, b in zip(labels, g_e, g_t):
            if b is None:
                assert a is None or not np.any(to_numpy(a)), f"{label}: ember has a gradient"
                continue
            assert a is not None, f"{label}: ember gave no gradient"
            assert_same(a, b, grad_rtol or rtol, grad_atol or atol, path=f"grad {label}")
    if check_buffers:
        bt = dict(tm.named_buffers())
        for n, b in em.named_buffers():
            assert_same(b, bt[n], rtol, atol, path=f"buffer {n}")
    return out_e, out_t


def randn(*shape, dtype=ember.float64, requires_grad: bool = True, seed: int = 0,
          scale: float = 1.0) -> ember.Tensor:
    a = np.random.default_rng(seed).standard_normal(shape) * scale
    t = ember.tensor(a, dtype=dtype)
    return t.requires_grad_() if requires_grad else t


def randint(high: int, *shape, seed: int = 0, low: int = 0) -> ember.Tensor:
    return ember.tensor(np.random.default_rng(seed).integers(low, high, shape),
                        dtype=ember.int64)
