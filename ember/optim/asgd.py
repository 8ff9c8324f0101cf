"""ASGD: SGD with a decaying step size eta_t = lr / (1 + lambd * lr * t) ** alpha, keeping a
running average ``ax`` of the iterates that starts after step ``t0``."""

from __future__ import annotations

from .._tensor import Tensor
from ..ops.creation import ones, tensor, zeros_like
from ._util import as_real, check_lr, scalar_dtype, scalar_or_tensor, upgrade_state, zero_step
from .optimizer import Optimizer, check_range, grads_of, value

_FLAGS = dict(foreach=None, maximize=False, differentiable=False, capturable=False)


class ASGD(Optimizer):
    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        check_lr(lr)
        check_range("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def __setstate__(self, state):
        super().__setstate__(state)
        upgrade_state(self, _FLAGS, scalars=("step", "eta", "mu"))

    def _update(self):
        for group in self.param_groups:
            lr, lambd, alpha = scalar_or_tensor(group["lr"]), group["lambd"], group["alpha"]
            t0, wd = group["t0"], group["weight_decay"]
            for p, g in grads_of(group):
                if g.is_sparse:
                    raise RuntimeError("ASGD does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = zero_step()
                    state["eta"] = tensor(value(lr), dtype=scalar_dtype())
                    state["mu"] = ones((), dtype=scalar_dtype())
                    state["ax"] = zeros_like(p)
                step, eta, mu = state["step"], state["eta"], state["mu"]
                if group["maximize"]:
                    g = -g
                p, g, ax = as_real(p, g, state["ax"])
                step += 1
                if wd != 0:
                    g = g.add(p, alpha=wd)
                # eta and mu are scalar tensors of the state dtype; the update reads their value
                eta_v = eta.item()
                p.mul_(1 - lambd * eta_v)
                p.add_(g, alpha=-eta_v)
                if mu.item() != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                t = step.item()
                # with a tensor lr this is tensor arithmetic in its dtype, as in PyTorch
                new_eta = lr / ((1 + lambd * lr * t) ** alpha)
                if isinstance(new_eta, Tensor):
                    eta.copy_(new_eta)
                else:
                    eta.fill_(new_eta)
                mu.fill_(1 / max(1, t - t0))
