"""Errors of in-place writes and Python operators against torch: outputs that partly overlap
an input, writes through expanded views, and operators with operands that are neither
tensors nor numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


# Writing an element-wise (or scan) result into memory an input partly covers: PyTorch refuses
# unless the input is the very same view; reductions and matmul do not check. Each case runs in
# both libraries on the same arange; errors must agree, and results where they are defined
# (PyTorch's value for an overlapping reduction or matmul is an artifact of its loop order:
# both libraries only have to accept those calls).
UNDEFINED = {"sum out into input", "matmul out overlapping"}
OVERLAP = {
    "add_ self": lambda m: (lambda x: x.add_(x))(m.arange(6.).reshape(2, 3)),
    "add_ same view": lambda m: (lambda x: x.add_(x.view(2, 3)))(m.arange(6.).reshape(2, 3)),
    "add_ own row": lambda m: (lambda x: x.add_(x[0]))(m.arange(6.).reshape(2, 3)),
    "add_ own transpose": lambda m: (lambda y: y.add_(y.t()))(m.arange(4.).reshape(2, 2)),
    "interleaved halves": lambda m: (lambda z: z[::2].add_(z[1::2]))(m.arange(6.)),
    "mul out shifted": lambda m: (lambda z: m.mul(z[1:], 3, out=z[:-1]))(m.arange(6.)),
    "exp out same": lambda m: (lambda z: m.exp(z, out=z))(m.arange(6.)),
    "clamp out shifted": lambda m: (lambda z: m.clamp(z[1:], 0, 3, out=z[:-1]))(m.arange(6.)),
    "copy_ disjoint": lambda m: (lambda z: z[:3].copy_(z[3:]))(m.arange(6.)),
    "copy_ shifted": lambda m: (lambda z: z[1:].copy_(z[:-1]))(m.arange(6.)),
    "cumsum out shifted": lambda m: (lambda z: m.cumsum(z[1:], 0, out=z[:-1]))(m.arange(6.)),
    "cumsum_ self": lambda m: (lambda z: z.cumsum_(0))(m.arange(6.)),
    "sum out into input": lambda m: (lambda z: m.sum(z.reshape(2, 3), 0, out=z[:3]))(
        m.arange(6.)),
    "matmul out overlapping": lambda m: (lambda z: m.matmul(
        z[:4].reshape(2, 2), z[:4].reshape(2, 2), out=z[2:6].reshape(2, 2)))(m.arange(6.)),
}


@pytest.mark.parametrize("name", list(OVERLAP))
def test_partial_overlap_of_output_and_input_like_torch(name):
    def run(m):
        try:
            return OVERLAP[name](m), None
        except RuntimeError as e:
            return None, str(e)
    (te, terr), (ee, eerr) = run(torch), run(ember)
    assert terr == eerr
    if terr is None and name not in UNDEFINED:
        np.testing.assert_allclose(ee.numpy(), te.numpy(), rtol=1e-6)


def test_fill_and_zero_write_through_expanded_views_like_torch():
    """fill_ / zero_ write one value everywhere, so PyTorch allows them on an expanded view
    (other in-place ops there raise, tested above)."""
    for m in (torch, ember):
        x = m.zeros(2, 3)
        x[0].expand(4, 3).fill_(2.0)
        x[:, 1:2].expand(2, 5).zero_()
        assert x.tolist() == [[2.0, 0.0, 2.0], [0.0, 0.0, 0.0]], m.__name__
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            m.zeros(3).expand(2, 3).add_(1)


# An operator whose other operand is not a Tensor or number gives Python's own message (the op
# returns NotImplemented, as torch's do); the method and function forms name the argument.
OPERAND_CASES = {
    "x + str": lambda m, x: x + "a",
    "str + x": lambda m, x: "a" + x,
    "x - list": lambda m, x: x - [1.0],
    "x @ int": lambda m, x: x @ 2,
    "int @ x": lambda m, x: 2 @ x,
    "x.add(str)": lambda m, x: x.add("a"),
    "add(x, str)": lambda m, x: m.add(x, "a"),
    "x.sub_(str)": lambda m, x: x.sub_("a"),
    "x.mul(None)": lambda m, x: x.mul(None),
}


@pytest.mark.parametrize("name", list(OPERAND_CASES))
def test_operator_with_a_foreign_operand_like_torch(name):
    def run(m):
        with pytest.raises(TypeError) as e:
            OPERAND_CASES[name](m, m.ones(2, 2))
        return str(e.value)
    assert run(ember) == run(torch)
