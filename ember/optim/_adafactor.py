"""Adafactor (PyTorch 2.5+): Adam-like steps whose second-moment estimate of a matrix is kept
factored as row and column means, with a relative step size and update clipping."""

from __future__ import annotations

from .. import _dtype as D
from ..ops.creation import tensor, zeros, zeros_like
from ._util import check_lr, scalar_dtype, scalar_or_tensor, upgrade_state
from .optimizer import Optimizer, grads_of


class Adafactor(Optimizer):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        check_lr(lr, "Learning rate should be >= 0 but is: {}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def __setstate__(self, state):
        super().__setstate__(state)
        upgrade_state(self, dict(foreach=None))

    def _update(self):
        for group in self.param_groups:
            items = []
            for p, g in grads_of(group):
                if p.is_complex():
                    raise RuntimeError("Adafactor does not support complex parameters")
                if g.is_sparse:
                    raise RuntimeError("Adafactor does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = tensor(0.0, dtype=scalar_dtype())
                    if g.dim() > 1:  # factored: one mean per row and one per column
                        state["row_var"] = zeros((*g.shape[:-1], 1), dtype=g.dtype,
                                                 device=g.device)
                        state["col_var"] = zeros((*g.shape[:-2], 1, g.shape[-1]),
                                                 dtype=g.dtype, device=g.device)
                    else:
                        state["variance"] = zeros_like(g)
                items.append((p, g, state))
            self._update_group(group, items)

    @staticmethod
    def _update_group(group, items):
        # a tensor lr stays a tensor, so the step size is computed in its dtype as in PyTorch
        lr, d, wd = scalar_or_tensor(group["lr"]), group["d"], group["weight_decay"]
        beta2_decay = group["beta2_decay"]
        eps1, eps2 = group["eps"]
        for p, g, state in items:
            if group["maximize"]:
                g = -g
            if eps1 is None:  # the first parameter's dtype then holds for the whole group
                eps1 = D.finfo(p.dtype).eps
            state["step"] += 1
            t = state["step"].item()
            beta2_complement = t ** beta2_decay
            rho = min(lr, 1 / t ** 0.5)
            alpha = max(eps2, p.norm(2).item() / p.numel() ** 0.5) * rho
            if wd != 0:
                p.mul_(1 - lr * wd)
            if g.dim() > 1:
                row, col = state["row_var"], state["col_var"]
                row.lerp_(g.norm(dim=-1, keepdim=True).square_().div_(g.shape[-1]),
                          beta2_complement)
                col.lerp_(g.norm(dim=-2, keepdim=True).square_().div_(g.shape[-2]),
                          beta2_complement)
                var = row @ col
                var.div_(row.mean(dim=-2, keepdim=True).clamp_(min=eps1))
            else:
                state["variance"].lerp_(g * g, beta2_complement)
                var = state["variance"].clone()
            update = var.clamp_(min=eps1 * eps1).rsqrt_().mul_(g)
            denom = max(1.0, update.norm(2).item() / (update.numel() ** 0.5 * d))
            p.add_(update, alpha=-alpha / denom)
