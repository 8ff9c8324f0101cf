"""DESIGN.md's layers hold: every import inside ember points to the importer's own layer or a
lower one, no module inside the package imports the package root, none imports torch, and the
modules import each other without cycles.

The source is read with ``ast``, nothing is imported, so every import counts: at module level,
inside functions, under ``if TYPE_CHECKING``, and literal dynamic ones (``importlib.
import_module("x")``, ``__import__("x")``, ``sys.modules["x"]``, ``sys.modules.get("x")``).
For cycles, only imports that run count (not those under ``if TYPE_CHECKING``), and importing
a module also runs the ``__init__`` of each package above it that is not above the importer.
"""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ember"
ROOT = "ember"

# DESIGN.md's layers, lowest first. A module may import from its own layer or a lower one; it
# belongs to the layer of the longest entry naming it or a package above it.
LAYERS = (
    ("ember._dtype", "ember._device", "ember._version", "ember._stream"),
    ("ember.codegen",),
    ("ember.backends",),
    ("ember._dispatch", "ember._tensor", "ember._print", "ember._random"),
    ("ember.autograd",),
    ("ember.ops", "ember.return_types", "ember.linalg", "ember.fft", "ember.random"),
    ("ember.nn", "ember.optim", "ember.utils", "ember.multiprocessing", "ember.serialization",
     "ember.amp", "ember.cpu", "ember.cuda", "ember.accelerator", "ember.profiler"),
    ("ember.compiler", "ember._dynamo", "ember.jit", "ember.onnx"),
    ("ember.distributed",),
    ("ember.examples",),
)
# The package root imports every layer; only programs written against the public API
# (``import ember as torch``), which the root never imports, may import it.
ROOT_USERS = ("ember.examples",)

# Edges that break the rules for now, each with its reason. Once one is gone the test fails
# until its entry is removed here.
KNOWN: set = set()
# Import cycles allowed for now (each a frozenset of the modules of one strongly connected
# component), each with its reason; likewise removed once gone.
ALLOWED_CYCLES: set = set()


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, whether it is a package's __init__)."""
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return mods


MODULES = _modules()


def layer(module: str) -> int | None:
    best = None  # (layer, length of the entry that placed it)
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and \
                    (best is None or len(name) > best[1]):
                best = (i, len(name))
    return None if best is None else best[0]


_DYNAMIC_IMPORTS = ("importlib.import_module", "import_module", "__import__", "sys.modules.get")


def _literal_import(node: ast.AST) -> str | None:
    """The module a dynamic import or ``sys.modules`` lookup names with a literal string."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) in _DYNAMIC_IMPORTS and node.args:
        arg = node.args[0]
    elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "sys.modules":
        arg = node.slice
    else:
        return None
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` bodies (code that never runs)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                    "typing.TYPE_CHECKING"):
            ids.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return ids


def imports(module: str, runtime: bool = False) -> list[tuple[int, str]]:
    """(line, imported module) for every import in ``module``'s source (``runtime``: those
    outside ``if TYPE_CHECKING``). Relative imports are resolved; ``from pkg import name``
    imports ``pkg.name`` when that is a module, else ``pkg``."""
    path, is_pkg = MODULES[module]
    base = module if is_pkg else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_only(tree) if runtime else set()
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            pkg = node.module
            if node.level:
                pkg = base
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                pkg += f".{node.module}" if node.module else ""
            found += [(node.lineno, f"{pkg}.{a.name}" if f"{pkg}.{a.name}" in MODULES else pkg)
                      for a in node.names]
        elif (name := _literal_import(node)) is not None:
            found.append((node.lineno, name))
    return found


def _edges() -> list[tuple[str, int, str]]:
    """(importer, line, imported) for every import of an ember module by a module inside the
    package (the root's own imports excluded)."""
    return sorted({(m, line, t) for m in MODULES if m != ROOT for line, t in imports(m)
                   if t == ROOT or t.startswith(ROOT + ".")})


def _where(module: str, line: int) -> str:
    return f"{MODULES[module][0].relative_to(PACKAGE.parent)}:{line}"


def test_every_module_has_a_layer():
    unplaced = [m for m in MODULES if m != ROOT and layer(m) is None]
    assert not unplaced, ("modules in no layer (add them to LAYERS, as DESIGN.md places them):\n"
                          + "\n".join(unplaced))


def test_imports_point_down_and_never_to_the_root():
    bad = []
    for m, line, t in _edges():
        if (m, t) in KNOWN:
            continue
        if t == ROOT:
            if not m.startswith(ROOT_USERS):
                bad.append(f"{_where(m, line)}: {m} -> {t} (the package root)")
        elif None not in (layer(m), layer(t)) and layer(t) > layer(m):  # unplaced: see above
            bad.append(f"{_where(m, line)}: {m} -> {t} (layer {layer(m)} -> layer {layer(t)})")
    assert not bad, "imports against DESIGN.md's layers:\n" + "\n".join(bad)


def test_known_exceptions_are_still_needed():
    edges = {(m, t) for m, _, t in _edges()}
    stale = sorted(KNOWN - edges)
    assert not stale, ("no longer imported, remove from KNOWN: "
                       + ", ".join(f"{m} -> {t}" for m, t in stale))


# modules that look torch up in ``sys.modules`` (never import it): Triton's driver answers
# device and stream queries from torch when the user's program has imported it (the devices
# issue), so that torch's own Triton kernels keep running on torch's stream
TORCH_IF_PRESENT = {"ember.backends.cuda.triton_adapter"}


def test_no_module_imports_torch():
    bad = [f"{_where(m, line)}: {m} -> {t}" for m in MODULES for line, t in imports(m)
           if (t == "torch" or t.startswith("torch.")) and m not in TORCH_IF_PRESENT]
    assert not bad, "ember never imports torch (DESIGN.md, Dependencies):\n" + "\n".join(bad)


def test_torch_is_only_looked_up_where_present():
    for m in TORCH_IF_PRESENT:
        targets = {t for _, t in imports(m) if t == "torch" or t.startswith("torch.")}
        assert targets == {"torch"}, (m, targets)
        src = MODULES[m][0].read_text()
        assert not re.search(r"^\s*(import torch|from torch)", src, re.M), m


# ---------------------------------------------------------------------- cycles
def _import_graph() -> dict[str, dict[str, int]]:
    """importer -> {module it makes Python run: the first line that does}, for the imports
    that run; the package root left out (it imports everything, and nothing imports it)."""
    graph: dict[str, dict[str, int]] = {}
    for m in MODULES:
        if m == ROOT:
            continue
        out = graph.setdefault(m, {})
        for line, t in imports(m, runtime=True):
            if t == ROOT or not t.startswith(ROOT + "."):
                continue
            runs = [t]  # and the packages above it that are not above the importer
            pkg = t.rpartition(".")[0]
            while pkg != ROOT and not m.startswith(pkg + "."):
                runs.append(pkg)
                pkg = pkg.rpartition(".")[0]
            for r in runs:
                if r != m and r in MODULES:
                    out[r] = min(out.get(r, line), line)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[frozenset]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph.get(w, {}))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(frozenset(comp))
    return found


def _a_cycle(graph: dict[str, dict[str, int]], comp: frozenset) -> str:
    """One shortest cycle through the component's first module, each import with its line."""
    first = min(comp)
    prev: dict[str, str] = {}
    queue = [first]
    while queue:
        v = queue.pop(0)
        for w in graph[v]:
            if w in comp and w not in prev:
                prev[w] = v
                queue.append(w)
        if first in prev:
            break
    path = [first]
    while True:
        path.append(prev[path[-1]])
        if path[-1] == first:
            break
    path.reverse()
    return " -> ".join(f"{a} ({_where(a, graph[a][b])})" for a, b in zip(path, path[1:])) + \
        f" -> {first}"


def test_no_import_cycles():
    graph = _import_graph()
    bad = [c for c in _cycles(graph) if c not in ALLOWED_CYCLES]
    assert not bad, "import cycles (DESIGN.md: none; move what both sides need below them, or " \
        "register instead of importing):\n" + "\n".join(
            f"  {sorted(c)}:\n    {_a_cycle(graph, c)}" for c in bad)


def test_allowed_cycles_are_still_there():
    stale = ALLOWED_CYCLES - set(_cycles(_import_graph()))
    assert not stale, "no longer a cycle, remove from ALLOWED_CYCLES: " + \
        ", ".join(str(sorted(c)) for c in stale)


def test_import_ember_imports_no_triton_cupy_or_torch():
    """``import ember`` stays light: Triton, CuPy and torch load only where first used."""
    import subprocess
    import sys
    code = "import sys, ember; print(sorted(m for m in ('triton', 'cupy', 'torch') " \
           "if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=str(PACKAGE.parent), timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", (r.stdout, r.stderr[-1000:])
