"""Muon: momentum followed by Newton-Schulz orthogonalisation of 2-D updates (PyTorch 2.9)."""

from __future__ import annotations

import math

from .. import _dtype as D
from ..ops.creation import zeros_like
from .optimizer import Optimizer, check_range, grads_of, value

_ADJUST = (None, "original", "match_rms_adamw")


def newton_schulz(u, coefficients, steps: int, eps: float):
    """Approximately orthogonalise ``u`` in bfloat16 (the quintic iteration)."""
    a, b, c = coefficients
    x = u.to(D.bfloat16)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        g = x @ x.T
        x = a * x + (b * g + c * (g @ g)) @ x
    return x.T if tall else x


class Muon(Optimizer):
    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(3.4445, -4.7750, 2.0315), eps=1e-7, ns_steps=5,
                 adjust_lr_fn=None):
        check_range("learning rate", lr)
        check_range("momentum value", momentum)
        check_range("weight decay value", weight_decay)
        if adjust_lr_fn not in _ADJUST:
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        if ns_steps >= 100:
            raise ValueError("Number of steps must be less than 100 for computational "
                             "efficiency")
        if len(ns_coefficients) != 3:
            raise ValueError("Coefficients must be a tuple of exactly 3 values")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_coefficients=ns_coefficients,
                                      eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn))
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")
                if p.is_complex():
                    raise RuntimeError("Muon does not support complex parameters")

    def _update(self):
        for group in self.param_groups:
            lr, wd, mu = value(group["lr"]), group["weight_decay"], group["momentum"]
            for p, g in grads_of(group):
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = zeros_like(g)
                buf = state["momentum_buffer"]
                buf.lerp_(g, 1 - mu)
                u = g.lerp(buf, mu) if group["nesterov"] else buf
                o = newton_schulz(u, group["ns_coefficients"], group["ns_steps"], group["eps"])
                rows, cols = p.shape[:2]
                if group["adjust_lr_fn"] == "match_rms_adamw":
                    adj = lr * 0.2 * math.sqrt(max(rows, cols))
                else:
                    adj = lr * math.sqrt(max(1, rows / cols))
                p.mul_(1 - lr * wd)
                p.add_(o, alpha=-adj)
