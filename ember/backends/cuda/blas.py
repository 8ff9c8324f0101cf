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


def _as_gemm_operand(a):
    """``(array, transposed, leading dimension, batch stride)`` of a batch of matrices whose
    last two dims cuBLAS can read in place (copied to C order where it cannot)."""
    item = a.itemsize
    rows, cols = a.shape[-2:]
    s_row, s_col = a.strides[-2:]
    batch = a.shape[:-2]
    # a dimension of size 1 may have any stride (numpy and CuPy call such arrays contiguous
    # whatever it is, so a copy would not change it)
    if (s_col == item or cols == 1) and (s_row == cols * item or rows == 1):
        trans, ld = False, max(cols, 1)
    elif (s_row == item or rows == 1) and (s_col == rows * item or cols == 1):
        trans, ld = True, max(rows, 1)
    else:
        a = cupy().ascontiguousarray(a)
        return _as_gemm_operand(a)
    # the batch dims must be one stride apart: collapse them, else copy
    strides = [s for n, s in zip(batch, a.strides[:-2]) if n != 1]
    sizes = [n for n in batch if n != 1]
    if not sizes:
        return a, trans, ld, 0
    if all(s == 0 for s in strides):
        return a, trans, ld, 0
    for j in range(len(sizes) - 1):
        if strides[j] != strides[j + 1] * sizes[j + 1]:
            return _as_gemm_operand(cupy().ascontiguousarray(a))
    if strides[-1] % item:
        return _as_gemm_operand(cupy().ascontiguousarray(a))
    return a, trans, ld, strides[-1] // item


def matmul(a, b, out=None, bias=None):
    """``a @ b`` (numpy's matmul semantics) on CuPy arrays; ``bias`` (of the result's shape,
    broadcast views welcome) is added in the product's float32 accumulator, so a half-precision
    ``a @ b + bias`` rounds once, as PyTorch's addmm."""
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


def _compute_type(dtype) -> int:
    compute = TYPES[dtype][1]
    if compute == COMPUTE_32F and dtype == np.float32 and settings.allow_tf32():
        compute = COMPUTE_32F_FAST_TF32
    return compute


def _bias_vector(bias, out):
    """The bias as a packed row of ``n`` values broadcast over the result's rows (and batch),
    the case cuBLASLt adds in its epilogue; else None."""
    if bias is None or bias.dtype != out.dtype:
        return None
    bias = cupy().broadcast_to(bias, out.shape)
    if any(s != 0 and d != 1 for s, d in zip(bias.strides[:-1], bias.shape[:-1])):
        return None
    if bias.strides[-1] != bias.itemsize and bias.shape[-1] != 1:
        return None
    return bias


def _lt_product(ga, gb, out, m, n, k, count, bias) -> bool:
    """The product through cuBLASLt (blas_lt.py), the bias in its epilogue where it is a row
    vector; False (nothing written) where cuBLASLt has no algorithm for it."""
    if not out.flags.c_contiguous:
        return False
    cp = cupy()
    a, ta, lda, sa = ga
    b, tb, ldb, sb = gb
    if count > 1 and sb == 0 and not ta and sa == m * lda:
        # one b for a batch of row-major a's whose rows follow one another: one tall product
        m, count, sa = m * count, 1, 0
    dtype, compute = out.dtype, _compute_type(out.dtype)
    device = cp.cuda.runtime.getDevice()
    a_op, b_op = (a.data.ptr, ta, lda, sa), (b.data.ptr, tb, ldb, sb)
    vec = _bias_vector(bias, out)
    p = None
    if vec is not None:
        p = blas_lt.plan(device, dtype, compute, m, n, k, count, a_op, b_op, out.data.ptr,
                         vec.data.ptr)
    beta = 0
    if p is None:
        vec = None
        p = blas_lt.plan(device, dtype, compute, m, n, k, count, a_op, b_op, out.data.ptr, None)
        if p is None:
            return False
        if bias is not None:
            out[...] = bias
            beta = 1
    blas_lt.run(p, device, a.data.ptr, b.data.ptr, out.data.ptr, beta,
                None if vec is None else vec.data.ptr, cp.cuda.get_current_stream().ptr,
                lambda: f"handle, {'T' if tb else 'N'}, {'T' if ta else 'N'}, n={n}, m={m}, "
                        f"k={k}, batch {count}, {dtype}"
                        f"{', bias epilogue' if vec is not None else ''}")
    return True


def _gemm(ga, gb, c, m, n, k, count, beta=0) -> None:
    """The product by ``cublasGemmStridedBatchedEx`` (where cuBLASLt has no algorithm; also
    the reference the Lt path was checked against)."""
    cp = cupy()
    a, ta, lda, sa = ga
    b, tb, ldb, sb = gb
    dtype_id, _, scalar = TYPES[a.dtype]
    compute = _compute_type(a.dtype)
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


def gemm_launcher(a, b, c, beta: int = 0):
    """``go(a_ptr, b_ptr, c_ptr)``: ``c = a @ b`` (``+ c`` when ``beta``) for 2-D operands laid
    out as these examples (shapes, strides, dtype; ``c`` C-contiguous) at other addresses, on
    the current stream: ``matmul``'s argument work done once, for a loop of many small
    products (a recurrent layer's steps). None where an operand would need a copy or the dtype
    is not cuBLAS's."""
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
    dtype_id, compute, scalar = TYPES[a.dtype]
    if compute == COMPUTE_32F and a.dtype == np.float32 and settings.allow_tf32():
        compute = COMPUTE_32F_FAST_TF32
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

