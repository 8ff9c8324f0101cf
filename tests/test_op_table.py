"""The op table itself: every op is complete, registered once, and bound where it should be."""

import numpy as np
import pytest

import ember
from ember.ops.registry import OPS, OpDef, op

DIFFERENTIABLE = [d for d in OPS.values() if d.differentiable]


def test_table_is_large_and_named():
    assert len(OPS) > 100
    for name, d in OPS.items():
        assert isinstance(d, OpDef) and d.name == name


@pytest.mark.parametrize("d", list(OPS.values()), ids=lambda d: d.name)
def test_op_is_complete(d):
    assert callable(d.impl), f"{d.name} has no impl"
    assert d.meta is not None or "pointwise" in d.tags or "dynamic_shape" in d.tags or \
        callable(d.run_meta), f"{d.name} has no meta"
    if d.differentiable and d.tensor_params:
        assert d.backward is not None, f"{d.name} is differentiable but has no backward"
    if d.has_function:
        assert getattr(ember, d.name, None) is d, f"ember.{d.name} is not bound"
    if d.has_inplace:
        assert hasattr(ember.Tensor, d.name + "_"), f"Tensor.{d.name}_ is not bound"


def test_registering_a_name_twice_fails():
    with pytest.raises(RuntimeError, match="registered twice"):
        @op("add")
        def add(xp, input: "Tensor"):
            return input


def test_tensor_parameters_must_be_positional():
    with pytest.raises(TypeError, match="must be positional"):
        @op("bad_kwonly_tensor_op")
        def bad(xp, input: "Tensor", *, other: "Tensor"):
            return input
    assert "bad_kwonly_tensor_op" not in OPS


POINTWISE_META = [("add", [((2, 3), ember.float32), ((3,), ember.int64)], {}),
                  ("mul", [((4, 1), ember.float16), ((1, 5), ember.float32)], {}),
                  ("exp", [((2, 2), ember.int32)], {}),
                  ("sum", [((2, 3, 4), ember.int32)], {"dim": 1}),
                  ("reshape", [((2, 3, 4), ember.float64)], {"shape": (6, 4)}),
                  ("transpose", [((2, 3, 4), ember.float32)], {"dim0": 0, "dim1": 2})]


@pytest.mark.parametrize("name,inputs,kwargs", POINTWISE_META, ids=[c[0] for c in POINTWISE_META])
def test_meta_matches_eager(name, inputs, kwargs):
    d = OPS[name]
    metas = [ember.autograd.engine.TensorMeta(ember.zeros(s, dtype=dt)) for s, dt in inputs]
    shape, dtype = d.run_meta(*metas, **kwargs)
    real = d(*[ember.tensor(np.random.rand(*s)).to(dt) for s, dt in inputs], **kwargs)
    assert shape == tuple(real.shape) and dtype is real.dtype
