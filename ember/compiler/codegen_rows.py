"""C emitters of rows kernels (``fusion.RowsKernel``) for ``codegen_c.kernel_source``.

Rows mode: per row, each reduction phase is one pass over the row in LANES partial states
(element r goes to lane r % LANES; each lane is an exact sequential accumulation, so vector
code computes what scalar code would), merged at the end of the row, then the tail; then the
per-row stores; then one pass computing the row outputs. Column mode (the reduced dim is not
the unit-stride one: ``x.sum(0)``): the same for a block of up to COLUMNS kept elements, one
state per column, the rows walked in order.

A phase's state is written once, as a ``_Reducer`` (its C types, initial values, the update
by one element and the merge of two partial states), and both modes emit it. Online softmax
(fusion.PAIRED "max_sumexp", rows mode only; rules.ONLINE_SOFTMAX_MIN says from which row
length) is blocked on top of the max and sum reducers.
"""

from __future__ import annotations

from . import codegen_c_body as C
from .fusion import RowsKernel
from .lower import Expr, Op, contiguous_strides, loads_of

LANES = 16  # independent partial states per row: the row loop vectorizes without reassociation
COLUMNS = 64  # kept elements a column-mode kernel reduces side by side
KEPT_ROW_MAX = 8192  # a streaming rows kernel keeps a phase's values for its row pass in a
#                     row buffer on the stack; longer rows with such values do not stream
PREFETCH_ROW_MAX = 8192  # rows up to this many elements: the second pass over a row, which
#                         reads it from L1, prefetches the next row for the first (4096 rows
#                         of 1024: softmax's median time 2.3 -> 1.7 ms, LayerNorm's 1.5 -> 1.3)
ONLINE_BLOCK = 2048  # elements per block of online softmax: 8 KB of float32, still in L1
#                      when the block is read a second time for its sum of exp(x - max)

# one-value reductions: initial state (None: the row's first element) and the update
_REDUCE = {
    "sum": ("0", "{a} += {v};"),
    "prod": ("1", "{a} *= {v};"),
    "max": (None, "{a} = ({v} != {v} || {v} > {a}) ? {v} : {a};"),  # NaN propagates
    "min": (None, "{a} = ({v} != {v} || {v} < {a}) ? {v} : {a};"),
}


class _Reducer:
    """The C of one phase's state (a list of lvalues ``a``). ``update`` folds element ``v``,
    index ``i`` in the row, into ``a``; when ``counts``, it reads ``inv`` = 1 / (the number of
    elements ``a`` holds with ``v``), set up by the loop. ``merge_lanes`` combines the
    partial states of rows mode, by default in lane order with ``merge`` (fold lane ``l``'s
    state ``b`` into ``a``, which holds lanes 0 .. l-1)."""

    counts = False
    needs_first = False  # ``init`` starts from the row's first element
    lanes = LANES

    def __init__(self, ctypes: list[str]):
        self.ctypes = ctypes

    def init(self, first: str | None, i0: str) -> list[str]:
        raise NotImplementedError

    def update(self, a: list[str], v: str, i: str) -> list[str]:
        raise NotImplementedError

    def merge(self, a: list[str], b: list[str], l: str) -> list[str]:
        raise NotImplementedError

    def merge_lanes(self, names: list[str], parts: list[str], ind: str) -> list[str]:
        """The whole state from the lanes' (``parts``): lane 0, then each next one merged."""
        lines = [f"{ind}{n} = {p}[0];" for n, p in zip(names, parts)]
        lines.append(f"{ind}for (int l = 1; l < {self.lanes}; ++l) {{")
        lines += [f"{ind}    {s}" for s in self.merge(names, [f"{p}[l]" for p in parts], "l")]
        return lines + [f"{ind}}}"]


class _Fold(_Reducer):
    """sum / prod / max / min: one accumulator, merged by the update itself."""

    def __init__(self, prim: str, ct: str):
        super().__init__([ct])
        self.start, self.step = _REDUCE[prim]
        self.needs_first = self.start is None
        if prim in ("max", "min"):  # a compare-and-select chain per lane, where sum's is one
            self.lanes = 4 * LANES  # add: more lanes hide its latency (order-free: same result)

    def init(self, first, i0):
        return [first if self.needs_first else self.start]

    def update(self, a, v, i):
        return [self.step.format(a=a[0], v=v)]

    def merge(self, a, b, l):
        return self.update(a, b[0], "")


class _Welford(_Reducer):
    """(mean, M2) in one pass: d = x - mean; mean += d / count; M2 += d (x - mean). Every lane
    holds the same count at each step, so one reciprocal serves them all; the lanes merge
    pairwise by Chan's formula, which for two equal counts c is mean += d / 2,
    M2 += M2' + d * d * c / 2 (no division, a vector loop per halving)."""

    counts = True
    lanes = 4 * LANES  # each update is a chain of three dependent operations: more lanes hide
    #                    its latency (16 lanes ran 1.4x slower than the two-pass kernel)

    def __init__(self, at: str):
        super().__init__([at, at])

    def init(self, first, i0):
        return ["0", "0"]

    def update(self, a, v, i):
        m, m2 = a
        return [f"const {self.ctypes[0]} d = {v} - {m};", f"{m} += d * inv;",
                f"{m2} += d * ({v} - {m});"]

    def merge_lanes(self, names, parts, ind):
        (m, m2), t = parts, self.ctypes[0]
        return [(f"{ind}for (int h = {self.lanes // 2}; h >= 1; h /= 2) {{  "
                 f"/* lanes of nb * {self.lanes // 2} / h elements each */"),
                f"{ind}    const {t} half = ({t})nb * ({self.lanes // 2} / h) / 2;",
                f"{ind}    for (int l = 0; l < h; ++l) {{",
                f"{ind}        const {t} d = {m}[l + h] - {m}[l];",
                f"{ind}        {m}[l] += d / 2;",
                f"{ind}        {m2}[l] += {m2}[l + h] + d * d * half;",
                f"{ind}    }}",
                f"{ind}}}"] + [f"{ind}{n} = {p}[0];" for n, p in zip(names, parts)]


class _Arg(_Reducer):
    """The max (``>``) or min (``<``) and the index of its first occurrence; NaN counts as the
    extreme, its first occurrence wins. Lanes interleave, so merging breaks ties by index."""

    needs_first = True
    lanes = 2 * LANES  # a select chain per lane: more lanes hide its latency (1.2x measured)

    def __init__(self, cmp: str, ct: str):
        super().__init__([ct, "int64_t"])
        self.cmp = cmp

    def init(self, first, i0):
        return [first, i0]

    def update(self, a, v, i):
        # v beats x when it is larger or NaN, unless x is NaN: !(v <= x) && x == x, in bitwise
        # operators so the vector loop has no branches (2.4x faster than || and &&); both
        # selects before both stores (1.3x faster than storing the value first)
        (x, j), no = a, "<=" if self.cmp == ">" else ">="
        return [f"const int t = !({v} {no} {x}) & ({x} == {x});",
                f"const {self.ctypes[0]} tx = t ? {v} : {x};",
                f"const int64_t tj = t ? (int64_t)({i}) : {j};",
                f"{x} = tx;", f"{j} = tj;"]

    def merge(self, a, b, l):
        (x, i), (y, j), c = a, b, self.cmp
        better = (f"{y} != {y} ? ({x} == {x} || {j} < {i}) : "
                  f"{x} == {x} && ({y} {c} {x} || ({y} == {x} && {j} < {i}))")
        return [f"if ({better}) {{", f"    {x} = {y};", f"    {i} = {j};", "}"]


def _reducer(prim: str, e: Expr, acc) -> _Reducer:
    if prim in _REDUCE:
        return _Fold(prim, C.CTYPE[acc])
    if prim == "welford":
        return _Welford(C.CTYPE[acc])
    if prim in ("argmax", "argmin"):
        return _Arg(">" if prim == "argmax" else "<", C.CTYPE[e.dtype])
    raise AssertionError(f"no C reducer for phase {prim}")


def _lanes(red: _Reducer, names: list[str], value, lo: str, hi: str, ind: str,
           prefetch=None) -> list[str]:
    """Fold elements lo .. hi-1 of the row into the (declared) state ``names``: ``red.lanes``
    partial states in a vector loop, merged in lane order, then the tail one element at a time.
    ``value(r, indent)`` gives the statements and the C name of element ``r``;
    ``prefetch(r, lanes, indent)``, the vector loop's first statements."""
    parts = [f"{n}_lane" for n in names]
    rel = "r" if lo == "0" else f"(r - {lo})"
    t, lanes = red.ctypes[0], red.lanes
    i2 = ind + "    "
    lines = [f"{ind}{{"] + [f"{i2}{ct} {p}[{lanes}];" for ct, p in zip(red.ctypes, parts)]
    first = None
    if red.needs_first:
        body, first = value(lo, i2)
        lines += body
    lines.append(f"{i2}for (int l = 0; l < {lanes}; ++l) {{")
    lines += [f"{i2}    {p}[l] = {v};" for p, v in zip(parts, red.init(first, lo))]
    lines += [f"{i2}}}", f"{i2}int64_t r = {lo};",
              f"{i2}for (; r + {lanes} <= {hi}; r += {lanes}) {{"]
    if red.counts:  # after this step every lane holds rel / lanes + 1 elements
        lines.append(f"{i2}    const {t} inv = 1 / ({t})({rel} / {lanes} + 1);")
    if prefetch is not None:
        lines += prefetch("r", lanes, i2 + "    ")
    lines += [f"{i2}    #pragma omp simd", f"{i2}    for (int l = 0; l < {lanes}; ++l) {{"]
    body, v = value("(r + l)", i2 + "        ")
    lines += body
    lines += [f"{i2}        {s}" for s in red.update([f"{p}[l]" for p in parts], v, "(r + l)")]
    lines += [f"{i2}    }}", f"{i2}}}"]
    if red.counts:
        lines.append(f"{i2}const int64_t nb = {rel} / {lanes};  /* elements in each lane */")
    lines += red.merge_lanes(names, parts, i2)
    lines.append(f"{i2}for (; r < {hi}; ++r) {{")
    if red.counts:
        lines.append(f"{i2}    const {t} inv = 1 / ({t})({rel} + 1);")
    body, v = value("r", i2 + "    ")
    lines += body
    lines += [f"{i2}    {s}" for s in red.update(names, v, "r")]
    return lines + [f"{i2}}}", f"{ind}}}"]


def _columns(red: _Reducer, names: list[str], value, n, ind: str) -> list[str]:
    """Fold the rows of a block of columns into one state per column (``name[jj]``), the rows
    in order: the inner loop over the columns reads contiguous memory and vectorizes."""
    t = red.ctypes[0]
    lines = [f"{ind}{ct} {nm}[{COLUMNS}];" for ct, nm in zip(red.ctypes, names)]
    lines.append(f"{ind}for (int64_t jj = 0; jj < jn; ++jj) {{")
    first = None
    if red.needs_first:
        body, first = value("0", ind + "    ")
        lines += body
    lines += [f"{ind}    {nm}[jj] = {v};" for nm, v in zip(names, red.init(first, "0"))]
    lines += [f"{ind}}}", f"{ind}for (int64_t r = 0; r < {n}; ++r) {{"]
    if red.counts:
        lines.append(f"{ind}    const {t} inv = 1 / ({t})(r + 1);")
    lines += [f"{ind}    #pragma omp simd", f"{ind}    for (int64_t jj = 0; jj < jn; ++jj) {{"]
    body, v = value("r", ind + "        ")
    lines += body
    lines += [f"{ind}        {s}" for s in red.update([f"{nm}[jj]" for nm in names], v, "r")]
    return lines + [f"{ind}    }}", f"{ind}}}"]


def _online_softmax(p: int, e: Expr, acc, value, n, ind: str) -> list[str]:
    """The max and the sum of exp(x - max) of a long row in one pass over memory: per block of
    ONLINE_BLOCK elements the block's max, the running sum rescaled by exp(old max - new max)
    when the max grows, then the block's sum of exp(x - max). Blocks of -inf only add nothing;
    a NaN or +inf max makes the sum NaN, as the three-pass kernel's."""
    ct, at = C.CTYPE[e.dtype], C.CTYPE[acc]
    ops = C.CScalarOps(ct)
    m, s, i2 = f"red{p}", f"red{p}_1", ind + "    "

    def exp_at(r: str, ind3: str) -> tuple[list[str], str]:
        body, v = value(r, ind3)
        return body + [f"{ind3}const {at} ev = ({at})({ops.exp(f'{v} - {m}')});"], "ev"

    lines = [f"{ind}{ct} {m} = -INFINITY;  /* online softmax: the running max and sum */",
             f"{ind}{at} {s} = 0;",
             f"{ind}for (int64_t b0 = 0; b0 < {n}; b0 += {ONLINE_BLOCK}) {{",
             f"{i2}const int64_t b1 = b0 + {ONLINE_BLOCK} < {n} ? b0 + {ONLINE_BLOCK} : {n};",
             f"{i2}{ct} bmax;"]
    lines += _lanes(_Fold("max", ct), ["bmax"], value, "b0", "b1", i2)
    lines += [f"{i2}const {ct} mx = {ops.max(m, 'bmax')};",
              f"{i2}if (mx == -INFINITY) continue;  /* -inf only so far: the sum stays 0 */",
              f"{i2}if (mx != {m}) {{  /* a larger (or NaN) max: rescale the sum so far */",
              f"{i2}    {s} *= {ops.exp(f'{m} - mx')};",
              f"{i2}    {m} = mx;",
              f"{i2}}}",
              f"{i2}{at} bsum;"]
    lines += _lanes(_Fold("sum", at), ["bsum"], exp_at, "b0", "b1", i2)
    return lines + [f"{i2}{s} += bsum;", f"{ind}}}"]


def _next_row_prefetch(k: RowsKernel, params: dict, at: list):
    """``prefetch`` for ``_lanes``: the lines of the next row (index ``at[-1] + 1``) that a vector
    step's elements of the current one occupy, in every buffer the first phase reads along
    the row, for rows short enough that the next one fits in L1 beside the current; else
    None."""
    if not at or not isinstance(k.n, int) or k.n > PREFETCH_ROW_MAX or len(k.phases) < 2:
        return None
    seen, loads = set(), []
    for ld in loads_of(k.phases[0][1]):
        key = (ld.buf.name, ld.strides, ld.offset)
        if ld.strides[-1] == 1 and ld.strides[len(at) - 1] != 0 and key not in seen:
            seen.add(key)
            loads.append(ld)
    if not loads:
        return None
    i, last = at[-1], k.outer[-1]  # the last row prefetches itself: no address past the data
    nxt = at[:-1] + [f"({i} + 1 < {last} ? {i} + 1 : {i})"]

    def prefetch(r: str, lanes: int, ind: str) -> list[str]:
        lines = []
        for ld in loads:
            per_line = max(1, 64 // ld.dtype.itemsize)  # elements in a 64-byte cache line
            for off in range(0, lanes, per_line):
                terms = [str(ld.offset)] if ld.offset else []
                terms.append(C._index(nxt + [f"{r} + {off}" if off else r], ld.strides))
                lines.append(f"{ind}EM_PREFETCH(&{params[ld.buf.name]}[{' + '.join(terms)}]);")
        return lines
    return prefetch


def _rows_body(k: RowsKernel, params: dict, idx: list, ind: str, stream: bool = False
               ) -> list[str]:
    """One row (the loop indices ``idx`` name it); ``stream``: the row outputs leave through
    non-temporal stores (codegen_c_body.streamed), in blocks."""
    return _body(k, params, idx, ind, columns=False, stream=stream)


def _columns_body(k: RowsKernel, params: dict, idx: list, ind: str) -> list[str]:
    """One block of up to COLUMNS kept elements (the last loop index counts blocks)."""
    return _body(k, params, idx, ind, columns=True)


def _body(k: RowsKernel, params: dict, idx: list, ind: str, columns: bool,
          stream: bool = False) -> list[str]:
    """Each phase over the row(s), then the per-row stores, then the pass over the row(s)
    computing the row outputs."""
    n = k.n
    if columns:
        lines = [f"{ind}const int64_t j0 = {idx[-1]} * {COLUMNS};",
                 (f"{ind}const int64_t jn = {k.outer[-1]} - j0 < {COLUMNS} ? "
                  f"{k.outer[-1]} - j0 : {COLUMNS};")]
        at, rowref, cache = idx[:-1] + ["(j0 + jj)"], "red{}[jj]", None
    else:
        lines, at, rowref, cache = [], idx, "red{}", _row_cache(k, stream)
    if cache and stream:  # the kept values go to a row buffer (in L1), not to the output
        lines.append(f"{ind}{C.CTYPE[cache[1].dtype]} kept_row[{n}];")

    def kept(r: str) -> str:
        _, _, b, st = cache
        return f"kept_row[{r}]" if stream else f"{params[b.name]}[{C._index(at + [r], st)}]"

    def value_of(e: Expr, p: int):
        def value(r: str, ind2: str) -> tuple[list[str], str]:
            body = C._Body(params, ind2, rowref)
            v = body.emit(e, at + [r])
            if cache and cache[0] == p:  # keep the value the row pass needs in its output
                body.lines.append(f"{ind2}{kept(r)} = {body.memo[id(cache[1])]};")
            return body.lines, v
        return value

    for p, (prim, e, acc) in enumerate(k.phases):
        if prim == "max_sumexp":
            assert not columns, "online softmax is chosen for unit-stride rows only"
            lines += _online_softmax(p, e, acc, value_of(e, p), n, ind)
            continue
        red = _reducer(prim, e, acc)
        names = [f"red{p}", f"red{p}_1"][:len(red.ctypes)]
        if columns:
            lines += _columns(red, names, value_of(e, p), n, ind)
        else:
            lines += [f"{ind}{ct} {nm};" for ct, nm in zip(red.ctypes, names)]
            lines += _lanes(red, names, value_of(e, p), "0", str(n), ind,
                            _next_row_prefetch(k, params, at) if p == 1 else None)
    jj_loop = "for (int64_t jj = 0; jj < jn; ++jj) {"
    if k.scalar_outs:
        inner = ind + "    " * columns
        lines += [ind + jj_loop] * columns
        body = C._Body(params, inner, rowref)
        lin = C._index(at, contiguous_strides(k.outer))
        for b, e in k.scalar_outs:
            v = body.emit(e, at + ["0"])
            lines += body.lines
            body.lines = []
            lines.append(f"{inner}{params[b.name]}[{lin}] = {C.store_expr(b.meta.dtype, v)};")
        lines += [f"{ind}}}"] * columns
    if not k.row_outs:
        return lines
    inner = ind + "    " * (1 + columns)
    if stream:  # blocks of the row, each computed into L1 buffers and streamed out
        outs = [b for b, _, _ in k.row_outs]
        head, tail, inner = C.streamed(
            outs, [(params[b.name], C._index(at + ["lo"], st)) for b, _, st in k.row_outs],
            "lo", n, ind + "    ")
        lines += [f"{ind}for (int64_t lo = 0; lo < {n}; lo += {C.stream_block(n)}) {{"] + head
    else:
        lines += [f"{ind}for (int64_t r = 0; r < {n}; ++r) {{"] + [ind + "    " + jj_loop] * columns
    body = C._Body(params, inner, rowref)
    if cache:
        body.lines.append(f"{inner}const {C.CTYPE[cache[1].dtype]} kept = {kept('r')};")
        body.memo[id(cache[1])] = "kept"
    for j, (b, e, st) in enumerate(k.row_outs):
        v = body.emit(e, at + ["r"])
        lines += body.lines
        body.lines = []
        dst = f"t{j}[r - lo]" if stream else f"{params[b.name]}[{C._index(at + ['r'], st)}]"
        lines.append(f"{inner}{dst} = {C.store_expr(b.meta.dtype, v)};")
    if stream:
        return lines + tail + [f"{ind}}}"]
    return lines + [f"{ind}    }}"] * columns + [f"{ind}}}"]


def _column_mode(k: RowsKernel) -> bool:
    """Reduce across rows in blocks of the last kept dim, when that dim, not the row, is the
    unit-stride one in memory (``x.sum(0)``): the inner loop then reads contiguous elements of
    COLUMNS independent accumulators instead of striding down a column. A per-row value read
    along the row (LayerNorm's mean and rstd in its weight gradient: stride 0 across the
    kept dim) is one scalar per row there and does not stand in the way."""
    if not k.outer or not k.phases:
        return False
    lds = [ld for e in k.exprs() for ld in loads_of(e)]
    if any(ld.strides[-1] == 1 and ld.strides[-2] != 0 for ld in lds):
        return False
    return any(ld.strides[-2] == 1 for ld in lds)


def _row_cache(k: RowsKernel, row_buffer: bool = False) -> tuple | None:
    """(phase, subexpression, output, strides) when a one-value phase's summand (softmax's
    exp(x - max)) is also what a row output computes from: the phase stores it in that output
    (same C type, so exactly) and the row pass reads it back instead of computing it again.
    With ``row_buffer`` (a streaming kernel) it goes to a row buffer of its own C type, so the
    output's storage type does not matter."""
    for p in range(len(k.phases) - 1, -1, -1):
        prim, e, _ = k.phases[p]
        sub = e.args[0] if isinstance(e, Op) and e.prim == "cast" else e
        if prim not in _REDUCE or not isinstance(sub, Op):
            continue
        for b, out, st in k.row_outs:
            if (row_buffer or C.STORAGE[b.meta.dtype] == C.CTYPE[sub.dtype]) and \
                    _contains(out, sub, set()):
                return p, sub, b, st
    return None


def _contains(e: Expr, sub: Expr, seen: set) -> bool:
    if e is sub:
        return True
    if id(e) in seen:
        return False
    seen.add(id(e))
    return any(_contains(a, sub, seen) for a in getattr(e, "args", ()))
