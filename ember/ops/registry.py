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

from .. import _dtype as D
from .._tensor import Tensor, _wrap, factory_result
from ..autograd import engine
from ..autograd.grad_mode import state as _grad_state
from .._dispatch import RUNNERS, STATE, intercepts, interpose
from ..backends import base as backends_base
from ..backends.casting import cast
from ..backends.xp_ops import COMPILERS, convert
from ..backends.cpu import BACKEND as CPU_BACKEND, quiet_enter, quiet_exit
from ..backends.meta import BACKEND as META_BACKEND
from . import float8, meta_rule
from .arguments import arg_type_error, method_arg_error, translate_error, type_name
from .writes import (C_TYPE_NAME, _C_NAME_CAST, cast_error, check_partial_overlap,
                     raise_if_uncastable, write_inplace, write_out)

OPS: dict[str, OpDef] = {}

# type-promotion kinds
DEFAULT = "default"  # result_type of the promoted operands
INT_TO_FLOAT = "int_to_float"  # as DEFAULT, but integral and bool results become the default float
ALWAYS_BOOL = "always_bool"  # compute in the promoted type, return bool
NO_PROMOTE = None

_HALF = (D.float16, D.bfloat16, *D.FLOAT8)  # computed in float32
_KERNEL_HALF = (D.float16, D.bfloat16)  # what compiled pointwise kernels widen themselves
_NP_FROM = D._FROM_NP
HOST_RESULTS: dict = {}  # op name -> host values (numpy-only kernels) a device backend returned
_new = object.__new__


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


class OpDef:
    """One entry of the op table. See the module docstring for the conventions."""
    optional_grads = frozenset()  # outputs whose unused gradient the rule takes as None

    def __init__(self, name, impl, *, tags=(), promote=None, promote_args=None, saves=(),
                 save_output=False, differentiable=True, method=True, function=True,
                 inplace=False, out=True, upcast_half=False, returns=None, meta=None,
                 decomposition=None, view=False, grad_name=None, out_dtype=None,
                 out_exact=False, nondiff_outputs=()):
        self.name = name
        # nondiff_outputs: outputs with no gradient (no grad_fn; the rule gets None for them)
        self.nondiff_outputs = frozenset(nondiff_outputs)
        # out_exact: an out= tensor must have the result's dtype (PyTorch's matmul, max.dim...);
        # True, or the op's own message rule (see ``out_dtype_message``)
        self.out_exact = out_exact
        # the backends' overrides of this op: kind -> {backend: kernel} (see "call paths")
        self.overrides: dict[str, dict] = {}
        self._kernel_overrides = self.overrides.setdefault("kernel", {})
        # out_dtype: the keyword parameter (``dtype``) that an ``out=`` tensor's dtype fills
        # when the call leaves it None, so ``sum(x_int, 0, out=float_t)`` computes in float
        self.out_dtype = out_dtype
        self.impl = impl
        self.tags = frozenset(tags) | ({"view"} if view else set())
        # view: True (always a view), "maybe" (a view when strides allow, else a copy), False
        self.promote = promote
        self.upcast_half = upcast_half
        self.half_in_kernel = False  # a pointwise definition: compiled kernels widen halves
        self.differentiable = differentiable
        self.backward: Callable | None = None
        self.decomposition = decomposition
        self.pointwise_defn = None  # a pointwise_defn.PointwiseDefn (the compiler's), or None
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
        # the operands whose promoted dtype the op computes in (promoted_op sets its own)
        self.operand_pos = self.promote_pos
        # float8 tensors: True where welcome, else the rule float8.check asks (see float8.py)
        self.float8 = float8.rule(self)
        self._float8_kw = self.float8 is not True and "dtype" in self.param_index
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
        # an op with a device= parameter picks its backend from it (in the general path)
        self._takes_device = "device" in self.param_index
        # a factory that allocates on the default device when given none (PyTorch's
        # ``torch.utils._device`` constructors; not the ``*_like`` ones)
        self._default_device = "default_device" in self.tags
        self._fast = self._plain and promote is None and not upcast_half and \
            not self.list_pos and not self._takes_device

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
            if hasattr(a, "shape") and isinstance(getattr(a, "dtype", None), D.dtype):
                xp = CPU_BACKEND.xp
                z = xp.broadcast_to(xp.zeros((), a.dtype.np), tuple(a.shape))
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
        if STATE.top is not None and intercepts(self.name):
            return interpose(self, args, kwargs, "call")
        token = quiet_enter()  # numpy's FP errors ignored for ember's kernels alone
        try:
            if kwargs:
                if "out" in kwargs:
                    if not self.has_out:
                        raise TypeError(f"{self.name}() got an unexpected keyword argument 'out'")
                    out = kwargs.pop("out")
                    if out is not None:
                        if isinstance(out, Tensor):
                            check_partial_overlap(self, out, (*args, *kwargs.values()))
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
            if self.float8 is not True:
                for t in inputs:
                    if t._dtype.is_float8:
                        float8.check(self, args, kwargs)
                        break
                else:
                    if self._float8_kw and getattr(kwargs.get("dtype"), "is_float8", False):
                        float8.check(self, args, kwargs)  # a factory asked for float8
            backend = inputs[0]._backend if inputs else CPU_BACKEND
            if len(inputs) > 1:
                for t in inputs:
                    if t._backend is not backend:
                        backend = common_backend(self, inputs)
                        break
            if self._takes_device:  # factories, *_like(..., device=): the device's backend
                dev = kwargs.get("device")
                if dev is None and self._default_device and (dev := STATE.device) is not None:
                    kwargs["device"] = dev  # ``with ember.device(...)``, set_default_device
                if dev is not None:
                    backend = backends_base.of_device(dev)
            out_dtype = None
            if backend is META_BACKEND:  # no kernel: the results' metadata from the op table
                res = meta_rule.run(self, args, kwargs)
            else:
                if not unwrap:
                    out_dtype = self._promote(vals, nargs, backend)
                kernel = self._kernel_overrides.get(backend)
                widen = None  # half inputs the impl (not the kernel) takes widened
                if unwrap and self.upcast_half and inputs and inputs[0]._dtype in _HALF:
                    out_dtype = widen = inputs[0]._dtype
                    if not getattr(kernel, "widens_half", False):
                        self._widen_half(vals, nargs, backend, widen)
                        widen = None
                if backend is not CPU_BACKEND:  # zero-dim CPU tensors' arrays move over
                    vals = [backends_base.scalars_moved(v, backend) for v in vals]
                try:
                    res = None
                    if kernel is not None:
                        res = kernel(*vals, **kwargs)
                    if res is None:
                        if widen is not None:
                            self._widen_half(vals, nargs, backend, widen)
                        res = self.impl(backend.xp, *vals, **kwargs) if kwargs else \
                            self.impl(backend.xp, *vals)
                except backends_base.KERNEL_ERRORS as e:
                    raise translate_error(self, e, args, kwargs) from None
            if self._plain and type(res) is backend.array_type and out_dtype is None and \
                    (dt := _NP_FROM.get(res.dtype)) is not None:
                outs = _new(Tensor)  # the common case: _wrap inline
                outs._data = res
                outs._dtype = dt
                if backend is not CPU_BACKEND:
                    outs._backend = backend
                view = self.view
                if view and (view is True or backend.may_share_memory(res, inputs[0]._data)):
                    _mark_view(outs, inputs[0])
            elif self.returns == "python":
                return res
            else:
                outs = self._wrap_outputs(res, out_dtype, inputs, backend)
                if self._factory:  # pin_memory=, requires_grad=
                    outs = factory_result(outs, kwargs)
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

    def _widen_half(self, vals: list, nargs: int, backend, half) -> None:
        """An ``upcast_half`` op's ``half`` arrays among ``vals`` as float32, for its impl."""
        for i in self.tensor_pos:
            if i < nargs and isinstance(vals[i], backend.array_type) and \
                    vals[i].dtype == half.np:
                vals[i] = convert(backend.xp, vals[i], D.float32)

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

    def _promote(self, vals: list, nargs: int, backend):
        rt = D.result_type(*(vals[i] for i in self.promote_pos if i < nargs))
        kind = self.promote
        if kind == INT_TO_FLOAT and rt.kind in "uib":
            rt = D._default[0]
        widens = self.half_in_kernel and rt in _KERNEL_HALF and backend.xp in COMPILERS
        compute = D.float32 if rt in _HALF and not widens else rt
        cnp = compute.np
        for i in self.promote_pos:
            a = vals[i] if i < nargs else None  # (an absent argument: nothing to promote)
            if isinstance(a, Tensor):
                arr = a._data
                vals[i] = arr if arr.dtype == cnp else convert(backend.xp, arr, compute)
            elif isinstance(a, (list, tuple)):
                vals[i] = [x._data if x._data.dtype == cnp else x._data.astype(cnp) for x in a]
            elif a is not None and compute.kind in "uib":
                vals[i] = CPU_BACKEND.xp.asarray(a).astype(cnp)  # integers wrap like PyTorch's
        for i in self.tensor_pos:  # tensor parameters outside promotion (e.g. where's condition)
            if i < nargs and isinstance(vals[i], Tensor):
                vals[i] = vals[i]._data
        if kind == ALWAYS_BOOL:
            return D.bool_
        return rt

    def _wrap_outputs(self, res, out_dtype, inputs, backend):
        if type(res) is tuple or type(res) is list:
            outs = tuple(self._wrap_one(r, out_dtype, inputs, backend) for r in res)
            return outs if type(res) is tuple else list(outs)
        return self._wrap_one(res, out_dtype, inputs, backend)

    def _wrap_one(self, r, out_dtype, inputs, backend):
        if type(r) is not backend.array_type:
            if r is None or isinstance(r, Tensor):
                return r
            if backend is not CPU_BACKEND:  # a numpy-only kernel's result, moved over
                HOST_RESULTS[self.name] = HOST_RESULTS.get(self.name, 0) + 1
            r = backend.xp.asarray(r)
        if out_dtype is not None and r.dtype != out_dtype.np and (
                r.dtype.kind in "fc" or self.promote is not None):
            r = cast(r, out_dtype)
        dt = _NP_FROM.get(r.dtype)
        if dt is None:
            dt = D.from_np(r.dtype)
            r = r.astype(dt.np)
        t = _wrap(r, dt, backend)
        if self.view and (self.view is True or backend.may_share_memory(r, inputs[0]._data)):
            _mark_view(t, inputs[0])
        return t


def common_backend(op: OpDef, inputs: list):
    """The backend of a call whose tensors are not all on one device: PyTorch takes zero-dim
    CPU tensors beside tensors of another device as scalars, and an op tagged
    "host_indices" (index_put) CPU index tensors too (the caller moves them over); anything
    else is its device error."""
    host_ok = "host_indices" in op.tags
    others = {t._backend for t in inputs if not (t._backend is CPU_BACKEND and (
        t.ndim == 0 or host_ok and t._dtype.kind in "iub"))}
    if len(others) == 1:
        return others.pop()
    if META_BACKEND in others:
        return meta_rule.mixed_devices(op, inputs)  # the meta backend, or PyTorch's error
    devices = list(dict.fromkeys(str(t.device) for t in inputs))  # (in order of appearance)
    raise RuntimeError(f"{op.name}(): Expected all tensors to be on the same device, but found "
                       f"at least two devices, {devices[0]} and {devices[1]}!")


def _mark_view(t: Tensor, src: Tensor) -> None:
    """``t`` is a view of ``src``: same base, same version counter."""
    t._base = src._base if src._base is not None else src
    vc = src._vc
    t._vc = vc if vc is not None else src._version_counter()


def call_inplace(op: OpDef, self: Tensor, args: tuple, kwargs: dict) -> Tensor:
    """``x.<op>_(...)``: run the op out of place, then write the result into ``x``."""
    if not isinstance(self, Tensor):
        raise arg_type_error(op, 0, False, f"Tensor, not {type_name(self)}", op.name + "_")
    if STATE.top is not None and intercepts(op.name):
        return interpose(op, (self,) + tuple(args), kwargs, "inplace")
    token = quiet_enter()
    try:
        if _grad_state.enabled:
            engine.check_inplace(self)
        check_partial_overlap(op, self, (*args, *kwargs.values()))
        if _into_override(op, self, args, kwargs):
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


# ---------------------------------------------------------------------- call paths
# The dispatcher's per-op call paths: what ``ember.exp(x)``, ``x.exp()``, ``x + y`` and
# ``ember.add(x, y)`` run.
#
# ``OpDef.__call__`` is the general path: keyword tensors, lists, promotion, ``out=``,
# argument errors. Most calls need none of that: one tensor and plain arguments (``x.sum(1)``,
# ``x.view(n)``), or two tensors or a tensor and a number (``x + y``). At registration each op
# whose signature allows it gets a path specialised to that shape of call, built here once and
# used for its function, its Tensor method and its operator alike; it runs the same steps as the
# general path (interposers, backend, kernel, wrap, autograd record) inline and hands any other
# call to the general path unchanged. With no interposer active that costs one check.
#
# Backends register per-op overrides (``Backend.override``); ``bind_overrides`` puts them on the
# ops, where these paths and the general path look them up by the tensor's backend:
#
#     "binary"   ``f(a, b)`` for two arrays of one float dtype (float32/float64): the same result
#                as the impl, faster (the CPU backend's threaded ufuncs, its matmul)
#     "kernel"   ``f(*arrays, **kwargs)`` tried before the impl on the unpromoted arrays; returns
#                None where it does not apply (the CPU backend's fused axpy for ``add``); an
#                ``upcast_half`` op hands it float16/bfloat16 arrays widened to float32, unless
#                the kernel has ``widens_half = True`` (it takes them as they are; the impl
#                still gets them widened if the kernel declines)
#     "inplace"  ``f(a, b, alpha) -> bool``: ``x.op_(other[, alpha=])`` computed in x's memory,
#                ``b`` an array of x's dtype or a Python number; False where it does not apply
_NUMBERS = frozenset((int, float, bool, complex))
_NONE = object()  # "no argument" for the positional-only parameters below
# the dtypes a "binary" override takes (numpy dtype -> ember dtype)
_KERNEL_DTYPES = {D.float32.np: D.float32, D.float64.np: D.float64}


def bind_overrides() -> None:
    """Put every registered backend's overrides on their ops (``OpDef.overrides``)."""
    for backend in backends_base.BACKENDS.values():
        for name, kinds in backend.overrides.items():
            op = OPS.get(name)
            if op is None:
                raise RuntimeError(f"backend {backend.name}: override of unknown op {name!r}")
            for kind, fn in kinds.items():
                op.overrides.setdefault(kind, {})[backend] = fn


def _slow_result(op: OpDef, res, args: tuple, kwargs: dict, inputs: list, backend):
    """The end of the general path, for a path's uncommon results (tuples, scalars)."""
    outs = op._wrap_outputs(res, None, inputs, backend)
    if _grad_state.enabled and op.backward is not None:
        for t in inputs:
            if t._leaf_rg or t.grad_fn is not None:
                engine.record(op, args, kwargs, inputs, outs)
                break
    return outs


def unary_path(op: OpDef, fallback: Callable) -> Callable:
    """``f(x, *args, **kwargs)`` for an op whose only tensor parameter is the first;
    ``fallback(x, args, kwargs)`` runs any call this path does not take."""
    impl = op.impl
    max_args = op.n_positional - 1
    view = op.view
    overrides = op._kernel_overrides  # the backends' "kernel" overrides, filled at binding

    def path(self=_NONE, /, *args, **kwargs):
        if STATE.top is not None and intercepts(op.name) or len(args) > max_args or \
                "out" in kwargs or not isinstance(self, Tensor):
            return fallback(self, args, kwargs)
        if self._dtype.is_float8 and op.float8 is not True:
            float8.check(op, (self,) + args, kwargs)
        backend = self._backend
        if backend is META_BACKEND:
            return fallback(self, args, kwargs)  # the general path's meta rule
        token = quiet_enter()
        try:
            res = None
            if overrides and (kernel := overrides.get(backend)) is not None:
                res = kernel(self._data, *args, **kwargs)
            if res is None:
                res = impl(backend.xp, self._data, *args, **kwargs) if kwargs else \
                    impl(backend.xp, self._data, *args)
        except backends_base.KERNEL_ERRORS as e:
            raise translate_error(op, e, (self,) + args, kwargs) from None
        finally:
            quiet_exit(token)
        if type(res) is not type(self._data) or (dt := _NP_FROM.get(res.dtype)) is None:
            return _slow_result(op, res, (self,) + args, kwargs, [self], backend)
        out = _new(Tensor)
        out._data = res
        out._dtype = dt
        if backend is not CPU_BACKEND:
            out._backend = backend
        if view and (view is True or backend.may_share_memory(res, self._data)):
            base = self._base  # registry._mark_view, inline
            out._base = base if base is not None else self
            vc = self._vc
            out._vc = vc if vc is not None else self._version_counter()
        if _grad_state.enabled and (self._leaf_rg or self.grad_fn is not None) and \
                op.backward is not None:
            engine.record(op, (self,) + args, kwargs, [self], out)
        return out
    return path


def binary_path(op: OpDef, fallback: Callable) -> Callable:
    """``f(x, other)`` for a non-view op whose tensor parameters are its first two; ``other``
    a tensor, or a Python number where the op takes one; ``fallback(x, other)`` runs any
    call this path does not take (an argument error, another device, a trace)."""
    impl = op.impl
    numbers = _NUMBERS if 1 not in op._arg_kind else frozenset()  # "Scalar|Tensor" other
    kernels = op.overrides.setdefault("binary", {})

    def path(self, other):
        if STATE.top is not None and intercepts(op.name) or not isinstance(self, Tensor):
            return fallback(self, other)
        backend = self._backend
        if isinstance(other, Tensor):
            if other._backend is not backend:
                return fallback(self, other)  # the general path moves or refuses
            a = self._data
            b = other._data
            dt = a.dtype
            if dt is b.dtype and (edt := _KERNEL_DTYPES.get(dt)) is not None and \
                    (kernel := kernels.get(backend)) is not None:
                token = quiet_enter()
                try:
                    res = kernel(a, b)
                except backends_base.KERNEL_ERRORS:
                    return fallback(self, other)  # the general path raises PyTorch's error
                finally:
                    quiet_exit(token)
                if type(res) is not type(a):
                    res = backend.xp.asarray(res)  # numpy hands back scalars for 0-d operands
                out = _new(Tensor)
                out._data = res
                out._dtype = edt
                if backend is not CPU_BACKEND:
                    out._backend = backend
                if _grad_state.enabled and (
                        self._leaf_rg or self.grad_fn is not None or other._leaf_rg or
                        other.grad_fn is not None) and op.backward is not None:
                    engine.record(op, (self, other), {}, [self, other], out)
                return out
            inputs = [self, other]
        elif type(other) in numbers:
            inputs = [self]
            b = other
        else:
            return fallback(self, other)
        if op.float8 is not True and (self._dtype.is_float8 or (
                len(inputs) > 1 and other._dtype.is_float8)):
            float8.check(op, (self, other), {})
        if backend is META_BACKEND:
            return fallback(self, other)  # the general path's meta rule
        token = quiet_enter()
        try:
            res = impl(backend.xp, self._data, b)
        except backends_base.KERNEL_ERRORS as e:
            raise translate_error(op, e, (self, other), {}) from None
        finally:
            quiet_exit(token)
        if type(res) is not type(self._data) or (dt := _NP_FROM.get(res.dtype)) is None:
            return _slow_result(op, res, (self, other), {}, inputs, backend)
        out = _new(Tensor)
        out._data = res
        out._dtype = dt
        if backend is not CPU_BACKEND:
            out._backend = backend
        if _grad_state.enabled and op.backward is not None:
            for t in inputs:
                if t._leaf_rg or t.grad_fn is not None:
                    engine.record(op, (self, other), {}, inputs, out)
                    break
        return out
    return path


# ---------------------------------------------------------------------- the three forms
def specialise(op: OpDef) -> None:
    """Give ``op`` its call paths: ``op.method`` (``x.op(...)``), ``op.operator``
    (``x <op> y``, or None) and, through a class of its own, ``op(...)`` itself."""
    general = OpDef.__call__
    op.operator = None
    if not op._fast:
        function = None
    elif op.tensor_pos == (0,):
        fn_path = unary_path(op, lambda x, args, kwargs: general(op, x, *args, **kwargs)
                             if x is not _NONE else general(op, *args, **kwargs))

        function = fn_path
        op.method = unary_path(op, lambda x, args, kwargs: call_as_method(op, x, args, kwargs))
        op.operator = fn_path
    elif op.tensor_pos == (0, 1) and not op.view:
        fn_path = binary_path(op, lambda x, y: general(op, x, y))

        def function(x=_NONE, other=_NONE, /, *args, **kwargs):
            if args or kwargs or other is _NONE:
                return general(op, *(v for v in (x, other) if v is not _NONE), *args, **kwargs)
            return fn_path(x, other)
        method_path = binary_path(op, lambda x, y: call_as_method(op, x, (y,), {}))

        def method(self, *args, **kwargs):
            if len(args) == 1 and not kwargs:
                return method_path(self, args[0])
            return call_as_method(op, self, args, kwargs)
        op.method = method
        op.operator = binary_path(op, lambda x, y: call_as_operator(op, x, y))
    else:
        function = None
    if function is None:
        def method(self, *args, **kwargs):
            return call_as_method(op, self, args, kwargs)
        op.method = method
        return
    # the call path is the op's own ``__call__`` (Python looks special methods up on the type)
    op.__class__ = type(f"OpDef_{op.name}", (OpDef,), {"__call__": staticmethod(function)})


def _into_override(op: OpDef, self: Tensor, args: tuple, kwargs: dict) -> bool:
    """``self.<op>_(other[, alpha=])`` through the backend's "inplace" override: ``other`` a
    tensor of self's dtype and device or a Python number, nothing needing autograd."""
    into = op.overrides.get("inplace")
    if not into or len(args) != 1 or (kwargs and set(kwargs) != {"alpha"}):
        return False
    backend = self._backend
    into = into.get(backend)
    other = args[0]
    if into is None or (_grad_state.enabled and (self.requires_grad or getattr(
            other, "requires_grad", False))):
        return False
    if isinstance(other, Tensor):
        if other._dtype is not self._dtype or other._backend is not backend:
            return False
        other = other._data
    elif type(other) not in (int, float):
        return False
    alpha = kwargs.get("alpha")
    return (alpha is None or type(alpha) in (int, float)) and into(self._data, other, alpha)


# what ``_dispatch.redispatch`` runs for an interposer that hands a call on
RUNNERS["call"] = lambda op, args, kwargs: op(*args, **kwargs)
RUNNERS["inplace"] = lambda op, args, kwargs: call_inplace(op, args[0], args[1:], kwargs)


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
        specialise(d)
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
