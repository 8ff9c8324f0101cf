"""Matrix products on CUDA: ember's own thin binding to cuBLAS (ctypes), not ``cupy.matmul``.

CuPy 14's matmul refuses stream capture (its cuBLAS wrapper checks), crashes on batched
bfloat16 and computes batched float16 in float32 (reference/gpu-stack.md, section 3.1). Here
float16, bfloat16, float32 and float64 operands of one dtype run on the caller's current
stream through cuBLASLt (blas_lt.py: heuristically chosen kernels, a row-vector bias added in
the GEMM's epilogue), or, where cuBLASLt offers no algorithm, through one cuBLAS handle per
device running ``cublasGemmStridedBatchedEx``; both have preset workspaces, so nothing
allocates inside a captured CUDA graph. Other dtypes (integers, complex, mixed) go to CuPy.

Row-major products map onto column-major cuBLAS as ``C^T = B^T A^T``: a C-contiguous matrix
is its transpose in column-major order, and a transposed view of one (``x.mT`` of a contiguous
tensor) is passed with the transpose flag instead of being copied. Batch dimensions are
broadcast; a broadcast operand has batch stride 0.
"""

from __future__ import annotations

import ctypes
import functools
import threading

import ml_dtypes
import numpy as np

from . import blas_lt, settings
from .blas_lt import COMPUTE_32F, COMPUTE_32F_FAST_TF32, COMPUTE_64F, OP_N, OP_T
from .blas_lt import check as _check
from .runtime import cupy, nvidia_library

GEMM_DEFAULT = -1
# numpy dtype -> (cudaDataType, compute type, ctypes scalar of alpha and beta)
TYPES = {
    np.dtype(np.float16): (2, COMPUTE_32F, ctypes.c_float),
    np.dtype(ml_dtypes.bfloat16): (14, COMPUTE_32F, ctypes.c_float),
    np.dtype(np.float32): (0, COMPUTE_32F, ctypes.c_float),
    np.dtype(np.float64): (1, COMPUTE_64F, ctypes.c_double),
}
WORKSPACE_BYTES = 32 << 20


@functools.cache
def library() -> ctypes.CDLL:
    """libcublas, as CuPy's CUDA wheels provide it."""
    lib = nvidia_library("cublas", "ember's CUDA products")
    p, i, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    lib.cublasCreate_v2.argtypes = [ctypes.POINTER(p)]
    lib.cublasSetStream_v2.argtypes = [p, p]
    lib.cublasSetWorkspace_v2.argtypes = [p, p, ctypes.c_size_t]
    lib.cublasGemmStridedBatchedEx.argtypes = [
        p, i, i, i, i, i, p, p, i, i, i64, p, i, i, i64, p, p, i, i, i64, i, i, i]
    for fn in (lib.cublasCreate_v2, lib.cublasSetStream_v2, lib.cublasSetWorkspace_v2,
               lib.cublasGemmStridedBatchedEx):
        fn.restype = i
    return lib


_handles: dict[int, tuple] = {}
_lock = threading.Lock()


def handle(device: int) -> ctypes.c_void_p:
    """The device's cuBLAS handle (created once, with its workspace)."""
    h = _handles.get(device)
    if h is None:
        with _lock:
            h = _handles.get(device)
            if h is None:
                lib, cp = library(), cupy()
                with cp.cuda.Device(device):
                    hd = ctypes.c_void_p()
                    _check(lib.cublasCreate_v2(ctypes.byref(hd)), "cublasCreate")
                    workspace = cp.empty(WORKSPACE_BYTES, np.uint8)
                    _check(lib.cublasSetWorkspace_v2(hd, workspace.data.ptr, WORKSPACE_BYTES),
                           "cublasSetWorkspace")
                h = _handles[device] = (hd, workspace)
    return h[0]


def _gemm_layout(shape: tuple, strides: tuple, item: int):
    """``(transposed, leading dimension, batch stride)`` of a batch of matrices of this shape
    and these byte strides that cuBLAS reads in place; None where it needs a C-order copy."""
    rows, cols = shape[-2:]
    s_row, s_col = strides[-2:]
    # a dimension of size 1 may have any stride (numpy and CuPy call such arrays contiguous
    # whatever it is, so a copy would not change it)
    if (s_col == item or cols == 1) and (s_row == cols * item or rows == 1):
        trans, ld = False, max(cols, 1)
    elif (s_row == item or rows == 1) and (s_col == rows * item or cols == 1):
        trans, ld = True, max(rows, 1)
    else:
        return None
    # the batch dims must be one stride apart: collapse them, else copy
    batch = [(n, s) for n, s in zip(shape[:-2], strides[:-2]) if n != 1]
    if not batch or all(s == 0 for _, s in batch):
        return trans, ld, 0
    for (_, s), (n_next, s_next) in zip(batch, batch[1:]):
        if s != s_next * n_next:
            return None
    if batch[-1][1] % item:
        return None
    return trans, ld, batch[-1][1] // item


def _as_gemm_operand(a):
    """``(array, transposed, leading dimension, batch stride)`` of a batch of matrices whose
    last two dims cuBLAS can read in place (copied to C order where it cannot)."""
    layout = _gemm_layout(a.shape, a.strides, a.itemsize)
    if layout is None:
        a = cupy().ascontiguousarray(a)
        layout = _gemm_layout(a.shape, a.strides, a.itemsize)
    return (a, *layout)


# (shapes, strides, dtypes and bias layout of a product) -> its cuBLASLt geometry, or False
# where the general path must run (operand copies, a bias that is no row vector, empty)
_GEOMETRY: dict = {}


def _geometry(a, b, bias):
    """``(result shape, m, n, k, count, a's layout, b's layout)`` of ``a @ b [+ bias]`` where
    cuBLASLt reads both operands in place and the bias is a row vector for its epilogue (the
    batch folded into the rows where it can be); else False. Computed once per key."""
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.dtype not in TYPES:
        return False
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return False  # the general path raises the error
    count = 1
    for s in batch:
        count *= s
    shape = (*batch, m, n)
    if k != k2 or not (count and m and n and k) or (
            bias is not None and _bias_vector(bias, shape, a.dtype) is None):
        return False
    cp = cupy()
    la = cp.broadcast_to(a, (*batch, m, k))
    lb = cp.broadcast_to(b, (*batch, k, n))
    la, lb = _gemm_layout(la.shape, la.strides, a.itemsize), \
        _gemm_layout(lb.shape, lb.strides, b.itemsize)
    if la is None or lb is None:
        return False
    m, count, la = _fold(m, count, la, lb)
    return shape, m, n, k, count, la, lb


def _fold(m: int, count: int, la: tuple, lb: tuple) -> tuple:
    """One tall product for one ``b`` and a batch of row-major ``a``'s whose rows follow one
    another: ``(m, count, a's layout)`` after folding."""
    ta, lda, sa = la
    if count > 1 and lb[2] == 0 and not ta and sa == m * lda:
        return m * count, 1, (ta, lda, 0)
    return m, count, la


def matmul(a, b, out=None, bias=None):
    """``a @ b`` (numpy's matmul semantics) on CuPy arrays; ``bias`` (broadcastable to the
    result) is added in the product's float32 accumulator, so a half-precision ``a @ b + bias``
    rounds once, as PyTorch's addmm."""
    if out is None:  # the common case, its argument work cached per layout
        key = (a.shape, a.strides, b.shape, b.strides, a.dtype, b.dtype,
               None if bias is None else (bias.shape, bias.strides, bias.dtype))
        g = _GEOMETRY.get(key)
        if g is None:
            if len(_GEOMETRY) > 4096:
                _GEOMETRY.clear()
            g = _GEOMETRY[key] = _geometry(a, b, bias)
        if g:
            out = cupy().empty(g[0], a.dtype)
            if _lt_run(g[1:], a.data.ptr, b.data.ptr, out, bias):
                return out
            _GEOMETRY[key] = False  # no cuBLASLt algorithm: the general path from now on
    cp = cupy()
    if a.dtype != b.dtype or a.dtype not in TYPES or a.ndim == 0 or b.ndim == 0:
        r = cp.matmul(a, b) if out is None else cp.matmul(a, b, out=out)
        if bias is not None:
            r += bias
        return r
    vec_a, vec_b = a.ndim == 1, b.ndim == 1
    if vec_a:
        a = a[None, :]
    if vec_b:
        b = b[:, None]
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    if k != k2:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, "
                         f"with gufunc signature (n?,k),(k,m?)->(n?,m?) (size {k2} is different "
                         f"from {k})")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    shape = (*batch, m, n)
    count = 1
    for s in batch:
        count *= s
    if out is None:
        out = cp.empty(shape, a.dtype)
    if count and m and n and k:
        ga = _as_gemm_operand(cp.broadcast_to(a, (*batch, m, k)))
        gb = _as_gemm_operand(cp.broadcast_to(b, (*batch, k, n)))
        if not _lt_product(ga, gb, out, m, n, k, count, bias):
            if bias is not None:
                out[...] = bias
            _gemm(ga, gb, out, m, n, k, count, beta=0 if bias is None else 1)
    elif bias is not None:
        out[...] = bias
    elif count and m and n:  # k == 0: an empty sum
        out.fill(0)
    if vec_a:
        out = out[..., 0, :]
    if vec_b:
        out = out[..., 0]
    return out


def _compute_type(dtype, tf32: bool | None = None) -> int:
    """cuBLAS's compute type for ``dtype``: float32 products in TF32 where ``tf32`` (None:
    ``ember.backends.cuda.matmul.allow_tf32``, the setting of matmul and its kin)."""
    compute = TYPES[dtype][1]
    if compute == COMPUTE_32F and dtype == np.float32 and \
            (settings.allow_tf32() if tf32 is None else tf32):
        compute = COMPUTE_32F_FAST_TF32
    return compute


def _bias_vector(bias, shape: tuple, dtype):
    """The bias as a packed row of ``n`` values broadcast over the result's rows (and batch),
    the case cuBLASLt adds in its epilogue; else None."""
    if bias is None or bias.dtype != dtype:
        return None
    bias = cupy().broadcast_to(bias, shape)
    if any(s != 0 and d != 1 for s, d in zip(bias.strides[:-1], bias.shape[:-1])):
        return None
    if bias.strides[-1] != bias.itemsize and bias.shape[-1] != 1:
        return None
    return bias


def _lt_run(g: tuple, a_ptr: int, b_ptr: int, out, bias, beta: int = 0) -> bool:
    """``out [+]= a @ b [+ bias]`` through cuBLASLt (blas_lt.py) for a geometry ``(m, n, k,
    count, a's layout, b's layout)``, ``bias`` (or None) a row vector added in the epilogue;
    False (nothing written) where cuBLASLt has no algorithm for it."""
    m, n, k, count, (ta, lda, sa), (tb, ldb, sb) = g
    cp = cupy()
    dtype = out.dtype
    device = cp.cuda.runtime.getDevice()
    out_ptr = out.data.ptr
    bias_ptr = None if bias is None else bias.data.ptr
    p = blas_lt.plan(device, dtype, _compute_type(dtype), m, n, k, count, (a_ptr, ta, lda, sa),
                     (b_ptr, tb, ldb, sb), out_ptr, bias_ptr)
    if p is None:
        return False
    blas_lt.run(p, device, a_ptr, b_ptr, out_ptr, beta, bias_ptr,
                cp.cuda.get_current_stream().ptr,
                lambda: f"handle, {'T' if tb else 'N'}, {'T' if ta else 'N'}, n={n}, m={m}, "
                        f"k={k}, batch {count}, {dtype}"
                        f"{', bias epilogue' if bias is not None else ''}")
    return True


def _lt_product(ga, gb, out, m, n, k, count, bias) -> bool:
    """The product of operands laid out for cuBLAS (``_as_gemm_operand``) through cuBLASLt,
    the bias in its epilogue where it is a row vector, else copied into ``out`` first (beta
    1); False (nothing written) where cuBLASLt has no algorithm for it."""
    if not out.flags.c_contiguous:
        return False
    a, b = ga[0], gb[0]
    m, count, la = _fold(m, count, ga[1:], gb[1:])
    g = (m, n, k, count, la, gb[1:])
    vec = _bias_vector(bias, out.shape, out.dtype)
    if vec is not None and _lt_run(g, a.data.ptr, b.data.ptr, out, vec):
        return True
    # no bias, or one the epilogue cannot add: written first, then added by beta 1
    if bias is None:
        return _lt_run(g, a.data.ptr, b.data.ptr, out, None)
    if blas_lt.plan(cupy().cuda.runtime.getDevice(), out.dtype, _compute_type(out.dtype), m,
                    n, k, count, (a.data.ptr, *la), (b.data.ptr, *gb[1:]), out.data.ptr,
                    None) is None:
        return False
    out[...] = bias
    return _lt_run(g, a.data.ptr, b.data.ptr, out, None, beta=1)


def _gemm(ga, gb, c, m, n, k, count, beta=0, tf32: bool | None = None) -> None:
    """The product by ``cublasGemmStridedBatchedEx`` (where cuBLASLt has no algorithm; also
    the reference the Lt path was checked against); ``tf32`` as ``_compute_type``'s."""
    cp = cupy()
    a, ta, lda, sa = ga
    b, tb, ldb, sb = gb
    dtype_id, _, scalar = TYPES[a.dtype]
    compute = _compute_type(a.dtype, tf32)
    one, c_scale = scalar(1), scalar(beta)
    device = cp.cuda.runtime.getDevice()
    hd, lib = handle(device), library()
    _check(lib.cublasSetStream_v2(hd, cp.cuda.get_current_stream().ptr), "cublasSetStream")
    # column-major: C^T (n x m) = B^T (n x k) . A^T (k x m)
    _check(lib.cublasGemmStridedBatchedEx(
        hd, OP_T if tb else OP_N, OP_T if ta else OP_N, n, m, k, ctypes.byref(one),
        b.data.ptr, dtype_id, ldb, sb, a.data.ptr, dtype_id, lda, sa, ctypes.byref(c_scale),
        c.data.ptr, dtype_id, n, m * n, count, compute, GEMM_DEFAULT),
        f"cublasGemmStridedBatchedEx(handle, {'T' if tb else 'N'}, {'T' if ta else 'N'}, "
        f"{n}, {m}, {k}, ..., batch {count}, {a.dtype})")
    blas_lt.STATS["gemm_ex"] += 1


matmul.widens_half = True  # float16/bfloat16 accumulate in float32 and round once (linalg.py)


def gemm_launcher(a, b, c, beta: int = 0, tf32: bool | None = None):
    """``go(a_ptr, b_ptr, c_ptr)``: ``c = a @ b`` (``+ c`` when ``beta``) for 2-D operands laid
    out as these examples (shapes, strides, dtype; ``c`` C-contiguous) at other addresses, on
    the current stream: ``matmul``'s argument work done once, for a loop of many small
    products (a recurrent layer's steps); ``tf32`` as ``_compute_type``'s. None where an
    operand would need a copy or the dtype is not cuBLAS's."""
    cp = cupy()
    if a.dtype != b.dtype or a.dtype != c.dtype or a.dtype not in TYPES or a.ndim != 2 or \
            b.ndim != 2 or c.shape != (a.shape[0], b.shape[1]) or not c.flags.c_contiguous:
        return None
    m, k = a.shape
    n = b.shape[1]
    a2, ta, lda, _ = _as_gemm_operand(a)
    b2, tb, ldb, _ = _as_gemm_operand(b)
    if a2 is not a or b2 is not b or not (m and n and k):
        return None
    dtype_id, _, scalar = TYPES[a.dtype]
    compute = _compute_type(a.dtype, tf32)
    one, c_scale = scalar(1), scalar(beta)
    hd, lib = handle(cp.cuda.runtime.getDevice()), library()
    _check(lib.cublasSetStream_v2(hd, cp.cuda.get_current_stream().ptr), "cublasSetStream")
    fn, op_b, op_a = lib.cublasGemmStridedBatchedEx, OP_T if tb else OP_N, OP_T if ta else OP_N
    p_one, p_beta = ctypes.byref(one), ctypes.byref(c_scale)

    def go(a_ptr: int, b_ptr: int, c_ptr: int) -> None:
        status = fn(hd, op_b, op_a, n, m, k, p_one, b_ptr, dtype_id, ldb, 0, a_ptr, dtype_id,
                    lda, 0, p_beta, c_ptr, dtype_id, n, m * n, 1, compute, GEMM_DEFAULT)
        if status:
            _check(status, f"cublasGemmStridedBatchedEx(handle, {n}, {m}, {k}, {a.dtype})")
    # the operands' keep-alive is the caller's: only addresses are held here
    go.keep = (one, c_scale)
    return go

