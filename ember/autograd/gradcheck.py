"""Finite-difference checks of analytical gradients (gradcheck, gradgradcheck)."""

from __future__ import annotations

import numpy as np

from . import engine


class GradcheckError(RuntimeError):
    pass


def _inputs(inputs):
    from .._tensor import Tensor
    return (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)


def _outputs(out):
    from .._tensor import Tensor
    return [out] if isinstance(out, Tensor) else [o for o in out if isinstance(o, Tensor)]


def _numerical_jacobian(fn, inputs, k, eps):
    """d(all outputs, flattened)/d(inputs[k], flattened) by central differences."""
    x = inputs[k]
    data = x._data
    flat = data.reshape(-1)  # inputs to gradcheck are contiguous double tensors
    cols = []
    for j in range(flat.size):
        orig = flat[j]
        flat[j] = orig + eps
        plus = np.concatenate([o._data.reshape(-1).astype(np.complex128 if o.is_complex()
                                                          else np.float64)
                               for o in _outputs(fn(*inputs))] or [np.zeros(0)])
        flat[j] = orig - eps
        minus = np.concatenate([o._data.reshape(-1).astype(np.complex128 if o.is_complex()
                                                           else np.float64)
                                for o in _outputs(fn(*inputs))] or [np.zeros(0)])
        flat[j] = orig
        cols.append((plus - minus) / (2 * eps))
    return np.stack(cols, axis=1) if cols else np.zeros((0, 0))


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None) -> bool:
    """Compare ``func``'s analytical gradients with finite differences on double inputs."""
    from ..autograd.grad_mode import no_grad
    inputs = _inputs(inputs)
    diff = [k for k, t in enumerate(inputs)
            if hasattr(t, "requires_grad") and t.requires_grad]
    for k in diff:
        if inputs[k].dtype.name not in ("float64", "complex128"):
            import warnings
            warnings.warn(f"Input #{k} requires gradient and is not a double precision floating "
                          "point or complex. This check will likely fail if all the inputs are "
                          "not of double precision floating point or complex.")
    outs = _outputs(func(*inputs))
    sizes = [o.numel() for o in outs]
    total = sum(sizes)
    for k in diff:
        with no_grad():
            num = _numerical_jacobian(func, inputs, k, eps)
        ana = np.zeros((total, inputs[k].numel()))
        row = 0
        for o in outs:
            if not o.requires_grad:
                row += o.numel()
                continue
            for j in range(o.numel()):
                g = o.new_zeros(o.shape)
                g._data.reshape(-1)[j] = 1
                (gi,) = engine.grad([o], [inputs[k]], [g], retain_graph=True, allow_unused=True)
                if gi is not None:
                    ana[row + j] = gi._data.reshape(-1).real
            row += o.numel()
        if num.size and not np.allclose(ana, num.real, rtol=rtol, atol=atol):
            if raise_exception:
                raise GradcheckError(
                    f"Jacobian mismatch for output 0 with respect to input {k},\n"
                    f"numerical:{num.real}\nanalytical:{ana}\n")
            return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False) -> bool:
    """gradcheck applied to the gradient of ``func`` (second derivatives)."""
    inputs = _inputs(inputs)
    outs = _outputs(func(*inputs))
    if grad_outputs is None:  # randn_like(o), through the methods the op table binds
        grad_outputs = [o.new_empty(o.shape).normal_().requires_grad_() for o in outs]
    else:
        grad_outputs = list(_inputs(grad_outputs))
    n = len(inputs)
    diff = [k for k, t in enumerate(inputs) if hasattr(t, "requires_grad") and t.requires_grad]

    def first_grad(*args):
        from .grad_mode import enable_grad
        ins, gos = args[:n], args[n:]
        with enable_grad():  # gradcheck evaluates this under no_grad for finite differences
            o = _outputs(func(*ins))
            gs = engine.grad(o, [ins[k] for k in diff], list(gos), create_graph=True,
                             allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grad, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)
