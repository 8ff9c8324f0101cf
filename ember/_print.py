"""``repr(tensor)`` in PyTorch's format: ``tensor([1., 2.], requires_grad=True)``."""

from __future__ import annotations

import numpy as np

from . import _dtype as D

_opts = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    if profile == "default":
        _opts.update(precision=4, threshold=1000, edgeitems=3, linewidth=80)
    elif profile == "short":
        _opts.update(precision=2, threshold=1000, edgeitems=2, linewidth=80)
    elif profile == "full":
        _opts.update(precision=4, threshold=float("inf"), edgeitems=3, linewidth=80)
    for k, v in dict(precision=precision, threshold=threshold, edgeitems=edgeitems,
                     linewidth=linewidth).items():
        if v is not None:
            _opts[k] = v
    _opts["sci_mode"] = sci_mode


def _float_formatter(a: np.ndarray):
    finite = a[np.isfinite(a)]
    p = _opts["precision"]
    if finite.size == 0:
        return lambda x: _special(x) or f"{x:.{p}f}"
    absf = np.abs(finite)
    ints = bool(np.all(finite == np.round(finite)))
    amax, amin = float(absf.max()), float(absf.min()) if absf.size else 0.0
    nz = absf[absf > 0]
    nzmin = float(nz.min()) if nz.size else 0.0
    sci = _opts["sci_mode"]
    if sci is None:
        ratio = amax / nzmin if nz.size else 0.0
        sci = amax >= 1e8 or ratio > 1000.0 or (not ints and nz.size and nzmin < 1e-4)
    if sci:
        return lambda x: _special(x) or f"{x:.{p}e}"
    if ints:
        return lambda x: _special(x) or f"{x:.0f}."
    return lambda x: _special(x) or f"{x:.{p}f}"


def _shown(a: np.ndarray) -> np.ndarray:
    """The elements the repr will print (edges only when summarised)."""
    if a.size <= _opts["threshold"]:
        return a.reshape(-1)
    e = _opts["edgeitems"]
    for d in range(a.ndim):
        if a.shape[d] > 2 * e:
            a = np.concatenate([np.take(a, range(e), d), np.take(a, range(-e, 0), d)], d)
    return a.reshape(-1)


def _special(x) -> str | None:
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return None


def _body(a: np.ndarray, dtype, indent: int) -> str:
    if a.size == 0 and a.ndim == 1:
        return "[]"
    summarize = a.size > _opts["threshold"]
    if dtype.is_floating_point:
        a = a.astype(np.float64)
        fmt = _float_formatter(_shown(a))  # PyTorch formats from the printed elements
        shown = _shown(a)
        width = max((len(fmt(v)) for v in shown[np.isfinite(shown)]), default=0)
        formatter = {"float_kind": lambda v: fmt(v).rjust(width)}  # PyTorch aligns columns
    elif dtype.is_complex:
        p = _opts["precision"]
        formatter = {"complex_kind": lambda z: f"{z.real:.{p}f}{z.imag:+.{p}f}j"}
    elif dtype is D.bool_:
        width = 5 if not a.all() else 4
        formatter = {"bool": lambda b: ("True" if b else "False").rjust(width)}
    else:
        formatter = None
    text = np.array2string(a, separator=", ", formatter=formatter,
                           threshold=_opts["threshold"] if summarize else a.size + 1,
                           edgeitems=_opts["edgeitems"], max_line_width=_opts["linewidth"],
                           prefix=" " * indent)
    return text.replace(", ..., ", ",  ..., ")  # PyTorch's elision marker is " ..."


def _meta_repr(t) -> str:
    """A tensor without data, as PyTorch prints it: its device, size and non-default dtype,
    each suffix on a new line where the line would pass the print width."""
    suffixes = [f"device='{t.device}'", f"size={tuple(t._data.shape)}"]
    if t._dtype is not D.get_default_dtype():
        suffixes.append(f"dtype={t._dtype}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._leaf_rg:
        suffixes.append("requires_grad=True")
    text = "tensor(..."
    width = len(text) + 2  # PyTorch's count
    for s in suffixes:
        if width + len(s) + 2 > _opts["linewidth"]:
            text += ",\n" + " " * 7 + s
            width = 7 + len(s)
        else:
            text += ", " + s
            width += len(s) + 2
    return text + ")"


def tensor_repr(t) -> str:
    if not t._backend.has_data:
        return _meta_repr(t)
    a = t._backend.to_host(t._data)
    suffix = []
    if t._backend.name != "cpu":
        suffix.append(f"device='{t.device}'")
    dt = t._dtype
    if a.size == 0 and a.ndim > 1:
        body = "[]"
        suffix.append(f"size={tuple(a.shape)}")
    elif a.ndim == 0:
        body = _body(a.reshape(1), dt, 7)[1:-1]
    else:
        body = _body(a, dt, 7)
    default = dt in (D.get_default_dtype(), D.int64, D.bool_) or (
        dt is D.complex64 and D.get_default_dtype() is D.float32)
    if not default or (a.size == 0 and dt is not D.get_default_dtype()):
        suffix.append(f"dtype={dt}")
    if t.grad_fn is not None:
        suffix.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._leaf_rg:
        suffix.append("requires_grad=True")
    return _with_suffixes("tensor(" + body, suffix, 7) + ")"


def _with_suffixes(text: str, suffixes: list, indent: int) -> str:
    """``text, suffix, ...``, a suffix going to a new line (indented) where it would pass
    the line width, as PyTorch lays them out."""
    line = len(text) - text.rfind("\n") + 1  # PyTorch's count, one more than the last line's
    for s in suffixes:
        if line + len(s) + 2 > _opts["linewidth"]:
            text += ",\n" + " " * indent + s
            line = indent + len(s)
        else:
            text += ", " + s
            line += len(s) + 2
    return text
