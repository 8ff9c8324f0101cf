"""L-BFGS: quasi-Newton steps from a limited history of parameter and gradient differences,
with a fixed step or a strong-Wolfe line search (cubic interpolation and zoom).

The arithmetic follows PyTorch's step for step, including which quantities are 0-dim tensors
(directional derivatives, curvature pairs, often the step length ``t``) and which are Python
floats (losses), so iterates and the saved state agree with PyTorch's."""

from __future__ import annotations

import math

from .._tensor import Tensor
from ..autograd.grad_mode import enable_grad
from ..ops.creation import zeros
from ..ops.joining import cat
from ._util import check_lr
from .optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clamped
    to ``bounds`` (by default the interval between x1 and x2); the middle of the bounds when
    the cubic has no minimum there."""
    if bounds is None:
        bounds = (x1, x2) if x1 <= x2 else (x2, x1)
    lo, hi = bounds
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 ** 2 - g1 * g2
    if not disc >= 0:
        return (lo + hi) / 2.0
    d2 = disc.sqrt() if isinstance(disc, Tensor) else math.sqrt(disc)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


class _Point:
    """One trial of the line search: step ``t``, loss ``f``, flat gradient ``g`` and the
    directional derivative ``gtd`` (g . d)."""

    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Find a step ``t`` along ``d`` meeting the strong Wolfe conditions: first bracket an
    interval that holds one (growing ``t`` by cubic extrapolation), then shrink it by cubic
    interpolation. ``evaluate(t)`` returns (loss, flat gradient) at x + t d. Returns the
    chosen point's (loss, gradient, t) and the number of evaluations."""
    d_norm = d.abs().max()
    start = _Point(0, f, g.clone(), gtd)
    f_new, g_new = evaluate(t)
    evals = 1
    new = _Point(t, f_new, g_new, g_new.dot(d))
    prev = start
    bracket = None
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if new.f > (f + c1 * new.t * gtd) or (ls_iter > 1 and new.f >= prev.f):
            bracket = [prev, _Point(new.t, new.f, new.g.clone(), new.gtd)]
            break
        if abs(new.gtd) <= -c2 * gtd:  # strong Wolfe holds at the new point
            bracket = [new]
            done = True
            break
        if new.gtd >= 0:
            bracket = [prev, _Point(new.t, new.f, new.g.clone(), new.gtd)]
            break
        # extrapolate: the next trial lies between 1.01 t and 10 t
        t_next = _cubic_minimum(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd,
                                bounds=(new.t + 0.01 * (new.t - prev.t), new.t * 10))
        prev = _Point(new.t, new.f, new.g.clone(), new.gtd)
        f_new, g_new = evaluate(t_next)
        evals += 1
        new = _Point(t_next, f_new, g_new, g_new.dot(d))
        ls_iter += 1
    if ls_iter == max_ls:  # no bracket in the budget: the ends are the start and the last trial
        bracket = [_Point(0, f, start.g, None), _Point(new.t, new.f, new.g, None)]

    # zoom: keep bracket[low] the best point found and shrink the bracket around it
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    insufficient = False
    while not done and ls_iter < max_ls:
        a, b = bracket
        if abs(b.t - a.t) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        t_lo, t_hi = min(a.t, b.t), max(a.t, b.t)
        margin = 0.1 * (t_hi - t_lo)
        if min(t_hi - t, t - t_lo) < margin:
            # too close to an end: after a second such trial in a row, or at (or past) an end,
            # step a tenth of the bracket inside the nearer end instead
            if insufficient or t >= t_hi or t <= t_lo:
                t = t_hi - margin if abs(t - t_hi) < abs(t - t_lo) else t_lo + margin
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        trial = _Point(t, f_new, g_new.clone(), gtd_new)
        if f_new > (f + c1 * t * gtd) or f_new >= bracket[low].f:
            bracket[high] = trial  # no sufficient decrease: the trial becomes the high end
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]  # the minimum lies on the other side
            bracket[low] = trial
    best = bracket[low]
    return best.f, best.g, best.t, evals


class LBFGS(Optimizer):
    """L-BFGS over all parameters as one flat vector; ``step(closure)`` runs up to
    ``max_iter`` iterations, re-evaluating ``closure`` (which must return the loss after
    computing gradients). One parameter group only; all state is kept under the first
    parameter, as PyTorch does."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    # ------------------------------------------------------------------ flat views
    def _numel(self) -> int:
        if self._numel_cache is None:
            self._numel_cache = sum(2 * p.numel() if p.is_complex() else p.numel()
                                    for p in self._params)
        return self._numel_cache

    def _flat_grad(self) -> Tensor:
        """All gradients in one new vector (zeros for parameters without a gradient)."""
        from ..ops.complex import view_as_real
        parts = []
        for p in self._params:
            g = p.grad
            if g is None:
                part = zeros(p.numel(), dtype=p.dtype, device=p.device)
            else:
                part = (g.to_dense() if g.is_sparse else g).reshape(-1)
            if part.is_complex():
                part = view_as_real(part).reshape(-1)
            parts.append(part)
        return cat(parts, 0)

    def _move(self, t, direction: Tensor) -> None:
        """x += t * direction, the flat direction split over the parameters."""
        from ..ops.complex import view_as_real
        offset = 0
        for p in self._params:
            if p.is_complex():
                p = view_as_real(p)
            n = p.numel()
            p.add_(direction[offset:offset + n].view_as(p), alpha=t)
            offset += n
        if offset != self._numel():
            raise AssertionError(f"Expected offset {offset} to equal {self._numel()}")

    def _evaluate_at(self, closure, x, t, d):
        """Loss and flat gradient at x + t d; the parameters are put back to ``x`` after."""
        self._move(t, d)
        loss = float(closure())
        g = self._flat_grad()
        for p, saved in zip(self._params, x):
            p.copy_(saved)
        return loss, g

    # ------------------------------------------------------------------ step
    def step(self, closure):
        result = []
        self._run_step(lambda: result.append(self._optimize(closure)), None)
        return result[0]

    def _optimize(self, closure):
        if len(self.param_groups) != 1:
            raise AssertionError("Expected exactly one param_group, but got "
                                 f"{len(self.param_groups)}")

        def evaluate():
            with enable_grad():
                return closure()

        group = self.param_groups[0]
        lr = group["lr"]
        if isinstance(lr, Tensor) and lr.dim() != 0:
            lr = lr.squeeze()
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        line_search, history_size = group["line_search_fn"], group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = evaluate()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        opt_cond = flat_grad.abs().max() <= tol_grad
        if opt_cond:  # already optimal
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # the search direction
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad.sub(prev_flat_grad)  # gradient change
                s = d.mul(t)  # parameter change
                ys = y.dot(s)
                if ys > 1e-10:  # curvature positive: remember the pair
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)  # scale of the initial inverse Hessian
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                # two-loop recursion: d = -H g with H the L-BFGS inverse Hessian
                q = flat_grad.neg()
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = q.mul(H_diag)
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=al[i] - be_i)

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the step length: the first iteration ever is scaled by the gradient's size
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d)
            if gtd > -tol_change:  # not a descent direction (to tolerance)
                break

            ls_evals = 0
            if line_search is not None:
                if line_search != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x0 = [p.clone() for p in self._params]
                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    lambda step: self._evaluate_at(evaluate, x0, step, d), t, d, loss,
                    flat_grad, gtd, max_ls=max_eval - evals)
                self._move(t, d)
                opt_cond = flat_grad.abs().max() <= tol_grad
            else:
                self._move(t, d)
                if n_iter != max_iter:  # the last iteration's loss is not needed
                    loss = float(evaluate())
                    flat_grad = self._flat_grad()
                    opt_cond = flat_grad.abs().max() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or evals >= max_eval or opt_cond:
                break
            if d.mul(t).abs().max() <= tol_change:  # the step no longer moves x
                break
            if abs(loss - prev_loss) < tol_change:  # nor the loss
                break

        state["d"] = d
        state["t"] = t
        state["old_dirs"] = old_dirs
        state["old_stps"] = old_stps
        state["ro"] = ro
        state["H_diag"] = H_diag
        state["prev_flat_grad"] = prev_flat_grad
        state["prev_loss"] = prev_loss
        return orig_loss
