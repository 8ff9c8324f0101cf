"""cuBLASLt binding (ember/backends/cuda/blas_lt.py) without a GPU: its enum values and struct
sizes against the header, written out here as literals so a typo in the module shows up in CI.

Source: cuBLAS 13.10.0.20 (pip wheel nvidia-cublas 13.10.0.20), include/cublasLt.h and
include/cublas_api.h, and include/library_types.h of nvidia-cuda-runtime 13. Where a libcublasLt
can be found (the GPU machine), the descriptors are also made and set through the library."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest

from ember.backends.cuda import blas_lt


def test_import_needs_no_gpu_stack():
    import subprocess
    code = ("import sys; import ember.backends.cuda.blas, ember.backends.cuda.blas_lt; "
            "print('cupy' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_enum_values_match_the_header():
    L = blas_lt
    assert (L.OP_N, L.OP_T) == (0, 1)                            # cublasOperation_t
    assert (L.COMPUTE_32F, L.COMPUTE_32F_FAST_TF32, L.COMPUTE_64F) == (68, 77, 70)
    assert (L.STATUS_INVALID_VALUE, L.STATUS_NOT_SUPPORTED) == (7, 15)
    assert L.STATUS == {1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
                        7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH",
                        11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
                        14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
                        16: "CUBLAS_STATUS_LICENSE_ERROR"}
    assert (L.CUDA_R_32F, L.CUDA_R_64F, L.CUDA_R_16F, L.CUDA_R_16BF) == (0, 1, 2, 14)
    # cublasLtMatmulDescAttributes_t
    assert (L.DESC_TRANSA, L.DESC_TRANSB, L.DESC_EPILOGUE, L.DESC_BIAS_POINTER) == (3, 4, 7, 8)
    # cublasLtMatrixLayoutAttribute_t
    assert (L.LAYOUT_BATCH_COUNT, L.LAYOUT_STRIDED_BATCH_OFFSET) == (5, 6)
    # cublasLtEpilogue_t
    assert (L.EPILOGUE_DEFAULT, L.EPILOGUE_BIAS) == (1, 4)
    # cublasLtMatmulPreferenceAttributes_t
    assert L.PREF_MAX_WORKSPACE_BYTES == 1
    assert (L.PREF_MIN_ALIGNMENT_A_BYTES, L.PREF_MIN_ALIGNMENT_B_BYTES,
            L.PREF_MIN_ALIGNMENT_C_BYTES, L.PREF_MIN_ALIGNMENT_D_BYTES) == (5, 6, 7, 8)


def test_types_table():
    import ml_dtypes
    t = blas_lt.TYPES
    assert t[np.dtype(np.float16)][:3] == (2, 68, 0)
    assert t[np.dtype(ml_dtypes.bfloat16)][:3] == (14, 68, 0)
    assert t[np.dtype(np.float32)][:3] == (0, 68, 0)
    assert t[np.dtype(np.float64)][:3] == (1, 70, 1)
    assert t[np.dtype(np.float64)][3] is ctypes.c_double


def test_struct_layouts():
    # cublasLtMatmulAlgo_t: uint64_t data[8]; cublasLtMatmulHeuristicResult_t: algo,
    # size_t workspaceSize, cublasStatus_t state, float wavesCount, int reserved[4]
    assert ctypes.sizeof(blas_lt.MatmulAlgo) == 64
    r = blas_lt.HeuristicResult
    assert ctypes.sizeof(r) == 96
    assert (r.workspaceSize.offset, r.state.offset, r.wavesCount.offset,
            r.reserved.offset) == (64, 72, 76, 80)


def test_every_called_function_is_declared():
    """``declare`` sets argtypes and an int restype on each function the module calls."""
    import inspect
    import re

    class Fn:
        argtypes = restype = None

    class Lib:
        def __getattr__(self, name):
            fn = Fn()
            setattr(self, name, fn)
            return fn

    lib = Lib()
    blas_lt.declare(lib)
    called = set(re.findall(r"lib\.(cublasLt\w+)", inspect.getsource(blas_lt)))
    assert called and called <= set(blas_lt.SIGNATURES)
    for name in blas_lt.SIGNATURES:
        fn = getattr(lib, name)
        assert fn.restype is ctypes.c_int and fn.argtypes, name
    assert len(blas_lt.SIGNATURES["cublasLtMatmul"]) == 16
    assert len(blas_lt.SIGNATURES["cublasLtMatmulAlgoGetHeuristic"]) == 10


def test_alignment():
    assert blas_lt.alignment(0x7F0000000000) == 256
    assert blas_lt.alignment(0x7F0000000040) == 64
    assert blas_lt.alignment(0x7F0000000002) == 2
    assert blas_lt.alignment(0x7F0000000300) == 256


def _host_library():
    try:
        from cuda import pathfinder
        return ctypes.CDLL(pathfinder.load_nvidia_dynamic_lib("cublasLt").abs_path)
    except Exception:
        pass
    for name in ("libcublasLt.so.13", "libcublasLt.so.12"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    pytest.skip("no libcublasLt on this machine (the GPU machine has one)")


def test_descriptors_through_the_library():
    """Descriptors are host objects: with the library, every attribute this module sets is
    accepted with the size used (a wrong size is refused) and reads back as set."""
    lib = _host_library()
    blas_lt.declare(lib)
    get_args = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                ctypes.POINTER(ctypes.c_size_t)]
    lib.cublasLtMatmulDescGetAttribute.argtypes = get_args
    lib.cublasLtMatrixLayoutGetAttribute.argtypes = get_args

    def readback(get, obj, attr):
        size, buf = ctypes.c_size_t(), ctypes.c_uint64(0)
        assert get(obj, attr, ctypes.byref(buf), 8, ctypes.byref(size)) in (0, 7)
        assert get(obj, attr, None, 0, ctypes.byref(size)) == 0
        assert get(obj, attr, ctypes.byref(buf), size.value, ctypes.byref(size)) == 0
        return size.value, buf.value

    desc = ctypes.c_void_p()
    assert lib.cublasLtMatmulDescCreate(ctypes.byref(desc), 77, 0) == 0
    setd, getd = lib.cublasLtMatmulDescSetAttribute, lib.cublasLtMatmulDescGetAttribute
    for attr, value in ((blas_lt.DESC_TRANSA, ctypes.c_int32(1)),
                        (blas_lt.DESC_TRANSB, ctypes.c_int32(0)),
                        (blas_lt.DESC_EPILOGUE, ctypes.c_uint32(blas_lt.EPILOGUE_BIAS)),
                        (blas_lt.DESC_BIAS_POINTER, ctypes.c_void_p(0x7F0000001000))):
        assert setd(desc, attr, ctypes.byref(value), ctypes.sizeof(value)) == 0
        assert setd(desc, attr, ctypes.byref(ctypes.c_int16(0)), 2) == 7
        assert readback(getd, desc, attr) == (ctypes.sizeof(value), value.value or 0)
    assert readback(getd, desc, 0) == (4, 77)  # CUBLASLT_MATMUL_DESC_COMPUTE_TYPE
    layout = ctypes.c_void_p()
    assert lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), 14, 768, 3072, 768) == 0
    setl, getl = lib.cublasLtMatrixLayoutSetAttribute, lib.cublasLtMatrixLayoutGetAttribute
    for attr, value in ((blas_lt.LAYOUT_BATCH_COUNT, ctypes.c_int32(12)),
                        (blas_lt.LAYOUT_STRIDED_BATCH_OFFSET, ctypes.c_int64(768 * 3072))):
        assert setl(layout, attr, ctypes.byref(value), ctypes.sizeof(value)) == 0
        assert readback(getl, layout, attr) == (ctypes.sizeof(value), value.value)
    assert [readback(getl, layout, a)[1] for a in (0, 2, 3, 4)] == [14, 768, 3072, 768]
    pref = ctypes.c_void_p()
    assert lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)) == 0
    setp = lib.cublasLtMatmulPreferenceSetAttribute
    workspace = ctypes.c_uint64(blas_lt.WORKSPACE_BYTES)
    for attr, value in ((blas_lt.PREF_MAX_WORKSPACE_BYTES, workspace),
                        (blas_lt.PREF_MIN_ALIGNMENT_A_BYTES, ctypes.c_uint32(16)),
                        (blas_lt.PREF_MIN_ALIGNMENT_D_BYTES, ctypes.c_uint32(2))):
        assert setp(pref, attr, ctypes.byref(value), ctypes.sizeof(value)) == 0
        assert setp(pref, attr, ctypes.byref(ctypes.c_int16(0)), 2) == 7
    assert lib.cublasLtMatmulPreferenceDestroy(pref) == 0
    assert lib.cublasLtMatrixLayoutDestroy(layout) == 0
    assert lib.cublasLtMatmulDescDestroy(desc) == 0
