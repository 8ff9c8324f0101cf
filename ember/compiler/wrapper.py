"""The generated Python wrapper of a compiled graph: one function, ``call(inputs)``, that
allocates buffers, calls the kernels (ctypes), the matrix-product driver and the eager ops in
plan order, hands dead kernel buffers to later kernels, and returns the outputs.

It is the per-call cost a graph adds to its kernels, so it does little: each buffer's data
pointer is read once (``.ctypes.data`` costs ~1 us) into ``_p<buffer>``; a product with
static shapes calls the driver with arguments worked out here (gemm.static_args), not
through gemm.matmul, and two independent ones in a row share one call (side by side); and a
strided view only such calls read is never made as an array: they take its source's pointer
plus the offset."""

from __future__ import annotations

from . import gemm
from .fusion import Plan
from .gemm import library_call, library_operands
from .lower import Load, contiguous_strides


def wrapper_source(plan: Plan, kparams: dict, binds: list, contiguous_inputs,
                   one_pool: bool) -> str:
    """The wrapper's source. ``kparams``: each kernel's parameter buffer names (inputs,
    then outputs); ``binds``: (name, expression) of the dynamic sizes; ``contiguous_inputs``
    and ``one_pool`` as for codegen_c.generate."""
    return _Writer(plan, kparams, one_pool).source(binds, contiguous_inputs)


class _Writer:
    def __init__(self, plan: Plan, kparams: dict, one_pool: bool):
        self.plan, self.kparams, self.one_pool = plan, kparams, one_pool
        self.syms = list(plan.symbols)
        self.by_name = {b.name: b for b in plan.buffers}
        self.lines = ["def call(inputs):"]
        self.ptrs: set = set()  # buffers whose _p<name> holds their current array's pointer
        self.offsets: dict = {}  # view never made -> (source buffer, byte offset)
        self.static = {id(s): _static_args(s) for s in plan.steps
                       if one_pool and s.kind == "eager" and library_call(s.node)}
        self.unmade = self._views_only_drivers_read()  # view name -> its source buffer

    # ------------------------------------------------------------------ lines
    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def assign(self, name: str, expr: str) -> None:
        self.emit(f"{name} = {expr}")
        self.ptrs.discard(name)

    def ptr(self, b) -> str:
        """An expression for buffer ``b``'s data pointer (read once per array)."""
        if b.name in self.offsets:
            src, off = self.offsets[b.name]
            return f"{self.ptr(src)} + {off}" if off else self.ptr(src)
        if b.name not in self.ptrs:
            self.emit(f"_p{b.name} = {b.name}.ctypes.data")
            self.ptrs.add(b.name)
        return f"_p{b.name}"

    # ------------------------------------------------------------------ the function
    def source(self, binds: list, contiguous_inputs) -> str:
        plan = self.plan
        for i, b in enumerate(plan.inputs):
            src = f"inputs[{i}]._data"
            if contiguous_inputs:
                src = f"_restride({src}, {tuple(b.strides)})" if planned_layout(b) else \
                    f"_contig({src})"
            self.assign(b.name, f"{src}  # {b.meta}")
        for n, v in binds:
            self.emit(f"{n} = {v}")
        if self.one_pool:  # a product's driver call reads its operands in their planned layouts
            for s in plan.steps:
                if id(s) in self.static:
                    for b in s.inputs.values():
                        b.read_by_kernel = True
        free = _dead_after(plan, self.kparams, self.unmade)
        pool: dict = {}  # (shape, dtype) -> dead kernel outputs whose memory a new one can take
        steps, i = plan.steps, 0
        while i < len(steps):
            s, last = steps[i], i
            if s.kind == "kernel":
                self.kernel(s.kernel, pool)
            elif s.kind == "view":
                self.view(s)
            elif self.one_pool and library_call(s.node):
                last = self.pair_end(i)
                if last > i:  # two independent products side by side (views between them)
                    for v in steps[i + 1:last]:
                        self.view(v)
                    self.product(s, steps[last])
                else:
                    self.product(s)
            else:
                self.eager(s)
            for k in range(i, last + 1):
                for b, reusable in free.get(k, ()):
                    if reusable:
                        pool.setdefault(_key(b), []).append(b.name)
                    elif b.name not in self.offsets:
                        self.emit(f"del {b.name}")
            i = last + 1
        rets = []
        for o in plan.outputs:
            if isinstance(o, tuple):
                rets.append(f"inputs[{o[1]}]")
            elif isinstance(o, Load):
                view = f"_view({o.buf.name}, {tuple(o.shape)}, {tuple(o.strides)}, {o.offset})"
                rets.append(f"_wrap({view}, _dt_{o.buf.meta.dtype.name})")
            else:
                rets.append(f"_wrap({o.name}, _dt_{o.meta.dtype.name})")
        self.emit(f"return ({''.join(r + ', ' for r in rets)})")
        return "\n".join(self.lines) + "\n"

    def kernel(self, k, pool: dict) -> None:
        for b in k.outs:
            if pool.get(_key(b)):
                self.assign(b.name, f"{pool[_key(b)].pop()}  # dead buffer reused")
            else:
                self.assign(b.name, f"_empty({b.meta.shape}, _np_{b.meta.dtype.name})")
        ptrs = [self.ptr(self.by_name[n]) for n in self.kparams[k.name]]
        self.emit(f"_k_{k.name}({', '.join(ptrs + self.syms)})")

    def view(self, s) -> None:
        b = s.outs[0]
        if b.name in self.unmade:
            self.offsets[b.name] = (s.src, s.offset * b.meta.dtype.itemsize)
            return
        self.assign(b.name, f"_view({s.src.name}, {tuple(b.meta.shape)}, {tuple(b.strides)}, "
                            f"{s.offset})  # no copy")

    def pair_end(self, i: int) -> int:
        """The index of the product step that runs side by side with product step ``i``
        (gemm.py's em_gemm2), or ``i``: the next step but views, if both are direct driver
        calls big enough to go parallel, of one dtype, and neither the second nor a view
        between them reads what the first writes (the views are made before both)."""
        steps = self.plan.steps
        j = i + 1
        while j < len(steps) and steps[j].kind == "view":
            j += 1
        a, b = self.static.get(id(steps[i])), self.static.get(id(steps[j])) \
            if j < len(steps) else None
        if not (a and b and a[0][0] and b[0][0]) or \
                steps[i].outs[0].meta.dtype != steps[j].outs[0].meta.dtype:
            return i
        written = steps[i].outs[0].name
        views = {v.outs[0].name: v.src.name for v in steps[i + 1:j]}
        reads = {views.get(x.name, x.name) for x in steps[j].inputs.values()}
        return i if written in reads or written in views.values() else j

    def product(self, s, other=None) -> None:
        """A matrix product (the two matrices, then linear's bias) by gemm.py's driver: one
        direct call with static arguments, else through gemm.matmul. With ``other``, a
        second, independent product step: both in one call, side by side."""
        if self.static[id(s)]:
            calls = [(st, self.static[id(st)]) for st in ((s,) if other is None else (s, other))]
            for st, _ in calls:
                self.assign(st.outs[0].name, _alloc(st.outs[0]))
            args = []
            for st, (head, la, lb, lc) in calls:
                ops = [st.inputs[id(n)] for n in library_operands(st.node)]
                p = [self.ptr(b) for b in ops] + ["None"] * (3 - len(ops))
                args.append(f"{_ints(head[1:])}, {p[0]}, {_ints(la)}, {p[1]}, {_ints(lb)}, "
                            f"{self.ptr(st.outs[0])}, {_ints(lc)}, {p[2]}")
            dt = s.outs[0].meta.dtype.name
            what = " and ".join(st.node.target.name for st, _ in calls)
            if other is None:
                self.emit(f"_drv_{dt}(_blas_{dt}, {int(calls[0][1][0][0])}, {args[0]})  "
                          f"# {what}: BLAS on the graph's thread pool")
            else:
                self.emit(f"_drv2_{dt}(_blas_{dt}, {args[0]}, {args[1]})  "
                          f"# {what}: BLAS on the graph's thread pool, side by side")
            return
        node, out = s.node, s.outs[0]
        ops = [s.inputs[id(n)] for n in library_operands(node)]
        alloc = _alloc(out)
        ins = ", ".join(o.name for o in ops)
        if planned_layout(out):
            self.assign(out.name, alloc)
            self.emit(f"_gemm_{node.target.name}({ins}, out={out.name})  "
                      f"# BLAS on the graph's thread pool, in its reader's layout")
        else:
            self.assign(out.name, f"_gemm_{node.target.name}({ins})  "
                                  f"# BLAS on the graph's thread pool")

    def eager(self, s) -> None:
        names = ", ".join(b.name for b in s.outs)
        ins = ", ".join(b.name for b in s.inputs.values())
        self.emit(f"{names}, = _eager_{s.node.name}({ins})  "
                  f"# ember.ops.{s.node.target.name}, not lowered")
        for b in s.outs:
            self.ptrs.discard(b.name)
            if planned_layout(b):
                self.assign(b.name, f"_restride({b.name}, {tuple(b.strides)})")
            elif b.read_by_kernel:
                self.assign(b.name, f"_contig({b.name})")

    def _views_only_drivers_read(self) -> dict:
        """View buffers whose every reader is a direct driver call (not an output, not a
        kernel or an eager op, which need the array), each with its source buffer."""
        plan, readers = self.plan, {}
        for s in plan.steps:
            if s.kind == "kernel":
                names = set(self.kparams[s.kernel.name]) - {b.name for b in s.kernel.outs}
            else:
                names = {b.name for b in s.inputs.values()}
            for n in names:
                readers.setdefault(n, []).append(bool(self.static.get(id(s))))
        for o in plan.outputs:
            if not isinstance(o, tuple):
                readers.setdefault(o.buf.name if isinstance(o, Load) else o.name,
                                   []).append(False)
        return {b.name: s.src for s in plan.steps if s.kind == "view" for b in s.outs
                if readers.get(b.name) and all(readers[b.name])}


def _static_args(s) -> tuple | None:
    """gemm.static_args for product step ``s`` from its buffers' planned shapes and strides
    (None with symbolic sizes, or a bias that is not one dense row)."""
    node, out = s.node, s.outs[0]
    ops = [s.inputs[id(n)] for n in library_operands(node)]
    a, b = ops[0], ops[1]
    shape_b, strides_b = tuple(b.meta.shape), tuple(b.strides)
    if node.target.name == "linear":  # the weight, read transposed
        shape_b, strides_b = shape_b[::-1], strides_b[::-1]
    dims = (*a.meta.shape, *a.strides, *shape_b, *strides_b, *out.meta.shape, *out.strides)
    if not all(type(d) is int for d in dims) or len(ops) > 2 and tuple(ops[2].strides) != (1,):
        return None
    return gemm.static_args((tuple(a.meta.shape), tuple(a.strides)), (shape_b, strides_b),
                            (tuple(out.meta.shape), tuple(out.strides)), out.meta.dtype.np)


def _dead_after(plan: Plan, kparams: dict, unmade: dict) -> dict:
    """step index -> [(buffer, reusable)] for the buffers last read by that step. Only a kernel
    output read by kernels alone is reusable: an eager op may have returned a view of it. A
    read of a view never made as an array (``unmade``: name -> source) reads its source: no
    array keeps the source alive for it."""
    last: dict = {}
    eager_read: set = set()
    made_by_kernel: dict = {}
    for i, s in enumerate(plan.steps):
        if s.kind == "kernel":
            for b in s.kernel.outs:
                made_by_kernel[b.name] = b
                last.setdefault(b.name, (i, b))
            names = set(kparams[s.kernel.name]) - {b.name for b in s.kernel.outs}
            reads = [b for b in plan.buffers if b.name in names]
        else:
            reads = list(s.inputs.values())
            eager_read.update(b.name for b in reads)
            for b in s.outs:
                last.setdefault(b.name, (i, b))
        for b in reads + [unmade[b.name] for b in reads if b.name in unmade]:
            last[b.name] = (i, b)
    keep = {b.name for b in plan.inputs}
    keep.update(o.buf.name if isinstance(o, Load) else o.name
                for o in plan.outputs if not isinstance(o, tuple))
    out: dict = {}
    for name, (i, b) in last.items():
        if name not in keep:
            out.setdefault(i, []).append((b, name in made_by_kernel and name not in eager_read))
    return out


def planned_layout(b) -> bool:
    """Whether buffer ``b`` was planned in a layout other than contiguous (a product written
    the way its reader permutes it, a saved value the forward returned as a view)."""
    return tuple(b.strides) != tuple(contiguous_strides(b.meta.shape))


def _alloc(b) -> str:
    """The expression allocating a product's output buffer ``b`` in its planned layout."""
    dt = b.meta.dtype.name
    return f"_empty_strided({tuple(b.meta.shape)}, {tuple(b.strides)}, _np_{dt})" \
        if planned_layout(b) else f"_empty({tuple(b.meta.shape)}, _np_{dt})"


def _key(b) -> tuple:
    return str(tuple(b.meta.shape)), b.meta.dtype.name


def _ints(values) -> str:
    return ", ".join(str(int(v)) for v in values)
