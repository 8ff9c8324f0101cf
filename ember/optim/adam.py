"""Adam and AdamW (AdamW is Adam with decoupled weight decay), with amsgrad, maximize and
tensor-valued lr/betas."""

from __future__ import annotations

from .._tensor import Tensor
from ..ops.creation import zeros_like
from .. import _dtype as D
from .optimizer import Optimizer, check_range, grads_of, value


def new_step():
    from ..ops.creation import zeros
    return zeros((), dtype=D.float32)


def _as_hyper(name, v):
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise ValueError(f"Tensor {name} must be 1-element")
        return v.reshape(())
    return v


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        lr = _as_hyper("lr", lr)
        check_range("learning rate", lr)
        check_range("epsilon value", eps)
        b0, b1 = betas
        if isinstance(b0, Tensor) != isinstance(b1, Tensor):
            raise ValueError("betas must be either both floats or both Tensors")
        betas = (_as_hyper("betas[0]", b0), _as_hyper("betas[1]", b1))
        for i, b in enumerate(betas):
            check_range("beta parameter", b, 0.0, 1.0, index=i)
        check_range("weight_decay value", weight_decay)
        if isinstance(lr, Tensor) and foreach and not capturable:
            raise ValueError("lr as a Tensor is not supported for capturable=False and "
                             "foreach=True")
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        if fused and differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable,
                                      fused=fused, decoupled_weight_decay=decoupled_weight_decay))

    def step(self, closure=None):
        return self._run_step(self._update, closure)

    def _update(self):
        for group in self.param_groups:
            lr, eps, wd = value(group["lr"]), group["eps"], group["weight_decay"]
            beta1, beta2 = (value(b) for b in group["betas"])
            amsgrad, maximize = group["amsgrad"], group["maximize"]
            decoupled = group["decoupled_weight_decay"]
            for p, g in grads_of(group):
                if g.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients, please consider "
                                       "SparseAdam instead")
                state = self.state[p]
                if not state:
                    state["step"] = new_step()
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = zeros_like(p)
                if maximize:
                    g = -g
                m, v = state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                t = state["step"].item()
                if wd != 0:
                    if decoupled:
                        p.mul_(1 - lr * wd)
                    else:
                        g = g.add(p, alpha=wd)
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g.conj(), value=1 - beta2)
                bc1 = 1 - beta1 ** t
                bc2_sqrt = (1 - beta2 ** t) ** 0.5
                if amsgrad:
                    vmax = state["max_exp_avg_sq"]
                    vmax.copy_(vmax.maximum(v))
                    denom = (vmax.sqrt() / bc2_sqrt).add_(eps)
                else:
                    denom = (v.sqrt() / bc2_sqrt).add_(eps)
                p.addcdiv_(m, denom, value=-(lr / bc1))


class AdamW(Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for g in self.param_groups:
            g["decoupled_weight_decay"] = True
