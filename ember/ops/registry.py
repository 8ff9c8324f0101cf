"""The op table: OpDef, the ``@op`` decorator that registers one op, and the dispatcher.

An op is one Python function ``impl(xp, ...)`` whose parameters are the op's PyTorch
parameters. Annotations mark which parameters carry tensors:

    Tensor          a tensor (the dispatcher hands the impl its array)
    Tensor?         a tensor or None
    Tensor[]        a list of tensors (the impl gets a list of arrays)
    Scalar|Tensor   a Python number or a tensor; both take part in type promotion

Everything else (``int``, ``bool``, dims, dtypes, ...) reaches the impl untouched. The
dispatcher does type promotion, calls the impl with ``xp = numpy``, wraps the arrays it returns
as Tensors, marks views, and records an autograd node when an input requires grad. The
backward rule, written in ember ops, is attached with ``@OP.def_backward``; it receives a ctx
whose attributes are the call's arguments by name (tensors it did not declare in ``saves`` are
shape/dtype stand-ins) and one gradient per output, and returns one gradient per tensor
parameter, in signature order.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor, _wrap
from ..autograd import engine
from ..autograd.grad_mode import state as _grad_state

OPS: dict[str, "OpDef"] = {}

# type-promotion kinds
DEFAULT = "default"  # result_type of the promoted operands
INT_TO_FLOAT = "int_to_float"  # as DEFAULT, but integral and bool results become the default float
ALWAYS_BOOL = "always_bool"  # compute in the promoted type, return bool
NO_PROMOTE = None

_HALF = (D.float16, D.bfloat16)

# The compiler's capture hook. While a trace is active, TRACE[0] is a callable
# ``handler(op, args, kwargs, mode)`` (mode: "call", "inplace" or "out") that receives every
# op call instead of the eager path. One list lookup per call when no trace runs.
TRACE: list = [None]
_NP_FROM = D._FROM_NP


class OpDef:
    """One entry of the op table. See the module docstring for the conventions."""

    def __init__(self, name, impl, *, tags=(), promote=None, promote_args=None, saves=(),
                 save_output=False, differentiable=True, method=True, function=True,
                 inplace=False, out=True, upcast_half=False, returns=None, meta=None,
                 decomposition=None, view=False, grad_name=None):
        self.name = name
        self.impl = impl
        self.tags = frozenset(tags) | ({"view"} if view else set())
        # view: True (always a view), "maybe" (a view when strides allow, else a copy), False
        self.promote = promote
        self.upcast_half = upcast_half
        self.differentiable = differentiable
        self.backward: Callable | None = None
        self.decomposition = decomposition
        self.meta = meta
        self.returns = returns  # a namedtuple class for multi-output ops, or "python"
        self.save_output = save_output
        self.view = view
        self.grad_name = grad_name or "".join(p.capitalize() for p in name.split("_")) + \
            "Backward0"

        sig = inspect.signature(impl)
        params = list(sig.parameters.values())[1:]  # drop xp
        self.signature = sig
        self.params = [p.name for p in params]
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self.param_index = {n: i for i, n in enumerate(self.params)}
        self.n_positional = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                                for p in params)
        if any(p.kind == p.VAR_POSITIONAL for p in params):
            self.n_positional = 1 << 30
        kinds = {}
        for p in params:
            ann = p.annotation.strip("'\"") if isinstance(p.annotation, str) else ""
            if ann.startswith("Tensor[]"):
                kinds[p.name] = "list"
            elif "Tensor" in ann:
                kinds[p.name] = "tensor"
        self.tensor_params = tuple(n for n in self.params if n in kinds)
        self.tensor_pos = tuple(self.param_index[n] for n in self.tensor_params)
        self.list_pos = tuple(self.param_index[n] for n in self.tensor_params
                              if kinds[n] == "list")
        self._tensor_kw = frozenset(self.tensor_params)
        if promote_args is None:
            promote_args = self.tensor_params if promote else ()
        self.promote_pos = tuple(self.param_index[n] for n in promote_args)
        self.saves = frozenset(saves)
        self.save_pos = frozenset(self.param_index[n] for n in saves)
        for n in self.tensor_params:
            if self.param_index[n] >= self.n_positional:
                raise TypeError(f"op {name}: tensor parameter {n!r} must be positional")
        self.has_method = method
        self.has_function = function
        self.has_inplace = inplace
        self.has_out = out
        self._factory = "factory" in self.tags

    # ------------------------------------------------------------------ registration helpers
    def def_backward(self, fn: Callable) -> Callable:
        if self.backward is not None:
            raise RuntimeError(f"op {self.name}: backward defined twice")
        self.backward = fn
        return fn

    def def_meta(self, fn: Callable) -> Callable:
        self.meta = fn
        return fn

    def __repr__(self):
        return f"<op {self.name}{self.signature}>"

    # ------------------------------------------------------------------ meta
    def run_meta(self, *args, **kwargs):
        """Output shape(s) and dtype(s) from input metadata alone.

        Tensor arguments may be anything with ``.shape`` and ``.dtype`` (ember dtype). Returns a
        ``TensorMeta``-like ``(shape, dtype)`` pair, or a tuple of them for multi-output ops.
        An explicit ``meta`` wins; pointwise ops broadcast and promote; any other op is
        evaluated on zero-strided stand-ins (no memory for inputs, real kernels). Ops whose
        output shape depends on data (tag ``dynamic_shape``) raise.
        """
        if self.meta is not None:
            return self.meta(*args, **kwargs)
        if "dynamic_shape" in self.tags:
            raise RuntimeError(f"{self.name}: output shape depends on the input's values")

        def stand_in(a):
            if hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, np.ndarray):
                z = np.broadcast_to(np.zeros((), a.dtype.np), tuple(a.shape))
                return _wrap(z, a.dtype)
            if isinstance(a, (list, tuple)) and a and hasattr(a[0], "shape"):
                return type(a)(stand_in(x) for x in a)
            return a

        from ..autograd.grad_mode import no_grad
        with no_grad():
            out = self(*[stand_in(a) for a in args],
                       **{k: stand_in(v) for k, v in kwargs.items()})
        if isinstance(out, (tuple, list)):
            return tuple((tuple(o.shape), o.dtype) if isinstance(o, Tensor) else o for o in out)
        return (tuple(out.shape), out.dtype) if isinstance(out, Tensor) else out

    # ------------------------------------------------------------------ dispatch
    def normalize(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Move tensor parameters passed by keyword into their positions."""
        args = list(args)
        kwargs = dict(kwargs)
        last = max(self.param_index[k] for k in kwargs if k in self._tensor_kw)
        for i in range(len(args), last + 1):
            name = self.params[i]
            if name in kwargs:
                args.append(kwargs.pop(name))
            elif name in self.defaults:
                args.append(self.defaults[name])
            else:
                raise TypeError(f"{self.name}() missing required argument '{name}'")
        return tuple(args), kwargs

    def __call__(self, *args, **kwargs):
        """Run the op on tensors and Python values (the public function ``ember.<name>``)."""
        hook = TRACE[0]
        if hook is not None:
            return hook(self, args, kwargs, "call")
        if kwargs:
            if "out" in kwargs:
                if not self.has_out:
                    raise TypeError(f"{self.name}() got an unexpected keyword argument 'out'")
                out = kwargs.pop("out")
                if out is not None:
                    return write_out(self, out, self(*args, **kwargs))
            if not self._tensor_kw.isdisjoint(kwargs):
                args, kwargs = self.normalize(args, kwargs)
        nargs = len(args)
        if nargs > self.n_positional:
            raise TypeError(f"{self.name}() takes {self.n_positional} positional arguments but "
                            f"{nargs} were given")
        vals = list(args)
        inputs = []
        unwrap = self.promote is None  # promoted ops unwrap (and cast) in _promote
        list_pos = self.list_pos
        for i in self.tensor_pos:
            if i >= nargs:
                break
            a = vals[i]
            if isinstance(a, Tensor):
                inputs.append(a)
                if unwrap:
                    vals[i] = a._data
            elif list_pos and i in list_pos:
                if not isinstance(a, (list, tuple)):
                    raise TypeError(f"{self.name}(): argument '{self.params[i]}' must be tuple "
                                    f"of Tensors, not {type(a).__name__}")
                for x in a:
                    if not isinstance(x, Tensor):
                        raise TypeError(f"{self.name}(): expected Tensor as element of "
                                        f"argument '{self.params[i]}', but got "
                                        f"{type(x).__name__}")
                inputs.extend(a)
                if unwrap:
                    vals[i] = [x._data for x in a]
        out_dtype = None
        if not unwrap:
            out_dtype = self._promote(vals, nargs)
        elif self.upcast_half and inputs and inputs[0]._dtype in _HALF:
            out_dtype = inputs[0]._dtype
            for i in self.tensor_pos:
                if i < nargs and isinstance(vals[i], np.ndarray) and vals[i].dtype == \
                        out_dtype.np:
                    vals[i] = vals[i].astype(np.float32)
        try:
            res = self.impl(np, *vals, **kwargs)
        except (ValueError, IndexError, TypeError, FloatingPointError, np.linalg.LinAlgError,
                OverflowError) as e:
            raise translate_error(self, e, args, kwargs) from None
        if self.returns == "python":
            return res
        if type(res) is np.ndarray and out_dtype is None and not self.view:
            dt = _NP_FROM.get(res.dtype)  # the common case, inline
            outs = _wrap(res, dt) if dt is not None else self._wrap_one(res, None, inputs)
        else:
            outs = self._wrap_outputs(res, out_dtype, inputs)
        if self._factory and kwargs.get("requires_grad"):
            if not (outs._dtype.is_floating_point or outs._dtype.is_complex):
                raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                                   "gradients")
            outs.requires_grad_()
        if _grad_state.enabled and self.backward is not None:
            for t in inputs:
                if t._leaf_rg or t.grad_fn is not None:
                    engine.record(self, args, kwargs, inputs, outs)
                    break
        if self.returns is not None and type(outs) is tuple:
            return self.returns(*outs)
        return outs

    def _promote(self, vals: list, nargs: int):
        dims = zeros = scalars = None
        for i in self.promote_pos:
            if i >= nargs:
                continue
            a = vals[i]
            if isinstance(a, Tensor):
                dt = a._dtype
                if a._data.ndim:
                    dims = dt if dims is None else D._PROMOTE[dims, dt]
                else:
                    zeros = dt if zeros is None else D._PROMOTE[zeros, dt]
            elif a is not None:
                if isinstance(a, (list, tuple)):
                    for x in a:
                        dt = x._dtype
                        dims = dt if dims is None else D._PROMOTE[dims, dt]
                    continue
                dt = D.scalar_dtype(a)
                scalars = dt if scalars is None else D._PROMOTE[scalars, dt]
        rt = D._combine(dims, D._combine(zeros, scalars))
        kind = self.promote
        if kind == INT_TO_FLOAT and rt.kind in "uib":
            rt = D._default[0]
        compute = D.float32 if rt in _HALF else rt
        cnp = compute.np
        for i in self.promote_pos:
            if i >= nargs:
                continue
            a = vals[i]
            if isinstance(a, Tensor):
                arr = a._data
                vals[i] = arr if arr.dtype == cnp else arr.astype(cnp)
            elif isinstance(a, (list, tuple)):
                vals[i] = [x._data if x._data.dtype == cnp else x._data.astype(cnp) for x in a]
            elif a is not None and compute.kind in "uib":
                vals[i] = np.asarray(a).astype(cnp)  # integer scalars wrap like PyTorch's
        for i in self.tensor_pos:  # tensor parameters outside promotion (e.g. where's condition)
            if i < nargs and isinstance(vals[i], Tensor):
                vals[i] = vals[i]._data
        if kind == ALWAYS_BOOL:
            return D.bool_
        return rt

    def _wrap_outputs(self, res, out_dtype, inputs):
        if type(res) is tuple or type(res) is list:
            outs = tuple(self._wrap_one(r, out_dtype, inputs) for r in res)
            return outs if type(res) is tuple else list(outs)
        return self._wrap_one(res, out_dtype, inputs)

    def _wrap_one(self, r, out_dtype, inputs):
        if type(r) is not np.ndarray:
            if r is None or isinstance(r, Tensor):
                return r
            r = np.asarray(r)
        if out_dtype is not None and r.dtype != out_dtype.np and (
                r.dtype.kind in "fc" or self.promote is not None):
            r = r.astype(out_dtype.np)
        dt = _NP_FROM.get(r.dtype)
        if dt is None:
            dt = D.from_np(r.dtype)
            r = r.astype(dt.np)
        t = _wrap(r, dt)
        if self.view and (self.view is True or np.may_share_memory(r, inputs[0]._data)):
            src = inputs[0]
            t._base = src._base if src._base is not None else src
            t._vc = src._version_counter()
        return t


def write_out(op: OpDef, out, result):
    """``out=``: copy the result into the given tensor(s), resizing them if needed."""
    if isinstance(out, (tuple, list)):
        if not isinstance(result, tuple) or len(result) != len(out):
            raise TypeError(f"{op.name}(): out= expects a tuple of {len(result)} tensors")
        for o, r in zip(out, result):
            write_out(op, o, r)
        return op.returns(*out) if op.returns not in (None, "python") else tuple(out)
    if not isinstance(out, Tensor):
        raise TypeError(f"{op.name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if isinstance(result, tuple):
        raise TypeError(f"{op.name}(): out= must be a tuple of {len(result)} tensors")
    if _grad_state.enabled and (result.requires_grad or out.requires_grad):
        raise RuntimeError(f"{op.name}(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")
    if not D.can_cast(result._dtype, out._dtype):
        raise RuntimeError(f"result type {D.TYPE_NAME[result._dtype]} can't be cast to the "
                           f"desired output type {D.TYPE_NAME[out._dtype]}")
    if out._data.shape != result._data.shape:
        out._data = np.empty(result._data.shape, out._dtype.np)
    elif not out._data.flags.writeable:
        raise RuntimeError(f"{op.name}(): unsupported operation: more than one element of the "
                           "written-to tensor refers to a single memory location. Please clone()"
                           " the tensor before performing the operation.")
    np.copyto(out._data, result._data, casting="unsafe")
    out._bump()
    return out


def call_inplace(op: OpDef, self: Tensor, args: tuple, kwargs: dict) -> Tensor:
    """``x.<op>_(...)``: run the op out of place, then write the result into ``x``."""
    if not isinstance(self, Tensor):
        raise TypeError(f"{op.name}_(): expected a Tensor as self")
    hook = TRACE[0]
    if hook is not None:
        return hook(op, (self,) + tuple(args), kwargs, "inplace")
    if _grad_state.enabled:
        engine.check_inplace(self)
    result = op(self, *args, **kwargs)
    return write_inplace(self, result, op.name + "_")


def write_inplace(self: Tensor, result: Tensor, name: str) -> Tensor:
    if not D.can_cast(result._dtype, self._dtype):
        raise RuntimeError(f"result type {D.TYPE_NAME[result._dtype]} can't be cast to the "
                           f"desired output type {D.TYPE_NAME[self._dtype]}")
    if result._data.shape != self._data.shape:
        raise RuntimeError(f"{name}(): output with shape {list(self._data.shape)} doesn't match "
                           f"the broadcast shape {list(result._data.shape)}")
    if not self._data.flags.writeable:  # an expanded view: several elements share memory
        raise RuntimeError(f"{name}(): unsupported operation: more than one element of the "
                           "written-to tensor refers to a single memory location. Please clone()"
                           " the tensor before performing the operation.")
    tracked = _grad_state.enabled and (result.grad_fn is not None or self.grad_fn is not None)
    if tracked and result.grad_fn is not None:
        engine.snapshot_saved(result.grad_fn, self)
    np.copyto(self._data, result._data, casting="unsafe")
    self._bump()
    if tracked:
        engine.rebase_history(self, result)
    return self


def translate_error(op: OpDef, e: Exception, args, kwargs) -> Exception:
    """Turn an error raised inside a numpy kernel into PyTorch's type with the op's name.
    An impl that already raised PyTorch's exact error marks it ``_ember_final``."""
    if getattr(e, "_ember_final", False):
        return e
    msg = str(e)
    if isinstance(e, np.linalg.LinAlgError):
        return RuntimeError(f"{op.name}: {msg}")
    if isinstance(e, ValueError) and ("broadcast" in msg or "operands could not" in msg):
        shapes = [tuple(a.shape) for a in args if isinstance(a, Tensor)]
        return RuntimeError(broadcast_error(shapes) or f"{op.name}(): {msg}")
    if isinstance(e, (ValueError, FloatingPointError, OverflowError)):
        return RuntimeError(f"{op.name}(): {msg}")
    if isinstance(e, IndexError):
        return IndexError(msg if msg.startswith(op.name) or "out of" in msg
                          else f"{op.name}(): {msg}")
    if isinstance(e, TypeError) and "argument" in msg and op.name not in msg:
        return TypeError(f"{op.name}(): {msg}")
    return e


def broadcast_error(shapes) -> str | None:
    """PyTorch's message for the first pair of sizes that do not broadcast."""
    if len(shapes) < 2:
        return None
    nd = max(len(s) for s in shapes)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
    for d in range(nd):
        sizes = {p[d] for p in padded} - {1}
        if len(sizes) > 1:
            a, b = [p[d] for p in padded if p[d] != 1][:2]
            return (f"The size of tensor a ({a}) must match the size of tensor b ({b}) at "
                    f"non-singleton dimension {d}")
    return None


# ---------------------------------------------------------------------- the decorator
def op(name: str | None = None, **options) -> Callable[[Callable], OpDef]:
    """Register ``impl`` as op ``name``; returns the OpDef (callable as the op itself)."""

    def register(impl):
        opname = name or impl.__name__.rstrip("_")
        if opname in OPS:
            raise RuntimeError(f"op {opname!r} is registered twice")
        d = OpDef(opname, impl, **options)
        d.__doc__ = impl.__doc__
        OPS[opname] = d
        return d

    return register


ALIASES: dict[str, str] = {}


def alias_all(names: dict[str, str]) -> None:
    """Other public names for ops (``arcsin`` for ``asin``); bound like the op itself."""
    for new, target in names.items():
        if new in ALIASES or new in OPS:
            raise RuntimeError(f"alias {new!r} is registered twice")
        ALIASES[new] = target


def ops_with(tag: str) -> list[OpDef]:
    return [d for d in OPS.values() if tag in d.tags]
