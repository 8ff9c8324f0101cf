"""The op table: OpDef, the ``@op`` decorator that registers one op, and the dispatcher.

An op is one Python function ``impl(xp, ...)`` whose parameters are the op's PyTorch
parameters. Annotations mark which parameters carry tensors:

    Tensor          a tensor (the dispatcher hands the impl its array)
    Tensor?         a tensor or None
    Tensor[]        a list of tensors (the impl gets a list of arrays)
    Scalar|Tensor   a Python number or a tensor; both take part in type promotion

Anything else where a ``Tensor``, ``Tensor?`` or ``Tensor[]`` belongs is PyTorch's TypeError
("exp(): argument 'input' (position 1) must be Tensor, not float"), raised before the impl.
A public function that is a composition of ops, not an op, declares the same check with
``@takes_tensors("input", "weight?")`` (ember/ops/arguments.py).

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
from .._dispatch import STATE
from ..backends.cpu import quiet_enter, quiet_exit

OPS: dict[str, OpDef] = {}

# type-promotion kinds
DEFAULT = "default"  # result_type of the promoted operands
INT_TO_FLOAT = "int_to_float"  # as DEFAULT, but integral and bool results become the default float
ALWAYS_BOOL = "always_bool"  # compute in the promoted type, return bool
NO_PROMOTE = None

_HALF = (D.float16, D.bfloat16)

_NP_FROM = D._FROM_NP
_new = object.__new__
# what a numpy kernel raises on bad input; the dispatcher turns it into PyTorch's error
_KERNEL_ERRORS = (ValueError, IndexError, TypeError, FloatingPointError, np.linalg.LinAlgError,
                  OverflowError)


# PyTorch's C++ scalar type names, which some of its dtype errors print
C_TYPE_NAME = {D.bool_: "bool", D.uint8: "unsigned char", D.int8: "signed char",
               D.int16: "short int", D.int32: "int", D.int64: "long int",
               D.float16: "c10::Half", D.bfloat16: "c10::BFloat16", D.float32: "float",
               D.float64: "double", D.complex64: "c10::complex<float>",
               D.complex128: "c10::complex<double>"}


def type_name(v) -> str:
    """A value's type as PyTorch's argument errors print it (``float``, ``numpy.ndarray``)."""
    if isinstance(v, Tensor):
        return "Tensor"
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def arg_type_error(op: OpDef, index: int, keyword: bool, what: str,
                   name: str = "") -> TypeError:
    """PyTorch's "op(): argument 'x' (position n) must be Tensor, not float" for parameter
    ``index`` of ``op``. Positions count from 1 in a function call; a Tensor method does not
    count ``self``, so the method binders renumber it with ``method_arg_error``. A keyword
    argument has no position."""
    e = TypeError(_arg_message(op, index, keyword, what, name or op.name, index + 1))
    e.ember_arg = (op, index, keyword, what)
    return e


def method_arg_error(e: TypeError, op: OpDef, name: str = "") -> TypeError | None:
    """``e`` renumbered for the Tensor method ``name`` of ``op``; None when ``e`` is not
    ``op``'s own argument error (an error from an op called inside it stays as it is)."""
    info = getattr(e, "ember_arg", None)
    if info is None or info[0] is not op:
        return None
    _, index, keyword, what = info
    return TypeError(_arg_message(op, index, keyword, what, name or op.name, index))


def call_as_method(op: OpDef, self, args: tuple, kwargs: dict, name: str = ""):
    """``op(self, *args, **kwargs)`` called as the Tensor method ``name``: the positions in
    its argument TypeErrors do not count ``self``, as PyTorch's methods do not."""
    try:
        return op(self, *args, **kwargs)
    except TypeError as e:
        renumbered = method_arg_error(e, op, name)
        if renumbered is None:
            raise
        raise renumbered from None


def call_as_operator(op: OpDef, self, other):
    """``self <operator> other``: an argument TypeError of the op itself (``x @ 2``) becomes
    NotImplemented, so Python tries the reflected operator."""
    try:
        return op(self, other)
    except TypeError as e:
        if method_arg_error(e, op) is None:
            raise
        return NotImplemented


def _arg_message(op, index, keyword, what, name, position) -> str:
    where = "" if keyword else f" (position {position})"
    return f"{name}(): argument '{op.params[index]}'{where} must be {what}"


class OpDef:
    """One entry of the op table. See the module docstring for the conventions."""

    def __init__(self, name, impl, *, tags=(), promote=None, promote_args=None, saves=(),
                 save_output=False, differentiable=True, method=True, function=True,
                 inplace=False, out=True, upcast_half=False, returns=None, meta=None,
                 decomposition=None, view=False, grad_name=None, out_dtype=None,
                 float_kernel=None, out_exact=False):
        self.name = name
        # out_exact: an out= tensor must have the result's dtype (PyTorch's matmul, max.dim...);
        # True, or the op's own message rule (see ``out_dtype_message``)
        self.out_exact = out_exact
        # float_kernel: a numpy function ``f(a, b)`` that computes this binary op exactly as the
        # impl does when both operands are tensors of one dtype, float32 or float64, and no
        # other argument is given: the Tensor methods and operators call it directly (the
        # commonest op call of a model); anything it raises reruns the full path for the error
        self.float_kernel = float_kernel
        # ``into(self, args, kwargs) -> bool``: an in-place call computed in self's memory
        # (the op's module sets it; call_inplace tries it first)
        self.inplace_into = None
        # out_dtype: the keyword parameter (``dtype``) that an ``out=`` tensor's dtype fills
        # when the call leaves it None, so ``sum(x_int, 0, out=float_t)`` computes in float
        self.out_dtype = out_dtype
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
        # positional parameters without a default: fewer arguments than this may be missing
        self.n_required = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and
                              p.default is p.empty for p in params)
        kinds = {}
        for p in params:
            ann = p.annotation.strip("'\"") if isinstance(p.annotation, str) else ""
            if ann.startswith("Tensor[]"):
                kinds[p.name] = "list"
            elif ann in ("Tensor", "Tensor?"):
                kinds[p.name] = ann
            elif "Tensor" in ann:
                kinds[p.name] = "number"  # "Scalar|Tensor", "int|Tensor": numbers pass through
        self.tensor_params = tuple(n for n in self.params if n in kinds)
        self.tensor_pos = tuple(self.param_index[n] for n in self.tensor_params)
        self.list_pos = tuple(self.param_index[n] for n in self.tensor_params
                              if kinds[n] == "list")
        # positions whose non-Tensor values the dispatcher must look at (lists, None, errors)
        self._arg_kind = {self.param_index[n]: k for n, k in kinds.items() if k != "number"}
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
        # one array out that needs nothing beyond wrapping (the dispatcher's inline case)
        self._plain = returns is None and not self._factory
        # calls the fast Tensor methods below can run inline (see fast_unary_method)
        self._fast = self._plain and promote is None and not upcast_half and not self.list_pos

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
                v = kwargs.pop(name)
                if i in self._arg_kind and not isinstance(v, Tensor):
                    self._non_tensor(i, v, [], False, keyword=True)  # raises on a wrong type
                args.append(v)
            elif name in self.defaults:
                args.append(self.defaults[name])
            else:
                raise TypeError(f"{self.name}() missing required argument '{name}'")
        return tuple(args), kwargs

    def _check_missing(self, nargs: int, kwargs: dict) -> None:
        """A TypeError naming the required parameters the call left out (before the impl or
        the type promotion trips over them)."""
        missing = [n for n in self.params[nargs:self.n_required] if n not in kwargs]
        if missing:
            names = " and ".join(f"'{n}'" for n in missing)
            s = "s" if len(missing) > 1 else ""
            raise TypeError(f"{self.name}() missing {len(missing)} required positional "
                            f"argument{s}: {names}")

    def _dtype_from_out(self, out: Tensor, kwargs: dict) -> None:
        """``out=`` sets the computation dtype (option ``out_dtype``); an explicit dtype that
        differs from the out tensor's is PyTorch's error."""
        given = kwargs.get(self.out_dtype)
        if given is None:
            kwargs[self.out_dtype] = out._dtype
        elif given != out._dtype:
            raise RuntimeError(f"Expected out tensor to have dtype {C_TYPE_NAME[given]}, but got "
                               f"{C_TYPE_NAME[out._dtype]} instead")

    def __call__(self, *args, **kwargs):
        """Run the op on tensors and Python values (the public function ``ember.<name>``)."""
        hook = STATE.capture
        if hook is not None:
            return hook(self, args, kwargs, "call")
        token = quiet_enter()  # numpy's FP errors ignored for ember's kernels alone
        try:
            if kwargs:
                if "out" in kwargs:
                    if not self.has_out:
                        raise TypeError(f"{self.name}() got an unexpected keyword argument 'out'")
                    out = kwargs.pop("out")
                    if out is not None:
                        if isinstance(out, Tensor):
                            check_partial_overlap(self, out._data, (*args, *kwargs.values()))
                        if self.out_dtype is not None and isinstance(out, Tensor):
                            self._dtype_from_out(out, kwargs)
                        try:
                            result = self(*args, **kwargs)
                        except NotImplementedError as e:
                            raise_if_uncastable(self, out, args, kwargs, e)  # PyTorch checks first
                            raise
                        return write_out(self, out, result)
                if not self._tensor_kw.isdisjoint(kwargs):
                    args, kwargs = self.normalize(args, kwargs)
            nargs = len(args)
            if nargs > self.n_positional:
                raise TypeError(f"{self.name}() takes {self.n_positional} positional arguments but "
                                f"{nargs} were given")
            if nargs < self.n_required:
                self._check_missing(nargs, kwargs)
            vals = list(args)
            unwrap = self.promote is None  # promoted ops unwrap (and cast) in _promote
            if self.list_pos:
                inputs = self._collect_with_lists(vals, nargs, unwrap)
            else:
                inputs = []
                arg_kind = self._arg_kind
                for i in self.tensor_pos:
                    if i >= nargs:
                        break
                    a = vals[i]
                    if isinstance(a, Tensor):
                        inputs.append(a)
                        if unwrap:
                            vals[i] = a._data
                    elif i in arg_kind:
                        self._non_tensor(i, a, inputs, unwrap)  # None for "Tensor?", else raises
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
                res = self.impl(np, *vals, **kwargs) if kwargs else self.impl(np, *vals)
            except _KERNEL_ERRORS as e:
                raise translate_error(self, e, args, kwargs) from None
            if self._plain and type(res) is np.ndarray and out_dtype is None and \
                    (dt := _NP_FROM.get(res.dtype)) is not None:
                outs = _new(Tensor)  # the common case: _wrap inline
                outs._data = res
                outs._dtype = dt
                view = self.view
                if view and (view is True or np.may_share_memory(res, inputs[0]._data)):
                    _mark_view(outs, inputs[0])
            elif self.returns == "python":
                return res
            else:
                outs = self._wrap_outputs(res, out_dtype, inputs)
                if self._factory and kwargs.get("requires_grad"):
                    if not (outs._dtype.is_floating_point or outs._dtype.is_complex):
                        raise RuntimeError("Only Tensors of floating point and complex dtype can "
                                           "require gradients")
                    outs.requires_grad_()
            if _grad_state.enabled and self.backward is not None:
                for t in inputs:
                    if t._leaf_rg or t.grad_fn is not None:
                        engine.record(self, args, kwargs, inputs, outs)
                        break
            if self.returns is not None and type(outs) is tuple:
                return self.returns(*outs)
            return outs
        finally:
            quiet_exit(token)


    def _collect_with_lists(self, vals: list, nargs: int, unwrap: bool) -> list:
        """The tensor arguments of an op with a ``Tensor[]`` parameter, in signature order
        (lists flattened); unwraps them in ``vals`` when ``unwrap``."""
        inputs = []
        list_pos = self.list_pos
        for i in self.tensor_pos:
            if i >= nargs:
                break
            a = vals[i]
            if isinstance(a, Tensor) and i not in list_pos:
                inputs.append(a)
                if unwrap:
                    vals[i] = a._data
            else:
                r = self._non_tensor(i, a, inputs, unwrap)
                if unwrap and r is not None:
                    vals[i] = r
        return inputs

    def _non_tensor(self, i: int, a, inputs: list, unwrap: bool, keyword: bool = False):
        """Check a non-Tensor value at tensor parameter ``i`` (a list for ``Tensor[]``):
        returns the arrays of a list (adding its tensors to ``inputs``), None for a None
        ``Tensor?``; raises PyTorch's TypeError for anything else."""
        kind = self._arg_kind.get(i)
        if kind == "list":
            if not isinstance(a, (list, tuple)):
                raise arg_type_error(self, i, keyword, f"tuple of Tensors, not {type_name(a)}")
            for j, x in enumerate(a):
                if not isinstance(x, Tensor):
                    raise TypeError(f"expected Tensor as element {j} in argument {i}, but got "
                                    f"{type_name(x)}")
            inputs.extend(a)
            return [x._data for x in a] if unwrap else None
        if kind == "Tensor" or (kind == "Tensor?" and a is not None):
            raise arg_type_error(self, i, keyword, f"Tensor, not {type_name(a)}")
        return None

    def _promote(self, vals: list, nargs: int):
        rt = D.result_type(*(vals[i] for i in self.promote_pos if i < nargs))
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
            _mark_view(t, inputs[0])
        return t


def _mark_view(t: Tensor, src: Tensor) -> None:
    """``t`` is a view of ``src``: same base, same version counter."""
    t._base = src._base if src._base is not None else src
    vc = src._vc
    t._vc = vc if vc is not None else src._version_counter()


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
    if out._data.shape != result._data.shape:
        out._data = np.empty(result._data.shape, out._dtype.np)
    elif not out._data.flags.writeable:
        raise RuntimeError(f"{op.name}(): unsupported operation: more than one element of the "
                           "written-to tensor refers to a single memory location. Please clone()"
                           " the tensor before performing the operation.")
    np.copyto(out._data, result._data, casting="unsafe")
    out._bump()
    return out


# ops whose in-place and out= forms refuse an output that partly overlaps an input (PyTorch's
# element-wise iterator and scans check it; reductions and matmul do not)
_OVERLAP_TAGS = frozenset(("pointwise", "scan"))


def check_partial_overlap(op: OpDef, target: np.ndarray, inputs) -> None:
    """PyTorch refuses to write an element-wise result into memory that an input also
    covers, unless that input is the very same view (``x.add_(x)``)."""
    if op.name != "copy" and op.tags.isdisjoint(_OVERLAP_TAGS):
        return
    for t in inputs:
        if not isinstance(t, Tensor):
            continue
        a = t._data
        if a is target or not np.may_share_memory(a, target):
            continue
        if a.shape == target.shape and a.strides == target.strides and \
                a.__array_interface__["data"][0] == target.__array_interface__["data"][0]:
            continue
        if np.shares_memory(a, target):
            raise RuntimeError("unsupported operation: some elements of the input tensor and the "
                               "written-to tensor refer to a single memory location. Please "
                               "clone() the tensor before performing the operation.")


def call_inplace(op: OpDef, self: Tensor, args: tuple, kwargs: dict) -> Tensor:
    """``x.<op>_(...)``: run the op out of place, then write the result into ``x``."""
    if not isinstance(self, Tensor):
        raise arg_type_error(op, 0, False, f"Tensor, not {type_name(self)}", op.name + "_")
    hook = STATE.capture
    if hook is not None:
        return hook(op, (self,) + tuple(args), kwargs, "inplace")
    token = quiet_enter()
    try:
        if _grad_state.enabled:
            engine.check_inplace(self)
        check_partial_overlap(op, self._data, (*args, *kwargs.values()))
        into = op.inplace_into
        if into is not None and not (_grad_state.enabled and (
                self.requires_grad or any(getattr(a, "requires_grad", False) for a in args))) \
                and into(self, args, kwargs):
            self._bump()  # computed in self's memory, with nothing for autograd to record
            return self
        try:
            result = call_as_method(op, self, args, kwargs, op.name + "_")
        except NotImplementedError as e:
            raise_if_uncastable(op, self, (self,) + tuple(args), kwargs, e)  # PyTorch checks first
            raise
        if op.name in _C_NAME_CAST and not D.can_cast(result._dtype, self._dtype) and \
                not any(isinstance(a, Tensor) for a in (*args, *kwargs.values())):
            raise cast_error(result._dtype, self._dtype, c_name=True)
        return write_inplace(self, result, op.name + "_")
    finally:
        quiet_exit(token)


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
    if not self._data.flags.writeable:  # an expanded view: several elements share memory
        alias = _writeable_alias(self._data) if name == "fill_" else None
        if alias is None:  # (fill_ writes one value everywhere, which PyTorch allows)
            raise RuntimeError(f"{name}(): unsupported operation: more than one element of the "
                               "written-to tensor refers to a single memory location. Please "
                               "clone() the tensor before performing the operation.")
        np.copyto(alias, result._data, casting="unsafe")
        self._bump()
        return self
    tracked = _grad_state.enabled and (result.grad_fn is not None or self.grad_fn is not None)
    if tracked and result.grad_fn is not None:
        engine.snapshot_saved(result.grad_fn, self)
    np.copyto(self._data, result._data, casting="unsafe")
    self._bump()
    if tracked:
        engine.rebase_history(self, result)
    return self


def _writeable_alias(a: np.ndarray) -> np.ndarray | None:
    """A writeable array over ``a``'s memory (``a`` a read-only broadcast view), found through
    its base arrays; None when no base owns writeable contiguous memory."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.writeable or not root.flags.c_contiguous:
        return None
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return np.ndarray(a.shape, a.dtype, root, offset, a.strides)


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
