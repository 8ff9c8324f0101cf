"""Capture: run the user's function on symbolic tensors and record every op call as a node.

While a trace runs, ``ember.ops.registry.TRACE[0]`` is the tracer, so every op-table call
(functions, methods, operators, in-place variants) reaches ``Tracer.handle`` instead of a
kernel. Tensor arguments are ``Proxy`` objects: Tensors with a shape and dtype but no data.
Reading a proxy's data (``.item()``, ``bool(t)``, ``.numpy()``, printing, or any ember code
that touches ``_data``) raises ``GraphBreak`` naming the reason and the user's source line.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

from .. import _dtype as D
from .._tensor import Size, Tensor
from ..autograd.grad_mode import state as _grad_state
from ..ops import registry
from . import pytree
from .graph import Graph, Node, TensorMeta

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACING = [0]  # depth of active traces (is_compiling())


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

    def stride(self, dim: int | None = None):
        st = _contiguous_strides(self._meta.shape)
        return st if dim is None else st[dim]

    def is_contiguous(self, memory_format=None) -> bool:
        return True

    def storage_offset(self) -> int:
        return 0

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
    """Builds one graph while installed as ``registry.TRACE[0]``."""

    def __init__(self):
        self.graph = Graph()
        self._lifted: dict[int, Node] = {}
        self.lifted_tensors: list[Tensor] = []

    # ------------------------------------------------------------------ values
    def wrap(self, node: Node, rg: bool, aliased: bool = False) -> Proxy:
        p = object.__new__(Proxy)
        p._node, p._meta, p._dtype, p._rg, p._tracer = node, node.meta, node.meta.dtype, rg, \
            self
        if aliased:
            p._aliased = True
        return p

    def input(self, t: Tensor, name: str) -> Proxy:
        node = self.graph.add("input", name, meta=TensorMeta(t.shape, t.dtype), name=name)
        return self.wrap(node, t.requires_grad, aliased=True)

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
        if kwargs.get("out") is not None:
            raise GraphBreak(f"{op.name}(out=...) writes into an existing tensor")
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        if "dynamic_shape" in op.tags:
            raise GraphBreak(f"{op.name}: its output shape depends on the input's values")
        if "random" in op.tags:
            raise GraphBreak(f"{op.name}: random ops are not captured yet")
        if op.returns == "python":
            raise GraphBreak(f"{op.name} returns a Python value computed from data")
        if mode == "inplace":
            return self._inplace(op, args, kwargs)
        tensors = pytree.collect((args, kwargs), Tensor, [])
        registry.TRACE[0] = None  # run_meta evaluates the op on stand-ins: no recursion
        try:
            meta = op.run_meta(*args, **kwargs)
        finally:
            registry.TRACE[0] = self.handle
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

    def _inplace(self, op, args: tuple, kwargs: dict):
        target = args[0]
        if not isinstance(target, Proxy):
            raise GraphBreak(f"{op.name}_() mutates a tensor from outside the compiled region")
        if target._aliased:
            raise GraphBreak(f"{op.name}_() mutates a graph input or a view (input mutation "
                             "is not captured yet)")
        result = self.handle(op, args, kwargs, "call")
        if result.dtype is not target.dtype:
            if not D.can_cast(result.dtype, target.dtype):
                raise RuntimeError(f"result type {D.TYPE_NAME[result.dtype]} can't be cast to "
                                   f"the desired output type {D.TYPE_NAME[target.dtype]}")
            result = self.handle(registry.OPS["_to_copy"], (result, target.dtype), {}, "call")
        if result.shape != target.shape:
            raise RuntimeError(f"{op.name}_(): output with shape {list(target.shape)} doesn't "
                               f"match the broadcast shape {list(result.shape)}")
        target._node, target._meta, target._rg = result._node, result._meta, result._rg
        return target


def trace(fn, args: tuple, kwargs: dict) -> tuple[Graph, list[Tensor]]:
    """Run ``fn`` symbolically; returns the graph and the lifted (outside) tensors in input
    order. Raises GraphBreak when the function cannot be captured whole."""
    tracer = Tracer()
    leaves, skeleton = pytree.flatten((args, kwargs), Tensor)
    names = [f"arg{i}" for i in range(len(leaves))]
    proxies = [tracer.input(t, n) for t, n in zip(leaves, names)]
    p_args, p_kwargs = pytree.unflatten(skeleton, proxies)
    prev = registry.TRACE[0]
    registry.TRACE[0] = tracer.handle
    TRACING[0] += 1
    try:
        result = fn(*p_args, **p_kwargs)
    finally:
        registry.TRACE[0] = prev
        TRACING[0] -= 1
    outs, spec = pytree.flatten(result, Tensor)
    graph = tracer.graph
    graph.outputs = [tracer.node_of(t) for t in outs]
    graph.output_spec = spec
    for p in proxies:
        if p._node.kind != "input":  # rebound by an in-place op (blocked above, kept honest)
            raise GraphBreak("an input was mutated in place")
    return graph, tracer.lifted_tensors
