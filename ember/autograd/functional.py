"""``ember.autograd.functional``: vjp, jacobian, hessian built on ``autograd.grad``."""

from __future__ import annotations

from . import engine


def _tup(x):
    from .._tensor import Tensor
    return (x,), True if isinstance(x, Tensor) else (tuple(x), False)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    from .._tensor import Tensor
    single = isinstance(inputs, Tensor)
    ins = [inputs] if single else list(inputs)
    ins = [x.detach().requires_grad_() for x in ins]
    from .grad_mode import enable_grad
    with enable_grad():
        out = func(*ins)
    outs = [out] if isinstance(out, Tensor) else list(out)
    vs = None if v is None else ([v] if isinstance(v, Tensor) else list(v))
    gs = engine.grad(outs, ins, vs, create_graph=create_graph, allow_unused=True)
    gs = tuple(g if g is not None else x.new_zeros(x.shape) for g, x in zip(gs, ins))
    out_det = out.detach() if isinstance(out, Tensor) else tuple(o.detach() for o in out)
    return out_det, (gs[0] if single else gs)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: shape ``out.shape + in.shape`` per pair."""
    from .._tensor import Tensor
    from .grad_mode import enable_grad
    single_in = isinstance(inputs, Tensor)
    ins = [inputs] if single_in else list(inputs)
    ins = [x.detach().requires_grad_() for x in ins]
    with enable_grad():
        out = func(*ins)
    single_out = isinstance(out, Tensor)
    outs = [out] if single_out else list(out)
    result = []
    for o in outs:
        rows = [[] for _ in ins]
        flat = o.reshape(-1)
        for j in range(flat.numel()):
            gs = engine.grad([flat[j]], ins, retain_graph=True, create_graph=create_graph,
                             allow_unused=True)
            for k, (g, x) in enumerate(zip(gs, ins)):
                rows[k].append(g if g is not None else x.new_zeros(x.shape))
        per_in = []
        for k, x in enumerate(ins):
            st = x.new_zeros((len(rows[k]),) + tuple(x.shape))  # the rows stacked (autograd
            for j, g in enumerate(rows[k]):                     # sits below the op table)
                st[j] = g
            per_in.append(st.reshape(tuple(o.shape) + tuple(x.shape)))
        result.append(per_in[0] if single_in else tuple(per_in))
    return result[0] if single_out else tuple(result)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    from .._tensor import Tensor
    single = isinstance(inputs, Tensor)

    def grad_fn(*xs):
        from .grad_mode import enable_grad
        with enable_grad():
            out = func(*xs)
            gs = engine.grad([out], list(xs), create_graph=True, allow_unused=True)
        gs = tuple(g if g is not None else x.new_zeros(x.shape) for g, x in zip(gs, xs))
        return gs[0] if single else gs

    return jacobian(grad_fn, inputs, create_graph=create_graph)
