"""Writing results into existing tensors: ``out=`` arguments and in-place ops.

PyTorch's rules: an ``out=`` tensor of another shape is resized; a result whose dtype cannot be
cast to the target is an error (some ops demand the exact dtype: ``out_exact``); an element-wise
result may not be written over memory an input partly covers; an expanded view (several
elements at one address) is refused as a target. The writes go through the tensors' backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd import engine
from ..autograd.grad_mode import state as _grad_state

if TYPE_CHECKING:
    from .registry import OpDef

# PyTorch's C++ scalar type names, which some of its dtype errors print
C_TYPE_NAME = {D.bool_: "bool", D.uint8: "unsigned char", D.int8: "signed char",
               D.int16: "short int", D.int32: "int", D.int64: "long int",
               D.float16: "c10::Half", D.bfloat16: "c10::BFloat16", D.float32: "float",
               D.float64: "double", D.complex64: "c10::complex<float>",
               D.complex128: "c10::complex<double>"}



# PyTorch's commonest message for an out= tensor that must have the result's dtype
OUT_EXACT = "Expected out tensor to have dtype {res_c}, but got {out_c} instead"


def out_dtype_message(rule, index: int, name: str, res: D.dtype, out: D.dtype) -> str | None:
    """The error for writing a result of dtype ``res`` into output ``index`` (of dtype ``out``)
    of an op whose option ``out_exact`` is ``rule``; None when the write may go ahead (then
    without the usual can-cast check: the rule decides). The rule is one of

        True                    the result's dtype exactly, with ``OUT_EXACT``'s message
        "template"              the result's dtype exactly, with this message
        {index: template, ...}  per output; PyTorch checks the outputs in the dict's order
        callable(name, res, out) -> message or None: any other test (``all``: bool or uint8)

    Templates are ``str.format``-ed with ``name`` (the op), ``res``/``out`` (PyTorch's type
    names: Float), ``res_c``/``out_c`` (C++ names: float) and ``res_t``/``out_t``
    (torch.FloatTensor)."""
    if callable(rule):
        return rule(name, res, out)
    if isinstance(rule, dict):
        rule = rule.get(index, True)
    if res is out:
        return None
    return (OUT_EXACT if rule is True else rule).format(
        name=name, res=D.TYPE_NAME[res], out=D.TYPE_NAME[out], res_c=C_TYPE_NAME[res],
        out_c=C_TYPE_NAME[out], res_t=f"torch.{D.TYPE_NAME[res]}Tensor",
        out_t=f"torch.{D.TYPE_NAME[out]}Tensor")


def _check_out_dtypes(op, out, result) -> bool:
    """Raise the op's ``out_exact`` error for the first output (in PyTorch's order) whose dtype
    it refuses, before anything is written; False when the op has no such rule."""
    rule = getattr(op, "out_exact", False)
    if not rule:
        return False
    pairs = list(zip(out, result)) if isinstance(out, (tuple, list)) else [(out, result)]
    order = [i for i in rule if i < len(pairs)] if isinstance(rule, dict) else []
    for i in order + [i for i in range(len(pairs)) if i not in order]:
        o, r = pairs[i]
        if isinstance(o, Tensor) and isinstance(r, Tensor):
            msg = out_dtype_message(rule, i, op.name, r._dtype, o._dtype)
            if msg is not None:
                raise RuntimeError(msg)
    return True


def write_out(op: OpDef, out, result, _checked: bool | None = None):
    """``out=``: copy the result into the given tensor(s), resizing them if needed."""
    if _checked is None:
        if isinstance(out, (tuple, list)) and (
                not isinstance(result, tuple) or len(result) != len(out)):
            raise TypeError(f"{op.name}(): out= expects a tuple of {len(result)} tensors")
        _checked = _check_out_dtypes(op, out, result)
    if isinstance(out, (tuple, list)):
        for o, r in zip(out, result):
            write_out(op, o, r, _checked)
        return op.returns(*out) if op.returns not in (None, "python") else tuple(out)
    if not isinstance(out, Tensor):
        raise TypeError(f"{op.name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if isinstance(result, tuple):
        raise TypeError(f"{op.name}(): out= must be a tuple of {len(result)} tensors")
    if _grad_state.enabled and (result.requires_grad or out.requires_grad):
        raise RuntimeError(f"{op.name}(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")
    if not _checked and not D.can_cast(result._dtype, out._dtype):
        raise cast_error(result._dtype, out._dtype)
    if out._backend is not result._backend:
        raise RuntimeError(f"{op.name}(): Expected all tensors to be on the same device, but "
                           f"found at least two devices, {out.device} and {result.device}!")
    backend = out._backend
    if out._data.shape != result._data.shape:
        out._data = backend.empty(result._data.shape, out._dtype.np)
    elif not backend.writeable(out._data):
        raise RuntimeError(f"{op.name}(): unsupported operation: more than one element of the "
                           "written-to tensor refers to a single memory location. Please clone()"
                           " the tensor before performing the operation.")
    backend.copy_into(out._data, result._data)
    out._bump()
    return out


# ops whose in-place and out= forms refuse an output that partly overlaps an input (PyTorch's
# element-wise iterator and scans check it; reductions and matmul do not)
_OVERLAP_TAGS = frozenset(("pointwise", "scan"))


def check_partial_overlap(op: OpDef, target: Tensor, inputs) -> None:
    """PyTorch refuses to write an element-wise result into memory that an input also
    covers, unless that input is the very same view (``x.add_(x)``)."""
    if op.name != "copy" and op.tags.isdisjoint(_OVERLAP_TAGS):
        return
    backend = target._backend
    target = target._data
    for t in inputs:
        if not isinstance(t, Tensor) or t._backend is not backend:
            continue
        a = t._data
        if a is target or not backend.may_share_memory(a, target):
            continue
        if a.shape == target.shape and a.strides == target.strides and \
                backend.data_ptr(a) == backend.data_ptr(target):
            continue
        if backend.shares_memory(a, target):
            raise RuntimeError("unsupported operation: some elements of the input tensor and the "
                               "written-to tensor refer to a single memory location. Please "
                               "clone() the tensor before performing the operation.")


# in-place ops whose all-Scalar overload names the target in C++ ("long int") in its cast error
_C_NAME_CAST = frozenset(("clamp", "clamp_min", "clamp_max"))


def cast_error(result: D.dtype, target: D.dtype, c_name: bool = False) -> RuntimeError:
    target_name = C_TYPE_NAME[target] if c_name else D.TYPE_NAME[target]
    return RuntimeError(f"result type {D.TYPE_NAME[result]} can't be cast to the desired output "
                        f"type {target_name}")


def raise_if_uncastable(op: OpDef, target, args: tuple, kwargs: dict,
                        error: NotImplementedError) -> None:
    """An in-place or ``out=`` call of a pointwise op failed because its kernel refused the
    promoted dtype (``long.bitwise_and_(1.5)`` computes in Float): PyTorch checks that the
    result dtype can be written into ``target`` before that, so raise its cast error instead.
    Errors about the inputs' own dtypes (``long.lerp_(...)``) stand."""
    if not isinstance(target, Tensor) or op.meta is None or "pointwise" not in op.tags:
        return
    try:
        meta = op.meta(*args, **kwargs)
    except (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError):
        return  # the meta refuses the arguments too: the op's own error stands
    dt = meta[1] if isinstance(meta, tuple) and len(meta) == 2 and \
        isinstance(meta[1], D.dtype) else None
    if dt is not None and not D.can_cast(dt, target._dtype) and \
            f"'{D.TYPE_NAME[dt]}'" in str(error):
        raise cast_error(dt, target._dtype) from None


def write_inplace(self: Tensor, result: Tensor, name: str) -> Tensor:
    if not D.can_cast(result._dtype, self._dtype):
        raise cast_error(result._dtype, self._dtype)
    if result._data.shape != self._data.shape:
        raise RuntimeError(f"{name}(): output with shape {list(self._data.shape)} doesn't match "
                           f"the broadcast shape {list(result._data.shape)}")
    backend = self._backend
    if result._backend is not backend:
        raise RuntimeError(f"{name}(): Expected all tensors to be on the same device, but "
                           f"found at least two devices, {self.device} and {result.device}!")
    if not backend.writeable(self._data):  # an expanded view: several elements share memory
        alias = backend.writeable_alias(self._data) if name == "fill_" else None
        if alias is None:  # (fill_ writes one value everywhere, which PyTorch allows)
            raise RuntimeError(f"{name}(): unsupported operation: more than one element of the "
                               "written-to tensor refers to a single memory location. Please "
                               "clone() the tensor before performing the operation.")
        backend.copy_into(alias, result._data)
        self._bump()
        return self
    tracked = _grad_state.enabled and (result.grad_fn is not None or self.grad_fn is not None)
    if tracked and result.grad_fn is not None:
        engine.snapshot_saved(result.grad_fn, self)
    backend.copy_into(self._data, result._data)
    self._bump()
    if tracked:
        engine.rebase_history(self, result)
    return self
