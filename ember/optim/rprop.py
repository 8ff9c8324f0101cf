"""Rprop (resilient backpropagation): each element keeps its own step size, grown by
``etas[1]`` while its gradient keeps its sign and shrunk by ``etas[0]`` when the sign flips;
the parameter moves by that step size against the gradient's sign."""

from __future__ import annotations

from ..ops.creation import full_like, zeros_like
from ._util import as_real, check_lr, upgrade_state, zero_step
from .optimizer import Optimizer, grads_of, value

_FLAGS = dict(foreach=None, maximize=False, differentiable=False, capturable=False)


class Rprop(Optimizer):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def __setstate__(self, state):
        super().__setstate__(state)
        upgrade_state(self, _FLAGS)

    def _update(self):
        for group in self.param_groups:
            eta_minus, eta_plus = group["etas"]
            size_min, size_max = group["step_sizes"]
            for p, g in grads_of(group):
                if g.is_sparse:
                    raise RuntimeError("Rprop does not support sparse gradients")
                state = self.state[p]
                if not state:
                    lr = value(group["lr"])
                    state["step"] = zero_step()
                    state["prev"] = zeros_like(p)
                    # a complex element is two real ones: both parts start at lr
                    state["step_size"] = full_like(g, complex(lr, lr) if p.is_complex() else lr)
                state["step"] += 1
                if group["maximize"]:
                    g = -g
                p, g, prev, size = as_real(p, g, state["prev"], state["step_size"])
                # per element: eta_plus where the gradient kept its sign, eta_minus where it
                # flipped, 1 where either is zero (NaN stays NaN, as in PyTorch)
                factor = g.mul(prev).sign()
                factor.masked_fill_(factor.gt(0), eta_plus)
                factor.masked_fill_(factor.lt(0), eta_minus)
                factor.masked_fill_(factor.eq(0), 1)
                size.mul_(factor).clamp_(size_min, size_max)
                # after a sign flip the element does not move and the next step sees no sign
                g = g.masked_fill(factor.eq(eta_minus), 0)
                p.addcmul_(g.sign(), size, value=-1)
                prev.copy_(g)
