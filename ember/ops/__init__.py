"""The op table. Importing this package registers every op family; ``bind_namespace`` binds the
table onto ``Tensor`` (methods, in-place variants, operators) and the public namespace."""

from __future__ import annotations

from .registry import OPS, OpDef, op  # noqa: F401
from . import (creation, pointwise, binary, complex, reduction, shape, indexing, linalg,  # noqa: F401
               random, nn_ops)
from .bind import bind_namespace  # noqa: F401
