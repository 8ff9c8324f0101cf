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

import numpy as np

from .._random import default_generator
from .._tensor import Size
from ..autograd.engine import SavedTensor
from ..autograd.engine import TensorMeta as EngineMeta
from ..autograd.function import Function
from ..autograd.grad_mode import state as _grad_state
from . import pytree
from .capture import GraphBreak, Proxy, Tracer
from .graph import Graph, Node, TensorMeta
from .._dispatch import STATE


def _stand_in(meta: TensorMeta):
    """A tensor argument the rule did not declare in ``saves``: the engine's metadata-only
    stand-in, as eager backward rules receive."""
    # ``_data`` too: the engine's stand-in reads the shape from either (it is being changed)
    src = SimpleNamespace(shape=Size(meta.shape), _dtype=meta.dtype,
                          _data=SimpleNamespace(shape=tuple(meta.shape)))
    return EngineMeta(src)


class _TraceCtx:
    """The ``ctx`` a backward rule sees, over symbolic saved values."""

    def __init__(self, node: Node, saved: Callable[[Node], Proxy], rg: dict,
                 output: Callable[[Node, int], Node], all_needed: bool = False):
        self._node, self._saved, self._rg, self._output = node, saved, rg, output
        self._all = all_needed

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
                res.append(self._all or any(isinstance(x, Node) and self._rg[id(x)]
                                            for x in items))
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


def _save_size_carriers(graph: Graph, bwd: Graph, saved_value: Callable) -> None:
    """Sizes the backward graph uses that none of its inputs has as a dimension (a mean's
    divisor, the shape a broadcast input's gradient sums back to) would be unbound when it
    runs: save a forward input that has each as a dimension, so the symbol binds from it."""
    from .symbolic import symbols_of

    def dims(nodes) -> set:
        return symbols_of(tuple(n.meta.shape for n in nodes if not isinstance(n.meta, tuple)))
    have = dims(n for n in bwd.nodes if n.kind == "input")
    used = dims(bwd.nodes) | symbols_of(tuple((n.args, tuple(n.kwargs.values()))
                                              for n in bwd.nodes))
    for s in sorted(used - have, key=lambda s: s.index):
        if s in have:
            continue
        src = next((n for n in graph.inputs if s in dims([n])), None)
        if src is not None:
            saved_value(src)
            have |= dims([src])


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
            # rules may test a saved tensor's requires_grad, as in eager
            saved_proxy[id(n)] = tracer.input(_Meta(n.meta, bool(rg.get(id(n)))),
                                              f"saved_{n.name}")
        return saved_proxy[id(n)]

    getitems = {(id(n.args[0]), n.target): n for n in graph.nodes if n.kind == "getitem"}

    def output_of(call: Node, k: int) -> Node:
        """The forward node holding output ``k`` of a multi-output call (made if unused)."""
        if (id(call), k) not in getitems:
            n = Node(f"{call.name}_out{k}", "getitem", k, (call,), meta=call.meta[k])
            graph.nodes.insert(graph.nodes.index(call) + 1, n)
            getitems[(id(call), k)] = n
        return getitems[(id(call), k)]

    def ctx_of(n: Node) -> Callable[[bool], _TraceCtx]:
        return lambda all_needed: _TraceCtx(n, saved_value, rg, output_of, all_needed)

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

    prev = STATE.capture
    STATE.capture = tracer.handle
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
                res = _multi_output_backward(n, outs, ctx_of(n))
            else:
                if id(n) not in grads:
                    continue
                res = _run_rule(n, [grads[id(n)]], ctx_of(n))
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
        STATE.capture = prev
        _grad_state.enabled = grad_prev
    # inputs without a path to the outputs get no gradient (None), as in eager
    wanted = [i for i, (n, f) in enumerate(zip(graph.inputs, input_rg))
              if f and id(n) in grads]
    bwd = tracer.graph
    outs = [tracer.node_of(grads[id(graph.inputs[i])]) for i in wanted]
    _save_size_carriers(graph, bwd, saved_value)
    if any(t.requires_grad for t in tracer.lifted_tensors):
        raise _NoRule("a backward rule read a tensor from outside the graph")
    # input order: saved values, then tangents, then the constants rules made (index
    # tensors built from shapes: ``param`` nodes, passed from ``bwd.lifted_tensors()``)
    ins = [n for n in bwd.nodes if n.kind == "input"]
    order = [n for n in ins if n.name.startswith("saved_")] + \
        [n for n in ins if n.name.startswith("tangent")]
    rest = [n for n in bwd.nodes if n.kind != "input"]
    bwd = bwd.copy_with(order + rest, outs)
    bwd.output_spec = None
    bwd.constants_as_inputs = False  # called with (saved..., tangents...) only
    return bwd, saved, wanted


def _run_rule(n: Node, grads: list, ctx: Callable[[bool], _TraceCtx]):
    """``n``'s backward rule on symbolic gradients. A rule may call an op that returns
    ``None`` for a gradient nobody needs; a graph value must be a tensor, so such a rule is
    run again asking for every input's gradient (the extra ones are unused, DCE drops what
    it can)."""
    try:
        return n.target.backward(ctx(False), *grads)
    except GraphBreak as e:
        if "not tensors" not in e.reason:
            raise
        return n.target.backward(ctx(True), *grads)


def _multi_output_backward(n: Node, outs: list, ctx: Callable[[bool], _TraceCtx]):
    """Run a multi-output op's backward rule. Outputs nothing read get ``None`` (what a rule's
    optional gradient parameters mean: no gradient, so e.g. batch norm keeps its first-order
    formula instead of testing zero-filled gradients, which needs data); a rule that needs
    every gradient gets zeros, as the eager engine fills them."""
    if outs[0] is not None:
        try:
            return _run_rule(n, outs, ctx)
        except (TypeError, AttributeError):
            pass
    from ..ops.creation import zeros
    outs = [g if g is not None else zeros(m.shape, dtype=m.dtype) for g, m in zip(outs, n.meta)]
    return _run_rule(n, outs, ctx)


class _Meta:
    """Shape/dtype of a forward value, the template a backward-graph input is made from."""

    def __init__(self, meta: TensorMeta, requires_grad: bool = False):
        self.shape, self.dtype, self.requires_grad = meta.shape, meta.dtype, requires_grad


def make_training_callable(out_metas: list[TensorMeta], fwd: Callable, bwd: Callable,
                           n_inputs: int, wanted: list[int], graph: Graph | None = None,
                           backward_graph: Graph | None = None) -> Callable:
    """A callable on flat inputs that runs ``fwd`` (user outputs + saved values) and records
    one autograd node whose backward runs ``bwd(saved..., grads..., constants...)`` (the
    constants are ``backward_graph``'s lifted tensors).

    A backward with ``create_graph=True`` (grad mode on inside backward) needs gradients that
    are themselves differentiable: given the forward ``graph``, it re-runs the forward op by
    op with eager autograd from the saved inputs (replaying the random generator's state, so
    random ops draw the same numbers) and differentiates that. Without ``graph`` it raises."""

    n_out = len(out_metas)
    random = graph is not None and any(
        n.kind == "call" and "random" in n.target.tags for n in graph.nodes)
    constant_outputs: list[list[int]] = []  # computed on the first call (guards fix it)
    written = [i for i, _ in graph.writebacks] if graph is not None else []
    constants = backward_graph.lifted_tensors() if backward_graph is not None else []

    class CompiledFunctionBackward(Function):
        @staticmethod
        def forward(ctx, *flat):
            if graph is not None:
                ctx.inputs = flat
                ctx.rng = default_generator.get_state() if random else None
                if not constant_outputs:
                    rg = requires_grad_flags(graph, [t.requires_grad for t in flat])
                    constant_outputs.append([k for k, o in enumerate(graph.outputs)
                                             if not rg[id(o)]])
            outs = fwd(*flat)
            saved = outs[n_out:]
            if written:  # a saved input (or view of one) holds the value before the write-back
                saved = [t.clone() if any(np.may_share_memory(t._data, flat[i]._data)
                                          for i in written) else t for t in saved]
            # saved with their versions: a later in-place write to one fails backward as in
            # eager
            ctx.saved_values = [SavedTensor(t) for t in saved]
            if constant_outputs and constant_outputs[0]:
                # outputs eager computes without grad (a batch norm's running statistics,
                # detached values) must not require grad here either
                ctx.mark_non_differentiable(*[outs[k] for k in constant_outputs[0]])
            return tuple(outs[:n_out])

        @staticmethod
        def backward(ctx, *grads):
            if _grad_state.enabled:
                return _double_backward(ctx, grads)
            from ..ops.creation import zeros
            grads = [g if g is not None else zeros(m.shape, dtype=m.dtype)
                     for g, m in zip(grads, out_metas)]
            gin = bwd(*[s.unpack() for s in ctx.saved_values], *grads, *constants)
            res: list = [None] * n_inputs
            for i, g in zip(wanted, gin):
                res[i] = g
            return tuple(res)

    def _double_backward(ctx, grads) -> tuple:
        if graph is None:
            raise RuntimeError("ember.compile does not support double backward "
                               "(create_graph=True) through this compiled graph")
        from ..autograd.engine import grad
        from .graph import interpret
        now = default_generator.get_state() if random else None
        if random:
            default_generator.set_state(ctx.rng)
        try:
            outs = interpret(graph)(*ctx.inputs)[:n_out]
        finally:
            if random:
                default_generator.set_state(now)
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        targets = [ctx.inputs[i] for i in wanted]
        res: list = [None] * n_inputs
        if pairs and targets:
            gin = grad([o for o, _ in pairs], targets, [g for _, g in pairs], create_graph=True,
                       allow_unused=True)
            for i, g in zip(wanted, gin):
                res[i] = g
        return tuple(res)

    def run(*flat):
        return CompiledFunctionBackward.apply(*flat)

    run.forward, run.backward = fwd, bwd
    return run
