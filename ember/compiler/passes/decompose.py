"""Decomposition: rewrite an op call as simpler ember ops, traced at graph level.

A decomposition is a Python function over tensors written with ember ops (in-place ops
included: they are captured as ``mutate`` nodes, which functionalize turns into dataflow).
The pass traces it on symbolic stand-ins for the call's tensor arguments and splices the
resulting nodes in place of the call. Sources, in order: the table below (compiler-specific
rewrites), then the op table's own ``decomposition`` entries.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..._dispatch import STATE
from ..._tensor import Tensor
from .. import pytree
from ..graph import Graph, Node


class _Meta:
    def __init__(self, meta):
        self.shape, self.dtype, self.requires_grad = meta.shape, meta.dtype, False


def inline(fn: Callable, node: Node, prefix: str) -> tuple[list[Node], object]:
    """Trace ``fn(*node.args, **node.kwargs)`` with the node's tensor arguments as symbolic
    values: ``(new nodes reading the original argument nodes, result node(s))``."""
    from ..capture import Tracer

    tracer = Tracer()
    proxy: dict[int, object] = {}
    originals: dict[int, Node] = {}
    for i, a in enumerate(pytree.collect((node.args, node.kwargs), Node, [])):
        if id(a) not in proxy:
            p = tracer.input(_Meta(a.meta), f"{prefix}in{i}")
            proxy[id(a)] = p
            originals[id(p._node)] = a
    args, kwargs = pytree.map_leaves((node.args, node.kwargs), Node, lambda n: proxy[id(n)])
    prev = STATE.capture
    STATE.capture = tracer.handle
    try:
        result = fn(*args, **kwargs)
    finally:
        STATE.capture = prev
    if tracer.lifted_tensors:
        raise RuntimeError(f"decomposition of {node.target.name} read a tensor from outside")
    made: dict[int, Node] = dict(originals)
    nodes = []
    for n in tracer.graph.nodes:
        if n.kind == "input":
            continue
        args, kwargs = pytree.map_leaves((n.args, n.kwargs), Node, lambda x: made[id(x)])
        new = Node(f"{prefix}{n.name}", n.kind, n.target, args, kwargs, n.meta)
        made[id(n)] = new
        nodes.append(new)
    out = pytree.map_leaves(result, Tensor, lambda t: made[id(tracer.node_of(t))])
    return nodes, out


# ---------------------------------------------------------------------- rewrites
def _batch_norm_functional(input, weight, bias, running_mean, running_var, training, momentum,
                           eps):
    """Training batch norm whose running-statistics update (done inside the eager kernel) is
    written as ops: the same in-place updates the kernel makes, on the detached batch
    statistics."""
    from ...ops import registry
    out = registry.OPS["native_batch_norm"](input, weight, bias, None, None, True, momentum, eps)
    c = input.shape[1] if input.ndim > 1 else 1
    count = input.numel() // max(c, 1)
    if count == 0:  # an empty batch leaves the statistics alone
        return out
    mean = out[1].detach()
    axes = (0,) + tuple(range(2, input.ndim))
    shape = (1, c) + (1,) * (input.ndim - 2)
    if running_mean is not None:
        running_mean.mul_(1 - momentum).add_(momentum * mean)
    if running_var is not None:
        var = (input.detach() - mean.reshape(shape)).square().mean(axes)
        # the count stays a (possibly symbolic) size: one graph serves every batch size
        unbiased = var * count / (count - 1) if count > 1 else var * math.inf
        running_var.mul_(1 - momentum).add_(unbiased * momentum)
    return out


def _bn_rule(n: Node) -> Callable | None:
    bound = dict(zip(n.target.params, n.args))
    bound.update(n.kwargs)
    stats = isinstance(bound.get("running_mean"), Node) or \
        isinstance(bound.get("running_var"), Node)
    return _batch_norm_functional if bound.get("training") and stats else None


# op name -> rule(node) -> the decomposition to apply to this call, or None to keep it
RULES: dict[str, Callable[[Node], Callable | None]] = {"native_batch_norm": _bn_rule}


def _decomposition(n: Node) -> Callable | None:
    if n.kind != "call":
        return None
    rule = RULES.get(n.target.name)
    if rule is not None:
        return rule(n)
    return getattr(n.target, "decomposition", None)


def decompose(graph: Graph) -> Graph:
    """A new graph where each call with a decomposition is replaced by its traced ops."""
    if not any(_decomposition(n) for n in graph.nodes):
        return graph
    replace: dict[int, object] = {}
    nodes: list[Node] = []

    def sub(v):
        return pytree.map_leaves(v, Node, lambda x: replace.get(id(x), x))

    for n in graph.nodes:
        if n.kind == "getitem" and isinstance(replace.get(id(n.args[0])), (tuple, list)):
            replace[id(n)] = replace[id(n.args[0])][n.target]
            continue
        fn = _decomposition(n)
        if fn is None:
            new = n if n.kind in ("input", "param") else \
                Node(n.name, n.kind, n.target, sub(n.args), sub(n.kwargs), n.meta)
            replace[id(n)] = new
            nodes.append(new)
            continue
        probe = Node(n.name, n.kind, n.target, sub(n.args), sub(n.kwargs), n.meta)
        made, result = inline(fn, probe, f"{n.name}_")
        nodes.extend(made)
        replace[id(n)] = tuple(result) if isinstance(result, (tuple, list)) else result
    return graph.copy_with(nodes, [replace[id(o)] for o in graph.outputs])
