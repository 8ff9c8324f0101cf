"""Property test of ember.compile: random chains of ops over random shapes, dtypes and input
layouts, compiled with the inductor backend (fullgraph=True), must match eager ember.

A drawn case is a small Python function (printed with ``note`` when an example fails, so the
failure reads as a runnable repro) plus the inputs it takes. Each step of the chain comes from
one op family: unary pointwise, binary with a second input (a broadcastable tensor or a Python
scalar), reductions (one dim, several or all, keepdim or not), views, and matmul/linear. The
forward values are compared (NaN and inf positions equal), then, for cases drawn with
``requires_grad``, the gradients of a randomly weighted sum of the output.

The dynamic variant compiles with ``dynamic=True`` and calls the same function on two sets of
shapes that differ in some dims (the generator tracks each size as a pair: first call, second).

Knobs for bug hunting (CI uses the defaults): EMBER_FUZZ_EXAMPLES=n runs n examples per test;
EMBER_FUZZ_RANDOM=1 draws new examples each run (combine with pytest's --hypothesis-seed=N).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import pytest
from compile_util import fresh_compiler  # noqa: F401 (autouse fixture)
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

import ember

F = ember.nn.functional

_EXAMPLES = int(os.environ.get("EMBER_FUZZ_EXAMPLES", "0"))
_SETTINGS = settings(
    deadline=None, database=None, print_blob=False,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    derandomize=not os.environ.get("EMBER_FUZZ_RANDOM"),
    # the fixture resets the compiler per test function; each example resets it itself
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large, HealthCheck.filter_too_much])

# var/std over fewer elements than the correction warn in eager (as in PyTorch): expected here
_DOF = pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")

MAX_RANK = 5
MAX_NUMEL = 1500  # per input/intermediate, in the larger of the two calls
SCALARS = (0.5, -1.5, 2.0, 3, -1)  # few distinct constants: generated kernels get reused

# (rtol, atol) of compiled against eager. Eager rounds after every op and the compiled kernel
# may not (half types compute in float32, fused code keeps values in registers, reductions
# sum in another order), so the tolerance is looser than the per-op tests'; atol scales with
# the largest finite reference value.
TOLS = {"float64": (1e-9, 1e-9), "float32": (2e-4, 2e-5), "float16": (3e-2, 3e-2),
        "bfloat16": (1.5e-1, 1.5e-1)}
DTYPES = {"float32": ember.float32, "float64": ember.float64, "float16": ember.float16,
          "bfloat16": ember.bfloat16}

# name -> code applying the op to ``a`` (each keeps the shape)
UNARY = {
    "exp": "a.exp()", "tanh": "ember.tanh(a)", "sigmoid": "ember.sigmoid(a)",
    "relu": "F.relu(a)", "gelu": "F.gelu(a)", "gelu_tanh": "F.gelu(a, approximate='tanh')",
    "abs": "a.abs()", "neg": "-a", "sqrt_abs": "a.abs().sqrt()",
    "log1p_abs": "ember.log1p(a.abs())", "sin": "a.sin()", "cos": "ember.cos(a)",
    "silu": "F.silu(a)", "softplus": "F.softplus(a)", "leaky_relu": "F.leaky_relu(a, 0.1)",
    "elu": "F.elu(a)", "erf": "ember.erf(a)", "square": "a * a", "cube": "a ** 3",
    "clamp": "a.clamp(-0.5, 1.0)", "expm1": "ember.expm1(a)", "atan": "ember.atan(a)",
    "rsqrt": "(a.abs() + 0.5).rsqrt()", "log_abs": "(a.abs() + 1).log()",
    "hardtanh": "F.hardtanh(a)", "reciprocal": "ember.reciprocal(a.abs() + 1)",
    "sign_mul": "a.sign() * a",
}

# name -> (code with ``b`` the other operand, operand kinds allowed, values of a tensor ``b``)
BINARY = {
    "add": ("a + {b}", "ts", "normal"), "radd": ("{b} + a", "ts", "normal"),
    "sub": ("a - {b}", "ts", "normal"), "rsub": ("{b} - a", "ts", "normal"),
    "mul": ("a * {b}", "ts", "normal"), "div": ("a / {b}", "ts", "divisor"),
    "maximum": ("ember.maximum(a, {b})", "t", "normal"),
    "minimum": ("ember.minimum({b}, a)", "t", "normal"),
    "clamp_min": ("a.clamp(min={b})", "s", "normal"),
    "pow": ("(a.abs() + 0.5) ** {b}", "ts", "exponent"),
    "where_gt": ("ember.where(a > 0.25, a, {b})", "ts", "normal"),
    "where_mask": ("ember.where({b} < 0, a * 2, a)", "t", "normal"),
    "where_cmp": ("ember.where(a <= {b}, {b} - a, a)", "t", "normal"),
}

# name -> code with ``{}`` the arguments (leading ones given here, then the dims, extra
# keywords and keepdim)
REDUCE = {
    "sum": ("a.sum({})", [], []), "mean": ("a.mean({})", [], []),
    "amax": ("a.amax({})", [], []), "amin": ("ember.amin({})", ["a"], []),
    "var": ("a.var({})", [], []), "var0": ("ember.var({})", ["a"], ["correction=0"]),
    "std": ("a.std({})", [], []), "logsumexp": ("ember.logsumexp({})", ["a"], []),
    "max_values": ("a.max({}).values", [], []),
}
SOFTMAX = {"softmax": "ember.softmax(a, {d})", "log_softmax": "F.log_softmax(a, dim={d})"}

Shape = tuple  # of (size in call 0, size in call 1) pairs


@dataclass
class Input:
    """One tensor argument of the chain function."""
    name: str
    shape: Shape
    layout: str  # contiguous | transposed | sliced | broadcast
    values: str  # normal | divisor | exponent
    layout_dim: int = 0
    requires_grad: bool = False


@dataclass
class Case:
    """A drawn chain function, its inputs and how to run them."""
    dtype: str
    lines: list[str]
    inputs: list[Input]
    seed: int
    grad: bool
    specials: bool
    dynamic: bool
    out_shape: Shape = ()
    source: str = field(init=False, default="")

    def __post_init__(self):
        args = ", ".join(i.name for i in self.inputs)
        body = "".join(f"    a = {line}\n" for line in self.lines)
        self.source = f"def chain({args}):\n    a = x\n{body}    return a\n"

    def __repr__(self) -> str:  # the note() above the traceback has the full repro
        return f"Case({self.dtype}, {len(self.lines)} steps)"

    def function(self):
        ns = {"ember": ember, "F": F}
        exec(compile(self.source, "<chain>", "exec"), ns)  # noqa: S102 (generated test code)
        return ns["chain"]

    def describe(self) -> str:
        def sizes(sh, k):
            return tuple(p[k] for p in sh)
        ins = []
        for i in self.inputs:
            s = str(sizes(i.shape, 0))
            if self.dynamic:
                s += f" then {sizes(i.shape, 1)}"
            ins.append(f"#   {i.name}: {s} {i.layout}(dim {i.layout_dim}) values={i.values}"
                       f"{' requires_grad' if i.requires_grad else ''}")
        return (f"# dtype={self.dtype} seed={self.seed} specials={self.specials} "
                f"dynamic={self.dynamic} output={tuple(p[0] for p in self.out_shape)}\n"
                + "\n".join(ins) + "\n" + self.source)


# ---------------------------------------------------------------------- generation
class _Gen:
    """Builds a chain step by step, tracking the current shape (as size pairs)."""

    def __init__(self, draw, shape: Shape, dynamic: bool):
        self.draw, self.shape, self.dynamic = draw, shape, dynamic
        self.lines: list[str] = []
        self.inputs: list[Input] = []

    def numel_ok(self, shape: Shape) -> bool:
        return all(int(np.prod([p[k] for p in shape])) <= MAX_NUMEL for k in (0, 1))

    def new_input(self, shape: Shape, values: str) -> str:
        name = f"i{len(self.inputs)}"
        self.inputs.append(Input(name, shape, self.draw(layouts(len(shape))), values,
                                 self.draw(st.integers(0, max(len(shape) - 1, 0)))))
        return name

    def static(self, p) -> bool:
        return p[0] == p[1]

    # -------------------------------------------------- families
    def unary(self):
        self.lines.append(UNARY[self.draw(st.sampled_from(sorted(UNARY)))])

    def broadcastable(self) -> Shape:
        """A shape that broadcasts with the current one: some dims 1, leading dims dropped,
        a size-1 dim of the current shape possibly widened, maybe a new leading dim."""
        out = []
        for p in self.shape:
            c = self.draw(st.integers(0, 2))
            if c == 0:
                out.append((1, 1))
            elif c == 1 and p == (1, 1):
                n = self.draw(st.integers(2, 4))
                out.append((n, n))
            else:
                out.append(p)
        drop = self.draw(st.integers(0, len(out)))
        out = out[drop:]
        if not drop and len(self.shape) < MAX_RANK and self.draw(st.booleans()):
            n = self.draw(st.sampled_from([1, 2, 3]))
            out.insert(0, (n, n))
        return tuple(out)

    def binary(self):
        name = self.draw(st.sampled_from(sorted(BINARY)))
        code, kinds, values = BINARY[name]
        kind = self.draw(st.sampled_from(kinds))
        if kind == "s":
            b = repr(self.draw(st.sampled_from(SCALARS)))
            if values == "divisor":
                b = repr(self.draw(st.sampled_from([s for s in SCALARS if s])))
        else:
            shape = self.broadcastable()
            out = _broadcast(self.shape, shape)
            if not self.numel_ok(out):
                return
            b = self.new_input(shape, values)
            self.shape = out
        self.lines.append(code.format(b=b))

    def dims_arg(self) -> tuple[str, list[int]]:
        """A dim argument: one dim (maybe negative), a tuple of dims, or all (no arg)."""
        nd = len(self.shape)
        c = self.draw(st.integers(0, 2))
        if nd == 0 or c == 0:
            d = self.draw(st.integers(-max(nd, 1), max(nd, 1) - 1))
            return str(d), [d % nd] if nd else []
        if c == 1:
            ds = sorted(self.draw(st.sets(st.integers(0, nd - 1), min_size=1)))
            return str(tuple(ds)), ds
        return "", list(range(nd))

    def reduce(self):
        name = self.draw(st.sampled_from(sorted(REDUCE) + sorted(SOFTMAX)))
        nd = len(self.shape)
        if name in SOFTMAX:
            d = self.draw(st.integers(-max(nd, 1), max(nd, 1) - 1))
            self.lines.append(SOFTMAX[name].format(d=d))
            return
        keep = self.draw(st.booleans())
        d, dims = self.dims_arg()
        if name == "max_values":  # one dim only
            d = str(self.draw(st.integers(-max(nd, 1), max(nd, 1) - 1)))
            dims = [int(d) % nd] if nd else []
        elif name == "logsumexp" and not d:
            d = str(tuple(range(nd)))
        if name in ("amax", "amin", "max_values") and any(
                0 in self.shape[i] for i in dims):
            return  # no identity: eager raises for an empty reduced dim
        if name == "max_values" and nd == 0:
            return
        if keep and not d:
            d = str(tuple(range(nd)))
        code, lead, kw = REDUCE[name]
        self.lines.append(code.format(", ".join(lead + ([d] if d else []) + kw +
                                                (["keepdim=True"] if keep else []))))
        self.shape = tuple((1, 1) if i in dims else p for i, p in enumerate(self.shape)
                           if keep or i not in dims)

    def view(self):
        sh, nd = self.shape, len(self.shape)
        c = self.draw(st.sampled_from(["transpose", "permute", "merge", "split", "flatten",
                                       "unsqueeze", "squeeze", "slice", "expand", "select",
                                       "narrow", "movedim"]))
        if c in ("transpose", "movedim") and nd >= 1:
            i, j = self.draw(st.integers(-nd, nd - 1)), self.draw(st.integers(-nd, nd - 1))
            self.lines.append(f"a.{c}({i}, {j})")
            s = list(sh)
            if c == "transpose":
                s[i], s[j] = s[j], s[i]
            else:
                s.insert(j % nd, s.pop(i % nd))
            self.shape = tuple(s)
        elif c == "permute" and nd >= 2:
            perm = self.draw(st.permutations(range(nd)))
            self.lines.append(f"a.permute{tuple(perm)}")
            self.shape = tuple(sh[p] for p in perm)
        elif c == "merge" and nd >= 2:  # reshape joining adjacent dims
            i = self.draw(st.integers(0, nd - 2))
            merged = (sh[i][0] * sh[i + 1][0], sh[i][1] * sh[i + 1][1])
            new = sh[:i] + (merged,) + sh[i + 2:]
            exprs = [f"a.shape[{j}]" for j in range(i)] + \
                [f"a.shape[{i}] * a.shape[{i + 1}]"] + [f"a.shape[{j}]" for j in range(i + 2, nd)]
            self.lines.append(f"a.reshape({self.size_code(new, exprs)})")
            self.shape = new
        elif c == "split" and nd < MAX_RANK:  # reshape/view splitting a static dim
            cands = [i for i, p in enumerate(sh) if self.static(p) and p[0] >= 2
                     and _factor(p[0])]
            if not cands:
                return
            i = self.draw(st.sampled_from(cands))
            f = _factor(sh[i][0])
            new = sh[:i] + ((f, f), (sh[i][0] // f, sh[i][0] // f)) + sh[i + 1:]
            how = self.draw(st.sampled_from(["unflatten", "view"]))
            if how == "unflatten":
                self.lines.append(f"a.unflatten({i}, ({f}, -1))")
            else:
                exprs = [f"a.shape[{j}]" for j in range(i)] + ["", ""] + \
                    [f"a.shape[{j}]" for j in range(i + 1, nd)]
                self.lines.append(f"a.view({self.size_code(new, exprs)})")
            self.shape = new
        elif c == "flatten":
            self.lines.append("a.flatten()")
            self.shape = ((int(np.prod([p[0] for p in sh])), int(np.prod([p[1] for p in sh]))),)
        elif c == "unsqueeze" and nd < MAX_RANK:
            d = self.draw(st.integers(-nd - 1, nd))
            self.lines.append(f"a.unsqueeze({d})")
            s = list(sh)
            s.insert(d % (nd + 1), (1, 1))
            self.shape = tuple(s)
        elif c == "squeeze":
            ones = [i for i, p in enumerate(sh) if p == (1, 1)]
            if self.draw(st.booleans()) or not ones:
                if any(1 in p for p in sh if p != (1, 1)):
                    return  # a size that is 1 in one call only: squeeze() would differ
                self.lines.append("a.squeeze()")
                self.shape = tuple(p for p in sh if p != (1, 1))
            else:
                d = self.draw(st.sampled_from(ones))
                self.lines.append(f"a.squeeze({d})")
                self.shape = sh[:d] + sh[d + 1:]
        elif c == "slice" and nd >= 1:
            d = self.draw(st.integers(0, nd - 1))
            start, step = self.draw(st.integers(0, 2)), self.draw(st.integers(1, 3))
            self.lines.append(f"a[{':, ' * d}{start}::{step}]")
            self.shape = sh[:d] + (tuple(len(range(start, n, step)) for n in sh[d]),) + \
                sh[d + 1:]
        elif c == "narrow" and nd >= 1:
            d = self.draw(st.integers(0, nd - 1))
            n = min(sh[d])
            start = self.draw(st.integers(0, n))
            length = self.draw(st.integers(0, n - start))
            self.lines.append(f"a.narrow({d}, {start}, {length})")
            self.shape = sh[:d] + ((length, length),) + sh[d + 1:]
        elif c == "select" and nd >= 1:
            d = self.draw(st.integers(0, nd - 1))
            if min(sh[d]) == 0:
                return
            i = self.draw(st.integers(-min(sh[d]), min(sh[d]) - 1))
            self.lines.append(f"a.select({d}, {i})")
            self.shape = sh[:d] + sh[d + 1:]
        elif c == "expand":
            new = [((n := self.draw(st.integers(2, 4))), n) if p == (1, 1) and
                   self.draw(st.booleans()) else p for p in sh]
            if nd < MAX_RANK and self.draw(st.booleans()):
                n = self.draw(st.integers(1, 3))
                new.insert(0, (n, n))
            new = tuple(new)
            if new == sh or not self.numel_ok(new):
                return
            args = [str(p[0]) if p != old else "-1"
                    for p, old in zip(new, ((None,) * (len(new) - nd)) + sh)]
            self.lines.append(f"a.expand({', '.join(args)})")
            self.shape = new

    def size_code(self, new: Shape, exprs: list[str]) -> str:
        """Sizes for reshape/view: literals where static, ``exprs`` (in terms of a.shape, so
        dynamic sizes stay symbolic) otherwise, and maybe -1 for one dim (not for 0 elements,
        where -1 is ambiguous)."""
        if not new:
            return "()"
        minus = None if any(0 in p for p in new) else \
            self.draw(st.sampled_from([None, *range(len(new))]))
        return ", ".join("-1" if i == minus else str(p[0]) if self.static(p) else e
                         for i, (p, e) in enumerate(zip(new, exprs)))

    def matmul(self):
        sh, nd = self.shape, len(self.shape)
        if nd == 0:
            return
        k = sh[-1]
        n = self.draw(st.integers(1, 5))
        c = self.draw(st.sampled_from(["mat", "vec", "left", "batched", "linear"]))
        if c == "mat":
            w, out = (k, (n, n)), sh[:-1] + ((n, n),)
        elif c == "vec":
            w, out = (k,), sh[:-1]
        elif c == "left" and nd >= 2:
            w, out = ((n, n), sh[-2]), sh[:-2] + ((n, n), sh[-1])
        elif c == "batched" and nd == 3:
            w, out = (sh[0], k, (n, n)), sh[:-1] + ((n, n),)
        elif c == "linear":
            w, out = ((n, n), k), sh[:-1] + ((n, n),)
        else:
            return
        if not self.numel_ok(out) or not self.numel_ok(w):
            return
        name = self.new_input(w, "normal")
        if c == "left":
            self.lines.append(f"{name} @ a")
        elif c == "linear":
            bias = self.new_input(((n, n),), "normal") if self.draw(st.booleans()) else None
            self.lines.append(f"F.linear(a, {name}{', ' + bias if bias else ''})")
        else:
            self.lines.append(f"ember.matmul(a, {name})" if c == "batched" else f"a @ {name}")
        self.shape = out


def _broadcast(a: Shape, b: Shape) -> Shape:
    n = max(len(a), len(b))
    a, b = ((1, 1),) * (n - len(a)) + a, ((1, 1),) * (n - len(b)) + b
    return tuple(y if x == (1, 1) else x for x, y in zip(a, b))


def _factor(n: int) -> int:
    """The smallest factor of n above 1 and below n (0 if n is prime or below 4)."""
    return next((f for f in range(2, n) if n % f == 0), 0)


def layouts(rank: int) -> st.SearchStrategy[str]:
    """How an input of ``rank`` dims is laid out in memory."""
    return st.sampled_from(["contiguous", "transposed", "sliced", "broadcast"] if rank else
                           ["contiguous"])


@st.composite
def shapes(draw, dynamic: bool) -> Shape:
    rank = draw(st.integers(0, 4))
    sizes = draw(st.lists(st.sampled_from([0, 1, 1, 2, 3, 4, 5, 6, 7]), min_size=rank,
                          max_size=rank))
    if not dynamic:
        return tuple((n, n) for n in sizes)
    # sizes that change between the calls are 2 or more in both (0 and 1 specialise)
    out, changed = [], False
    for n in sizes:
        if n >= 2 and draw(st.booleans()):
            out.append((n, draw(st.sampled_from([m for m in range(2, 8) if m != n]))))
            changed = True
        else:
            out.append((n, n))
    if rank and not changed:
        n = draw(st.integers(2, 7))
        out[-1] = (n, n + 1)
    return tuple(out)


@st.composite
def cases(draw, dynamic: bool = False) -> Case:
    dtype = draw(st.sampled_from(["float32", "float64", "float32", "float64", "float16",
                                  "bfloat16"]))
    shape = draw(shapes(dynamic))
    g = _Gen(draw, shape, dynamic)
    g.inputs.append(Input("x", shape, draw(layouts(len(shape))), "normal",
                          draw(st.integers(0, max(len(shape) - 1, 0)))))
    families = [g.unary, g.binary, g.reduce, g.view, g.matmul]
    # sampled_from draws near-uniformly (integers() favours small values): long chains too
    for _ in range(draw(st.sampled_from(range(1, 9)))):
        for _attempt in range(3):  # a family may not apply to the current shape
            n = len(g.lines)
            draw(st.sampled_from(families))()
            if len(g.lines) > n:
                break
        else:
            g.unary()
    grad = draw(st.sampled_from([True, False]))
    for i in g.inputs:
        i.requires_grad = grad and (i.name == "x" or draw(st.booleans()))
    specials = not grad and draw(st.sampled_from([False, False, True]))
    return Case(dtype, g.lines, g.inputs, draw(st.integers(0, 2**16)), grad, specials,
                dynamic, g.shape)


# ---------------------------------------------------------------------- running
def make_input(inp: Input, call: int, dtype: ember.dtype, rng, specials: bool) -> ember.Tensor:
    """The tensor for ``inp`` in call 0 or 1, laid out as drawn (a leaf when it needs grad)."""
    shape = [p[call] for p in inp.shape]
    nd, d = len(shape), inp.layout_dim
    base = list(shape)
    if inp.layout == "sliced":
        base[d] *= 2
    elif inp.layout == "broadcast":
        base[d] = min(base[d], 1)
    perm = list(range(nd))  # stored dim order: dim d swapped with the last (or first)
    if inp.layout == "transposed" and nd >= 2:
        j = 0 if d == nd - 1 else nd - 1
        perm[d], perm[j] = perm[j], perm[d]
    stored = [base[p] for p in perm]
    if inp.values == "divisor":
        a = rng.uniform(0.5, 2.0, stored) * rng.choice([-1.0, 1.0], stored)
    elif inp.values == "exponent":
        a = rng.uniform(-2.0, 2.0, stored)
    else:
        a = rng.standard_normal(stored)
    if specials and a.size:
        flat = a.reshape(-1)
        idx = rng.integers(0, flat.size, max(1, flat.size // 5))
        flat[idx] = rng.choice([np.nan, np.inf, -np.inf, 0.0], idx.size)
    t = ember.tensor(a).to(dtype)
    if nd:
        t = t.permute(*perm)  # a swap is its own inverse
    if inp.layout == "sliced":
        t = t[(slice(None),) * d + (slice(None, None, 2),)]
    elif inp.layout == "broadcast":
        t = t.expand(*shape)
    assert tuple(t.shape) == tuple(shape)
    return t.requires_grad_() if inp.requires_grad else t


def assert_close(out, ref, dtype: str, what: str) -> None:
    """Compiled ``out`` against eager ``ref``: shape, dtype, NaN/inf positions, values."""
    assert isinstance(out, ember.Tensor), f"{what}: got {type(out).__name__}"
    assert tuple(out.shape) == tuple(ref.shape), f"{what}: shape {tuple(out.shape)} vs " \
                                                 f"{tuple(ref.shape)}"
    assert out.dtype is ref.dtype, f"{what}: dtype {out.dtype} vs {ref.dtype}"
    o = out.detach().to(ember.float64).numpy()
    r = ref.detach().to(ember.float64).numpy()
    rtol, atol = TOLS[dtype]
    fin = np.isfinite(r)
    scale = max(1.0, float(np.abs(r[fin]).max())) if fin.any() else 1.0
    ok = np.isclose(o, r, rtol=rtol, atol=atol * scale, equal_nan=True)
    # a value near the end of the dtype's range may overflow in only one of the two
    edge = 0.5 * float(ml_dtypes.finfo(ref.detach().numpy().dtype).max)
    big = (np.abs(np.where(fin, r, 0)) > edge) | (np.abs(np.where(np.isfinite(o), o, 0)) > edge)
    bad = ~(ok | (big & ~np.isnan(o)))
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} differ; first at {i}: "
                             f"compiled {o[i]!r} vs eager {r[i]!r} (rtol {rtol}, "
                             f"atol {atol * scale:.3g})")


def run_case(case: Case, calls: tuple[int, ...], **compile_kwargs) -> None:
    ember.compiler.reset()  # each example compiles afresh (kernels still come from the cache)
    note(case.describe())
    fn = case.function()
    dtype = DTYPES[case.dtype]
    cf = ember.compile(fn, backend="inductor", fullgraph=True, **compile_kwargs)
    for call in calls:
        for rep in range(2):  # the second set of values reuses the compiled entry
            rng = np.random.default_rng(case.seed + 7919 * call + 104729 * rep)
            ins = [make_input(i, call, dtype, rng, case.specials) for i in case.inputs]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = cf(*ins)
            fallbacks = [str(w.message) for w in caught if "ember.compile" in str(w.message)]
            assert not fallbacks, f"call {call}: {fallbacks[0]}"
            ref = fn(*ins)
            assert_close(out, ref, case.dtype, f"call {call} rep {rep} forward")
            leaves = [t for t in ins if t.requires_grad]
            if not leaves or rep:
                continue
            w = ember.tensor(rng.standard_normal(tuple(ref.shape))).to(ref.dtype)
            g_out = ember.autograd.grad((out * w).sum(), leaves, allow_unused=True)
            g_ref = ember.autograd.grad((ref * w).sum(), leaves, allow_unused=True)
            for inp, a, b in zip([i for i in case.inputs if i.requires_grad], g_out, g_ref):
                if b is None:
                    assert a is None or not a.detach().abs().sum().item(), \
                        f"call {call}: compiled has a gradient for {inp.name}"
                    continue
                assert a is not None, f"call {call}: compiled gave no gradient for {inp.name}"
                assert_close(a, b, case.dtype, f"call {call} grad of {inp.name}")


@_DOF
@settings(_SETTINGS, max_examples=_EXAMPLES or 100)
@given(case=cases())
def test_compiled_chain_matches_eager(case: Case):
    run_case(case, (0,))


@_DOF
@settings(_SETTINGS, max_examples=_EXAMPLES or 40)
@given(case=cases(dynamic=True))
def test_dynamic_chain_matches_eager(case: Case):
    run_case(case, (0, 1), dynamic=True)
