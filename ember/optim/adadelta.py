"""Adadelta: steps scaled by the ratio of the running RMS of past updates to the running RMS
of gradients, so the step size needs little tuning."""

from __future__ import annotations

from ..ops.creation import zeros_like
from ._util import as_real, check_lr, upgrade_state, zero_step
from .optimizer import Optimizer, check_range, grads_of, value

_FLAGS = dict(foreach=None, maximize=False, differentiable=False, capturable=False)


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_range("epsilon value", eps)
        check_range("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable,
                                      foreach=foreach, differentiable=differentiable))

    def __setstate__(self, state):
        super().__setstate__(state)
        upgrade_state(self, _FLAGS)

    def _update(self):
        for group in self.param_groups:
            lr, rho, eps = value(group["lr"]), group["rho"], group["eps"]
            wd = group["weight_decay"]
            for p, g in grads_of(group):
                if g.is_sparse:
                    raise RuntimeError("Adadelta does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = zero_step()
                    state["square_avg"] = zeros_like(p)
                    state["acc_delta"] = zeros_like(p)
                state["step"] += 1
                if group["maximize"]:
                    g = -g
                if wd != 0:
                    g = g.add(p, alpha=wd)
                p, g, sq, acc = as_real(p, g, state["square_avg"], state["acc_delta"])
                sq.mul_(rho).addcmul_(g, g, value=1 - rho)
                std = sq.add(eps).sqrt_()
                delta = acc.add(eps).sqrt_().div_(std).mul_(g)
                acc.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                p.add_(delta, alpha=-lr)
