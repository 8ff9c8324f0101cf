"""Named tuples returned by multi-output reductions (``ember.return_types.max`` ...).

Each is a plain ``namedtuple`` (so it unpacks and indexes like a tuple) whose repr names it the
way PyTorch's ``torch.return_types`` does.
"""

from __future__ import annotations

from collections import namedtuple

__all__ = ["max", "min", "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax",
           "cummin", "aminmax"]


def _make(name: str, fields: tuple[str, str]):
    base = namedtuple(name, fields)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"ember.return_types.{name}(\n{body})"

    cls = type(name, (base,), {"__slots__": (), "__repr__": __repr__,
                               "__module__": "ember.return_types"})
    return cls


_VI = ("values", "indices")
max = _make("max", _VI)
min = _make("min", _VI)
sort = _make("sort", _VI)
topk = _make("topk", _VI)
kthvalue = _make("kthvalue", _VI)
median = _make("median", _VI)
nanmedian = _make("nanmedian", _VI)
mode = _make("mode", _VI)
cummax = _make("cummax", _VI)
cummin = _make("cummin", _VI)
aminmax = _make("aminmax", ("min", "max"))
