"""Op kernels compute through ``xp``, the array module the dispatcher hands them (numpy on
CPU; CuPy on CUDA), never through numpy directly: every ``np.<name>`` in ember/ops is either
metadata (dtypes, dtype questions, constants, type checks: ``METADATA`` below) or is marked
``# numpy-only: <why>``, on its line, the line before, or the line before a whole function's
``def``: a construct CuPy lacks or computes differently, host-side work on Python values, or
host computation on tensor data outside a kernel, each of which the CUDA backend (or a
rewrite in ember ops) must replace. The marks are the inventory of that work.

The dispatcher (registry.py, writes.py) calls no numpy at all: it asks the tensors'
backend (ember/backends/base.py)."""

from __future__ import annotations

import ast
import pathlib

import pytest

import ember

OPS_DIR = pathlib.Path(ember.__file__).parent / "ops"
DISPATCHER = {"bind.py", "arguments.py", "__init__.py"}

# numpy names that are no array work: dtypes and their questions, constants, type checks
METADATA = {
    "dtype", "bool_", "uint8", "int8", "int16", "int32", "int64", "intp", "uint16", "uint32",
    "uint64", "float16", "float32", "float64", "longdouble", "complex64", "complex128",
    "iinfo", "finfo", "issubdtype", "result_type", "promote_types", "can_cast",
    "integer", "signedinteger", "unsignedinteger", "floating", "complexfloating", "number",
    "generic", "bool", "inf", "nan", "pi", "e", "euler_gamma", "newaxis", "ndarray",
    "broadcast_shapes", "ndim", "min_scalar_type",
}


def _numpy_uses(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, name) of every ``np.<name>`` outside METADATA and not marked numpy-only: on its
    line, on the line before, or for a whole function by a mark on the line before its
    ``def`` (or its first decorator)."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)

    def mark_before(lineno: int) -> bool:
        return lineno > 1 and lines[lineno - 2].strip().startswith("# numpy-only:")

    whole = [(f.lineno, f.end_lineno) for f in ast.walk(tree)
             if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and
             mark_before(min([f.lineno] + [d.lineno for d in f.decorator_list]))]

    def marked(lineno: int) -> bool:
        return "# numpy-only:" in lines[lineno - 1] or mark_before(lineno) or \
            any(a <= lineno <= b for a, b in whole)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "np":
            name = node.attr
            if name == "linalg" or name in METADATA:
                continue
            if not marked(node.lineno):
                found.append((node.lineno, name))
    return found


def test_op_kernels_compute_through_xp():
    offenders = {}
    for path in sorted(OPS_DIR.glob("*.py")):
        if path.name in DISPATCHER:
            continue
        uses = _numpy_uses(path)
        if uses:
            offenders[path.name] = uses
    report = "\n".join(f"  ops/{f}:{line}: np.{name}" for f, uses in offenders.items()
                       for line, name in uses)
    assert not offenders, "numpy called directly in op kernels (use xp, or mark the line " \
        "'# numpy-only: <why>'):\n" + report


def test_numpy_only_inventory_is_explained():
    """Every marked line says why."""
    for path in sorted(OPS_DIR.glob("*.py")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if "# numpy-only:" in line:
                reason = line.split("# numpy-only:", 1)[1].strip()
                assert len(reason) >= 3, f"ops/{path.name}:{i}: a numpy-only mark needs a reason"


def test_kernels_get_only_the_listed_array_api():
    """The CPU backend hands its kernels ``xp_api.restricted(numpy)``: exactly the names of
    ``XP_API`` (and its linalg / stride_tricks lists), so every op the suite runs is held to
    the array API a second backend must provide; a kernel reaching for anything else fails
    where it runs."""
    from ember.backends import xp_api
    from ember.backends.cpu import BACKEND

    xp = BACKEND.xp
    public = {n for n in vars(xp) if not n.startswith("__")} - {"linalg", "lib", "fft"}
    assert public == set(xp_api.XP_API) | xp_api.EXTRAS
    assert {n for n in vars(xp.linalg) if not n.startswith("__")} == set(xp_api.LINALG)
    assert {n for n in vars(xp.fft) if not n.startswith("__")} == set(xp_api.FFT)
    with pytest.raises(AttributeError):
        xp.fft.fft  # noqa: B018  (numpy has it; the kernels' API does not)
    with pytest.raises(AttributeError):
        xp.polyfit  # noqa: B018
    x = ember.randn(4, 4)
    assert all(t._data is not None for t in (x.exp(), x.svd()[0], ember.cumsum(x, 0)))


def test_listed_names_are_used_by_some_kernel():
    """No dead entries: each listed name appears as ``xp.<name>`` (or as a kernel name string
    looked up with getattr) somewhere in ember."""
    import re

    from ember.backends import xp_api
    text = "\n".join(p.read_text() for p in OPS_DIR.parent.rglob("*.py"))
    used = set(re.findall(r"\bxp\.([A-Za-z_]\w*)", text)) | \
        set(re.findall(r"[\"']([a-z_0-9]+)[\"']", text))
    assert not (set(xp_api.XP_API) - used)
    fft_used = set(re.findall(r"\bxp\.fft\.([A-Za-z_]\w*)", text)) | used
    assert not (set(xp_api.FFT) - fft_used)
