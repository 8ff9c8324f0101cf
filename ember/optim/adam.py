"""Adam and AdamW (AdamW is Adam with decoupled weight decay), with amsgrad, maximize and
tensor-valued lr/betas."""

from __future__ import annotations


from .._tensor import Tensor
from .. import _dtype as D
from ..backends.cpu import quiet
from .optimizer import (Optimizer, advance_state, check_fused, check_range, fusable, grads_of,
                        value, weight_decay)


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

    def _update(self):
        for group in self.param_groups:
            lr, eps, wd = value(group["lr"]), group["eps"], group["weight_decay"]
            beta1, beta2 = (value(b) for b in group["betas"])
            amsgrad, maximize = group["amsgrad"], group["maximize"]
            decoupled = group["decoupled_weight_decay"]
            # (backend's fused step, dtype, step) -> [(p, g, m, v[, max_v])], one call each
            one_pass: dict = {}
            for p, g in grads_of(group):
                if g.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients, please consider "
                                       "SparseAdam instead")
                state = self.state[p]
                if not state and group.get("fused"):
                    check_fused(p)
                t = advance_state(state, p, "exp_avg", "exp_avg_sq",
                                  *(("max_exp_avg_sq",) if amsgrad else ()))
                m, v = state["exp_avg"], state["exp_avg_sq"]
                if fusable(p, g, group):
                    # the backend's step (any float dtype it takes: half precision computes
                    # in float32, rounded once, as PyTorch's fused step), else numpy's
                    q = (p, g, m, v) + ((state["max_exp_avg_sq"],) if amsgrad else ())
                    fused = p._backend.fused_step("adam")
                    if fused is not None and fused.fits(*[x._data for x in q]):
                        one_pass.setdefault((fused, p._dtype, t), []).append(q)
                        continue
                    if p.dtype in (D.float32, D.float64):
                        _fused_update(p, g, m, v, state.get("max_exp_avg_sq"), t, lr, beta1,
                                      beta2, eps, wd, decoupled, maximize)
                        continue
                if maximize:
                    g = -g
                g = weight_decay(p, g, lr, wd, decoupled)
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
            for (fused, _, t), items in one_pass.items():
                # _fused_update's arithmetic, operation for operation (the CPU backend's: in
                # C, one pass over each parameter; backends/cpu_kernels.py; CUDA's: one
                # Triton launch, backends/cuda/optim.py); weight decay 0: none, 1: decoupled,
                # 2: L2; with amsgrad each tuple ends with max_exp_avg_sq
                fused([tuple([x._data for x in q]) for q in items], maximize,
                      0 if wd == 0 else 1 if decoupled else 2, 1 - lr * wd, wd, beta1, beta2,
                      (1 - beta2 ** t) ** 0.5, eps, -(lr / (1 - beta1 ** t)))
                for q in items:
                    q[0]._bump()
                    for x in q[2:]:
                        x._bump()


@quiet  # the backend's array module called directly: FP errors ignored, as in every kernel
def _fused_update(p, g, m, v, vmax, t, lr, beta1, beta2, eps, wd, decoupled, maximize):
    """One Adam step on the arrays in place, with the same arithmetic (and float rounding
    order) as the op-by-op path: PyTorch's fused CPU Adam plays the same role."""
    xp = p._backend.xp
    P, G, M, V = p._data, g._data, m._data, v._data
    if maximize:
        G = -G
    if wd != 0:
        if decoupled:
            P *= 1 - lr * wd
        else:
            G = G + wd * P
    M += (1 - beta1) * (G - M)  # lerp(m, g, 1 - beta1) with weight < 0.5
    V *= beta2
    V += (1 - beta2) * (G * G)
    bc1 = 1 - beta1 ** t
    bc2_sqrt = (1 - beta2 ** t) ** 0.5
    if vmax is not None:
        xp.maximum(vmax._data, V, out=vmax._data)
        vmax._bump()
        V = vmax._data
    denom = xp.sqrt(V)
    denom /= bc2_sqrt
    denom += eps
    step = M / denom
    step *= -(lr / bc1)
    P += step
    for t_ in (p, m, v):
        t_._bump()


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
