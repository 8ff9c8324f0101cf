"""Views against PyTorch: results share storage and version counter with their base, misc
shape semantics, hypothesis-driven reshapes, and PyTorch's errors for shape ops."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import assert_same, check, raises_like, to_torch
from shape_util import NAN, F, make

import ember

# ---------------------------------------------------------------------- views and storage
# views of a (2, 3, 4) base: each result (or the first of a tuple) shares the base's storage
VIEWS = {
    "view": lambda m, x: x.view(6, 4),
    "reshape": lambda m, x: x.reshape(4, 6),
    "flatten": lambda m, x: x.flatten(1),
    "unflatten": lambda m, x: x.unflatten(2, (2, 2)),
    "expand": lambda m, x: x.unsqueeze(0).expand(1, 2, 3, 4),
    "permute": lambda m, x: x.permute(2, 0, 1),
    "transpose": lambda m, x: x.transpose(0, 2),
    "t": lambda m, x: x[0].t(),
    "mT": lambda m, x: x.mT,
    "adjoint": lambda m, x: x.adjoint(),
    "movedim": lambda m, x: x.movedim(0, 2),
    "unsqueeze": lambda m, x: x.unsqueeze(1),
    "squeeze": lambda m, x: x[:1].squeeze(0),
    "narrow": lambda m, x: x.narrow(2, 1, 2),
    "select": lambda m, x: x.select(1, 2),
    "select_to_0d": lambda m, x: x[1, 2].select(0, 3),
    "diagonal": lambda m, x: x.diagonal(1, 1, 2),
    "as_strided": lambda m, x: x.as_strided((2, 2), (5, 2), 3),
    "as_strided_of_view": lambda m, x: x[1].as_strided((3,), (2,)),
    "unfold": lambda m, x: x.unfold(2, 2, 2),
    "split": lambda m, x: x.split(2, 2)[1],
    "chunk": lambda m, x: x.chunk(3, 1)[2],
    "tensor_split": lambda m, x: x.tensor_split([1, 3], 2)[1],
    "hsplit": lambda m, x: x.hsplit(3)[1],
    "vsplit": lambda m, x: x.vsplit(2)[1],
    "dsplit": lambda m, x: x.dsplit([1])[1],
    "unbind": lambda m, x: x.unbind(2)[3],
    "broadcast_tensors": lambda m, x: m.broadcast_tensors(x, m.zeros(1, 4))[0],
    "meshgrid": lambda m, x: m.meshgrid(x[0, 0], x[1, 1], indexing="ij")[1],
    "atleast_3d": lambda m, x: m.atleast_3d(x[0]),
}
# expanded views repeat elements: PyTorch refuses most writes through them
OVERLAPPING = {"expand", "meshgrid"}


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_shares_storage_and_version(name):
    fn = VIEWS[name]
    results = []
    for m in (ember, torch):
        x = m.arange(24, dtype=m.float64).reshape(2, 3, 4)
        base = x._base if x._base is not None else x
        v = fn(m, x)
        assert v._base is base, f"{m.__name__}: not a view of the base"
        geometry = (tuple(v.shape), tuple(v.stride()), v.storage_offset())
        before = x._version
        if name not in OVERLAPPING:
            v.add_(1)
            assert x._version == before + 1 and v._version == x._version
        results.append((x.clone(), geometry))
    (xe, ge), (xt, gt) = results
    assert ge == gt
    assert_same(xe, xt)
    if name in OVERLAPPING:
        xe_ = ember.arange(24.0).reshape(2, 3, 4)
        assert np.shares_memory(fn(ember, xe_)._data, xe_._data)


def test_view_dtype_shares_storage_and_version():
    results = []
    for m in (ember, torch):
        x = m.arange(6, dtype=m.float32).reshape(2, 3)
        v = x.view(m.int16)
        assert tuple(v.shape) == (2, 6)
        v.zero_()
        assert x._version == 1 and v._version == 1
        results.append(x.clone())
    assert_same(*results)


def test_reshape_of_noncontiguous_copies():
    for m in (ember, torch):
        x = m.arange(6.0).reshape(2, 3).t()
        y = x.reshape(6)
        assert y._base is None
        y.add_(1)
        assert x._version == 0


def test_views_of_leaf_backprop_into_leaf():
    x = make((3, 4), requires_grad=True)
    check(lambda m, a: a.diagonal() * a.narrow(0, 0, 3).select(1, 1) + a.t().unfold(0, 2, 1)
          .sum((1, 2)), None, x)


def test_write_through_diagonal_view_is_tracked_by_autograd():
    def prog(m, a):
        b = a * 1
        b.diagonal().mul_(3)
        return b

    check(prog, None, make((3, 3), requires_grad=True))


# ---------------------------------------------------------------------- misc semantics
def test_repeat_interleave_indices_form():
    for dtype in (ember.int64, ember.int32):
        r = ember.tensor([1, 0, 3, 2], dtype=dtype)
        check(lambda m, a: m.repeat_interleave(a), None, r, grad=False)
        check(lambda m, a: m.repeat_interleave(a, output_size=6), None, r, grad=False)


def test_meshgrid_default_is_ij_without_warning():
    a, b = make((2,)), make((3,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ember.meshgrid(a, b)
    assert [tuple(o.shape) for o in out] == [(2, 3), (2, 3)]


def test_broadcast_shapes_returns_size():
    s = ember.broadcast_shapes((2, 1), [3], 1, ember.Size([1, 1, 1]))
    assert isinstance(s, ember.Size) and s == (1, 2, 3)
    assert ember.broadcast_shapes() == ()


def test_T_warnings_match():
    for shape in [(3,), (2, 3, 4), ()]:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            _ = make(shape).T
        assert any("deprecated" in str(x.message) for x in w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _ = make((2, 3)).T


def test_as_strided_gradient_outside_input_and_overlaps():
    # the view reads storage beyond the input (a narrowed view) and some elements twice
    def prog(m, a):
        base = a * 1
        part = base.narrow(1, 1, 2)
        return part.as_strided((3, 3), (4, 1), 1)

    check(prog, None, make((3, 4), requires_grad=True))


def test_unfold_on_expanded_and_split_gradients_with_unused_outputs():
    x = make((4, 3), requires_grad=True)
    check(lambda m, a: a.split(1)[2] * 2, None, x)
    check(lambda m, a: m.tensor_split(a, [1, 1, 3])[3], None, x)
    check(lambda m, a: a.expand(2, 4, 3).unfold(1, 2, 2), None, x)


# ---------------------------------------------------------------------- hypothesis
dims = st.lists(st.integers(0, 3), min_size=0, max_size=4)


@st.composite
def shape_sets(draw):
    """Two or three shapes that mostly broadcast (ones are sprinkled into random shapes)."""
    base = draw(dims)
    out = []
    for _ in range(draw(st.integers(1, 3))):
        s = list(base[draw(st.integers(0, len(base))):])
        s = [1 if draw(st.booleans()) else v for v in s]
        if draw(st.integers(0, 4)) == 0 and s:
            s[draw(st.integers(0, len(s) - 1))] = draw(st.integers(0, 3))
        out.append(tuple(s))
    return out


def _outcome(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the exception type is the outcome compared
        return type(e)


@settings(max_examples=150, deadline=None)
@given(shape_sets())
def test_broadcasting_matches_torch(shapes):
    se = _outcome(lambda: tuple(ember.broadcast_shapes(*shapes)))
    stt = _outcome(lambda: tuple(torch.broadcast_shapes(*shapes)))
    assert se == stt
    xs = [make(s, seed=i) for i, s in enumerate(shapes)]
    te = _outcome(lambda: ember.broadcast_tensors(*xs))
    tt = _outcome(lambda: torch.broadcast_tensors(*to_torch(xs)))
    if isinstance(tt, type):
        assert te is tt
    else:
        assert_same(te, tt)
    if not isinstance(stt, type):
        for x in xs:
            assert_same(x.expand(stt), to_torch(x).expand(stt))
            assert_same(x.expand_as(ember.zeros(stt)), to_torch(x).expand_as(torch.zeros(stt)))


# ---------------------------------------------------------------------- errors
X = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
# (id, program(m), ember's message must contain torch's first line)
ERRORS = [
    ("view_bad_numel", lambda m: m.tensor(X).view(4, -1), True),
    ("view_two_infer", lambda m: m.tensor(X).view(-1, -1), True),
    ("view_negative", lambda m: m.tensor(X).view(-2, 3), True),
    ("view_ambiguous_empty", lambda m: m.zeros(0, 3).view(0, -1), True),
    ("view_strides", lambda m: m.tensor(X).t().view(6), True),
    ("view_float_size", lambda m: m.tensor(X).view(2.0, 3), False),
    ("view_dtype_0d", lambda m: m.tensor(1.0).view(m.int16), True),
    ("view_dtype_stride", lambda m: m.tensor(X).t().view(m.int16), True),
    ("view_dtype_size", lambda m: m.tensor(X).view(m.float64), True),
    ("reshape_int_shape", lambda m: m.reshape(m.tensor(X), 6), True),
    ("expand_too_few", lambda m: m.tensor(X).int().expand(3), True),
    ("expand_leading_neg1", lambda m: m.tensor(X).expand(-1, 2, 3), True),
    ("expand_mismatch", lambda m: m.tensor(X).expand(4, 3), True),
    ("expand_negative", lambda m: m.ones(1, 3).expand(-2, 3), True),
    ("permute_length", lambda m: m.tensor(X).permute(0), True),
    ("permute_duplicate", lambda m: m.tensor(X).permute(0, 0), True),
    ("permute_range", lambda m: m.tensor(X).permute(0, 2), True),
    ("transpose_range", lambda m: m.tensor(X).transpose(0, 2), True),
    ("t_3d", lambda m: m.ones(2, 3, 4).t(), True),
    ("adjoint_1d", lambda m: m.ones(3).adjoint(), True),
    ("H_1d", lambda m: m.ones(3).H, True),
    ("H_3d", lambda m: m.ones(2, 3, 4).H, True),
    ("mT_1d", lambda m: m.ones(3).mT, True),
    ("mH_1d", lambda m: m.ones(3).mH, True),
    ("movedim_repeated", lambda m: m.tensor(X).movedim((0, 0), (1, 0)), True),
    ("movedim_repeated_dst", lambda m: m.tensor(X).movedim((0, 1), (1, 1)), True),
    ("movedim_lengths", lambda m: m.tensor(X).movedim((0, 1), (1,)), True),
    ("movedim_range", lambda m: m.tensor(X).movedim(3, 0), True),
    ("unsqueeze_range", lambda m: m.tensor(X).unsqueeze(3), True),
    ("squeeze_range", lambda m: m.tensor(X).squeeze(2), True),
    ("squeeze_repeated", lambda m: m.tensor(X).squeeze((0, 0)), True),
    ("flatten_order", lambda m: m.tensor(X).flatten(1, 0), True),
    ("flatten_0d_range", lambda m: m.tensor(1.0).flatten(1), True),
    ("unflatten_product", lambda m: m.tensor(X).unflatten(1, (2, 2)), True),
    ("unflatten_product_infer", lambda m: m.tensor(X).unflatten(1, (-1, 2)), True),
    ("unflatten_empty", lambda m: m.tensor(X).unflatten(1, ()), True),
    ("narrow_0d", lambda m: m.tensor(1.0).narrow(0, 0, 1), True),
    ("narrow_exceeds", lambda m: m.tensor(X).narrow(0, 1, 2), True),
    ("narrow_start_range", lambda m: m.tensor(X).narrow(0, -3, 1), True),
    ("narrow_negative_length", lambda m: m.tensor(X).narrow(0, 0, -1), True),
    ("narrow_float_start", lambda m: m.tensor(X).narrow(0, m.tensor(1.0), 1), True),
    ("narrow_dim_range", lambda m: m.tensor(X).narrow(2, 0, 1), True),
    ("select_range", lambda m: m.tensor(X).select(0, 2), True),
    ("select_range_neg", lambda m: m.tensor(X).select(1, -4), True),
    ("select_0d", lambda m: m.tensor(1.0).select(0, 0), True),
    ("select_empty", lambda m: m.zeros(0, 3).select(0, 0), True),
    ("diagonal_same_dims", lambda m: m.tensor(X).diagonal(0, 0, 0), True),
    ("diagonal_1d", lambda m: m.ones(3).diagonal(), True),
    ("as_strided_bounds", lambda m: m.tensor(X).as_strided((2, 2), (1, 2), 3), True),
    ("as_strided_negative_stride", lambda m: m.tensor(X).as_strided((2, 2), (-1, 2)), True),
    ("as_strided_negative_offset", lambda m: m.tensor(X).as_strided((2,), (1,), -1), True),
    ("as_strided_lengths", lambda m: m.tensor(X).as_strided((2,), (1, 2)), True),
    ("as_strided_negative_size", lambda m: m.tensor(X).as_strided((2, -1), (1, 2)), True),
    ("unfold_too_big", lambda m: m.tensor(X).unfold(1, 4, 1), True),
    ("unfold_step", lambda m: m.tensor(X).unfold(1, 2, 0), True),
    ("unfold_negative", lambda m: m.tensor(X).unfold(1, -1, 1), True),
    ("unfold_0d", lambda m: m.tensor(1.0).unfold(0, 2, 1), True),
    ("split_zero", lambda m: m.tensor(X).split(0, 1), True),
    ("split_negative", lambda m: m.tensor(X).split(-1, 1), True),
    ("split_sizes_sum", lambda m: m.tensor(X).split([1, 1], 1), True),
    ("split_sizes_negative", lambda m: m.tensor(X).split([1, -1, 3], 1), True),
    ("split_0d", lambda m: m.tensor(1.0).split(1), True),
    ("split_tensor_sizes", lambda m: m.tensor(X).split(m.tensor([1, 2]), 1), True),
    ("chunk_zero", lambda m: m.tensor(X).chunk(0, 1), True),
    ("chunk_0d", lambda m: m.tensor(1.0).chunk(1), True),
    ("tensor_split_zero", lambda m: m.ones(7).tensor_split(0), True),
    ("tensor_split_0d", lambda m: m.tensor(1.0).tensor_split(1), True),
    ("tensor_split_2d_tensor", lambda m: m.ones(7).tensor_split(m.tensor([[3]])), True),
    ("tensor_split_float_tensor", lambda m: m.ones(7).tensor_split(m.tensor([3.0])), True),
    ("hsplit_divisible", lambda m: m.ones(6, 4).hsplit(3), True),
    ("hsplit_zero", lambda m: m.ones(6, 4).hsplit(0), True),
    ("hsplit_0d", lambda m: m.tensor(1.0).hsplit(1), True),
    ("vsplit_1d", lambda m: m.ones(6).vsplit(2), True),
    ("dsplit_2d", lambda m: m.ones(6, 4).dsplit(2), True),
    ("unbind_0d", lambda m: m.tensor(1.0).unbind(), True),
    ("unbind_range", lambda m: m.tensor(X).unbind(2), True),
    ("atleast_not_tensor", lambda m: m.atleast_1d(1.0), False),
    ("atleast_list_not_tensor", lambda m: m.atleast_1d([1.0]), True),
    ("broadcast_shapes_mismatch", lambda m: m.broadcast_shapes((2, 1), (3, 2)), True),
    ("broadcast_shapes_partial", lambda m: m.broadcast_shapes((4, 3), (2, 1, 2), (5, 1, 1, 1)),
     True),
    ("broadcast_shapes_negative", lambda m: m.broadcast_shapes((-1,), (3, 1)), True),
    ("broadcast_shapes_float", lambda m: m.broadcast_shapes((2.0,), (1,)), True),
    ("broadcast_shapes_tensor", lambda m: m.broadcast_shapes(m.tensor(2), (3, 1)), True),
    ("broadcast_tensors_mismatch", lambda m: m.broadcast_tensors(m.ones(2, 3), m.ones(4)), True),
    ("broadcast_tensors_list", lambda m: m.broadcast_tensors([m.ones(2)]), True),
    ("meshgrid_empty", lambda m: m.meshgrid(), True),
    ("meshgrid_2d", lambda m: m.meshgrid(m.ones(2, 2)), False),
    ("meshgrid_dtypes", lambda m: m.meshgrid(m.ones(2), m.ones(3).double()), True),
    ("meshgrid_indexing", lambda m: m.meshgrid(m.ones(2), indexing="yx"), True),
    ("cat_empty_list", lambda m: m.cat([]), True),
    ("cat_sizes", lambda m: m.cat([m.ones(2, 3), m.ones(3, 3)], 1), True),
    ("cat_ndims", lambda m: m.cat([m.ones(2, 3), m.ones(2, 3, 1)], 1), True),
    ("cat_0d", lambda m: m.cat([m.ones(2, 3), m.tensor(2.0)]), True),
    ("cat_dim_range", lambda m: m.cat([m.ones(2, 3)], 2), True),
    ("cat_tensor_arg", lambda m: m.cat(m.ones(2, 3)), True),
    ("cat_not_tensor", lambda m: m.cat([m.ones(2), 1]), False),
    ("cat_float_dim", lambda m: m.cat([m.ones(2)], 1.0), True),
    ("stack_empty", lambda m: m.stack([]), True),
    ("stack_sizes", lambda m: m.stack([m.ones(2, 3), m.ones(3, 2)]), True),
    ("stack_dim_range", lambda m: m.stack([m.ones(2, 3)], 3), True),
    ("hstack_empty", lambda m: m.hstack([]), True),
    ("vstack_empty", lambda m: m.vstack([]), True),
    ("dstack_empty", lambda m: m.dstack([]), True),
    ("column_stack_empty", lambda m: m.column_stack([]), True),
    ("flip_repeated", lambda m: m.tensor(X).flip(0, 0), True),
    ("flip_range", lambda m: m.tensor(X).flip(2), True),
    ("flip_int_dims", lambda m: m.flip(m.tensor(X), 0), True),
    ("flip_float_dims", lambda m: m.flip(m.tensor(X), (0.0,)), True),
    ("flip_no_dims", lambda m: m.tensor(X).flip(), True),
    ("fliplr_1d", lambda m: m.ones(3).fliplr(), True),
    ("flipud_0d", lambda m: m.tensor(1.0).flipud(), True),
    ("roll_align", lambda m: m.roll(m.tensor(X), (1, 2), 0), True),
    ("roll_align_none", lambda m: m.roll(m.tensor(X), (1, 2)), True),
    ("roll_empty_shifts", lambda m: m.roll(m.tensor(X), (), ()), True),
    ("roll_0d_dim", lambda m: m.roll(m.tensor(1.0), 1, 0), True),
    ("roll_range", lambda m: m.roll(m.tensor(X), 1, 2), True),
    ("roll_float", lambda m: m.roll(m.tensor(X), 1.5), True),
    ("rot90_same", lambda m: m.rot90(m.tensor(X), 1, (0, -2)), True),
    ("rot90_ndims", lambda m: m.rot90(m.tensor(X), 1, (0,)), True),
    ("rot90_1d", lambda m: m.rot90(m.ones(3)), True),
    ("rot90_range", lambda m: m.rot90(m.tensor(X), 1, (0, 2)), True),
    ("repeat_too_few", lambda m: m.tensor(X).repeat(2), True),
    ("repeat_negative", lambda m: m.tensor(X).repeat(-1, 2), True),
    ("repeat_none", lambda m: m.tensor(X).repeat(), True),
    ("tile_int", lambda m: m.tile(m.tensor(X), 2), True),
    ("tile_negative", lambda m: m.tile(m.tensor(X), (-1,)), True),
    ("repeat_interleave_sizes", lambda m: m.repeat_interleave(m.tensor(X), m.tensor([1, 2]), 1),
     True),
    ("repeat_interleave_negative_t", lambda m: m.tensor(X).repeat_interleave(m.tensor([1, -2]),
                                                                             0), True),
    ("repeat_interleave_negative", lambda m: m.tensor(X).repeat_interleave(-1, 0), True),
    ("repeat_interleave_2d_repeats", lambda m: m.tensor(X).repeat_interleave(m.tensor([[2]]), 0),
     True),
    ("repeat_interleave_float_repeats",
     lambda m: m.tensor(X).repeat_interleave(m.tensor([2.0]), 0), True),
    ("repeat_interleave_out_size", lambda m: m.tensor(X).repeat_interleave(2, 0, output_size=5),
     True),
    ("repeat_interleave_out_size_t",
     lambda m: m.tensor(X).repeat_interleave(m.tensor([1, 2]), 0, output_size=4), True),
    ("repeat_interleave_indices_2d", lambda m: m.repeat_interleave(m.tensor([[1, 2]])), True),
    ("repeat_interleave_indices_float", lambda m: m.repeat_interleave(m.tensor([1.0])), True),
    ("repeat_interleave_indices_bool", lambda m: m.repeat_interleave(m.tensor([True])), True),
    ("repeat_interleave_0d_dim", lambda m: m.repeat_interleave(m.tensor(1.0), 3, 0), True),
    ("repeat_interleave_float", lambda m: m.repeat_interleave(m.tensor(X), 2.0, 0), False),
    # padding
    ("pad_odd", lambda m: F(m)(m.tensor(X), (1,)), True),
    ("pad_too_long", lambda m: F(m)(m.tensor(X), (1, 2, 3, 4, 5, 6)), True),
    ("pad_0d", lambda m: F(m)(m.tensor(1.0), (1, 1)), True),
    ("pad_crop_too_much", lambda m: F(m)(m.tensor(X), (-2, -2)), True),
    ("pad_crop_one_side", lambda m: F(m)(m.tensor(X), (-4, 2)), True),
    ("pad_int_pad", lambda m: F(m)(m.tensor(X), 1), True),
    ("pad_float_pad", lambda m: F(m)(m.tensor(X), (1.0, 1)), True),
    ("pad_mode", lambda m: F(m)(m.tensor(X), (1, 1), mode="foo"), True),
    ("pad_reflect_value", lambda m: F(m)(m.ones(2, 3, 4), (1, 1), mode="reflect", value=2),
     True),
    ("pad_reflect_2d_input_2d_pad", lambda m: F(m)(m.tensor(X), (1, 1, 1, 1), mode="reflect"),
     True),
    ("pad_replicate_1d_input", lambda m: F(m)(m.ones(3), (1, 1), mode="replicate"), True),
    ("pad_circular_6d", lambda m: F(m)(m.ones(1, 1, 1, 1, 2, 3), (1, 1), mode="circular"), True),
    ("pad_reflect_size", lambda m: F(m)(m.ones(2, 3, 4), (1, 1, 3, 1), mode="reflect"), True),
    ("pad_reflect_size_w", lambda m: F(m)(m.ones(2, 3), (3, 1), mode="reflect"), True),
    ("pad_reflect_size_d", lambda m: F(m)(m.ones(1, 1, 1, 2, 3), (1,) * 6, mode="reflect"),
     True),
    ("pad_reflect_empty", lambda m: F(m)(m.ones(3, 0, 4), (1, 1), mode="reflect"), True),
    ("pad_replicate_empty_w", lambda m: F(m)(m.ones(1, 3, 4, 0), (1, 1, 1, 1),
                                            mode="replicate"), True),
    ("pad_reflect_small_1d", lambda m: F(m)(m.ones(2, 3, 4), (-5, 1), mode="reflect"), True),
    ("pad_replicate_small_2d", lambda m: F(m)(m.ones(2, 3, 4), (-2, -2, -1, -2),
                                             mode="replicate"), True),
    ("pad_reflect_small_2d", lambda m: F(m)(m.ones(2, 3, 4), (-4, 0, -3, 0), mode="reflect"),
     True),
    ("pad_replicate_negative_2d", lambda m: F(m)(m.ones(2, 3, 4), (-1, 0, -4, 0),
                                                mode="replicate"), True),
    ("pad_reflect_negative_2d", lambda m: F(m)(m.ones(2, 3, 4), (-1, 0, -4, 0), mode="reflect"),
     True),
    ("pad_replicate_negative_3d", lambda m: F(m)(m.ones(1, 2, 3, 4), (0, 0, 0, 0, -1, -2),
                                                mode="replicate"), True),
    ("pad_replicate_small_3d", lambda m: F(m)(m.ones(2, 2, 2, 2), (0, -2, 0, -2, 0, -3),
                                             mode="replicate"), True),
    ("pad_circular_wrap", lambda m: F(m)(m.tensor(X), (4, 1), mode="circular"), True),
    ("pad_circular_empty_dim", lambda m: F(m)(m.ones(2, 3, 4), (-3, -2), mode="circular"),
     True),
    ("pad_reflect_bool", lambda m: F(m)(m.ones(2, 3, 4).bool(), (1, 1), mode="reflect"), True),
    ("pad_replicate_bool", lambda m: F(m)(m.ones(2, 3).bool(), (1, 1), mode="replicate"), True),
    ("pad_value_overflow_uint8", lambda m: F(m)(m.ones(2, 2).to(m.uint8), (1, 1), value=-1),
     True),
    ("pad_value_overflow_half", lambda m: F(m)(m.ones(2, 2).half(), (1, 1), value=1e6), True),
    ("pad_value_nan_int", lambda m: F(m)(m.ones(2, 2).int(), (1, 1), value=NAN), True),
    ("pad_value_complex", lambda m: F(m)(m.ones(2, 2), (1, 1), value=1j), True),
]


@pytest.mark.parametrize("prog,exact", [(p, e) for _, p, e in ERRORS],
                         ids=[n for n, _, _ in ERRORS])
def test_error(prog, exact):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ee, te = raises_like(lambda: prog(ember), lambda: prog(torch))
    if exact:
        expected = str(te).split("\n")[0].split(" (Triggered internally")[0]
        assert expected in str(ee), f"{str(ee)!r} lacks {expected!r}"
