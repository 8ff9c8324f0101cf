"""The autograd engine: each scenario is one program run in ember and in torch, compared."""

import numpy as np
import pytest
import torch

import ember
from oracle import assert_same, to_numpy

X = np.array([[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]])


def leaf(lib, a=X, dtype="float64"):
    return lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True)


def both(program):
    """Run ``program(lib)`` for ember and torch; compare whatever it returns."""
    out_e = program(ember)
    out_t = program(torch)
    assert_same(out_e, out_t)
    return out_e


# ---------------------------------------------------------------------- scenarios
def acc_twice(lib):
    x = leaf(lib)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    return x.grad


def diamond(lib):
    x = leaf(lib)
    y = x.exp()
    z = y * y + y.sin() + y  # y used three times
    z.sum().backward()
    return x.grad


def retain_then_again(lib):
    x = leaf(lib)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    return x.grad


def second_order(lib):
    x = leaf(lib)
    y = (x ** 3).sum()
    (g,) = lib.autograd.grad(y, x, create_graph=True)
    (h,) = lib.autograd.grad(g.sum(), x)
    return g.detach(), h


def third_order(lib):
    x = leaf(lib)
    y = (x.sin() * x).sum()
    (g,) = lib.autograd.grad(y, x, create_graph=True)
    (h,) = lib.autograd.grad(g.sum(), x, create_graph=True)
    (k,) = lib.autograd.grad(h.sum(), x)
    return k


def grad_outputs(lib):
    x = leaf(lib)
    y = x * 2 + x.tanh()
    v = lib.tensor(np.ones_like(X) * 0.5, dtype=lib.float64)
    return lib.autograd.grad(y, x, grad_outputs=v)


def grad_multiple(lib):
    x, w = leaf(lib), leaf(lib, X[::-1].copy())
    y = (x * w).sum() + (w * w).sum()
    return lib.autograd.grad(y, [x, w])


def grad_allow_unused(lib):
    x, u = leaf(lib), leaf(lib)
    y = (x * 2).sum()
    gx, gu = lib.autograd.grad(y, [x, u], allow_unused=True)
    return gx, gu is None


def grad_materialize(lib):
    x, u = leaf(lib), leaf(lib)
    y = (x * 2).sum()
    return lib.autograd.grad(y, [x, u], materialize_grads=True)


def grad_nonleaf(lib):
    x = leaf(lib)
    h = x * 3
    y = (h * h).sum()
    return lib.autograd.grad(y, h)


def grad_does_not_accumulate(lib):
    x = leaf(lib)
    lib.autograd.grad((x * x).sum(), x)
    return x.grad is None


def backward_inputs(lib):
    x, w = leaf(lib), leaf(lib)
    (x * w).sum().backward(inputs=[x])
    return x.grad, w.grad is None


def backward_gradient(lib):
    x = leaf(lib)
    y = x * x
    y.backward(lib.tensor(np.full_like(X, 2.0), dtype=lib.float64))
    return x.grad


def tensor_hook(lib):
    x = leaf(lib)
    y = x * 2
    y.register_hook(lambda g: g * 10)
    y.sum().backward()
    return x.grad


def leaf_hook_and_remove(lib):
    x = leaf(lib)
    seen = []
    h = x.register_hook(lambda g: seen.append(g.clone()))
    (x * 2).sum().backward()
    h.remove()
    (x * 2).sum().backward()
    return x.grad, len(seen)


def retain_grad(lib):
    x = leaf(lib)
    h = x * 3
    h.retain_grad()
    (h * h).sum().backward()
    return h.grad, x.grad, h.retains_grad


def custom_function(lib):
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, k):
            r = a.exp() * k
            ctx.save_for_backward(r)
            ctx.k = k
            return r

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return g * r, None

    x = leaf(lib)
    y = Exp.apply(x, 2.0)
    y.sum().backward()
    return y.detach(), x.grad, y.grad_fn.name()


def custom_function_needs_and_nondiff(lib):
    class SortLike(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.flags = ctx.needs_input_grad
            idx = (a > 0).to(lib.int64)
            ctx.mark_non_differentiable(idx)
            return a * b, idx

        @staticmethod
        def backward(ctx, g, gidx):
            return g * 2, None

    x = leaf(lib)
    b = lib.tensor(X, dtype=lib.float64)
    y, idx = SortLike.apply(x, b)
    y.sum().backward()
    return x.grad, idx.requires_grad, y.grad_fn is not None


def custom_function_materialize(lib):
    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(False)
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            assert g2 is None
            return g1 * 2

    x = leaf(lib)
    y1, _ = Two.apply(x)
    y1.sum().backward()
    return x.grad


def inplace_on_nonleaf(lib):
    x = leaf(lib)
    y = x * 2
    y.add_(x)  # y = 3x
    y.mul_(x)  # 3x^2; the gradient for x needs y's value from before the write
    y.sin_()
    y.sum().backward()
    return x.grad, y.grad_fn.name()


def inplace_on_view(lib):
    x = leaf(lib)
    b = x * 1
    v = b.t()
    v.mul_(3)
    (b * b).sum().backward()
    return b.detach(), x.grad


def no_grad_inplace_on_leaf(lib):
    x = leaf(lib)
    with lib.no_grad():
        x.mul_(2)
    (x * x).sum().backward()
    return x.detach(), x.grad


def detach_shares(lib):
    x = leaf(lib)
    d = x.detach()
    d.zero_()
    return x.detach(), d.requires_grad, x._version


def grad_modes(lib):
    x = leaf(lib)
    with lib.no_grad():
        a = x * 2
        with lib.enable_grad():
            b = x * 2
    with lib.set_grad_enabled(False):
        c = x * 2
    d = x * 2
    with lib.inference_mode():
        e = x * 2

    @lib.no_grad()
    def f(t):
        return t * 2

    prev = lib.is_grad_enabled()
    lib.set_grad_enabled(False)
    g = x * 2
    lib.set_grad_enabled(True)
    return (a.requires_grad, b.requires_grad, c.requires_grad, d.requires_grad,
            e.requires_grad, f(x).requires_grad, g.requires_grad, prev, lib.is_grad_enabled())


def grad_fn_graph(lib):
    x = leaf(lib)
    y = (x * 2).exp().sum()
    names = []
    fn = y.grad_fn
    while fn is not None:
        names.append(fn.name())
        nxt = [f for f, _ in fn.next_functions if f is not None]
        fn = nxt[0] if nxt else None
    return names[:-1], names[-1].endswith("AccumulateGrad")


def node_hooks(lib):
    x = leaf(lib)
    y = x * 2
    calls = []
    y.grad_fn.register_prehook(lambda go: calls.append("pre"))
    y.grad_fn.register_hook(lambda gi, go: calls.append("post"))
    y.sum().backward()
    return calls


def broadcast_grads(lib):
    x = lib.tensor(np.arange(3.0), dtype=lib.float64, requires_grad=True)
    m = lib.tensor(X, dtype=lib.float64, requires_grad=True)
    s = lib.tensor(2.0, dtype=lib.float64, requires_grad=True)
    ((x * m + s) / (m + 3)).sum().backward()
    return x.grad, m.grad, s.grad


def mixed_dtype_grads(lib):
    x = lib.tensor(X, dtype=lib.float32, requires_grad=True)
    w = lib.tensor(X, dtype=lib.float64, requires_grad=True)
    (x * w).sum().backward()
    return x.grad, w.grad


def multi_root(lib):
    x = leaf(lib)
    a, b = (x * 2).sum(), (x * x).sum()
    lib.autograd.backward([a, b])
    return x.grad


SCENARIOS = [acc_twice, diamond, retain_then_again, second_order, third_order, grad_outputs,
             grad_multiple, grad_allow_unused, grad_materialize, grad_nonleaf,
             grad_does_not_accumulate, backward_inputs, backward_gradient, tensor_hook,
             leaf_hook_and_remove, retain_grad, custom_function,
             custom_function_needs_and_nondiff, custom_function_materialize, inplace_on_nonleaf,
             inplace_on_view, no_grad_inplace_on_leaf, detach_shares, grad_modes,
             grad_fn_graph, node_hooks, broadcast_grads, mixed_dtype_grads, multi_root]


@pytest.mark.parametrize("program", SCENARIOS, ids=lambda f: f.__name__)
def test_scenario(program):
    both(program)


# ---------------------------------------------------------------------- errors
def _freed(lib):
    x = leaf(lib)
    y = (x * x).sum()
    y.backward()
    y.backward()


def _modified_saved(lib):
    x = leaf(lib)
    h = x * 1
    y = h * h
    h.add_(1)
    y.sum().backward()


def _modified_output(lib):
    x = leaf(lib)
    y = x.exp()
    y.add_(1)
    y.sum().backward()


def _inplace_self_saved_as_other(lib):
    y = leaf(lib) * 2
    y.mul_(y)  # `other` is y itself, overwritten by the op: PyTorch refuses at backward
    y.sum().backward()


def _inplace_leaf(lib):
    leaf(lib).add_(1)


def _inplace_view_of_leaf(lib):
    leaf(lib).t().mul_(2)


def _nonscalar(lib):
    (leaf(lib) * 2).backward()


def _no_grad_tensor(lib):
    lib.tensor(X).sum().backward()


def _int_requires_grad(lib):
    lib.tensor([1, 2, 3]).requires_grad_()


def _grad_unused(lib):
    x, u = leaf(lib), leaf(lib)
    lib.autograd.grad((x * 2).sum(), [x, u])


def _grad_input_not_requiring(lib):
    x = leaf(lib)
    lib.autograd.grad((x * 2).sum(), lib.tensor(X))


def _grad_shape_mismatch(lib):
    x = leaf(lib)
    (x * 2).backward(lib.ones(3, dtype=lib.float64))


def _set_requires_grad_nonleaf(lib):
    x = leaf(lib)
    (x * 2).requires_grad = False


def _numpy_requires_grad(lib):
    leaf(lib).numpy()


def _hook_on_no_grad(lib):
    lib.tensor(X).register_hook(lambda g: g)


def _custom_saved_freed(lib):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a

    x = leaf(lib)
    y = F.apply(x).sum()
    y.backward()
    y.backward()


ERRORS = [
    (_freed, "backward through the graph a second time"),
    (_modified_saved, "modified by an inplace operation"),
    (_modified_output, "modified by an inplace operation"),
    (_inplace_self_saved_as_other, "modified by an inplace operation"),
    (_inplace_leaf, "a leaf Variable that requires grad is being used in an in-place"),
    (_inplace_view_of_leaf, "a view of a leaf Variable that requires grad"),
    (_nonscalar, "grad can be implicitly created only for scalar outputs"),
    (_no_grad_tensor, "does not require grad and does not have a grad_fn"),
    (_int_requires_grad, "only Tensors of floating point dtype can require gradients"),
    (_grad_unused, "appears to not have been used in the graph"),
    (_grad_input_not_requiring, "does not require grad"),
    (_grad_shape_mismatch, "Mismatch in shape"),
    (_set_requires_grad_nonleaf, "you can only change requires_grad flags of leaf variables"),
    (_numpy_requires_grad, "Can't call numpy() on Tensor that requires grad"),
    (_hook_on_no_grad, "cannot register a hook on a tensor that doesn't require gradient"),
    (_custom_saved_freed, "backward through the graph a second time"),
]


@pytest.mark.parametrize("program,match", ERRORS, ids=lambda v: getattr(v, "__name__", ""))
def test_error(program, match):
    with pytest.raises(Exception) as te:
        program(torch)
    with pytest.raises(type(te.value)) as ee:
        program(ember)
    assert match in str(ee.value), str(ee.value)
    assert match in str(te.value), f"torch's message changed: {te.value}"


# ---------------------------------------------------------------------- gradcheck
def test_gradcheck_passes_and_catches_wrong_gradient():
    x = ember.tensor(X, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda t: (t.sin() * t).exp(), (x,))
    assert ember.autograd.gradgradcheck(lambda t: (t * t * t).sum(), (x,))

    class Wrong(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    with pytest.raises(RuntimeError):
        ember.autograd.gradcheck(Wrong.apply, (x,))
    assert not ember.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False)


def test_version_counter_shared_by_views_and_bumped_by_inplace():
    x = ember.zeros(3, 4)
    v = x.t()
    assert v._base is x and v._version == x._version == 0
    v.add_(1)
    assert x._version == 1 and v._version == 1
    assert to_numpy(x).sum() == 12
    x.mul_(2)
    assert v._version == 2


def test_inplace_result_cast_and_shape_errors():
    xi = ember.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        xi.add_(ember.tensor([0.5, 0.5, 0.5]))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        ember.zeros(3).add_(ember.zeros(2, 3))


def test_out_argument():
    a, b = ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0])
    out = ember.empty(2)
    r = ember.add(a, b, out=out)
    assert r is out and out.tolist() == [4.0, 6.0] and out._version == 1
    small = ember.empty(0)
    ember.mul(a, b, out=small)
    assert small.tolist() == [3.0, 8.0]
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        ember.add(a.requires_grad_(), b, out=ember.empty(2))


def test_accumulate_grad_takes_a_gradient_no_one_else_holds_and_copies_shared_ones():
    """AccumulateGrad makes a fresh gradient ``.grad`` without a copy (as PyTorch steals it),
    but a gradient another leaf, a hook or a view also holds is copied: no two ``.grad``s or a
    hook's tensor share memory, and later accumulation stays right."""
    a = ember.randn(4, requires_grad=True)
    b = ember.randn(4, requires_grad=True)
    kept = []
    c = ember.randn(4, requires_grad=True)
    c.register_hook(lambda g: kept.append(g))
    w = ember.randn(2, 3, requires_grad=True)
    x = ember.randn(5, 3)
    ((a + b).sum() + (c * 3).sum() + ember.nn.functional.linear(x, w).sum()).backward()
    assert a.grad.tolist() == [1.0] * 4 and b.grad.tolist() == [1.0] * 4
    a.grad.add_(1)
    assert b.grad.tolist() == [1.0] * 4  # a and b got one gradient object: copied
    c.grad.add_(1)
    assert kept[0].tolist() == [3.0] * 4  # the hook's tensor is not c.grad
    expect = x.sum(0).expand(2, 3)
    assert ember.allclose(w.grad, expect)
    ((a * 2).sum() + ember.nn.functional.linear(x, w).sum()).backward()
    assert a.grad.tolist() == [4.0] * 4 and ember.allclose(w.grad, 2 * expect)
    assert b.grad.tolist() == [1.0] * 4


def test_accumulate_grad_copies_nothing_for_fresh_gradients(monkeypatch):
    """A linear layer's and a product's gradients are fresh: none is cloned into ``.grad``."""
    w = ember.randn(2, 3, requires_grad=True)
    bias = ember.randn(2, requires_grad=True)
    c = ember.randn(4, requires_grad=True)
    x = ember.randn(5, 3)
    loss = ember.nn.functional.linear(x, w, bias).sum() + (c * 3).sum()
    clones = []
    real = ember.Tensor.clone
    monkeypatch.setattr(ember.Tensor, "clone", lambda self, *a, **k: clones.append(self) or
                        real(self, *a, **k))
    loss.backward()
    assert clones == []
    assert ember.allclose(w.grad, x.sum(0).expand(2, 3)) and bias.grad.tolist() == [5.0, 5.0]
    assert c.grad.tolist() == [3.0] * 4
