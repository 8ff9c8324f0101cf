"""Matrix products through cuBLASLt (ctypes), the fast path of blas.py's ``matmul``.

cuBLASLt picks its kernels by heuristics (on Hopper its "nvjet" kernels, which
``cublasGemmStridedBatchedEx`` does not reach for every shape) and adds a bias vector in the
GEMM's epilogue, so ``x @ w.T + b`` is one kernel instead of a bias copy plus a GEMM with
beta=1. One Lt handle per device with a workspace allocated once (nothing allocates inside a
captured CUDA graph); a product's descriptors and the heuristic's algorithm are made once per
(device, dtypes, shapes, strides, transposes, epilogue, pointer alignments) and cached, so a
repeated product is one ``cublasLtMatmul``.

blas.py states the product in column-major terms (``C^T = B^T A^T``) and hands it here:
``plan`` returns None where cuBLASLt has no algorithm, and blas.py then uses
``cublasGemmStridedBatchedEx``.

Every constant below is from cuBLAS 13.10's headers (cublasLt.h, cublas_api.h,
library_types.h); tests/test_blas_lt_constants.py repeats them as literals.
"""

from __future__ import annotations

import ctypes
import functools
import threading

import ml_dtypes
import numpy as np

from .runtime import cupy, nvidia_library

# cublas_api.h: cublasOperation_t, cublasComputeType_t, cublasStatus_t
OP_N, OP_T = 0, 1
COMPUTE_32F, COMPUTE_32F_FAST_TF32, COMPUTE_64F = 68, 77, 70
STATUS_NOT_SUPPORTED, STATUS_INVALID_VALUE = 15, 7
STATUS = {1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
          7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH",
          11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
          14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
          16: "CUBLAS_STATUS_LICENSE_ERROR"}
# library_types.h: cudaDataType_t
CUDA_R_32F, CUDA_R_64F, CUDA_R_16F, CUDA_R_16BF = 0, 1, 2, 14
# cublasLt.h: cublasLtMatmulDescAttributes_t (the value types are the header's)
DESC_TRANSA, DESC_TRANSB = 3, 4          # int32_t (cublasOperation_t)
DESC_EPILOGUE = 7                        # uint32_t (cublasLtEpilogue_t)
DESC_BIAS_POINTER = 8                    # const void *
# cublasLt.h: cublasLtMatrixLayoutAttribute_t
LAYOUT_BATCH_COUNT = 5                   # int32_t
LAYOUT_STRIDED_BATCH_OFFSET = 6          # int64_t, in elements
# cublasLt.h: cublasLtEpilogue_t
EPILOGUE_DEFAULT, EPILOGUE_BIAS = 1, 4
# cublasLt.h: cublasLtMatmulPreferenceAttributes_t
PREF_MAX_WORKSPACE_BYTES = 1             # uint64_t
PREF_MIN_ALIGNMENT_A_BYTES, PREF_MIN_ALIGNMENT_B_BYTES = 5, 6  # uint32_t, default 256
PREF_MIN_ALIGNMENT_C_BYTES, PREF_MIN_ALIGNMENT_D_BYTES = 7, 8

WORKSPACE_BYTES = 32 << 20
MAX_ALIGNMENT = 256  # the preference's default: cuBLASLt assumes pointers this aligned

# numpy dtype -> (cudaDataType of A, B, C and D, compute type, scale type, ctypes scalar)
TYPES = {
    np.dtype(np.float16): (CUDA_R_16F, COMPUTE_32F, CUDA_R_32F, ctypes.c_float),
    np.dtype(ml_dtypes.bfloat16): (CUDA_R_16BF, COMPUTE_32F, CUDA_R_32F, ctypes.c_float),
    np.dtype(np.float32): (CUDA_R_32F, COMPUTE_32F, CUDA_R_32F, ctypes.c_float),
    np.dtype(np.float64): (CUDA_R_64F, COMPUTE_64F, CUDA_R_64F, ctypes.c_double),
}

STATS = {"lt": 0, "lt_bias": 0, "heuristics": 0, "no_algorithm": 0, "gemm_ex": 0}


class MatmulAlgo(ctypes.Structure):
    """cublasLtMatmulAlgo_t: semi-opaque, ``uint64_t data[8]``."""
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t."""
    _fields_ = [("algo", MatmulAlgo), ("workspaceSize", ctypes.c_size_t),
                ("state", ctypes.c_int), ("wavesCount", ctypes.c_float),
                ("reserved", ctypes.c_int * 4)]


def check(status: int, call: str) -> None:
    if status:
        raise RuntimeError(f"CUDA error: {STATUS.get(status, status)} when calling `{call}`")


_p, _i, _u64, _i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64
_pp = ctypes.POINTER(ctypes.c_void_p)
# every function called, with its argument types (cublasLt.h); each returns cublasStatus_t
SIGNATURES = {
    "cublasLtCreate": [_pp],
    "cublasLtMatmulDescCreate": [_pp, _i, _i],
    "cublasLtMatmulDescSetAttribute": [_p, _i, _p, ctypes.c_size_t],
    "cublasLtMatmulDescDestroy": [_p],
    "cublasLtMatrixLayoutCreate": [_pp, _i, _u64, _u64, _i64],
    "cublasLtMatrixLayoutSetAttribute": [_p, _i, _p, ctypes.c_size_t],
    "cublasLtMatrixLayoutDestroy": [_p],
    "cublasLtMatmulPreferenceCreate": [_pp],
    "cublasLtMatmulPreferenceSetAttribute": [_p, _i, _p, ctypes.c_size_t],
    "cublasLtMatmulPreferenceDestroy": [_p],
    "cublasLtMatmulAlgoGetHeuristic": [_p, _p, _p, _p, _p, _p, _p, _i,
                                       ctypes.POINTER(HeuristicResult), ctypes.POINTER(_i)],
    # handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
    # workspace bytes, stream
    "cublasLtMatmul": [_p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p,
                       ctypes.POINTER(MatmulAlgo), _p, ctypes.c_size_t, _p],
}


def declare(lib) -> None:
    """Set argtypes and restype of every cuBLASLt function this module calls."""
    for name, args in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = _i


@functools.cache
def library() -> ctypes.CDLL:
    """libcublasLt, as CuPy's CUDA wheels provide it."""
    lib = nvidia_library("cublasLt", "ember's CUDA products")
    declare(lib)
    return lib


_handles: dict[int, tuple] = {}
_plans: dict[tuple, object] = {}
_lock = threading.Lock()        # handles
_plan_lock = threading.Lock()   # plans (making one takes _lock for the handle)


_workspaces: dict = {}  # device -> the Lt workspace array


def handle(device: int) -> tuple:
    """The device's ``(Lt handle, workspace address)``, created once."""
    h = _handles.get(device)
    if h is None:
        with _lock:
            h = _handles.get(device)
            if h is None:
                lib, cp = library(), cupy()
                with cp.cuda.Device(device):
                    hd = ctypes.c_void_p()
                    check(lib.cublasLtCreate(ctypes.byref(hd)), "cublasLtCreate")
                    workspace = cp.empty(WORKSPACE_BYTES, np.uint8)
                _workspaces[device] = workspace  # kept alive; calls pass its address
                h = _handles[device] = (hd, workspace.data.ptr)
    return h


def alignment(ptr: int) -> int:
    """The largest power of two (at most 256) dividing a device address."""
    return MAX_ALIGNMENT if ptr % MAX_ALIGNMENT == 0 else ptr & -ptr


def _set(setter, obj, attr: int, value, name: str) -> None:
    check(setter(obj, attr, ctypes.byref(value), ctypes.sizeof(value)), name)


class Plan:
    """A product's cuBLASLt descriptors and chosen algorithm (owned; freed with the plan)."""

    __slots__ = ("desc", "a", "b", "c", "algo", "scalar", "bias", "lock", "refs")

    def __init__(self, desc, scalar, bias: bool):
        self.desc, self.a, self.b, self.c = desc, None, None, None
        self.algo, self.scalar, self.bias, self.refs = None, scalar, bias, None
        self.lock = threading.Lock()

    def free(self, lib) -> None:
        for layout in (self.a, self.b, self.c):
            if layout:
                lib.cublasLtMatrixLayoutDestroy(layout)
        if self.desc:
            lib.cublasLtMatmulDescDestroy(self.desc)
        self.desc = self.a = self.b = self.c = None


def _layout(lib, dtype_id: int, rows: int, cols: int, ld: int, count: int, stride: int):
    """A column-major ``rows x cols`` matrix layout; a strided batch where ``count > 1``."""
    layout = ctypes.c_void_p()
    check(lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), dtype_id, rows, cols, ld),
          f"cublasLtMatrixLayoutCreate(..., {rows}, {cols}, {ld})")
    if count > 1:
        set_attr = lib.cublasLtMatrixLayoutSetAttribute
        _set(set_attr, layout, LAYOUT_BATCH_COUNT, ctypes.c_int32(count),
             "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)")
        _set(set_attr, layout, LAYOUT_STRIDED_BATCH_OFFSET, ctypes.c_int64(stride),
             "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)")
    return layout


def plan(device: int, dtype, compute: int, m: int, n: int, k: int, count: int,
         a_op: tuple, b_op: tuple, out_ptr: int, bias_ptr: int | None):
    """The cached plan of ``D (n x m, column-major, ld n, batch stride m*n) = op(B^T) op(A^T)
    [+ bias]``, or None where cuBLASLt offers no algorithm. ``a_op``/``b_op`` are
    ``(pointer, transposed, ld, batch stride)`` of the row-major operands ``a`` (m x k) and
    ``b`` (k x n); ``bias_ptr`` (a packed vector of length n, ``dtype``) asks for the bias
    epilogue."""
    a_ptr, ta, lda, sa = a_op
    b_ptr, tb, ldb, sb = b_op
    aligns = (alignment(b_ptr), alignment(a_ptr), alignment(out_ptr),
              0 if bias_ptr is None else alignment(bias_ptr))
    key = (device, dtype, compute, m, n, k, count, ta, lda, sa, tb, ldb, sb, aligns)
    p = _plans.get(key, False)
    if p is not False:
        return p
    with _plan_lock:
        p = _plans.get(key, False)
        if p is False:
            p = _plans[key] = _make_plan(device, dtype, compute, m, n, k, count, a_op, b_op,
                                         aligns, bias_ptr)
    return p


def _make_plan(device, dtype, compute, m, n, k, count, a_op, b_op, aligns, bias_ptr):
    lib = library()
    hd, _ = handle(device)
    dtype_id, _, scale_type, scalar = TYPES[dtype]
    _, ta, lda, sa = a_op
    _, tb, ldb, sb = b_op
    desc = ctypes.c_void_p()
    check(lib.cublasLtMatmulDescCreate(ctypes.byref(desc), compute, scale_type),
          "cublasLtMatmulDescCreate")
    p = Plan(desc, scalar, bias_ptr is not None)
    pref = ctypes.c_void_p()
    try:
        set_desc = lib.cublasLtMatmulDescSetAttribute
        # Lt's A is our b (n x k after op), Lt's B is our a (k x m after op); a layout
        # describes the stored matrix, before its transpose
        _set(set_desc, desc, DESC_TRANSA, ctypes.c_int32(OP_T if tb else OP_N),
             "cublasLtMatmulDescSetAttribute(TRANSA)")
        _set(set_desc, desc, DESC_TRANSB, ctypes.c_int32(OP_T if ta else OP_N),
             "cublasLtMatmulDescSetAttribute(TRANSB)")
        if bias_ptr is not None:
            # the bias vector has D's row count (n): one value per column of the row-major
            # result, broadcast over its rows; its type is D's (the header's default)
            _set(set_desc, desc, DESC_EPILOGUE, ctypes.c_uint32(EPILOGUE_BIAS),
                 "cublasLtMatmulDescSetAttribute(EPILOGUE)")
            _set(set_desc, desc, DESC_BIAS_POINTER, ctypes.c_void_p(bias_ptr),
                 "cublasLtMatmulDescSetAttribute(BIAS_POINTER)")
        p.a = _layout(lib, dtype_id, *((k, n) if tb else (n, k)), ldb, count, sb)
        p.b = _layout(lib, dtype_id, *((m, k) if ta else (k, m)), lda, count, sa)
        p.c = _layout(lib, dtype_id, n, m, n, count, m * n)
        check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)),
              "cublasLtMatmulPreferenceCreate")
        set_pref = lib.cublasLtMatmulPreferenceSetAttribute
        _set(set_pref, pref, PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(WORKSPACE_BYTES),
             "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)")
        for attr, align in zip((PREF_MIN_ALIGNMENT_A_BYTES, PREF_MIN_ALIGNMENT_B_BYTES,
                                PREF_MIN_ALIGNMENT_C_BYTES, PREF_MIN_ALIGNMENT_D_BYTES),
                               (aligns[0], aligns[1], aligns[2], aligns[2])):
            _set(set_pref, pref, attr, ctypes.c_uint32(align),
                 "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)")
        result, found = HeuristicResult(), ctypes.c_int(0)
        STATS["heuristics"] += 1
        status = lib.cublasLtMatmulAlgoGetHeuristic(hd, desc, p.a, p.b, p.c, p.c, pref, 1,
                                                    ctypes.byref(result), ctypes.byref(found))
        if status in (STATUS_NOT_SUPPORTED, STATUS_INVALID_VALUE) or (
                status == 0 and (found.value < 1 or result.state != 0)):
            STATS["no_algorithm"] += 1
            p.free(lib)
            return None
        check(status, f"cublasLtMatmulAlgoGetHeuristic(n={n}, m={m}, k={k}, batch {count}, "
                      f"{dtype})")
        p.algo = MatmulAlgo()
        ctypes.memmove(ctypes.byref(p.algo), ctypes.byref(result.algo),
                       ctypes.sizeof(MatmulAlgo))
        # what every call passes by reference, made once: alpha 1, beta 0 or 1, the algorithm
        p.refs = (ctypes.byref(scalar(1)), (ctypes.byref(scalar(0)), ctypes.byref(scalar(1))),
                  ctypes.byref(p.algo))
        return p
    except BaseException:
        p.free(lib)
        raise
    finally:
        if pref:
            lib.cublasLtMatmulPreferenceDestroy(pref)


def run(p: Plan, device: int, a_ptr: int, b_ptr: int, out_ptr: int, beta: int,
        bias_ptr: int | None, stream_ptr: int, what) -> None:
    """``out = op(b^T) op(a^T) [+ bias] [+ out]`` in column-major terms, by a plan of
    ``plan``; ``beta`` (0 or 1) adds the output's current values (a copy of the bias);
    ``what`` (a string, or a function making one) names the call in an error."""
    lib = library()
    hd, workspace = handle(device)
    alpha, betas, algo = p.refs
    if p.bias:
        with p.lock:  # the bias pointer lives in the shared descriptor
            _set(lib.cublasLtMatmulDescSetAttribute, p.desc, DESC_BIAS_POINTER,
                 ctypes.c_void_p(bias_ptr), "cublasLtMatmulDescSetAttribute(BIAS_POINTER)")
            status = lib.cublasLtMatmul(hd, p.desc, alpha, b_ptr, p.a, a_ptr, p.b, betas[beta],
                                        out_ptr, p.c, out_ptr, p.c, algo, workspace,
                                        WORKSPACE_BYTES, stream_ptr)
        STATS["lt_bias"] += 1
    else:
        status = lib.cublasLtMatmul(hd, p.desc, alpha, b_ptr, p.a, a_ptr, p.b, betas[beta],
                                    out_ptr, p.c, out_ptr, p.c, algo, workspace,
                                    WORKSPACE_BYTES, stream_ptr)
    if status:  # the message only where it is needed (formatting it costs microseconds)
        check(status, f"cublasLtMatmul({what() if callable(what) else what})")
    STATS["lt"] += 1
