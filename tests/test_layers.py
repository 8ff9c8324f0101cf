"""DESIGN.md's layers hold: every import inside ember points to the importer's own layer or a
lower one, no module inside the package imports the package root, and none imports torch.

The source is read with ``ast``, nothing is imported, so every import counts: at module level,
inside functions, under ``if TYPE_CHECKING``, and literal dynamic ones (``importlib.
import_module("x")``, ``__import__("x")``, ``sys.modules["x"]``, ``sys.modules.get("x")``).
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ember"
ROOT = "ember"

# DESIGN.md's layers, lowest first. A module may import from its own layer or a lower one; it
# belongs to the layer of the longest entry naming it or a package above it.
LAYERS = (
    ("ember._dtype", "ember._device", "ember._version"),
    ("ember.codegen",),
    ("ember.backends",),
    ("ember._dispatch", "ember._tensor", "ember._print", "ember._random"),
    ("ember.autograd",),
    ("ember.ops", "ember.return_types", "ember.linalg", "ember.random"),
    ("ember.nn", "ember.optim", "ember.utils", "ember.multiprocessing", "ember.serialization",
     "ember.amp", "ember.cpu", "ember.cuda", "ember.accelerator"),
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


def imports(module: str) -> list[tuple[int, str]]:
    """(line, imported module) for every import in ``module``'s source. Relative imports are
    resolved; ``from pkg import name`` imports ``pkg.name`` when that is a module, else
    ``pkg``."""
    path, is_pkg = MODULES[module]
    base = module if is_pkg else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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


def test_no_module_imports_torch():
    bad = [f"{_where(m, line)}: {m} -> {t}" for m in MODULES for line, t in imports(m)
           if t == "torch" or t.startswith("torch.")]
    assert not bad, "ember never imports torch (DESIGN.md, Dependencies):\n" + "\n".join(bad)
