"""Views at an offset in compiled graphs: split / unbind parts, narrow and select become loads
of their source buffer starting further on (index arithmetic, no copy), and a reshape may
split a dim of such a view; ``cat`` is one kernel writing each input into its slice.
Compiled results equal eager ember's forward and backward, the ops do not run eagerly, and
eager consumers receive numpy views at the right offset."""

from __future__ import annotations

import pytest
from compile_util import close, fresh_compiler, rand  # noqa: F401 (autouse fixture)

import ember
from ember.compiler import compile
from ember.compiler.lower import _split_strides

F = ember.nn.functional

CASES = {
    "split parts": lambda x: [p.exp() + 1 for p in x.split(3, dim=-1)],
    "split uneven": lambda x: [p * 2 for p in x.split([1, 5, 3], dim=-1)],
    "split then head view": lambda x: [p.reshape(4, 6, 3, 1).transpose(1, 2).sin()
                                       for p in x.split(3, dim=-1)],
    "split of computed": lambda x: [p.sum(-1) for p in (x * 3 + 1).split(2, dim=1)],
    "chunk": lambda x: [p.tanh() for p in x.chunk(3, dim=0)],
    "unbind": lambda x: [u - 1 for u in x.unbind(1)],
    "narrow": lambda x: (x.narrow(1, 2, 3).cos(), x.narrow(2, -4, 2) * 3),
    "select": lambda x: (x.select(0, -1).tanh(), x.select(2, 4).softmax(-1)),
    "part to matmul": lambda x: x.split(3, dim=-1)[1] @ x.split(3, dim=-1)[2].transpose(1, 2),
    "part as output": lambda x: x.split(3, dim=-1),
    "part reduced over rows": lambda x: x.narrow(2, 3, 5).sum(0),
    "adjoint": lambda x: (x.adjoint().exp(), x.mT @ x, x.mH.sum(-1)),
    "cat of computed": lambda x: ember.cat([x.exp(), x.transpose(0, 1).transpose(0, 1) * 2,
                                            x[..., :2]], dim=2),
    "cat dim 0 then op": lambda x: ember.cat([x, x.sin()], 0).cos(),
    "split then cat": lambda x: ember.cat(list(reversed(x.split(3, dim=-1))), dim=-1) + 1,
    "cat with empty": lambda x: ember.cat([x[:, :0], x, x.new_zeros(0)], 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("layout", ["contiguous", "transposed input"])
def test_offset_views_match_eager(name, layout):
    fn = CASES[name]
    x = rand(4, 6, 9)
    if layout == "transposed input":
        x = rand(9, 6, 4).permute(2, 1, 0)  # a strided graph input
    cf = compile(fn)
    with ember.no_grad():
        close(cf(x), fn(x))
    src = cf._entries[-1].run.wrapper_source
    for op in ("split", "unbind", "narrow", "select", "adjoint", "cat"):
        assert f"# ember.ops.{op}," not in src, op


@pytest.mark.parametrize("name", ["split parts", "split then head view", "narrow", "select",
                                  "part to matmul", "adjoint", "cat of computed",
                                  "split then cat"])
def test_offset_views_backward(name):
    fn = CASES[name]
    x = rand(4, 6, 9).requires_grad_()
    xe = x.detach().clone().requires_grad_()
    out = compile(fn)(x)
    ref = fn(xe)
    outs, refs = (out, ref) if isinstance(out, (list, tuple)) else ([out], [ref])
    sum(o.square().sum() for o in outs).backward()
    sum(r.square().sum() for r in refs).backward()
    close(x.grad, xe.grad)


def test_empty_offset_view_saved_for_backward():
    """A view at an offset into an empty buffer (``x.select(1, 1)`` of a (0, 2) input) that a
    training forward returns: no element is reached, so the offset past the empty memory is
    fine (found by the fuzzer at 600 examples)."""
    x = ember.randn(0, 2).requires_grad_()
    xe = x.detach().clone().requires_grad_()
    fn = (lambda a: a.abs().select(1, 1).abs())
    out = compile(fn)(x)
    assert tuple(out.shape) == (0,)
    out.sum().backward()
    fn(xe).sum().backward()
    close(x.grad, xe.grad)


def test_cat_promotes_and_dynamic_sizes_run_eagerly():
    x, i = rand(3, 4), ember.arange(12).reshape(3, 4)
    f = (lambda x, i: ember.cat([x, i, (i > 5)], 0))
    cf = compile(f)
    with ember.no_grad():
        close(cf(x, i), f(x, i))
    assert "# ember.ops.cat," not in cf._entries[-1].run.wrapper_source
    g = (lambda x: ember.cat([x, x * 2], 1))
    cg = compile(g, dynamic=True)
    for n in (3, 5):
        x = rand(n, 4)
        with ember.no_grad():
            close(cg(x), g(x))


def test_attention_heads_read_the_qkv_buffer_in_place():
    """The GPT block's q, k, v: one buffer from the qkv projection, read at three offsets by
    the head-transposing kernels, with no copy in between."""
    w = rand(3 * 32, 32, seed=1)

    def f(x):
        q, k, v = F.linear(x, w).split(32, dim=2)
        q, k, v = (t.view(2, 8, 4, 8).transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    x = rand(2, 8, 32)
    cf = compile(f)
    with ember.no_grad():
        close(cf(x), f(x))
    run = cf._entries[-1].run
    assert "ember.ops.split" not in run.wrapper_source
    assert "ember.ops.view" not in run.wrapper_source
    assert "_contig(" not in run.wrapper_source.split("def call")[1].split("\n", 2)[2]


@pytest.mark.parametrize("shape, strides, new, want", [
    ((16, 64, 128), (24576, 384, 1), (16, 64, 4, 32), (24576, 384, 32, 1)),  # split a dim
    ((16, 64, 128), (24576, 384, 1), (1024, 128), (384, 1)),  # merge the outer dims
    ((16, 64, 128), (24576, 384, 1), (16, 8192), None),  # the row is not contiguous
    ((4, 6), (1, 4), (24,), None),  # transposed: a copy is needed
    ((4, 6), (6, 1), (2, 2, 3, 2), (12, 6, 2, 1)),
    ((4, 1, 6), (6, 6, 1), (24, 1), (1, 0)),
    ((0, 3), (3, 1), (3, 0), (1, 1)),  # empty: any strides, contiguous ones
])
def test_split_strides(shape, strides, new, want):
    assert _split_strides(shape, strides, new) == want
