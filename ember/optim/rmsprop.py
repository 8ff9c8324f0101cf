"""RMSprop (optionally centered, with momentum)."""

from __future__ import annotations

from .optimizer import Optimizer, advance_state, check_range, grads_of, value, weight_decay


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        check_range("learning rate", lr)
        check_range("epsilon value", eps)
        check_range("momentum value", momentum)
        check_range("weight_decay value", weight_decay)
        check_range("alpha value", alpha)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered,
                                      capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def _update(self):
        for group in self.param_groups:
            lr, alpha, eps = value(group["lr"]), group["alpha"], group["eps"]
            wd, mom, centered = group["weight_decay"], group["momentum"], group["centered"]
            for p, g in grads_of(group):
                state = self.state[p]
                advance_state(state, p, "square_avg",
                              *(("momentum_buffer",) if mom > 0 else ()),
                              *(("grad_avg",) if centered else ()))
                if group["maximize"]:
                    g = -g
                g = weight_decay(p, g, lr, wd, decoupled=False)
                sq = state["square_avg"]
                sq.mul_(alpha).addcmul_(g, g, value=1 - alpha)
                if centered:
                    ga = state["grad_avg"]
                    ga.lerp_(g, 1 - alpha)
                    avg = sq.addcmul(ga, ga, value=-1).sqrt_().add_(eps)
                else:
                    avg = sq.sqrt().add_(eps)
                if mom > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(mom).addcdiv_(g, avg)
                    p.add_(buf, alpha=-lr)
                else:
                    p.addcdiv_(g, avg, value=-lr)
