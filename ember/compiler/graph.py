"""The compiler's graph IR: a flat list of nodes in execution order.

A node is one of

    input    a tensor argument of the compiled call (``target`` is its argument path)
    param    a tensor the function read from outside its arguments (module parameter,
             buffer, global); ``target`` is the Tensor itself, read again on every call so
             in-place updates (optimizer steps) are seen without recompiling
    call     one op-table call; ``target`` is the OpDef, ``args``/``kwargs`` hold Nodes where
             the call had tensors
    getitem  output ``target`` (an int) of a multi-output call node
    detach   ``args[0]`` cut from autograd (a view: it shares the storage)
    mutate   ``args[0]`` now holds the value ``args[1]`` (an in-place write or ``out=``, as
             captured); only before the functionalize pass, which turns it into dataflow

``graph.outputs`` lists the nodes the graph returns; ``graph.output_spec`` rebuilds the
function's return structure from them (see ``pytree``). After functionalization the outputs
end with the new values of mutated graph inputs / lifted tensors: ``graph.writebacks`` pairs
``(input index, output index)``, and the runtime copies each into its tensor after the call
(``with_writebacks``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _dtype as D
from . import pytree

_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
          "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
          "bool": "b8", "complex64": "c64", "complex128": "c128"}


class TensorMeta:
    """Shape and dtype of a graph value (what the tracer knows about a tensor)."""

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: tuple, dtype: D.dtype):
        self.shape = tuple(shape)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"{_SHORT.get(self.dtype.name, self.dtype.name)}[{', '.join(map(str, self.shape))}]"

    def __eq__(self, other) -> bool:
        return isinstance(other, TensorMeta) and self.shape == other.shape and \
            self.dtype is other.dtype

    def __hash__(self):
        return hash((self.shape, self.dtype))


class Node:
    """One value-producing step of a graph."""

    __slots__ = ("args", "kind", "kwargs", "meta", "name", "target")

    def __init__(self, name: str, kind: str, target: Any, args: tuple = (), kwargs=None,
                 meta: Any = None):
        self.name = name
        self.kind = kind
        self.target = target
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.meta = meta  # TensorMeta, or a tuple of them for a multi-output call

    def inputs(self) -> list[Node]:
        """The nodes this node reads, in argument order."""
        out: list[Node] = []
        pytree.collect((self.args, self.kwargs), Node, out)
        return out

    def __repr__(self) -> str:
        return f"<Node {self.name} {self.kind}>"


def _fmt(v: Any) -> str:
    if isinstance(v, Node):
        return v.name
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_fmt(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_fmt(x)}" for k, x in v.items()) + "}"
    if isinstance(v, D.dtype):
        return repr(v)
    return repr(v)


class Graph:
    """Nodes in execution order plus the return structure."""

    def __init__(self):
        self.nodes: list[Node] = []
        self.outputs: list[Node] = []
        self.output_spec: Any = None
        self.writebacks: list[tuple[int, int]] = []
        self.returns_input: dict[int, int] = {}  # output index -> input index it returns
        # whether passes may add lifted constants as inputs (the caller passes
        # ``lifted_tensors()``); a derived backward graph's callers pass a fixed list
        self.constants_as_inputs = True
        self._count = 0

    # ------------------------------------------------------------------ building
    def add(self, kind: str, target: Any, args: tuple = (), kwargs=None, meta=None,
            name: str | None = None) -> Node:
        if name is None:
            name = f"t{self._count}"
        self._count += 1
        node = Node(name, kind, target, args, kwargs, meta)
        self.nodes.append(node)
        return node

    @property
    def inputs(self) -> list[Node]:
        """The graph's runtime inputs: call arguments first, then lifted tensors."""
        return [n for n in self.nodes if n.kind == "input"] + \
            [n for n in self.nodes if n.kind == "param"]

    def copy_with(self, nodes: list[Node], outputs: list[Node]) -> Graph:
        g = Graph()
        g.nodes, g.outputs, g.output_spec, g._count = nodes, outputs, self.output_spec, \
            self._count
        g.writebacks, g.returns_input = list(self.writebacks), dict(self.returns_input)
        g.constants_as_inputs = self.constants_as_inputs
        return g

    def lifted_tensors(self) -> list:
        """The tensors of the ``param`` nodes, in input order (what the caller appends to the
        call's tensor arguments)."""
        return [n.target for n in self.nodes if n.kind == "param"]

    def users(self) -> dict[Node, list[Node]]:
        """For each node, the nodes that read it (graph outputs count as one user each)."""
        users: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs():
                users[i].append(n)
        for o in self.outputs:
            users[o].append(None)  # type: ignore[arg-type]
        return users

    # ------------------------------------------------------------------ printing
    def print_readable(self, print_output: bool = True) -> str:
        """The graph as Python source (what ``str(graph)`` returns); printed by default."""
        ins = ", ".join(f'{n.name}: "{n.meta}"' for n in self.inputs)
        lines = [f"def forward(self, {ins}):"]
        for n in self.nodes:
            if n.kind == "input":
                continue
            if n.kind == "param":
                lines.append(f"    # {n.name}: lifted tensor {n.meta} (read on every call)")
                continue
            if n.kind == "call":
                parts = [_fmt(a) for a in n.args]
                parts += [f"{k}={_fmt(v)}" for k, v in n.kwargs.items()]
                rhs = f"ember.ops.{n.target.name}({', '.join(parts)})"
            elif n.kind == "getitem":
                rhs = f"{n.args[0].name}[{n.target}]"
            elif n.kind == "mutate":
                lines.append(f"    {n.args[0].name}.copy_({n.args[1].name})  # in place")
                continue
            else:
                rhs = f"{n.args[0].name}.{n.kind}()"
            meta = n.meta if isinstance(n.meta, TensorMeta) else \
                "(" + ", ".join(map(str, n.meta)) + ")"
            lines.append(f'    {n.name}: "{meta}" = {rhs}')
        for i, k in self.writebacks:
            lines.append(f"    # writes {self.outputs[k].name} back into {self.inputs[i].name}")
        lines.append(f"    return ({''.join(o.name + ', ' for o in self.outputs)})")
        text = "\n".join(lines)
        if print_output:
            print(text)
        return text

    def __str__(self) -> str:
        return self.print_readable(print_output=False)

    # ------------------------------------------------------------------ checking
    def verify(self) -> None:
        """Raise AssertionError if the graph is malformed (use before definition, bad kinds,
        missing metadata, duplicate names, outputs not in the graph)."""
        seen: set[int] = set()
        names: set[str] = set()
        for n in self.nodes:
            assert n.kind in ("input", "param", "call", "getitem", "detach", "mutate"), n.kind
            assert n.name not in names, f"duplicate node name {n.name}"
            names.add(n.name)
            for i in n.inputs():
                assert id(i) in seen, f"{n.name} reads {i.name} before it is defined"
            if n.kind == "getitem":
                src = n.args[0]
                assert isinstance(src.meta, tuple) and 0 <= n.target < len(src.meta), n.name
            if n.kind != "call" or not isinstance(n.meta, tuple):
                assert isinstance(n.meta, TensorMeta), f"{n.name} has no tensor metadata"
            seen.add(id(n))
        for o in self.outputs:
            assert id(o) in seen, f"output {o.name} is not a graph node"
        n_in = len(self.inputs)
        for i, k in self.writebacks:
            assert 0 <= i < n_in and 0 <= k < len(self.outputs), f"bad write-back {(i, k)}"


def interpret(graph: Graph) -> Callable[..., tuple]:
    """A callable running the graph op by op through the op table (eager semantics,
    including autograd): ``fn(*flat_inputs) -> tuple of outputs``."""
    inputs = graph.inputs
    nodes = [n for n in graph.nodes if n.kind not in ("input", "param")]

    def run(*flat):
        env: dict[int, Any] = {id(n): v for n, v in zip(inputs, flat)}

        def sub(v):
            return pytree.map_leaves(v, Node, lambda n: env[id(n)])

        for n in nodes:
            if n.kind == "call":
                env[id(n)] = n.target(*sub(n.args), **sub(n.kwargs))
            elif n.kind == "getitem":
                env[id(n)] = env[id(n.args[0])][n.target]
            else:
                env[id(n)] = env[id(n.args[0])].detach()
        return tuple(env[id(o)] for o in graph.outputs)

    return run


def with_writebacks(graph: Graph, run: Callable) -> Callable:
    """``run`` followed by the graph's write-backs: each mutated input or lifted tensor gets
    its new value through ``copy_`` (under the caller's grad mode, so autograd history and
    the version counter change as the eager in-place ops would change them). Outputs that
    were an input itself in eager are that input again."""
    if not graph.writebacks and not graph.returns_input:
        return run
    pairs, same = list(graph.writebacks), dict(graph.returns_input)

    def call(*flat):
        outs = list(run(*flat))
        for i, k in pairs:
            flat[i].copy_(outs[k])
        for k, i in same.items():
            outs[k] = flat[i]
        return tuple(outs)

    for attr in ("forward", "backward", "plan", "graph"):  # what tests and explain() inspect
        setattr(call, attr, getattr(run, attr, None))
    call.wrapped = run
    return call


class GraphModule:
    """What a callable backend receives: the graph, callable on flat inputs."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self._run = interpret(graph)

    def __call__(self, *flat_inputs) -> tuple:
        return self._run(*flat_inputs)

    forward = __call__

    def print_readable(self, print_output: bool = True) -> str:
        return self.graph.print_readable(print_output)

    @property
    def code(self) -> str:
        return str(self.graph)

    def __repr__(self) -> str:
        return f"GraphModule(\n{self.graph}\n)"
