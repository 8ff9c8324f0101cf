"""Adagrad (state is created when the optimizer is built, as in PyTorch)."""

from __future__ import annotations

from ..ops.creation import full_like
from .optimizer import Optimizer, check_fused, check_range, grads_of, new_step, value


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        check_range("learning rate", lr)
        check_range("lr_decay value", lr_decay)
        check_range("weight_decay value", weight_decay)
        check_range("initial_accumulator_value value", initial_accumulator_value)
        check_range("epsilon value", eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = new_step()
                state["sum"] = full_like(p, group["initial_accumulator_value"])

    def _update(self):
        for group in self.param_groups:
            lr, decay, wd, eps = value(group["lr"]), group["lr_decay"], \
                group["weight_decay"], group["eps"]
            for p, g in grads_of(group):
                if group.get("fused"):
                    check_fused(p)
                state = self.state[p]
                state["step"] += 1
                t = state["step"].item()
                if group["maximize"]:
                    g = -g
                if wd != 0:
                    g = g.add(p, alpha=wd)
                clr = lr / (1 + (t - 1) * decay)
                state["sum"].addcmul_(g, g, value=1)
                std = state["sum"].sqrt().add_(eps)
                p.addcdiv_(g, std, value=-clr)
