"""Capture: run the user's function on symbolic tensors and record every op call as a node.

While a trace runs, ``ember._dispatch.STATE.capture`` is the tracer, so every op-table call
(functions, methods, operators, in-place variants) reaches ``Tracer.handle`` instead of a
kernel. Tensor arguments are ``Proxy`` objects: Tensors with a shape and dtype but no data.
Reading a proxy's data (``.item()``, ``bool(t)``, ``.numpy()``, printing, or any ember code
that touches ``_data``) raises ``GraphBreak`` naming the reason and the user's source line.

With dynamic shapes, a proxy's sizes may be ``SymInt`` expressions (see ``symbolic``); each op's
output sizes are then fitted to expressions over its inputs' sizes (``Tracer._meta``) and
re-checked for every new set of sizes (``revalidate``). ``SideEffects`` finds Python state a
trace changed (lists, globals, module attributes) so the call becomes a graph break.
"""

from __future__ import annotations

import builtins
import os
import threading
import traceback
from collections.abc import Callable
from typing import Any

from .. import _dtype as D
from .._tensor import Size, Tensor
from ..autograd.grad_mode import state as _grad_state
from ..ops import registry
from . import pytree
from .graph import Graph, Node, TensorMeta
from .guards import map_ints
from .symbolic import ShapeEnv, SymInt, evaluate, fit, size_carrier, symbols_of
from .views import REINTERPRET, StorageProbe, base_of, is_view
from .._dispatch import STATE

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class GraphBreak(Exception):
    """Something in the traced function needs real data or is not capturable."""

    def __init__(self, reason: str):
        self.reason = reason
        self.user_line = _user_frame()
        super().__init__(reason + (f"\n  from user code at {self.user_line}"
                                   if self.user_line else ""))


def _user_frame() -> str:
    """``file:line: source`` of the innermost stack frame outside the ember package."""
    for fr in reversed(traceback.extract_stack()[:-2]):
        if not os.path.abspath(fr.filename).startswith(_EMBER_DIR):
            return f"{fr.filename}:{fr.lineno}: {(fr.line or '').strip()}"
    return ""


def _contiguous_strides(shape) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def _needs_data(what: str):
    def method(self, *args, **kwargs):
        raise GraphBreak(f"{what} needs the tensor's data")
    method.__name__ = what
    return method


def meta_args(op, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments to compute ``op``'s output metadata with: an op whose eager kernel
    updates an argument in place (training batch norm's running statistics) gets that
    argument left out, since the stand-ins meta runs on are read-only."""
    if op.name == "native_batch_norm":
        bound = dict(zip(op.params, args))
        bound.update(kwargs)
        if bound.get("training"):
            bound["running_mean"] = bound["running_var"] = None
        return (), bound
    return args, kwargs


def check_mutable(node: Node, name: str = "", readonly: set | frozenset = frozenset()
                  ) -> None:
    """Raise GraphBreak when an in-place write into ``node`` cannot be functionalized (it
    writes through a view that reinterprets the elements' type), and eager's RuntimeError
    when several of the written elements are one memory location (an expanded view): the
    scatter of the write-back would silently keep one of the values instead. ``readonly``:
    ids of root nodes whose real tensor is such a view already (an expanded argument)."""
    chain = []
    while is_view(node):
        if node.kind == "call" and node.target.name in REINTERPRET:
            raise GraphBreak(f"an in-place write through {node.target.name}() is not captured")
        chain.append(node)
        node = base_of(node)
    if id(node) in readonly or (chain and not StorageProbe().writable(node, chain[::-1])):
        raise RuntimeError(f"{name}(): unsupported operation: more than one element of the "
                           "written-to tensor refers to a single memory location. Please "
                           "clone() the tensor before performing the operation.")


class _MetaArray:
    """What a proxy's ``_data`` is: an array's metadata (shape, ndim, size, dtype), with no
    values; any other use needs data and breaks the graph."""

    __slots__ = ("dtype", "itemsize", "ndim", "shape", "size")

    def __init__(self, meta):
        self.shape = tuple(meta.shape)
        self.ndim = len(self.shape)
        self.size = Size(self.shape).numel()
        self.dtype = meta.dtype.np
        self.itemsize = self.dtype.itemsize

    def __getattr__(self, name):
        raise GraphBreak(f"an operation outside the op table read the tensor's data "
                         f"(array.{name})")

    def __array__(self, *args, **kwargs):
        raise GraphBreak("an operation outside the op table read the tensor's data")

    def __len__(self):
        return self.shape[0]


class Proxy(Tensor):
    """A symbolic tensor of a trace: metadata and a graph node, never data."""

    _aliased = False  # a graph input, a view, or viewed: in-place writes would be visible
    _traced = True

    @property
    def _data(self):  # metadata reads work; anything needing values is a graph break
        return _MetaArray(self._meta)

    @_data.setter
    def _data(self, value):
        raise GraphBreak("an operation outside the op table replaced the tensor's data")

    @property
    def shape(self) -> Size:
        return Size(self._meta.shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._meta.shape)
        nd = len(self._meta.shape)
        if not -max(nd, 1) <= dim < max(nd, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(nd, 1)}, {max(nd, 1) - 1}], but got {dim})")
        return self._meta.shape[dim]

    @property
    def ndim(self) -> int:
        return len(self._meta.shape)

    def dim(self) -> int:
        return len(self._meta.shape)

    ndimension = dim

    def numel(self) -> int:
        return Size(self._meta.shape).numel()

    nelement = numel

    @property
    def nbytes(self) -> int:
        return self.numel() * self._dtype.itemsize

    _geometry = None  # a static graph input's (strides, storage offset), as guarded

    def stride(self, dim: int | None = None):
        st = self._geometry[0] if self._geometry else _contiguous_strides(self._meta.shape)
        return st if dim is None else st[dim]

    def is_contiguous(self, memory_format=None) -> bool:
        return self._geometry is None or \
            self._geometry[0] == _contiguous_strides(self._meta.shape)

    def storage_offset(self) -> int:
        return self._geometry[1] if self._geometry else 0

    @property
    def requires_grad(self) -> bool:
        return self._rg

    @property
    def is_leaf(self) -> bool:
        return self._node.kind == "input"

    def __len__(self) -> int:
        if not self._meta.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._meta.shape[0]

    def detach(self) -> Tensor:
        return self._tracer.wrap(self._tracer.graph.add("detach", None, (self._node,),
                                                        meta=self._meta), False)

    def requires_grad_(self, requires_grad: bool = True):
        raise GraphBreak("requires_grad_() inside a compiled region")

    def __repr__(self, *, tensor_contents=None) -> str:
        raise GraphBreak("printing a tensor")

    __str__ = __repr__
    item = _needs_data("Tensor.item()")
    tolist = _needs_data("Tensor.tolist()")
    numpy = _needs_data("Tensor.numpy()")
    __array__ = _needs_data("converting a tensor to a numpy array")
    __bool__ = _needs_data("bool(tensor) (data-dependent control flow)")
    __float__ = _needs_data("float(tensor)")
    __int__ = _needs_data("int(tensor)")
    __index__ = _needs_data("using a tensor as an index")
    __complex__ = _needs_data("complex(tensor)")
    data_ptr = _needs_data("Tensor.data_ptr()")
    untyped_storage = _needs_data("Tensor.untyped_storage()")
    __dlpack__ = _needs_data("DLPack export")
    backward = _needs_data("Tensor.backward()")
    __deepcopy__ = _needs_data("deepcopy of a tensor")
    __reduce_ex__ = _needs_data("pickling a tensor")
    __format__ = _needs_data("formatting a tensor")


class Tracer:
    """Builds one graph while installed as ``STATE.capture``."""

    def __init__(self, env: ShapeEnv | None = None):
        self.graph = Graph()
        self._lifted: dict[int, Node] = {}
        self._stale: dict[int, tuple] = {}  # lifted tensors written in place: (tensor, data)
        self.lifted_tensors: list[Tensor] = []
        self.readonly: set[int] = set()  # ids of input nodes whose tensor is read-only
        # dynamic shapes: the symbols' environment (None: all static); a tracer made while a
        # dynamic compilation is active (the backward graph's) shares it
        self.env = env if env is not None else STATE.shape_envs[-1]

    # ------------------------------------------------------------------ values
    def wrap(self, node: Node, rg: bool, aliased: bool = False) -> Proxy:
        p = object.__new__(Proxy)
        p._node, p._meta, p._dtype, p._rg, p._tracer = node, node.meta, node.meta.dtype, rg, \
            self
        if aliased:
            p._aliased = True
        return p

    def input(self, t: Tensor, name: str, shape: tuple | None = None) -> Proxy:
        """A proxy for argument ``t``; ``shape`` (with SymInt sizes) overrides its shape."""
        meta = TensorMeta(t.shape if shape is None else shape, t.dtype)
        node = self.graph.add("input", name, meta=meta, name=name)
        p = self.wrap(node, t.requires_grad, aliased=True)
        if shape is None and isinstance(t, Tensor) and not isinstance(t, Proxy):
            # a real argument's layout (guarded): as_strided and its backward read it
            p._geometry = (tuple(t.stride()), t.storage_offset())
            if not t._data.flags.writeable:  # an expanded argument (stride 0 is guarded)
                self.readonly.add(id(node))
        return p

    def node_of(self, t: Tensor) -> Node:
        if isinstance(t, Proxy):
            if t._tracer is not self:
                raise GraphBreak("a tensor from another compiled region")
            return t._node
        node = self._lifted.get(id(t))
        if node is None:  # a tensor from outside the arguments: read it on every call
            node = self.graph.add("param", t, meta=TensorMeta(t.shape, t.dtype),
                                  name=f"c{len(self.lifted_tensors)}")
            self._lifted[id(t)] = node
            self.lifted_tensors.append(t)
        return node

    def to_nodes(self, obj: Any) -> Any:
        return pytree.map_leaves(obj, Tensor, self.node_of)

    # ------------------------------------------------------------------ the hook
    def handle(self, op, args: tuple, kwargs: dict, mode: str):
        out = kwargs.get("out")
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        # a data-dependent op with a meta rule knows its shape for some arguments
        # (repeat_interleave with an int ``repeats``); its meta raises for the others
        if "dynamic_shape" in op.tags and op.meta is None:
            raise GraphBreak(f"{op.name}: its output shape depends on the input's values")
        if op.returns == "python":
            raise GraphBreak(f"{op.name} returns a Python value computed from data")
        if out is not None:  # out=: a functional call, then a write into ``out``
            return self._out(op, self.handle(op, args, kwargs, "call"), out)
        if mode == "inplace":
            return self._inplace(op, args, kwargs)
        tensors = pytree.collect((args, kwargs), Tensor, [])
        STATE.capture = None  # run_meta evaluates the op on stand-ins: no recursion
        # a random op's meta may draw samples: the run must see the generator untouched
        gens = rng_states(args, kwargs) if "random" in op.tags else ()
        try:
            m_args, m_kwargs = meta_args(op, args, kwargs)
            meta = self._meta(op, m_args, m_kwargs)
        except RuntimeError as e:
            if "dynamic_shape" in op.tags and "depends on the input's values" in str(e):
                raise GraphBreak(f"{op.name}: its output shape depends on the input's values")
            raise
        finally:
            STATE.capture = self.handle
            for g, st in gens:
                g.set_state(st)
        node = self.graph.add("call", op, self.to_nodes(args), self.to_nodes(kwargs))
        rg = _grad_state.enabled and op.differentiable and any(t.requires_grad for t in tensors)
        aliased = "view" in op.tags
        if aliased:
            for t in tensors:
                if isinstance(t, Proxy):
                    t._aliased = True
        if isinstance(meta, tuple) and len(meta) == 2 and isinstance(meta[1], D.dtype):
            node.meta = TensorMeta(*meta)
            return self.wrap(node, rg and node.meta.dtype.kind in "fc", aliased)
        if isinstance(meta, tuple) and all(isinstance(m, tuple) and len(m) == 2 for m in meta):
            node.meta = tuple(TensorMeta(*m) for m in meta)
            outs = tuple(self.wrap(self.graph.add("getitem", i, (node,), meta=m),
                                   rg and m.dtype.kind in "fc", aliased)
                         for i, m in enumerate(node.meta))
            if op.returns is not None:
                return op.returns(*outs)
            return outs
        self.graph.nodes.remove(node)
        raise GraphBreak(f"{op.name} returned {type(meta).__name__}, not tensors")

    def _meta(self, op, args: tuple, kwargs: dict):
        return symbolic_meta(self.env, op, args, kwargs)

    def _inplace(self, op, args: tuple, kwargs: dict):
        return self.mutate(args[0], self.handle(op, args, kwargs, "call"), op.name + "_")

    def _out(self, op, result, out):
        """``op(..., out=out)``: ``result`` written into ``out`` (a tensor or a tuple)."""
        pairs = list(zip(out, result)) if isinstance(out, (tuple, list)) else [(out, result)]
        for o, r in pairs:
            if tuple(o.shape) != tuple(r.shape):  # eager resizes ``out``: not captured
                raise GraphBreak(f"{op.name}(out=...) resizes its output")
            self.mutate(o, r, op.name)
        return out

    def mutate(self, target: Tensor, result: Tensor, name: str) -> Tensor:
        """Record that ``target`` now holds ``result`` (cast to its dtype): a ``mutate`` node,
        which the functionalize pass turns into dataflow (and a write-back when ``target``
        is, or views, a graph input or lifted tensor)."""
        from ..autograd import engine
        if not isinstance(result, Proxy):  # e.g. an op that returned its input unchanged
            result = self.wrap(self.node_of(result), result.requires_grad)
        if result.dtype is not target.dtype:
            if not D.can_cast(result.dtype, target.dtype):
                raise RuntimeError(f"result type {D.TYPE_NAME[result.dtype]} can't be cast to "
                                   f"the desired output type {D.TYPE_NAME[target.dtype]}")
            result = self.handle(registry.OPS["_to_copy"], (result, target.dtype), {}, "call")
        if tuple(result.shape) != tuple(target.shape):
            raise RuntimeError(f"{name}(): output with shape {list(target.shape)} doesn't "
                               f"match the broadcast shape {list(result.shape)}")
        if _grad_state.enabled:
            if isinstance(target, Proxy):
                if target.requires_grad and target._node.kind == "input":
                    raise RuntimeError("a leaf Variable that requires grad is being used in an "
                                       "in-place operation.")
            else:
                engine.check_inplace(target)
        node = self.node_of(target)
        check_mutable(node, name, self.readonly)
        if not isinstance(target, Proxy) and not target._data.flags.writeable:
            raise RuntimeError(f"{name}(): unsupported operation: more than one element of the "
                               "written-to tensor refers to a single memory location. Please "
                               "clone() the tensor before performing the operation.")
        self.graph.add("mutate", None, (node, result._node), meta=node.meta)
        if not isinstance(target, Proxy) and id(target) not in self._stale:
            # its data now predates the write: a read (float(buffer)) would bake a stale
            # value, so it breaks the graph until the trace ends (``restore``)
            self._stale[id(target)] = (target, target._data)
            target._data = _MetaArray(node.meta)
        if isinstance(target, Proxy):
            target._rg = target._rg or result._rg
        return target


    def restore(self) -> None:
        """Give the lifted tensors written during the trace their data back."""
        for t, data in self._stale.values():
            t._data = data
        self._stale.clear()


def rng_states(args: tuple, kwargs: dict) -> list:
    """``(generator, state)`` for each generator a random op call may draw from."""
    from .._random import Generator, default_generator
    gens = [g for g in pytree.collect((args, kwargs), Generator, [])] or [default_generator]
    return [(g, g.get_state()) for g in gens]


def trace(fn, args: tuple, kwargs: dict, env: ShapeEnv | None = None,
          shapes: dict | None = None) -> tuple[Graph, list[Tensor]]:
    """Run ``fn`` symbolically; returns the graph and the lifted (outside) tensors in input
    order. Raises GraphBreak when the function cannot be captured whole. ``shapes`` maps
    flat tensor-argument indices to symbolic shapes over ``env``'s symbols."""
    tracer = Tracer(env)
    leaves, skeleton = pytree.flatten((args, kwargs), Tensor)
    names = [f"arg{i}" for i in range(len(leaves))]
    shapes = shapes or {}
    proxies = [tracer.input(t, n, shapes.get(i)) for i, (t, n) in enumerate(zip(leaves, names))]
    p_args, p_kwargs = pytree.unflatten(skeleton, proxies)
    prev = STATE.capture
    STATE.capture = tracer.handle
    STATE.tracing += 1
    prev_print, builtins.print = builtins.print, _traced_print
    _PRINT_OWNER.append((threading.get_ident(), prev_print))
    try:
        result = fn(*p_args, **p_kwargs)
    finally:
        builtins.print = prev_print
        _PRINT_OWNER.pop()
        STATE.capture = prev
        STATE.tracing -= 1
        tracer.restore()
    outs, spec = pytree.flatten(result, Tensor)
    graph = tracer.graph
    graph.outputs = [tracer.node_of(t) for t in outs]
    graph.output_spec = spec
    return graph, tracer.lifted_tensors


# ---------------------------------------------------------------------- symbolic sizes
def with_int_symbols(fn: Callable, args: tuple, kwargs: dict, int_syms: dict) -> tuple:
    """What to trace when Python int arguments are symbolic: ``fn`` and the arguments with
    each such int (by position among the int arguments) replaced by its SymInt, plus one
    ``size_carrier`` tensor per symbol, passed after the call's tensors (the graph binds
    the symbol from its size); returns ``(fn, args, kwargs, carriers)``."""
    if not int_syms:
        return fn, args, kwargs, []
    seen = [0]

    def sub(path: str, v: int):
        k, seen[0] = seen[0], seen[0] + 1
        return int_syms.get(k, v)
    t_args = map_ints(args, sub, "args")
    t_kwargs = map_ints(kwargs, sub, "kwargs")
    carriers = [size_carrier(s.hint) for s in int_syms.values()]

    def traced(*a, _ember_int_carriers=(), **k):
        return fn(*a, **k)
    return traced, t_args, dict(t_kwargs, _ember_int_carriers=tuple(carriers)), carriers


def symbolic_meta(env: ShapeEnv | None, op, args: tuple, kwargs: dict):
    """Output metadata; with symbolic sizes, each output size is fitted to an expression
    over the inputs' sizes from evaluations at the hints and at probe sizes (a size that
    fits nothing specialises the symbols involved). The dynamic entry re-checks every
    such fit for each new set of sizes before using the graph (``revalidate``). Tensor
    arguments are proxies or ``_Shaped`` stand-ins."""
    syms = symbols_of(_symbolic_leaves((args, kwargs)))
    if env is None or not syms:
        return op.run_meta(*args, **kwargs)
    syms = sorted(syms, key=lambda s: s.index)
    live = [s for s in syms if s not in env.specialized]
    points = [{s: s.hint + (k if s in live else 0) for s in syms} for k in (0, 1, 2)]
    first = op.run_meta(*_concrete(args, points[0]), **_concrete(kwargs, points[0]))
    outs0 = _pairs(first)
    if outs0 is None:
        return first
    runs = [outs0]
    for pt in points[1:]:
        try:
            r = _pairs(op.run_meta(*_concrete(args, pt), **_concrete(kwargs, pt)))
        except Exception:
            r = None
        runs.append(r)
    if len(live) > 1:
        # the points above move every symbol together, so expressions that differ only in
        # which symbol they use agree there (s0*s1 vs s1*s2 for a reshape at equal sizes;
        # s0 - 1 vs s1 for ``x[1:]`` at s0 = s1 + 1): one more point with the symbols moved
        # apart, when the op allows it
        pt = {s: s.hint + (3 + live.index(s) if s in live else 0) for s in syms}
        try:
            r = _pairs(op.run_meta(*_concrete(args, pt), **_concrete(kwargs, pt)))
        except Exception:
            r = None
        if r is not None and len(r) == len(outs0) and \
                all(len(a[0]) == len(b[0]) for a, b in zip(r, outs0)):
            runs.append(r)
            points = points + [pt]
    fitted = _fit_outputs(runs, points, _candidates(args, kwargs))
    ints = [s for s in live if s in env.int_symbols]
    if fitted is None and ints and len(ints) < len(live):
        # an int argument's symbol is the likelier culprit (``x.view(n, -1)``: a size
        # divided by it, which fitting does not express): specialise it alone first
        for s in ints:
            env.specialize(s, f"{op.name}: output size not expressible in the input sizes")
        return symbolic_meta(env, op, args, kwargs)
    if fitted is None:
        for s in live:
            env.specialize(s, f"{op.name}: output size not expressible in the input sizes")
        fitted = [tuple(shape) for shape, _ in outs0]
    metas = [(shape, dt) for shape, (_, dt) in zip(fitted, outs0)]
    env.shape_log.append((op, _template(args), _template(kwargs), [m[0] for m in metas]))
    if isinstance(first, tuple) and len(first) == 2 and isinstance(first[1], D.dtype):
        return metas[0]
    return tuple(metas)


class _Shaped:
    """A concrete-shape stand-in for a symbolic tensor (what ``run_meta`` reads)."""

    __slots__ = ("dtype", "shape")
    requires_grad = False

    def __init__(self, shape: tuple, dtype):
        self.shape, self.dtype = tuple(shape), dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, d: int | None = None):
        return Size(self.shape) if d is None else self.shape[d]

    def numel(self):
        return Size(self.shape).numel()


def _symbolic_leaves(obj) -> list:
    """Every SymInt of ``obj``: in tensor shapes and in Python arguments."""
    out: list = []
    for leaf in pytree.collect(obj, (Tensor, SymInt, _Shaped), []):
        if isinstance(leaf, SymInt):
            out.append(leaf)
        elif isinstance(leaf, (Proxy, _Shaped)):
            out.extend(n for n in _shape_of(leaf) if isinstance(n, SymInt))
    return out


def _shape_of(t) -> tuple:
    return t._meta.shape if isinstance(t, Proxy) else tuple(t.shape)


def _concrete(obj, point: dict):
    """``obj`` with symbolic tensors as concrete-shape stand-ins and SymInts as ints, at the
    sizes ``point`` gives the symbols."""
    def conv(x):
        if isinstance(x, SymInt):
            return x.value(point)
        if isinstance(x, (Proxy, _Shaped)):
            return _Shaped(evaluate(_shape_of(x), point), x.dtype)
        if isinstance(x, Size):  # a proxy's ``.shape`` passed on (select's backward)
            return Size(evaluate(tuple(x), point))
        return x
    return pytree.map_leaves(obj, (Tensor, SymInt, _Shaped, Size), conv)


def _template(obj):
    """``obj`` with proxies replaced by their (symbolic) shape and dtype, for revalidation."""
    return pytree.map_leaves(obj, Proxy, lambda p: _Shaped(p._meta.shape, p.dtype))


def _pairs(meta) -> list | None:
    if isinstance(meta, tuple) and len(meta) == 2 and isinstance(meta[1], D.dtype):
        return [(tuple(meta[0]), meta[1])]
    if isinstance(meta, tuple) and all(isinstance(m, tuple) and len(m) == 2 for m in meta):
        return [(tuple(m[0]), m[1]) for m in meta]
    return None


def _candidates(args, kwargs) -> list:
    """Expressions an output size may equal: input sizes, products of runs of them (flatten,
    reshape), sums across inputs (cat), and symbolic Python arguments."""
    shapes = [_shape_of(t) for t in pytree.collect((args, kwargs), (Tensor, _Shaped), [])]
    out: list = []
    for shape in shapes:
        out += [n for n in shape if isinstance(n, SymInt)]
    out += [x for x in pytree.collect((args, kwargs), SymInt, [])]
    for shape in shapes:
        for i in range(len(shape)):
            for j in range(i + 2, len(shape) + 1):
                p = 1
                for n in shape[i:j]:
                    p = p * n
                if isinstance(p, SymInt):
                    out.append(p)
    for d in range(max((len(s) for s in shapes), default=0)):
        tot = 0
        for s in shapes:
            if d < len(s):
                tot = tot + s[d]
        if isinstance(tot, SymInt):
            out.append(tot)
    seen, uniq = set(), []
    for c in out:
        if c._key not in seen:
            seen.add(c._key)
            uniq.append(c)
    return uniq


def _fit_outputs(runs: list, points: list, cands: list) -> list | None:
    base = runs[0]
    if any(r is None or len(r) != len(base) for r in runs):
        return None
    fitted = []
    for k, (shape, dt) in enumerate(base):
        if any(len(r[k][0]) != len(shape) or r[k][1] is not dt for r in runs):
            return None
        dims = []
        for d in range(len(shape)):
            e = fit([r[k][0][d] for r in runs], points, cands)
            if e is None:
                return None
            dims.append(e)
        fitted.append(tuple(dims))
    return fitted


def revalidate(env: ShapeEnv, bindings: dict) -> str | None:
    """Re-run the metadata of every symbolic op of a dynamic graph at the sizes ``bindings``
    gives; a description of the first output size that differs from the graph's expression,
    or None when the graph is valid for these sizes."""
    for op, args, kwargs, expected in env.shape_log:
        # a random op's meta may draw samples: the user's generators stay untouched
        gens = rng_states(args, kwargs) if "random" in op.tags else ()
        try:
            got = _pairs(op.run_meta(*_concrete(args, bindings), **_concrete(kwargs, bindings)))
        except Exception as e:
            return f"{op.name} fails at these sizes ({type(e).__name__})"
        finally:
            for g, st in gens:
                g.set_state(st)
        want = [evaluate(tuple(s), bindings) for s in expected]
        if got is None or [tuple(g[0]) for g in got] != want:
            return f"{op.name} output size {want} does not hold at these sizes"
    return None


# ---------------------------------------------------------------------- Python side effects
class SideEffects:
    """Python state a traced function could change besides tensors: lists, dicts and sets
    reachable from its arguments, closure cells and the globals it reads (one level deep),
    the rebinding of those globals and cells, and the attributes of the modules it uses.

    A capture runs the function once, symbolically; a compiled graph then replays only its
    tensor operations. A function that changes such state would do it once (at capture) and
    never again, so ``changed()`` finds such changes after a trace, ``restore()`` undoes
    them, and the call is treated as a graph break: the function runs eagerly on every call,
    and each side effect happens exactly once per call, as without compile."""

    _CONTAINERS = (list, dict, set, bytearray)

    def __init__(self, args: tuple, kwargs: dict, free: list, modules: list):
        self.items: list = []  # (description, container, shallow copy)
        self.bound: list = []  # (description, source, value) for globals/cells
        self.attrs: list = []  # (description, object, dict copy)
        seen: set = set()
        for i, a in enumerate(args):
            self._add(f"argument {i}", a, seen)
        for k, v in kwargs.items():
            self._add(f"argument {k!r}", v, seen)
        for name, src in free:
            v = _source_value(src)
            self.bound.append((name, src, v))
            self._add(name, v, seen)
        for m in modules:
            for sub in m.modules():
                self.attrs.append((f"module {type(sub).__name__}", sub, dict(sub.__dict__)))

    def _add(self, what: str, v: Any, seen: set, depth: int = 0) -> None:
        if not isinstance(v, self._CONTAINERS) or id(v) in seen:
            return
        seen.add(id(v))
        self.items.append((what, v, v.copy() if not isinstance(v, bytearray) else bytes(v)))
        if depth < 1:
            inner = v.values() if isinstance(v, dict) else (v if isinstance(v, list) else ())
            for x in inner:
                self._add(what, x, seen, depth + 1)

    def changed(self) -> str | None:
        """What the trace changed (a readable description), or None."""
        for what, c, old in self.items:
            if _differs(c, old):
                return f"{what} ({type(c).__name__}) was modified"
        for name, src, v in self.bound:
            if _source_value(src) is not v:
                return f"{name} was rebound"
        for what, m, old in self.attrs:
            now = m.__dict__
            if now.keys() != old.keys() or any(now[k] is not old[k] for k in old):
                return f"an attribute of {what} was set"
        return None

    def restore(self) -> None:
        for _, c, old in self.items:
            if _differs(c, old):
                if isinstance(c, (list, bytearray)):
                    c[:] = old
                else:
                    c.clear()
                    c.update(old)
        for _, src, v in self.bound:
            if _source_value(src) is not v:
                if isinstance(src, tuple):
                    src[0][src[1]] = v
                else:
                    src.cell_contents = v
        for _, m, old in self.attrs:
            if m.__dict__.keys() != old.keys() or any(m.__dict__[k] is not old[k] for k in old):
                m.__dict__.clear()
                m.__dict__.update(old)


def _differs(c, old) -> bool:
    if len(c) != len(old):
        return True
    if isinstance(c, dict):
        return c.keys() != old.keys() or any(c[k] is not old[k] for k in old)
    if isinstance(c, set):
        return c != old
    return any(a is not b for a, b in zip(c, old))


def _source_value(src) -> Any:
    if isinstance(src, tuple):
        return src[0].get(src[1], _MISSING)
    try:
        return src.cell_contents
    except ValueError:
        return _MISSING


_MISSING = object()


_PRINT_OWNER: list = []  # (tracing thread, the print to use elsewhere), innermost last


def _traced_print(*args, **kwargs):
    thread, real = _PRINT_OWNER[-1]
    if threading.get_ident() != thread:  # another thread printing meanwhile: just print
        return real(*args, **kwargs)
    raise GraphBreak("printing: print() is a side effect (the function runs eagerly so that "
                     "it prints on every call)")
