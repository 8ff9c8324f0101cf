"""RAdam: Adam with a rectified adaptive learning rate."""

from __future__ import annotations

import math

from .optimizer import (Optimizer, advance_state, check_adam_family, grads_of, value,
                        weight_decay)


class RAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        check_adam_family(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      capturable=capturable, differentiable=differentiable))

    def _update(self):
        for group in self.param_groups:
            lr, eps, wd = value(group["lr"]), group["eps"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            rho_inf = 2 / (1 - beta2) - 1
            for p, g in grads_of(group):
                state = self.state[p]
                t = advance_state(state, p, "exp_avg", "exp_avg_sq")
                if group["maximize"]:
                    g = -g
                g = weight_decay(p, g, lr, wd, group["decoupled_weight_decay"])
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                bc1 = 1 - beta1 ** t
                bc2 = 1 - beta2 ** t
                m_hat = m / bc1
                rho_t = rho_inf - 2 * t * (beta2 ** t) / bc2
                if rho_t > 5.0:
                    rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                                     ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                    adaptive = math.sqrt(bc2) / v.sqrt().add_(eps)
                    p.add_(m_hat * lr * adaptive * rect, alpha=-1.0)
                else:
                    p.add_(m_hat * lr, alpha=-1.0)
