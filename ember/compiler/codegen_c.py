"""C code generation for a Plan: one C function per kernel, plus the Python wrapper source
that allocates buffers, calls kernels through ctypes and runs the eager steps.

``CScalarOps`` is the codegen interface: one method per primitive scalar operation, each
returning a C expression over already-named operands. A Triton backend would implement the
same methods.
"""

from __future__ import annotations

import math

from .. import _dtype as D
from .fusion import Kernel, Plan
from .lower import Const, Expr, Load

CTYPE = {D.float32: "float", D.float64: "double", D.float16: "float", D.bfloat16: "float",
         D.int8: "int8_t", D.int16: "int16_t", D.int32: "int32_t", D.int64: "int64_t",
         D.uint8: "uint8_t", D.bool_: "uint8_t"}
STORAGE = {**CTYPE, D.float16: "_Float16", D.bfloat16: "uint16_t"}

PRELUDE = """\
#include <math.h>
#include <stdint.h>
#include <string.h>

/* bfloat16 <-> float: the high half of a float32, rounded to nearest even */
static inline float em_bf16_load(uint16_t h) {
    uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t em_bf16_store(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float em_bf16_round(float f) { return em_bf16_load(em_bf16_store(f)); }

/* float32 exp and tanh written branch-free so loops calling them vectorize (libm's calls do
   not without -ffast-math). Cody-Waite range reduction and Cephes polynomials: within 2 ulp
   of the correctly rounded result; NaN and +-inf behave as in libm. */
static inline float em_expf(float x) {
    float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
    float t = xc * 1.44269504088896341f + 12582912.0f;  /* round to nearest integer */
    float n = t - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t ni = (int32_t)n, n1 = ni / 2, n2 = ni - n1;
    uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, 4);
    memcpy(&s2, &b2, 4);
    float y = p * s1 * s2;
    return x != x ? x : y;
}
static inline float em_tanhf(float x) {
    float ax = x < 0 ? -x : x;
    float z = x * x;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z
                    + 1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
    float e = em_expf(2.0f * (ax > 20.0f ? 20.0f : ax));
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0 ? -big : big;
    return ax < 0.625f ? small : (x != x ? x : big);
}
"""

OMP_MIN_ELEMENTS = 1 << 16  # below this, thread start-up costs more than it saves


def c_literal(value, dt: D.dtype) -> str:
    ct = CTYPE[dt]
    if dt.kind == "f":
        v = float(value)
        if math.isnan(v):
            return f"(({ct})NAN)"
        if math.isinf(v):
            return f"(({ct})({'-' if v < 0 else ''}INFINITY))"
        return f"(({ct}){v.hex()})"
    if dt is D.bool_:
        return "1" if value else "0"
    return f"(({ct}){int(value)}LL)"


class CScalarOps:
    """The C spelling of each primitive scalar operation (operands are C identifiers)."""

    def __init__(self, ct: str):
        self.ct = ct
        self.f = "f" if ct == "float" else ""
        self.is_float = ct in ("float", "double")

    def _fn(self, name, a):
        return f"{name}{self.f}({a})"

    def add(self, a, b): return f"{a} + {b}"
    def sub(self, a, b): return f"{a} - {b}"
    def mul(self, a, b): return f"{a} * {b}"
    def div(self, a, b): return f"{a} / {b}"
    def neg(self, a): return f"-{a}"
    def max(self, a, b): return f"(({a} != {a}) || {a} > {b}) ? {a} : {b}"  # NaN propagates
    def min(self, a, b): return f"(({a} != {a}) || {a} < {b}) ? {a} : {b}"
    def relu(self, a): return f"({a} != {a}) ? {a} : ({a} > 0 ? {a} : 0)"
    def where(self, c, a, b): return f"{c} ? {a} : {b}"
    def eq(self, a, b): return f"{a} == {b}"
    def ne(self, a, b): return f"{a} != {b}"
    def lt(self, a, b): return f"{a} < {b}"
    def le(self, a, b): return f"{a} <= {b}"
    def gt(self, a, b): return f"{a} > {b}"
    def ge(self, a, b): return f"{a} >= {b}"
    def exp(self, a): return f"em_expf({a})" if self.f else f"exp({a})"
    def log(self, a): return self._fn("log", a)
    def sqrt(self, a): return self._fn("sqrt", a)
    def tanh(self, a): return f"em_tanhf({a})" if self.f else f"tanh({a})"
    def erf(self, a): return self._fn("erf", a)
    def sin(self, a): return self._fn("sin", a)
    def cos(self, a): return self._fn("cos", a)
    def log1p(self, a): return self._fn("log1p", a)
    def expm1(self, a): return self._fn("expm1", a)
    def rsqrt(self, a): return f"1 / {self._fn('sqrt', a)}"
    def reciprocal(self, a): return f"1 / {a}"
    def sigmoid(self, a): return f"1 / (1 + {self.exp('-' + a)})"

    def abs(self, a):
        return self._fn("fabs", a) if self.is_float else f"{a} < 0 ? -{a} : {a}"

    def pow(self, a, b, const=None):
        if const == 2:
            return f"{a} * {a}"
        if const == 1:
            return a
        if const == 0.5:
            return self._fn("sqrt", a)
        return f"pow{self.f}({a}, {b})"


def cast_expr(src: D.dtype, dst: D.dtype, a: str) -> str:
    if dst is D.bool_:
        return f"(uint8_t)({a} != 0)"
    if dst is D.float16:
        return f"(float)(_Float16)({a})"
    if dst is D.bfloat16:
        return f"em_bf16_round((float)({a}))"
    return f"({CTYPE[dst]})({a})"


def load_expr(dt: D.dtype, ref: str) -> str:
    if dt is D.bfloat16:
        return f"em_bf16_load({ref})"
    if dt is D.float16:
        return f"(float){ref}"
    return ref


def store_expr(dt: D.dtype, value: str) -> str:
    if dt is D.bfloat16:
        return f"em_bf16_store((float)({value}))"
    if dt is D.bool_:
        return f"(uint8_t)(({value}) != 0)"
    return f"({STORAGE[dt]})({value})"


class _Body:
    """Emits the statements computing one expression at given index variables."""

    def __init__(self, params: dict, indent: str):
        self.params = params  # buffer name -> C parameter name
        self.lines: list[str] = []
        self.memo: dict = {}
        self.indent = indent
        self.n = 0

    def emit(self, e: Expr, idx: list[str]) -> str:
        key = ("load", e.buf.name, e.strides) if isinstance(e, Load) else id(e)
        if key in self.memo:
            return self.memo[key]
        if isinstance(e, Const):
            return c_literal(e.value, e.dtype)
        if isinstance(e, Load):
            terms = [v if s == 1 else f"{v} * {s}" for v, s in zip(idx, e.strides) if s != 0]
            ref = f"{self.params[e.buf.name]}[{' + '.join(terms) or '0'}]"
            rhs = load_expr(e.dtype, ref)
        else:
            args = [self.emit(a, idx) for a in e.args]
            if e.prim == "cast":
                rhs = cast_expr(e.args[0].dtype, e.dtype, args[0])
            else:
                ops = CScalarOps(CTYPE[e.args[0].dtype if e.prim in
                                       ("eq", "ne", "lt", "le", "gt", "ge") else e.dtype])
                if e.prim == "pow":
                    c = e.args[1]
                    rhs = ops.pow(*args, const=c.value if isinstance(c, Const) else None)
                else:
                    rhs = getattr(ops, e.prim)(*args)
        name = f"v{self.n}"
        self.n += 1
        self.lines.append(f"{self.indent}const {CTYPE[e.dtype]} {name} = {rhs};")
        self.memo[key] = name
        return name


def _buffers_of(e: Expr, out: dict, seen: set) -> dict:
    if id(e) in seen:
        return out
    seen.add(id(e))
    if isinstance(e, Load):
        out.setdefault(e.buf.name, e.buf)
    for a in getattr(e, "args", ()):
        _buffers_of(a, out, seen)
    return out


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def kernel_source(k: Kernel, openmp: bool) -> tuple[str, list[str]]:
    """C source of one kernel and the buffer names of its parameters, in order."""
    bufs = _buffers_of(k.expr, {}, set())
    params = {name: f"in{i}" for i, name in enumerate(bufs)}
    sig = [f"const {STORAGE[b.meta.dtype]} *restrict {params[n]}" for n, b in bufs.items()]
    sig.append(f"{STORAGE[k.out.meta.dtype]} *restrict out")
    lines = [f"/* {k.kind} kernel {k.name}: {k.out.meta} */",
             f"void {k.name}({', '.join(sig)}) {{"]
    shape = k.expr.shape
    loop_dims = list(shape) if k.kind == "pointwise" else list(shape[:-1])
    nd = len(loop_dims)
    total = _numel(shape)
    ind = "    "
    if nd and openmp and total >= OMP_MIN_ELEMENTS:
        collapse = f" collapse({nd - 1})" if (k.kind == "pointwise" and nd > 2) else \
            (f" collapse({nd})" if k.kind != "pointwise" and nd > 1 else "")
        lines.append(f"{ind}#pragma omp parallel for{collapse} schedule(static)")
    idx = [f"i{d}" for d in range(nd)]
    for d, n in enumerate(loop_dims):
        lines.append(f"{ind}for (int64_t i{d} = 0; i{d} < {n}; ++i{d}) {{")
        ind += "    "
    ostr = []
    acc = 1
    for n in reversed(loop_dims):
        ostr.append(acc)
        acc *= max(n, 1)
    ostr.reverse()
    lin = " + ".join(v if s == 1 else f"{v} * {s}" for v, s in zip(idx, ostr)) or "0"
    odt = k.out.meta.dtype
    if k.kind == "pointwise":
        body = _Body(params, ind)
        v = body.emit(k.expr, idx)
        lines += body.lines
        lines.append(f"{ind}out[{lin}] = {store_expr(odt, v)};")
    else:
        lines += _reduction_body(k, params, idx, lin, ind)
    for d in range(nd):
        ind = ind[:-4]
        lines.append(f"{ind}}}")
    lines.append("}")
    return "\n".join(lines), list(bufs)


LANES = 16  # independent partial accumulators: the row loop vectorizes without reassociation


def _reduction_body(k: Kernel, params: dict, idx: list, lin: str, ind: str) -> list[str]:
    """One row of a last-dimension reduction. Accumulation runs in LANES independent partial
    results (element r goes to lane r % LANES), combined at the end of the row: each lane is
    an exact sequential sum, so vector code computes what the scalar code would."""
    n = k.attrs["n"]
    e = k.expr
    ct = CTYPE[e.dtype]
    odt = k.out.meta.dtype
    lines: list[str] = []

    def value_at(r: str, extra: str) -> tuple[list[str], str]:
        body = _Body(params, ind + extra)
        v = body.emit(e, idx + [r])
        return body.lines, v

    def lanes(at: str, init: str, update: str, combine: str) -> None:
        """acc = combine over the row of update(lane, v); ``update``/``combine`` are templates
        with {a} (accumulator) and {v} (value)."""
        lines.append(f"{ind}{at} part[{LANES}];")
        lines.append(f"{ind}for (int l = 0; l < {LANES}; ++l) part[l] = {init};")
        lines.append(f"{ind}int64_t r = 0;")
        lines.append(f"{ind}for (; r + {LANES} <= {n}; r += {LANES}) {{")
        lines.append(f"{ind}    #pragma omp simd")
        lines.append(f"{ind}    for (int l = 0; l < {LANES}; ++l) {{")
        body, v = value_at("(r + l)", "        ")
        lines.extend(body)
        lines.append(f"{ind}        {update.format(a='part[l]', v=v, i='(r + l)')}")
        lines.append(f"{ind}    }}")
        lines.append(f"{ind}}}")
        lines.append(f"{ind}{at} acc = part[0];")
        merge = combine.format(a="acc", v="part[l]")
        lines.append(f"{ind}for (int l = 1; l < {LANES}; ++l) {merge}")
        lines.append(f"{ind}for (; r < {n}; ++r) {{")
        body, v = value_at("r", "    ")
        lines.extend(body)
        lines.append(f"{ind}    {update.format(a='acc', v=v, i='r')}")
        lines.append(f"{ind}}}")

    def first() -> str:
        body, v = value_at("0", "")
        lines.extend(body)
        return v

    def scope(fn):
        lines.append(f"{ind}{{")
        fn()
        lines.append(f"{ind}}}")

    if k.kind in ("sum", "mean"):
        at = CTYPE[k.attrs["acc"]]
        upd = f"{{a}} += ({at}){{v}};"
        lines.append(f"{ind}{at} total;")
        scope(lambda: (lanes(at, "0", upd, upd), lines.append(f"{ind}total = acc;")))
        res = "total" if k.kind == "sum" else f"total / {n}"
        lines.append(f"{ind}out[{lin}] = {store_expr(odt, cast_expr(k.attrs['acc'], odt, res))};")
    elif k.kind in ("amax", "amin"):
        cmp = ">" if k.kind == "amax" else "<"
        upd = f"{{a}} = ({{v}} != {{v}} || {{v}} {cmp} {{a}}) ? {{v}} : {{a}};"
        lines.append(f"{ind}{ct} best;")
        scope(lambda: (lanes(ct, first(), upd, upd), lines.append(f"{ind}best = acc;")))
        lines.append(f"{ind}out[{lin}] = {store_expr(odt, 'best')};")
    else:  # softmax / log_softmax: max, then sum of exp, then write
        f = "em_expf" if ct == "float" else "exp"
        upd = "{a} = ({v} != {v} || {v} > {a}) ? {v} : {a};"
        lines.append(f"{ind}{ct} m;")
        scope(lambda: (lanes(ct, first(), upd, upd), lines.append(f"{ind}m = acc;")))
        lines.append(f"{ind}double s;")
        # softmax into a float32/float64 output keeps exp(v - m) there for the last pass
        keep = k.kind == "softmax" and STORAGE[odt] == ct
        row = f"out[({lin}) * {n} + {{i}}]"
        upd = (f"{{{{ const {ct} ex = {f}({{v}} - m); {row} = ex; {{a}} += (double)ex; }}}}"
               if keep else f"{{a}} += (double){f}({{v}} - m);")
        scope(lambda: (lanes("double", "0", upd, "{a} += {v};"),
                       lines.append(f"{ind}s = acc;")))
        if keep:
            lines.append(f"{ind}const {ct} inv = ({ct})s;")
            lines.append(f"{ind}for (int64_t r = 0; r < {n}; ++r) "
                         f"{row.format(i='r')} = {row.format(i='r')} / inv;")
            return lines
        if k.kind == "softmax":
            lines.append(f"{ind}const {ct} inv = ({ct})s;")
            res = f"{f}({{v}} - m) / inv"
        else:
            lines.append(f"{ind}const {ct} lse = ({ct})log(s);")
            res = "{v} - m - lse"
        lines.append(f"{ind}for (int64_t r = 0; r < {n}; ++r) {{")
        body, v = value_at("r", "    ")
        lines.extend(body)
        lines.append(f"{ind}    out[({lin}) * {n} + r] = {store_expr(odt, res.format(v=v))};")
        lines.append(f"{ind}}}")
    return lines


def generate(plan: Plan, openmp: bool, contiguous_inputs: bool = False) -> tuple[str, str, dict]:
    """``(c_source, wrapper_source, kernel_params)``: the C translation unit, the Python
    wrapper's source, and each kernel's parameter buffer names."""
    chunks = [PRELUDE]
    kparams = {}
    for k in plan.kernels:
        src, params = kernel_source(k, openmp)
        chunks.append(src)
        kparams[k.name] = params
    py = ["def call(inputs):"]
    for i, b in enumerate(plan.inputs):
        src = f"_contig(inputs[{i}]._data)" if contiguous_inputs else f"inputs[{i}]._data"
        py.append(f"    {b.name} = {src}  # {b.meta}")
    for s in plan.steps:
        if s.kind == "kernel":
            k = s.kernel
            py.append(f"    {k.out.name} = _empty({k.out.meta.shape}, _np_{_dt_name(k.out)})")
            ptrs = ", ".join(f"{n}.ctypes.data" for n in kparams[k.name] + [k.out.name])
            py.append(f"    _k_{k.name}({ptrs})")
        else:
            names = ", ".join(s.outs[j].name for j in range(len(s.outs)))
            ins = ", ".join(b.name for b in s.inputs.values())
            py.append(f"    {names}, = _eager_{s.node.name}({ins})  "
                      f"# ember.ops.{s.node.target.name}, not lowered")
            for b in s.outs:
                if b.read_by_kernel:
                    py.append(f"    {b.name} = _contig({b.name})")
    rets = []
    for o in plan.outputs:
        rets.append(f"inputs[{o[1]}]" if isinstance(o, tuple) else
                    f"_wrap({o.name}, _dt_{_dt_name(o)})")
    py.append(f"    return ({''.join(r + ', ' for r in rets)})")
    return "\n\n".join(chunks) + "\n", "\n".join(py) + "\n", kparams


def _dt_name(b) -> str:
    return b.meta.dtype.name

