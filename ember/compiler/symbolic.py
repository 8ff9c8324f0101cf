"""Symbolic sizes for dynamic-shape graphs.

A ``SymInt`` is an integer expression over size symbols ``s0, s1, ...`` kept in a small
canonical form: a polynomial with integer coefficients whose atoms are symbols or
``FloorDiv``/``Mod`` of an expression by a positive constant (so ``s0*1024 == 1024*s0`` and
``s0 + s0 - s0`` is ``s0``; an expression with no symbols left is a plain ``int``).

Every symbol carries a *hint*, the value it has in the call being compiled. Arithmetic builds
expressions; anything that needs a concrete answer (comparisons, ``bool``, ``int``,
``__index__``) is decided from the symbols' ranges when that is possible (``s0 >= 2`` makes
``s0 == 1`` false for every size) and otherwise evaluated on the hints, recording a *guard*
in the active ``ShapeEnv``: the compiled entry is valid only for sizes where the guard holds.
An equality guard on a lone symbol specialises it.

At run time a dynamic graph is called with ``bindings`` (symbol -> this call's size) active;
SymInts then evaluate to the bound values (op arguments such as ``view(x, (s0, -1))``).

``str(e)`` renders C (``(s0 / 2)`` for a floor division of sizes, which are never negative);
``repr(e)`` renders Python (``(s0 // 2)``); both are valid in generated code where the symbol
names are defined.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

from .._dispatch import STATE


class ConstraintViolationError(RuntimeError):
    """A dimension marked dynamic with ``mark_dynamic`` was specialised by the program."""


# ---------------------------------------------------------------------- atoms
class Symbol:
    """One size variable: ``name`` (s<i>), ``hint`` (value at compile time), range
    ``[lo, hi]`` (``hi`` None: unbounded)."""

    __slots__ = ("hi", "hint", "index", "lo", "name", "owner", "source", "strict")

    def __init__(self, index: int, hint: int, lo: int = 2, hi: int | None = None,
                 source: str = "", strict: bool = False, owner: int = 0):
        self.index, self.name, self.hint = index, f"s{index}", hint
        self.lo, self.hi, self.source, self.strict = lo, hi, source, strict
        self.owner = owner  # the ShapeEnv's id: s0 of two compilations never compare equal

    @property
    def key(self) -> tuple:
        return (0, self.index, self.owner)

    def value(self, env: dict | None) -> int:
        if env is not None:
            return env[self]
        b = BINDINGS[-1]
        if b is not None and self in b:
            return b[self]
        return self.hint

    def lower(self) -> int | None:
        return self.lo

    def py(self) -> str:
        return self.name

    c = py

    def __repr__(self) -> str:
        return self.name


class _Div:
    """``floor(expr / k)`` (kind "//") or ``expr mod k`` (kind "%"), ``k`` > 0."""

    __slots__ = ("expr", "k", "kind")

    def __init__(self, kind: str, expr: SymInt, k: int):
        self.kind, self.expr, self.k = kind, expr, k

    @property
    def key(self) -> tuple:
        return (1, self.kind, self.expr._key, self.k)

    def value(self, env: dict | None) -> int:
        v = self.expr.value(env)
        return v // self.k if self.kind == "//" else v % self.k

    def lower(self) -> int | None:
        if self.kind == "%":
            return 0
        lb = _lower(self.expr._terms)
        return None if lb is None else lb // self.k

    def py(self) -> str:
        return f"({self.expr._render('py')} {self.kind} {self.k})"

    def c(self) -> str:
        return f"({self.expr._render('c')} {'/' if self.kind == '//' else '%'} {self.k})"

    def __eq__(self, other) -> bool:
        return isinstance(other, _Div) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


def _mono_value(mono: tuple, env) -> int:
    r = 1
    for a in mono:
        r *= a.value(env)
    return r


def _lower(terms: dict) -> int | None:
    """A lower bound of a polynomial over atoms with non-negative lower bounds, when every
    non-constant coefficient is >= 0 (None when no such simple bound exists)."""
    total = 0
    for mono, c in terms.items():
        if not mono:
            total += c
            continue
        if c < 0:
            return None
        p = 1
        for a in mono:
            lb = a.lower()
            if lb is None or lb < 0:
                return None
            p *= lb
        total += c * p
    return total


def _upper(terms: dict) -> int | None:
    """An upper bound when every non-constant coefficient is <= 0 (monomials only grow)."""
    neg = {m: -c for m, c in terms.items()}
    lb = _lower(neg)
    return None if lb is None else -lb


# ---------------------------------------------------------------------- expressions
def _mk(terms: dict) -> SymInt | int:
    terms = {m: c for m, c in terms.items() if c}
    if all(not m for m in terms):
        return terms.get((), 0)
    return SymInt(terms)


def _terms(x) -> dict:
    if isinstance(x, SymInt):
        return x._terms
    return {(): int(x)} if x else {}


class SymInt:
    """An integer expression over size symbols (see the module docstring)."""

    __slots__ = ("_key", "_terms")
    _symbolic = True  # duck-type marker: size parsers may keep a SymInt as it is

    def __init__(self, terms: dict):
        self._terms = terms
        self._key = tuple(sorted(((tuple(a.key for a in m), c) for m, c in terms.items())))

    @staticmethod
    def symbol(sym: Symbol) -> SymInt:
        return SymInt({(sym,): 1})

    # ------------------------------------------------------------ structure
    def symbols(self) -> set:
        out: set = set()
        for m in self._terms:
            for a in m:
                if isinstance(a, Symbol):
                    out.add(a)
                else:
                    out |= a.expr.symbols()
        return out

    def as_symbol(self) -> Symbol | None:
        """The symbol when this expression is exactly one symbol."""
        if len(self._terms) == 1:
            (m, c), = self._terms.items()
            if c == 1 and len(m) == 1 and isinstance(m[0], Symbol):
                return m[0]
        return None

    def as_linear(self) -> tuple | None:
        """``(symbol, c, k)`` when this expression is ``c*symbol + k`` with ``c`` > 0."""
        k = self._terms.get((), 0)
        rest = [(m, c) for m, c in self._terms.items() if m]
        if len(rest) == 1 and len(rest[0][0]) == 1 and isinstance(rest[0][0][0], Symbol) \
                and rest[0][1] > 0:
            return rest[0][0][0], rest[0][1], k
        return None

    def value(self, env: dict | None = None) -> int:
        """The expression's value under ``env`` (symbol -> int), else the active bindings,
        else the hints."""
        return sum(c * _mono_value(m, env) for m, c in self._terms.items())

    @property
    def hint(self) -> int:
        return self.value()

    # ------------------------------------------------------------ arithmetic
    def __add__(self, o):
        if not isinstance(o, (int, SymInt)):
            return NotImplemented
        t = dict(self._terms)
        for m, c in _terms(o).items():
            t[m] = t.get(m, 0) + c
        return _mk(t)

    __radd__ = __add__

    def __neg__(self):
        return _mk({m: -c for m, c in self._terms.items()})

    def __pos__(self):
        return self

    def __sub__(self, o):
        if not isinstance(o, (int, SymInt)):
            return NotImplemented
        return self + (-o)

    def __rsub__(self, o):
        if not isinstance(o, int):
            return NotImplemented
        return (-self) + o

    def __mul__(self, o):
        if not isinstance(o, (int, SymInt)):
            return NotImplemented
        t: dict = {}
        for m1, c1 in self._terms.items():
            for m2, c2 in _terms(o).items():
                m = tuple(sorted(m1 + m2, key=lambda a: a.key))
                t[m] = t.get(m, 0) + c1 * c2
        return _mk(t)

    __rmul__ = __mul__

    def _div(self, kind: str, o):
        if isinstance(o, SymInt):
            o = int(o)  # a symbolic divisor specialises (guarded)
        if not isinstance(o, int):
            return NotImplemented
        if o <= 0 or _lower(self._terms) is None or _lower(self._terms) < 0:
            # floor semantics of negative operands are not modelled: decide on the hint
            v = int(self)
            return v // o if kind == "//" else v % o
        if o == 1:
            return self if kind == "//" else 0
        if all(c % o == 0 for c in self._terms.values()):
            return _mk({m: c // o for m, c in self._terms.items()}) if kind == "//" else 0
        return SymInt({(_Div(kind, self, o),): 1})

    def __floordiv__(self, o):
        return self._div("//", o)

    def __mod__(self, o):
        return self._div("%", o)

    def __rfloordiv__(self, o):
        return o // int(self)

    def __rmod__(self, o):
        return o % int(self)

    def __truediv__(self, o):
        return int(self) / o

    def __rtruediv__(self, o):
        return o / int(self)

    def __pow__(self, e):
        if isinstance(e, int) and e >= 0:
            r: Any = 1
            for _ in range(e):
                r = r * self
            return r
        return int(self) ** e

    def __abs__(self):
        return self if self >= 0 else -self

    # ------------------------------------------------------------ decisions
    def _cmp(self, o, op: str) -> bool:
        if not isinstance(o, (int, SymInt)):
            return NotImplemented
        d = self - o
        if isinstance(d, int):
            return _OPS[op](d, 0)
        known = _decide(d._terms, op)
        if known is not None:
            return known
        result = _OPS[op](d.value(), 0)
        _record(self, o, op, result)
        return result

    def __eq__(self, o):
        return self._cmp(o, "==")

    def __ne__(self, o):
        return self._cmp(o, "!=")

    def __lt__(self, o):
        return self._cmp(o, "<")

    def __le__(self, o):
        return self._cmp(o, "<=")

    def __gt__(self, o):
        return self._cmp(o, ">")

    def __ge__(self, o):
        return self._cmp(o, ">=")

    def __bool__(self):
        return self._cmp(0, "!=")

    def __int__(self):
        v = self.value()
        _record(self, v, "==", True)
        return v

    __index__ = __int__

    def __float__(self):
        return float(int(self))

    def __hash__(self) -> int:
        return hash(self._key)

    # ------------------------------------------------------------ rendering
    def _render(self, how: str) -> str:
        parts = []
        for m, c in sorted(self._terms.items(), key=lambda mc: (-len(mc[0]), str(mc[0]))):
            atoms = [getattr(a, how)() for a in m]
            if not atoms:
                parts.append(str(c))
            elif c == 1:
                parts.append("*".join(atoms))
            elif c == -1:
                parts.append("-" + "*".join(atoms))
            else:
                parts.append("*".join([str(c)] + atoms))
        text = " + ".join(parts).replace("+ -", "- ")
        return f"({text})" if len(parts) > 1 else text

    def __str__(self) -> str:
        return self._render("c")

    def __repr__(self) -> str:
        return self._render("py")

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _decide(terms: dict, op: str) -> bool | None:
    """``poly op 0`` when the symbols' ranges decide it for every size, else None."""
    lb, ub = _lower(terms), _upper(terms)
    if op in ("==", "!="):
        if (lb is not None and lb > 0) or (ub is not None and ub < 0):
            return op == "!="
        return None
    if op == "<":
        return True if ub is not None and ub < 0 else (False if lb is not None and lb >= 0
                                                        else None)
    if op == "<=":
        return True if ub is not None and ub <= 0 else (False if lb is not None and lb > 0
                                                         else None)
    if op == ">":
        return True if lb is not None and lb > 0 else (False if ub is not None and ub <= 0
                                                       else None)
    return True if lb is not None and lb >= 0 else (False if ub is not None and ub < 0 else None)


# ---------------------------------------------------------------------- environments
BINDINGS: list = [None]  # run time: symbol -> size of the running call


class ShapeEnv:
    """The symbols of one compilation and the guards recorded about them."""

    def __init__(self):
        self.symbols: list[Symbol] = []
        self.guards: list[str] = []  # Python expressions over symbol names, all true
        self._seen: set[str] = set()
        self.specialized: dict[Symbol, tuple[int, str]] = {}
        self.shape_log: list = []  # (op, args, kwargs, expected metas) for revalidation
        self.notes: list[str] = []
        self.int_symbols: set[Symbol] = set()  # Python int arguments (automatic dynamic)

    def new_int_symbol(self, value: int, source: str) -> SymInt:
        """The symbol of a Python int argument: any value >= 0 (unlike a size, 0 and 1 are
        not special for an int; code that tests them records a guard)."""
        e = self.new_symbol(value, 0, None, source)
        self.int_symbols.add(e.as_symbol())
        return e

    def new_symbol(self, hint: int, lo: int = 2, hi: int | None = None, source: str = "",
                   strict: bool = False) -> SymInt:
        s = Symbol(len(self.symbols), hint, lo, hi, source, strict, id(self))
        self.symbols.append(s)
        return SymInt.symbol(s)

    def add_guard(self, text: str) -> None:
        if text not in self._seen:
            self._seen.add(text)
            self.guards.append(text)

    def specialize(self, sym: Symbol, why: str) -> None:
        if sym not in self.specialized:
            self.specialized[sym] = (sym.hint, why)
            self.add_guard(f"{sym.name} == {sym.hint}")

    def __enter__(self):
        STATE.shape_envs.append(self)
        return self

    def __exit__(self, *exc):
        STATE.shape_envs.pop()
        return False

    def range_guards(self) -> list[str]:
        out = []
        for s in self.symbols:
            if s in self.specialized:
                continue
            out.append(f"{s.name} >= {s.lo}")
            if s.hi is not None:
                out.append(f"{s.name} <= {s.hi}")
        return out

    def all_guards(self) -> list[str]:
        return self.range_guards() + self.guards

    def check_function(self) -> Callable[..., bool]:
        """``fn(*symbol_values) -> bool``: every range and recorded guard holds."""
        names = ", ".join(s.name for s in self.symbols) or "_"
        body = " and ".join(f"({g})" for g in self.all_guards()) or "True"
        env: dict = {}
        exec(f"def check({names}):\n    return {body}\n", env)
        return env["check"]

    def violations(self) -> list[str]:
        """Messages for marked-dynamic (strict) symbols the program specialised."""
        return [f"You marked {s.source} as dynamic but your code specialized it to be a "
                f"constant ({v}): {why}. If you're using mark_dynamic, either remove it or "
                "use maybe_mark_dynamic."
                for s, (v, why) in self.specialized.items() if s.strict]


def _record(a: SymInt, b, op: str, result: bool) -> None:
    env = STATE.shape_envs[-1]
    if env is None or BINDINGS[-1] is not None:
        return
    mine = set(env.symbols)
    if not symbols_of((a, b)) <= mine:  # e.g. a size cached from an earlier compilation
        raise RuntimeError("a symbolic size of another compilation was used")
    if op == "==" and result and isinstance(b, int):
        sym = a.as_symbol()
        if sym is not None:  # the symbol is this value: the entry is specialised to it
            env.specialize(sym, f"{sym.name} == {b} was tested")
            return
    text = f"{a!r} {op} {b!r}"
    env.add_guard(text if result else f"not ({text})")


def evaluate(x: Any, env: dict | None = None) -> Any:
    """``x`` with every SymInt (also inside lists/tuples) replaced by its value."""
    if isinstance(x, SymInt):
        return x.value(env)
    if isinstance(x, (list, tuple)) and any(isinstance(v, (SymInt, list, tuple)) for v in x):
        return type(x)(evaluate(v, env) for v in x) if not hasattr(x, "_fields") else \
            type(x)(*(evaluate(v, env) for v in x))
    return x


def has_symbols(x: Any) -> bool:
    if isinstance(x, SymInt):
        return True
    if isinstance(x, (list, tuple)):
        return any(has_symbols(v) for v in x)
    return False


def symbols_of(x: Any, out: set | None = None) -> set:
    out = set() if out is None else out
    if isinstance(x, SymInt):
        out |= x.symbols()
    elif isinstance(x, (list, tuple)):
        for v in x:
            symbols_of(v, out)
    return out


def fit(values: list[int], points: list[dict], candidates: Iterable) -> Any:
    """An expression over ``candidates`` (SymInts) equal to ``values[k]`` at every
    ``points[k]`` (symbol -> int): a constant, a candidate, a candidate plus a constant, or
    a rational multiple of a candidate; None when nothing fits."""
    if all(v == values[0] for v in values):
        return values[0]
    cands = list(candidates)
    evals = [[c.value(p) for p in points] for c in cands]
    for c, ev in zip(cands, evals):
        if ev == values:
            return c
    for c, ev in zip(cands, evals):
        off = values[0] - ev[0]
        if all(e + off == v for e, v in zip(ev, values)):
            return c + off
    for c, ev in zip(cands, evals):
        if ev[0] == 0:
            continue
        r = Fraction(values[0], ev[0])
        if r <= 0 or not all(Fraction(e) * r == v for e, v in zip(ev, values)):
            continue
        return (c * r.numerator) // r.denominator
    return None


def binding_sources(shapes: list[tuple]) -> dict:
    """For each symbol readable from a dimension of ``shapes``: ``(input index, dim, c, k)``
    with that dimension equal to ``c*symbol + k`` (a dimension equal to the symbol itself
    preferred)."""
    src: dict = {}
    for plain in (True, False):
        for i, shape in enumerate(shapes):
            for d, n in enumerate(shape):
                if not isinstance(n, SymInt):
                    continue
                lin = n.as_linear()
                if lin is None or (plain and lin[1:] != (1, 0)):
                    continue
                if lin[0] not in src:
                    src[lin[0]] = (i, d, lin[1], lin[2])
    return src


def graph_symbols(shapes: list[tuple]) -> list[Symbol]:
    out: set = set()
    for shape in shapes:
        symbols_of(tuple(shape), out)
    return sorted(out, key=lambda s: s.index)


def wrapper_bindings(shapes: list[tuple], array_expr: str = "inputs[{i}]._data"
                     ) -> list[tuple[str, str]]:
    """``(symbol name, Python expression)`` binding each symbol of a graph whose inputs have
    ``shapes`` from the inputs at run time; a symbol with no input dimension of its own is
    specialised to its hint (guarded)."""
    src = binding_sources(shapes)
    out = []
    for s in graph_symbols(shapes):
        if s in src:
            i, d, c, k = src[s]
            dim = f"{array_expr.format(i=i)}.shape[{d}]"
            out.append((s.name, dim if (c, k) == (1, 0) else f"({dim} - {k}) // {c}"))
        else:
            env = STATE.shape_envs[-1]
            if env is not None:
                env.specialize(s, "no graph input has it as a dimension")
            out.append((s.name, str(s.hint)))
    return out


def bind_calls(fn: Callable, shapes: list[tuple], nodes: Iterable = ()) -> Callable:
    """``fn(*flat_tensors)`` run with the symbols of a graph whose inputs have ``shapes``
    bound from those tensors' sizes (a no-op wrapper for static graphs). The SymInt
    arguments of ``nodes`` (graph call nodes, e.g. ``view(t0, (s0, -1))``) are replaced by
    their values for the duration of the call, so anything executing the nodes (an
    interpreter, an eager step of generated code) sees plain ints."""
    syms = graph_symbols(shapes)
    if not syms:
        return fn
    src = binding_sources(shapes)
    fixed = {s: s.hint for s in syms if s not in src}
    for s in fixed:  # no input has it as a dimension: the entry is valid only at the hint
        if STATE.shape_envs[-1] is not None:
            STATE.shape_envs[-1].specialize(s, "no graph input has it as a dimension")
    pairs = [(s, src[s]) for s in syms if s in src]
    sym_nodes = [(n, n.args, n.kwargs) for n in nodes
                 if has_symbols(n.args) or has_symbols(tuple(n.kwargs.values()))]

    def run(*flat):
        b = dict(fixed)
        for s, (i, d, c, k) in pairs:
            b[s] = (flat[i].shape[d] - k) // c
        BINDINGS.append(b)
        try:  # an unbound symbol must not leave the binding pushed (or nodes rewritten)
            for n, args, kwargs in sym_nodes:
                n.args = evaluate(args, b)
                n.kwargs = {k: evaluate(v, b) for k, v in kwargs.items()}
            return fn(*flat)
        finally:
            for n, args, kwargs in sym_nodes:
                n.args, n.kwargs = args, kwargs
            BINDINGS.pop()

    run.__wrapped__ = fn  # type: ignore[attr-defined]
    run._ember_binds = True  # type: ignore[attr-defined]
    return run


# ---------------------------------------------------------------------- symbolic ints
_CARRIERS: dict = {}


def size_carrier(n: int):
    """A tensor of shape ``(n,)`` with no memory of its own (stride 0): the extra graph input
    that carries the value of a symbolic Python int argument, so that the graph and its
    generated code bind the int's symbol from a dimension like every other symbol."""
    t = _CARRIERS.get(n)
    if t is None:
        from .._dtype import uint8
        from ..ops.creation import zeros
        t = zeros((), dtype=uint8).expand(n)
        if len(_CARRIERS) > 256:
            _CARRIERS.clear()
        _CARRIERS[n] = t
    return t


# ---------------------------------------------------------------------- marking tensors
class _Marks:
    __slots__ = ("static", "strict", "weak")

    def __init__(self, strict: dict, weak: set, static: set):
        self.strict, self.weak, self.static = strict, weak, static


_NO_MARKS = _Marks({}, set(), set())


def marks_of(t) -> _Marks:
    """The dims ``mark_dynamic`` / ``maybe_mark_dynamic`` / ``mark_static`` set on ``t``."""
    d = t.__dict__
    if "_ember_dynamic" not in d and "_ember_weak_dynamic" not in d and \
            "_ember_static" not in d:
        return _NO_MARKS
    return _Marks(d.get("_ember_dynamic", {}), d.get("_ember_weak_dynamic", set()),
                  d.get("_ember_static", set()))


def _dims(t, index) -> list[int]:
    idx = list(index) if isinstance(index, (list, tuple)) else [index]
    nd = t.ndim
    out = []
    for i in idx:
        if not isinstance(i, int) or not -max(nd, 1) <= i < max(nd, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(nd, 1)}, {max(nd, 1) - 1}], but got {i})")
        out.append(i % nd if nd else 0)
    return out


def mark_dynamic(t, index, *, min: int | None = None, max: int | None = None) -> None:
    """Make dim(s) ``index`` of ``t`` symbolic from the first compilation, over
    ``[min, max]`` (default ``[2, inf)``). Compiling fails with ConstraintViolationError if
    the program specialises such a dim (e.g. ``if x.shape[0] == 4``) or if its size is out
    of the range; a later call whose size leaves the range compiles a new entry."""
    if min is not None and max is not None and min > max:
        raise ValueError(f"mark_dynamic: min ({min}) must not exceed max ({max})")
    strict = t.__dict__.setdefault("_ember_dynamic", {})
    for d in _dims(t, index):
        strict[d] = (min, max)
        t.__dict__.get("_ember_static", set()).discard(d)


def maybe_mark_dynamic(t, index) -> None:
    """Like ``mark_dynamic`` but a hint: the program may specialise the dim silently."""
    weak = t.__dict__.setdefault("_ember_weak_dynamic", set())
    weak.update(_dims(t, index))


def mark_static(t, index=None) -> None:
    """Keep dim(s) ``index`` (all dims when None) of ``t`` static, even under
    ``dynamic=True`` or after a size change."""
    dims = list(range(t.ndim)) if index is None else _dims(t, index)
    t.__dict__.setdefault("_ember_static", set()).update(dims)
    for d in dims:
        t.__dict__.get("_ember_dynamic", {}).pop(d, None)
        t.__dict__.get("_ember_weak_dynamic", set()).discard(d)
