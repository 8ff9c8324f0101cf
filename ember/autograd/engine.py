"""The autograd engine: graph nodes, saved tensors, in-place history and the backward pass.

The engine imports no op module. Backward rules live in the op table and reach this file as
``op.backward``; everything the engine does to gradients itself (adding, casting, summing to a
shape) goes through Tensor methods that the op table binds.
"""

from __future__ import annotations

import heapq
import itertools
import sys
import weakref

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor, _wrap
from ..backends.cpu import quiet
from .grad_mode import state as _state
from .saved import SavedOutput, SavedTensor, TensorMeta  # noqa: F401  (the engine's names)

_seq = itertools.count()
_task_ids = itertools.count()
# set by a running profiler (``ember/autograd/profiler.py``): ``node_range(node, grads)``
# applies a node inside the profiler's ranges for it; None: nodes are applied directly
node_range = None
_FREED = ("Trying to backward through the graph a second time (or directly access saved tensors "
          "after they have already been freed). Saved intermediate values of the graph are freed "
          "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
          "backward through the graph a second time or if you need to access saved tensors after "
          "calling backward.")


# gradient dtypes AccumulateGrad adds in place with numpy directly (the result of add_ exactly)
_ADD_IN_PLACE = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


# ---------------------------------------------------------------------- nodes
class Node:
    """A backward function in the graph. ``edges[i]`` is ``(node, output_nr)`` or None."""

    edges: list = ()
    in_meta: list = ()
    n_out = 1
    pre_hooks = None  # {output_nr: [hook(grad) -> grad|None]}
    retain = None  # {output_nr: weakref to the tensor that called retain_grad}
    hooks = None  # [hook(grad_inputs, grad_outputs)]
    node_prehooks = None  # [hook(grad_outputs)]
    metadata_ = None

    def __init__(self):
        self.seq = next(_seq)

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self):
        return tuple((e[0], e[1]) if e is not None else (None, 0) for e in self.edges)

    @property
    def metadata(self) -> dict:
        if self.metadata_ is None:
            self.metadata_ = {}
        return self.metadata_

    def register_hook(self, fn):
        if self.hooks is None:
            self.hooks = []
        self.hooks.append(fn)
        return _Handle(self.hooks, fn)

    def register_prehook(self, fn):
        if self.node_prehooks is None:
            self.node_prehooks = []
        self.node_prehooks.append(fn)
        return _Handle(self.node_prehooks, fn)

    def apply(self, grads: list) -> list:
        raise NotImplementedError

    def release(self) -> None:
        pass

    def __call__(self, *grads):
        return self.apply(list(grads))

    def __repr__(self):
        return f"<{self.name()} object at {id(self):#x}>"


class _Handle:
    def __init__(self, lst, fn):
        self.lst, self.fn = lst, fn

    def remove(self):
        if self.fn in self.lst:
            self.lst.remove(self.fn)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class OpNode(Node):
    """The node an op-table call records. Its backward rule is ``op.backward``."""

    simple = False  # every tensor parameter got one tensor: results map 1:1 onto edges

    def __init__(self, op):
        self.seq = next(_seq)  # Node.__init__, inline: one node per recorded op call
        self.op = op
        self.freed = False

    def name(self) -> str:
        return self.op.grad_name

    def apply(self, grads):
        if self.freed:
            raise RuntimeError(_FREED)
        op = self.op
        if len(grads) != 1 or grads[0] is None:
            ref = next(g for g in grads if g is not None)
            optional = op.optional_grads  # (a norm's statistics: the rule takes None)
            for k, g in enumerate(grads):
                m = self.out_meta[k]
                if g is None and m is not None and m[1].kind in "fc" and k not in optional:
                    grads[k] = z = ref.new_zeros(m[0], dtype=m[1])
                    z._unused_grad = True  # a fill, not a gradient (see ops/normalization.py)
        res = op.backward(_Ctx(self), *grads)
        if self.simple:  # the common case: one gradient per input, in order
            if not isinstance(res, (tuple, list)):
                res = (res,)
            return _conform(self, list(res[:len(self.edges)]))
        if not isinstance(res, (tuple, list)) or (len(op.tensor_params) == 1 and op.list_pos):
            res = (res,)
        flat = []
        args = self.args
        for i, r in zip(self.op.tensor_pos, res):
            if i >= len(args):
                break
            a = args[i]
            if isinstance(a, list):
                flat.extend(r if r is not None else [None] * len(a))
            elif isinstance(a, (SavedTensor, TensorMeta)):
                flat.append(r)
        return _conform(self, flat)

    def release(self):
        if self.has_saved:
            self.freed = True
            self.args = self.saved_out = None


def _conform(node, grads):
    """Cast gradients to their input's dtype and sum broadcast dims (pointwise ops)."""
    edges = node.edges
    for k, (g, m) in enumerate(zip(grads, node.in_meta)):
        if g is None or edges[k] is None:
            grads[k] = None  # nothing upstream wants it
            continue
        shape, dtype = m
        if g._data.shape != shape:
            try:
                g = g.sum_to_size(shape)
            except RuntimeError:
                raise RuntimeError(
                    f"Function {node.name()} returned an invalid gradient at index {k} - got "
                    f"{list(g.shape)} but expected shape compatible with {list(shape)}") from None
        if g._dtype is not dtype:
            if g._dtype.is_complex and not dtype.is_complex:
                g = g.real
            g = g.to(dtype)
        grads[k] = g
    return grads


class _Ctx:
    """What a backward rule sees: the call's arguments by name, ``out``, ``needs_input_grad``."""

    __slots__ = ("_node",)

    def __init__(self, node):
        self._node = node

    def __getattr__(self, name):
        node = self._node
        if name == "out":
            outs = [s.unpack(node) for s in node.saved_out]
            return outs[0] if len(outs) == 1 else tuple(outs)
        op = node.op
        i = op.param_index.get(name)
        if i is None:
            raise AttributeError(f"{op.name} has no argument {name!r}")
        if i < len(node.args):
            v = node.args[i]
        elif name in node.kwargs:
            return node.kwargs[name]
        else:
            return op.defaults.get(name)
        if isinstance(v, SavedTensor):
            return v.unpack()
        if isinstance(v, list) and v and isinstance(v[0], SavedTensor):
            return [s.unpack() for s in v]
        return v

    @property
    def needs_input_grad(self):
        node, res, k = self._node, [], 0
        for i in node.op.tensor_pos:
            a = node.args[i] if i < len(node.args) else None
            n = len(a) if isinstance(a, list) else int(isinstance(a, (SavedTensor, TensorMeta)))
            res.append(any(node.edges[k + j] is not None for j in range(n)))
            k += n
        return tuple(res)


class AccumulateGrad(Node):
    """Sink node of a leaf tensor: adds the incoming gradient into ``tensor.grad``."""

    post_hooks = None  # [hook(tensor)]: Tensor.register_post_accumulate_grad_hook

    def __init__(self, t):
        super().__init__()
        self.seq = 1 << 62  # run as soon as ready, like PyTorch
        self._var = weakref.ref(t)

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    @property
    def variable(self):
        return self._var()

    def accumulate(self, g, create_graph):
        t = self._var()
        if t is None:
            return
        if g._dtype is not t._dtype:
            g = g.to(t._dtype)
        if g.shape != t.shape:
            g = g.sum_to_size(t.shape)
        if t.grad is None:
            # a gradient nothing else holds becomes .grad as it is (PyTorch steals it too)
            t.grad = g if create_graph or _stealable(g, t) else g.detach().clone()
        elif create_graph or t.grad.requires_grad:
            t.grad = t.grad + g
        else:
            acc = t.grad
            a = acc._data
            backend = acc._backend
            if type(acc) is type(g) is Tensor and acc._dtype is g._dtype and \
                    a.dtype in _ADD_IN_PLACE and a.shape == g._data.shape and \
                    g._backend is backend and backend.has_data and backend.writeable(a):
                # acc.add_(g) without the dispatch: every step, per leaf
                backend.xp.add(a, g._data, out=a)
                acc._bump()
            else:
                acc.add_(g)


def _stealable(g, t) -> bool:
    """Whether gradient ``g`` can become ``t.grad`` without a copy: no one else refers to the
    tensor (only the engine's list, the two callers' names and getrefcount's argument) or
    to its array (the tensor, our name, the argument), the array owns its memory (no view of
    another) and is laid out as ``t``'s, and it carries no history."""
    if type(g) is not Tensor or g._base is not None or g.grad_fn is not None or \
            g.requires_grad or sys.getrefcount(g) > 4:
        return False
    a = g._data
    backend = g._backend
    return backend is t._backend and backend.has_data and sys.getrefcount(a) <= 3 and \
        getattr(a, "base", False) is None and a.flags.c_contiguous and \
        t._data.flags.c_contiguous and a.shape == t._data.shape


class CopySlices(Node):
    """An in-place op on a view: the base's new history. ``pos`` holds, for each element of the
    view, its flat index in the base."""

    n_out = 1

    def __init__(self, pos):
        super().__init__()
        self.pos = pos

    def apply(self, grads):
        g = grads[0]
        base_grad = g.clone()
        base_grad.reshape(-1)[self.pos] = 0
        return _conform(self, [base_grad, g.reshape(-1)[self.pos]])


# ---------------------------------------------------------------------- recording
def edge_of(t):
    if t.grad_fn is not None:
        return (t.grad_fn, t._out_idx)
    if t._leaf_rg:
        acc = t._acc
        if acc is None:
            acc = t._acc = AccumulateGrad(t)
        return (acc, 0)
    return None


def record(op, args, kwargs, inputs, outs) -> None:
    """Attach an OpNode for one op call to its outputs. Runs once per op call on tensors that
    require grad, so the common cases are written out inline."""
    node = OpNode(op)
    edges = []
    in_meta = []
    for t in inputs:
        fn = t.grad_fn
        edges.append((fn, t._out_idx) if fn is not None else edge_of(t))
        in_meta.append((t._data.shape, t._dtype))  # (a plain tuple: only compared)
    node.edges = edges
    node.in_meta = in_meta
    saved = list(args)
    nargs = len(saved)
    sp = op.save_pos
    has_saved = False
    n_tensors = 0
    for i in op.tensor_pos:
        if i >= nargs:
            break
        a = saved[i]
        keep = i in sp
        has_saved |= keep
        if isinstance(a, Tensor):
            saved[i] = SavedTensor(a) if keep else TensorMeta(a)
            n_tensors += 1
        elif isinstance(a, (list, tuple)) and i in op.list_pos:
            saved[i] = [SavedTensor(x) if keep else TensorMeta(x) for x in a]
    if n_tensors == len(op.tensor_pos) and not op.list_pos:
        node.simple = True
    node.args = saved
    node.kwargs = kwargs
    if type(outs) is Tensor or not isinstance(outs, (tuple, list)):
        olist = (outs,)
        if outs is not None and outs._dtype.kind in "fc":
            outs.grad_fn = node
            outs._out_idx = 0
            node.out_meta = [(outs._data.shape, outs._dtype)]
        else:
            node.out_meta = [None]
    else:
        olist = outs
        node.n_out = len(olist)
        meta = []
        nondiff = op.nondiff_outputs
        for k, o in enumerate(olist):
            if o is not None and o._dtype.kind in "fc" and k not in nondiff:
                o.grad_fn, o._out_idx = node, k
                meta.append((o.shape, o._dtype))
            else:
                meta.append(None)
        node.out_meta = meta
    if op.save_output:
        node.saved_out = [SavedOutput(o, k) for k, o in enumerate(olist)]
        has_saved = True
    node.has_saved = has_saved


def check_inplace(t) -> None:
    if t.grad_fn is None and t._leaf_rg:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    b = t._base
    if b is not None and b.grad_fn is None and b._leaf_rg:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")


def snapshot_saved(node, t) -> None:
    """Before ``t`` is overwritten by an in-place op, give the node a copy of the value ``t``
    had as the op's ``self`` argument (the rule needs the value from before the write). Other
    saved aliases of ``t`` keep their version check, so they raise as PyTorch does."""
    if not isinstance(node, OpNode) or not node.has_saved or not node.args:
        return
    s = node.args[0]
    if not isinstance(s, SavedTensor) or s.tensor is not t:
        return
    c = _wrap(t._data.copy(), t._dtype, t._backend)
    c.grad_fn, c._out_idx, c._leaf_rg, c._acc = t.grad_fn, t._out_idx, t._leaf_rg, t._acc
    node.args[0] = SavedTensor(c)


def rebase_history(t, result) -> None:
    """``t`` now holds ``result``'s values: give it ``result``'s autograd history."""
    if t._base is None:
        t.grad_fn, t._out_idx = result.grad_fn, result._out_idx
        return
    base = t._base
    pos = _view_positions(base, t)
    pos_t = _wrap(base._backend.from_host(pos), D.int64, base._backend)
    node = CopySlices(pos_t)
    node.edges = [edge_of(base), edge_of(result)]
    node.in_meta = [(base.shape, base._dtype), (result.shape, result._dtype)]
    base.grad_fn, base._out_idx = node, 0
    prev = _state.enabled
    _state.enabled = True
    try:
        fresh = base.reshape(-1)[pos_t]
    finally:
        _state.enabled = prev
    t.grad_fn, t._out_idx = fresh.grad_fn, fresh._out_idx


def _view_positions(base, view) -> np.ndarray:
    """For each element of ``view``, its flat (row-major) index in ``base``."""
    bd, vd = base._data, view._data
    b_off, v_off = base.storage_offset(), view.storage_offset()
    b_st, v_st = base.stride(), view.stride()
    span = b_off + 1 + sum((n - 1) * s for n, s in zip(bd.shape, b_st) if n > 0)
    span = max(span, v_off + 1 + sum((n - 1) * s for n, s in zip(vd.shape, v_st) if n > 0))
    storage = np.full(span, -1, np.int64)
    ast = np.lib.stride_tricks.as_strided
    ast(storage[b_off:], bd.shape, [s * 8 for s in b_st])[...] = np.arange(bd.size).reshape(
        bd.shape)
    return ast(storage[v_off:], vd.shape, [s * 8 for s in v_st]).copy()


# ---------------------------------------------------------------------- hooks
def register_tensor_hook(t, hook):
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    node, idx = edge_of(t)
    if node.pre_hooks is None:
        node.pre_hooks = {}
    lst = node.pre_hooks.setdefault(idx, [])
    lst.append(hook)
    return _Handle(lst, hook)


def retain_grad(t) -> None:
    node, idx = t.grad_fn, t._out_idx
    if node.retain is None:
        node.retain = {}
    node.retain[idx] = weakref.ref(t)
    t._retains_grad = True


def _run_pre_hooks(node, grads):
    if node.pre_hooks:
        for idx, hooks in node.pre_hooks.items():
            for h in list(hooks):
                if grads[idx] is None:
                    continue
                r = h(grads[idx])
                if r is not None:
                    grads[idx] = r
    if node.retain:
        for idx, ref in node.retain.items():
            t = ref()
            g = grads[idx]
            if t is not None and g is not None:
                t.grad = g.detach().clone() if t.grad is None else t.grad + g.detach()
    if node.node_prehooks:
        for h in node.node_prehooks:
            r = h(tuple(grads))
            if r is not None:
                grads[:] = list(r)
    return grads


# ---------------------------------------------------------------------- the backward pass
def _needed(roots, targets):
    """Nodes from which some target node is reachable (the part of the graph worth running)."""
    needed = {}
    stack = [(n, False) for n in roots]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            needed[n] = n in targets or any(e is not None and needed.get(e[0], False)
                                            for e in n.edges)
            continue
        if n in needed:
            continue
        stack.append((n, True))
        for e in n.edges:
            if e is not None and e[0] not in needed:
                stack.append((e[0], False))
    return needed


@quiet  # the accumulation below calls numpy directly
def run_backward(root_edges, root_grads, retain_graph, create_graph, capture=None,
                 accumulate_into=None):
    """Propagate ``root_grads`` from ``root_edges`` through the graph.

    ``capture``: {(node, output_nr): slot} whose total gradient is returned in a list (for
    ``autograd.grad``); AccumulateGrad nodes then run only if in ``accumulate_into``.
    """
    deps: dict = {}
    roots = []
    for n, _ in root_edges:
        if n not in deps:
            deps[n] = 0
            roots.append(n)
    stack = list(roots)
    while stack:  # count each node's incoming edges (a node is new when it has no count yet)
        for e in stack.pop().edges:
            if e is not None:
                c = e[0]
                k = deps.get(c)
                if k is None:
                    deps[c] = 1
                    stack.append(c)
                else:
                    deps[c] = k + 1
    needed = None
    captured = None
    if capture is not None:
        targets = {n for n, _ in capture} | set(accumulate_into or ())
        needed = _needed(roots, targets)
        captured = [None] * (max(capture.values()) + 1 if capture else 0)
    buffers: dict = {}
    for (n, i), g in zip(root_edges, root_grads):
        buf = buffers.get(n)
        if buf is None:
            buf = buffers[n] = [None] * n.n_out
        buf[i] = g if buf[i] is None else buf[i] + g
    g = None
    ready = [(-n.seq, id(n), n) for n in roots if deps[n] == 0]
    heapq.heapify(ready)
    heappop, heappush = heapq.heappop, heapq.heappush
    prev = _state.enabled
    _state.enabled = bool(create_graph)
    prev_partial = _state.partial_backward  # whether the running pass is grad()-like
    _state.partial_backward = capture is not None
    prev_task = _state.graph_task  # the running pass's id (checkpointing keys on it)
    _state.graph_task = next(_task_ids)
    try:
        while ready:
            n = heappop(ready)[2]
            grads = buffers.pop(n, None)
            out = None
            if grads is not None and (grads[0] is not None or
                                      any(g is not None for g in grads)):
                if n.pre_hooks or n.retain or n.node_prehooks:
                    grads = _run_pre_hooks(n, grads)
                if capture is not None:
                    for k, g in enumerate(grads):
                        slot = capture.get((n, k))
                        if slot is not None:
                            captured[slot] = g
                if needed is None or needed.get(n):
                    if isinstance(n, AccumulateGrad):
                        if accumulate_into is None or n in accumulate_into:
                            n.accumulate(grads[0], create_graph)
                            for h in list(n.post_hooks or ()):
                                h(n.variable)  # register_post_accumulate_grad_hook's hooks
                    else:
                        out = n.apply(grads) if node_range is None else node_range(n, grads)
                        if n.hooks:
                            for h in n.hooks:
                                r = h(tuple(out), tuple(grads))
                                if r is not None:
                                    out = list(r)
                        if not retain_graph:
                            n.release()
            for k, e in enumerate(n.edges):
                if e is None:
                    continue
                c, idx = e
                if out is not None:
                    g = out[k]
                    if g is not None:
                        buf = buffers.get(c)
                        if buf is None:
                            buf = buffers[c] = [None] * c.n_out
                        buf[idx] = g if buf[idx] is None else buf[idx] + g
                k = deps[c] - 1
                deps[c] = k
                if k == 0:
                    heappush(ready, (-c.seq, id(c), c))
            g = None  # hold no gradient here: AccumulateGrad counts who else does
    finally:
        _state.enabled = prev
        _state.partial_backward = prev_partial
        _state.graph_task = prev_task
    return captured


def _as_list(x):
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _root_grads(outputs, grad_outputs, create_graph):
    grads = []
    grad_outputs = _as_list(grad_outputs) or [None] * len(outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad requires one gradient per output: got {len(grad_outputs)} "
                           f"gradients for {len(outputs)} outputs")
    for k, (o, g) in enumerate(zip(outputs, grad_outputs)):
        if not isinstance(o, Tensor):
            raise TypeError(f"expected a Tensor as output {k}, got {type(o).__name__}")
        if not o.requires_grad:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not "
                               "have a grad_fn")
        if g is None:
            if o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not o._dtype.is_floating_point:
                raise RuntimeError("grad can be implicitly created only for real scalar outputs "
                                   f"but got {o._dtype}")
            g = o.new_ones(o.shape)
        else:
            if not isinstance(g, Tensor):
                raise TypeError(f"grad_tensors[{k}] must be a Tensor, got {type(g).__name__}")
            if g.shape != o.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{k}] has a shape of "
                                   f"{g.shape} and output[{k}] has a shape of {o.shape}.")
            if not create_graph:
                g = g.detach()
        grads.append(g)
    return grads


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None) -> None:
    """``ember.autograd.backward``: accumulate gradients of ``tensors`` into leaves' ``.grad``."""
    outputs = _as_list(tensors)
    grads = _root_grads(outputs, grad_tensors if grad_tensors is not None else grad_variables,
                        create_graph)
    if retain_graph is None:
        retain_graph = create_graph
    edges = [edge_of(o) for o in outputs]
    if inputs is None:
        run_backward(edges, grads, retain_graph, create_graph)
        return
    inputs = _as_list(inputs)
    if not inputs:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    capture, acc, nonleaf = {}, set(), []
    for k, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        e = edge_of(t)
        if t.grad_fn is None:
            acc.add(e[0])
        else:
            capture[e] = len(nonleaf)
            nonleaf.append(t)
    got = run_backward(edges, grads, retain_graph, create_graph, capture=capture,
                       accumulate_into=acc)
    for t, g in zip(nonleaf, got or ()):
        if g is not None:
            t.grad = g if t.grad is None else t.grad + g


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """``ember.autograd.grad``: gradients of ``outputs`` with respect to ``inputs``."""
    inputs = _as_list(inputs)
    outputs = _as_list(outputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    grads = _root_grads(outputs, grad_outputs, create_graph)
    if retain_graph is None:
        retain_graph = create_graph
    capture = {}
    for k, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"grad(): inputs[{k}] must be a Tensor, got {type(t).__name__}")
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        capture.setdefault(edge_of(t), k)
    got = run_backward([edge_of(o) for o in outputs], grads, retain_graph, create_graph,
                       capture=capture, accumulate_into=set())
    slots = {k: capture[edge_of(t)] for k, t in enumerate(inputs)}
    result = []
    for k, t in enumerate(inputs):
        g = got[slots[k]]
        if g is None:
            if materialize_grads:
                g = t.new_zeros(t.shape)
            elif not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
        elif g.shape != t.shape:
            g = g.sum_to_size(t.shape)
        result.append(g)
    return tuple(result)


# ---------------------------------------------------------------------- Tensor's entry points
# Tensor sits below autograd: the engine binds the methods that reach it onto the class.
def _tensor_retain_grad(self) -> None:
    if self.grad_fn is None:
        if not self._leaf_rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        return
    if not self._retains_grad:
        retain_grad(self)


def _tensor_register_hook(self, hook):
    return register_tensor_hook(self, hook)


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


Tensor.retain_grad = _tensor_retain_grad
Tensor.register_hook = _tensor_register_hook
Tensor.backward = _tensor_backward
