"""Training graphs: derive the backward graph from the op table's backward rules, run the
forward and backward as compiled graphs, and record one autograd node for the whole call.

The backward graph is captured by running each node's ``op.backward`` rule, in reverse node
order, on symbolic tensors through the same tracer as the forward. Its inputs are the forward
values the rules read (saved activations, returned as extra forward outputs) followed by one
gradient per forward output; its outputs are the gradients of the forward inputs that require
grad. Gradients are conformed as the eager engine does (summed to the input's shape, cast to
its dtype) and accumulated when a value has several users.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from .._tensor import Size
from ..autograd.engine import TensorMeta as EngineMeta
from ..autograd.function import Function
from ..autograd.grad_mode import state as _grad_state
from ..ops import registry
from . import pytree
from .capture import Proxy, Tracer
from .graph import Graph, Node, TensorMeta


def _stand_in(meta: TensorMeta):
    """A tensor argument the rule did not declare in ``saves``: the engine's metadata-only
    stand-in, as eager backward rules receive."""
    src = SimpleNamespace(shape=Size(meta.shape), _dtype=meta.dtype)
    return EngineMeta(src)


class _TraceCtx:
    """The ``ctx`` a backward rule sees, over symbolic saved values."""

    def __init__(self, node: Node, saved: Callable[[Node], Proxy], rg: dict,
                 output: Callable[[Node, int], Node]):
        self._node, self._saved, self._rg, self._output = node, saved, rg, output

    def __getattr__(self, name: str) -> Any:
        node, op = self._node, self._node.target
        if name == "out":
            if isinstance(node.meta, tuple):
                return tuple(self._saved(self._output(node, k)) for k in range(len(node.meta)))
            return self._saved(node)
        if name == "needs_input_grad":
            res = []
            for i in op.tensor_pos:
                a = node.args[i] if i < len(node.args) else None
                items = a if isinstance(a, (list, tuple)) else [a]
                res.append(any(isinstance(x, Node) and self._rg[id(x)] for x in items))
            return tuple(res)
        i = op.param_index.get(name)
        if i is None:
            raise AttributeError(f"{op.name} has no argument {name!r}")
        if i < len(node.args):
            v = node.args[i]
        elif name in node.kwargs:
            v = node.kwargs[name]
        else:
            return op.defaults.get(name)
        keep = name in op.saves

        def conv(x):
            return self._saved(x) if keep else _stand_in(x.meta)
        return pytree.map_leaves(v, Node, conv)


class _NoRule(Exception):
    pass


def requires_grad_flags(graph: Graph, input_rg: list[bool]) -> dict:
    """Which graph values carry gradient (as the eager dispatcher would record)."""
    rg: dict[int, bool] = {}
    for n, flag in zip(graph.inputs, input_rg):
        rg[id(n)] = flag
    for n in graph.nodes:
        if n.kind in ("input", "param"):
            continue
        if n.kind == "detach":
            rg[id(n)] = False
        elif n.kind == "getitem":
            rg[id(n)] = rg[id(n.args[0])] and n.meta.dtype.kind in "fc"
        else:
            op = n.target
            ins = n.inputs()
            floating = any(m.dtype.kind in "fc" for m in
                           (n.meta if isinstance(n.meta, tuple) else (n.meta,)))
            rg[id(n)] = op.differentiable and op.backward is not None and floating and \
                any(rg[id(i)] for i in ins)
    return rg


def derive_backward(graph: Graph, input_rg: list[bool]) -> tuple[Graph, list[Node], list[int]]:
    """``(backward graph, forward nodes it reads, indices of the inputs it gives grads for)``.
    Raises _NoRule when some op cannot be differentiated symbolically."""
    rg = requires_grad_flags(graph, input_rg)
    tracer = Tracer()
    saved: list[Node] = []
    saved_proxy: dict[int, Proxy] = {}

    def saved_value(n: Node) -> Proxy:
        if id(n) not in saved_proxy:
            saved.append(n)
            saved_proxy[id(n)] = tracer.input(_Meta(n.meta), f"saved_{n.name}")
        return saved_proxy[id(n)]

    getitems = {(id(n.args[0]), n.target): n for n in graph.nodes if n.kind == "getitem"}

    def output_of(call: Node, k: int) -> Node:
        """The forward node holding output ``k`` of a multi-output call (made if unused)."""
        if (id(call), k) not in getitems:
            n = Node(f"{call.name}_out{k}", "getitem", k, (call,), meta=call.meta[k])
            graph.nodes.insert(graph.nodes.index(call) + 1, n)
            getitems[(id(call), k)] = n
        return getitems[(id(call), k)]

    # the gradient inputs come after the saved values: create them first, reorder later
    tangents = [tracer.input(_Meta(o.meta), f"tangent{i}") for i, o in enumerate(graph.outputs)]
    grads: dict[int, Proxy] = {}

    def accumulate(n: Node, g) -> None:
        if g is None or not rg.get(id(n)):
            return
        if tuple(g.shape) != n.meta.shape:
            g = g.sum_to_size(n.meta.shape)
        if g.dtype is not n.meta.dtype:
            g = g.to(n.meta.dtype)
        grads[id(n)] = g if id(n) not in grads else grads[id(n)] + g

    prev = registry.TRACE[0]
    registry.TRACE[0] = tracer.handle
    grad_prev = _grad_state.enabled
    _grad_state.enabled = False
    try:
        for o, t in zip(graph.outputs, tangents):
            accumulate(o, t)
        pending_multi: dict[int, list] = {}
        for n in reversed(graph.nodes):
            if n.kind in ("input", "param", "detach"):
                continue
            if n.kind == "getitem":
                if id(n) in grads:
                    pending_multi.setdefault(id(n.args[0]), [None] * len(n.args[0].meta))[
                        n.target] = grads[id(n)]
                continue
            if not rg[id(n)]:
                continue
            if isinstance(n.meta, tuple):
                outs = pending_multi.get(id(n))
                if outs is None:
                    continue
                import ember
                outs = [g if g is not None else ember.zeros(m.shape, dtype=m.dtype)
                        for g, m in zip(outs, n.meta)]
            else:
                if id(n) not in grads:
                    continue
                outs = [grads[id(n)]]
            res = n.target.backward(_TraceCtx(n, saved_value, rg, output_of), *outs)
            op = n.target
            if not isinstance(res, (tuple, list)) or (len(op.tensor_params) == 1 and op.list_pos):
                res = (res,)
            for i, r in zip(op.tensor_pos, res):
                if i >= len(n.args):
                    break
                a = n.args[i]
                if isinstance(a, (list, tuple)):
                    for x, gx in zip(a, r if r is not None else [None] * len(a)):
                        if isinstance(x, Node):
                            accumulate(x, gx)
                elif isinstance(a, Node):
                    accumulate(a, r)
    finally:
        registry.TRACE[0] = prev
        _grad_state.enabled = grad_prev
    # inputs without a path to the outputs get no gradient (None), as in eager
    wanted = [i for i, (n, f) in enumerate(zip(graph.inputs, input_rg))
              if f and id(n) in grads]
    bwd = tracer.graph
    outs = [tracer.node_of(grads[id(graph.inputs[i])]) for i in wanted]
    if tracer.lifted_tensors:
        raise _NoRule("a backward rule read a tensor from outside the graph")
    # input order: saved values, then tangents
    ins = [n for n in bwd.nodes if n.kind == "input"]
    order = [n for n in ins if n.name.startswith("saved_")] + \
        [n for n in ins if n.name.startswith("tangent")]
    rest = [n for n in bwd.nodes if n.kind != "input"]
    bwd = bwd.copy_with(order + rest, outs)
    bwd.output_spec = None
    return bwd, saved, wanted


class _Meta:
    """Shape/dtype of a forward value, the template a backward-graph input is made from."""

    def __init__(self, meta: TensorMeta):
        self.shape, self.dtype, self.requires_grad = meta.shape, meta.dtype, False


def make_training_callable(out_metas: list[TensorMeta], fwd: Callable, bwd: Callable,
                           n_inputs: int, wanted: list[int]) -> Callable:
    """A callable on flat inputs that runs ``fwd`` (user outputs + saved values) and records
    one autograd node whose backward runs ``bwd(saved..., grads...)``."""

    n_out = len(out_metas)

    class CompiledFunctionBackward(Function):
        @staticmethod
        def forward(ctx, *flat):
            outs = fwd(*flat)
            ctx.saved_values = outs[n_out:]
            return tuple(outs[:n_out])

        @staticmethod
        def backward(ctx, *grads):
            if _grad_state.enabled:
                raise RuntimeError("ember.compile does not support double backward "
                                   "(create_graph=True) through a compiled graph yet")
            import ember
            grads = [g if g is not None else ember.zeros(m.shape, dtype=m.dtype)
                     for g, m in zip(grads, out_metas)]
            gin = bwd(*ctx.saved_values, *grads)
            res: list = [None] * n_inputs
            for i, g in zip(wanted, gin):
                res[i] = g
            return tuple(res)

    def run(*flat):
        return CompiledFunctionBackward.apply(*flat)

    run.forward, run.backward = fwd, bwd
    return run
