"""NAdam: Adam with Nesterov momentum and the momentum-decay schedule."""

from __future__ import annotations

from .. import _dtype as D
from ..ops.creation import ones, zeros_like
from .optimizer import (Optimizer, check_adam_family, check_range, grads_of, new_step, value,
                        weight_decay)


class NAdam(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        check_adam_family(lr, eps, betas, weight_decay)
        check_range("momentum_decay value", momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      capturable=capturable, differentiable=differentiable))

    def _update(self):
        for group in self.param_groups:
            lr, eps, wd = value(group["lr"]), group["eps"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            psi = group["momentum_decay"]
            for p, g in grads_of(group):
                state = self.state[p]
                if not state:
                    state["step"] = new_step()
                    state["mu_product"] = ones((), dtype=D.float32)
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                if group["maximize"]:
                    g = -g
                state["step"] += 1
                t = state["step"].item()
                bc2 = 1 - beta2 ** t
                g = weight_decay(p, g, lr, wd, group["decoupled_weight_decay"])
                mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * psi))
                mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
                state["mu_product"] *= mu  # a float32 tensor, as in PyTorch
                mu_prod = state["mu_product"].item()
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                denom = v.div(bc2).sqrt().add_(eps)
                mu_prod_next = mu_prod * mu_next
                p.addcdiv_(g, denom, value=-lr * (1.0 - mu) / (1.0 - mu_prod))
                p.addcdiv_(m, denom, value=-lr * mu_next / (1.0 - mu_prod_next))
