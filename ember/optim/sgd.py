"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""

from __future__ import annotations

from ..ops.creation import empty_like
from .optimizer import Optimizer, check_fused, check_range, fusable, grads_of, required, value


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        if lr is not required:
            check_range("learning rate", lr)
        check_range("momentum value", momentum)
        check_range("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    def _update(self):
        for group in self.param_groups:
            lr, mom, damp = value(group["lr"]), group["momentum"], group["dampening"]
            wd, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
            # (backend's fused step, dtype, new buffers) -> [(p, g[, buf])], one call each
            one_pass: dict = {}
            for p, g in grads_of(group):
                if group.get("fused"):
                    check_fused(p)
                if fusable(p, g, group) and self._fused(p, g, mom, one_pass):
                    continue
                d = -g if maximize else g
                if wd != 0:
                    d = d.add(p, alpha=wd)
                if mom != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = d.clone().detach()
                    else:
                        buf.mul_(mom).add_(d, alpha=1 - damp)
                    d = d.add(buf, alpha=mom) if nesterov else buf
                p.add_(d, alpha=-lr)
            for (fused, _, first), items in one_pass.items():
                # the op-by-op arithmetic above in one pass (backends/cuda/optim.py)
                fused([tuple(x._data for x in q) for q in items], maximize, wd, mom, damp,
                      nesterov, lr, first)
                for q in items:
                    for x in (q[0],) + q[2:]:
                        x._bump()

    def _fused(self, p, g, mom, one_pass: dict) -> bool:
        """Queue ``p`` for its backend's fused SGD step if the step takes it (a new momentum
        buffer is made for it, which the step fills)."""
        fused = p._backend.fused_step("sgd")
        if fused is None:
            return False
        q, first = (p, g), False
        if mom != 0:
            buf = self.state[p].get("momentum_buffer")
            if buf is None:
                buf, first = empty_like(p), True
            q = (p, g, buf)
        if not fused.fits(*(x._data for x in q)):
            return False
        if first:
            self.state[p]["momentum_buffer"] = q[2]
        one_pass.setdefault((fused, p.dtype, first), []).append(q)
        return True
