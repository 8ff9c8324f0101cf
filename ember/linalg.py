"""``ember.linalg``: PyTorch's linear-algebra namespace. The functions live in the op table
(``ember/ops/linalg*.py``); this module gives them their ``torch.linalg`` names."""

from __future__ import annotations

from .ops.linalg import matmul, multi_dot
from .ops.linalg_decomp import (LinAlgError, det, inverse as inv, linalg_cholesky as cholesky,
                                linalg_eigh as eigh, linalg_eigvalsh as eigvalsh,
                                linalg_pinv as pinv, linalg_qr as qr, linalg_solve as solve,
                                linalg_svd as svd, linalg_svdvals as svdvals, matrix_power,
                                slogdet)
from .ops.linalg_norm import linalg_norm as norm, matrix_norm, vecdot, vector_norm
from .ops.linalg_struct import linalg_cross as cross

__all__ = ["LinAlgError", "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv",
           "matmul", "matrix_norm", "matrix_power", "multi_dot", "norm", "pinv", "qr", "slogdet",
           "solve", "svd", "svdvals", "vecdot", "vector_norm"]


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """linalg.diagonal(A, *, offset=0, dim1=-2, dim2=-1) -> Tensor: ``ember.diagonal`` with the
    matrix dimensions last by default."""
    from .ops.strided import diagonal as _diagonal
    return _diagonal(A, offset, dim1, dim2)
