"""The op table. Importing this package registers every op family; ``bind_namespace`` binds the
table onto ``Tensor`` (methods, in-place variants, operators) and the public namespace.

A family module may also list public functions that are not table entries (compositions such
as ``broadcast_shapes``) in ``PUBLIC``; they are exported as ``ember.<name>`` too.
"""

from __future__ import annotations

from .registry import OPS, OpDef, op  # noqa: F401
from . import (creation, pointwise, binary, selection, powers, complex, reduction,  # noqa: F401
               scans, sorting, shape, strided, joining, padding, indexing, index_ops, linalg,
               linalg_struct, linalg_einsum, linalg_decomp, linalg_norm, random, activations,
               losses, normalization, nn_ops, conv, attention, rnn_cells, rnn_layers,
               fft, fft_grad, fft_freq)
from .bind import bind_namespace as _bind

FAMILIES = (creation, pointwise, binary, selection, complex, reduction, scans, sorting, shape,
            strided, joining, padding, indexing, index_ops, linalg, linalg_struct, linalg_einsum,
            linalg_decomp, linalg_norm, random, activations, losses, normalization, nn_ops, conv,
            attention, rnn_cells, rnn_layers)


def bind_namespace(ns: dict) -> None:
    _bind(ns)
    for mod in FAMILIES:
        for name in getattr(mod, "PUBLIC", ()):
            if name in ns and ns[name] is not getattr(mod, name):
                raise RuntimeError(f"public name {name!r} is defined twice")
            ns[name] = getattr(mod, name)
