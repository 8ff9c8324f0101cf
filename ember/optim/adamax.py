"""Adamax: Adam with the infinity norm."""

from __future__ import annotations

from .optimizer import (Optimizer, advance_state, check_adam_family, grads_of, value,
                        weight_decay)


class Adamax(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        check_adam_family(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _update(self):
        for group in self.param_groups:
            lr, eps, wd = value(group["lr"]), group["eps"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            for p, g in grads_of(group):
                state = self.state[p]
                t = advance_state(state, p, "exp_avg", "exp_inf")
                if group["maximize"]:
                    g = -g
                g = weight_decay(p, g, lr, wd, decoupled=False)
                m, u = state["exp_avg"], state["exp_inf"]
                m.lerp_(g, 1 - beta1)
                u.copy_(u.mul_(beta2).maximum(g.abs().add_(eps)))
                p.addcdiv_(m, u, value=-lr / (1 - beta1 ** t))
