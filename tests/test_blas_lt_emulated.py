"""blas.matmul's cuBLASLt path without a GPU: CuPy is stood in for by numpy arrays with device
addresses, and libcublasLt by an emulator that reads the descriptors the module sets (types,
rows, cols, leading dimensions, batch count and stride, transposes, epilogue, bias pointer,
alpha and beta) and computes ``D = alpha op(A) op(B) + beta C [+ bias]`` in column-major terms
from raw memory, refusing any read or write outside the arrays. So the row-major to
column-major mapping, the batch folding and the bias epilogue are checked here; that the real
library agrees with the header is tests/test_blas_lt_constants.py, and the GPU tier runs the
real thing (tests/test_cuda_blas.py)."""

from __future__ import annotations

import contextlib
import ctypes
import types

import ml_dtypes
import numpy as np
import pytest

from ember.backends.cuda import blas, blas_lt

DTYPES = {0: np.float32, 1: np.float64, 2: np.float16, 14: ml_dtypes.bfloat16}


class DevArray(np.ndarray):
    """A numpy array posing as a CuPy one: ``.data.ptr`` is its address."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])


class FakeCupy:
    def __init__(self):
        self.buffers = []  # (start, end, array): the memory the emulator may touch
        self.cuda = types.SimpleNamespace(
            runtime=types.SimpleNamespace(getDevice=lambda: 0),
            get_current_stream=lambda: types.SimpleNamespace(ptr=0),
            Device=lambda d: contextlib.nullcontext())

    def _own(self, a):
        a = a.view(DevArray)
        start = a.__array_interface__["data"][0]
        self.buffers.append((start, start + a.nbytes, a))
        return a

    def asarray(self, a, dtype=None):
        return self._own(np.array(a, dtype=dtype, copy=True))

    def empty(self, shape, dtype):
        return self._own(np.full(shape, np.nan, dtype) if np.dtype(dtype).kind == "f"
                         else np.zeros(shape, dtype))

    def ascontiguousarray(self, a):
        return self._own(np.ascontiguousarray(a))

    def broadcast_to(self, a, shape):
        return np.broadcast_to(a, shape, subok=True)

    def check(self, start, end):
        assert any(s <= start and end <= e for s, e, _ in self.buffers), "out of bounds"


class FakeLt:
    """cuBLASLt's descriptor semantics, from cublasLt.h, on host memory."""

    SIZES = {("desc", 3): 4, ("desc", 4): 4, ("desc", 7): 4, ("desc", 8): 8,
             ("layout", 5): 4, ("layout", 6): 8, ("pref", 1): 8, ("pref", 5): 4,
             ("pref", 6): 4, ("pref", 7): 4, ("pref", 8): 4}

    def __init__(self, cp):
        self.cp, self.objects, self.calls = cp, {}, []

    def _new(self, ref, kind, **fields):
        key = 0x1000 + 16 * len(self.objects)
        self.objects[key] = dict(kind=kind, **fields)
        ref._obj.value = key
        return 0

    def _set(self, kind, obj, attr, ref, size):
        o = self.objects[obj.value if isinstance(obj, ctypes.c_void_p) else obj]
        assert o["kind"] == kind and size == self.SIZES[(kind, attr)] == ctypes.sizeof(ref._obj)
        o[attr] = ref._obj.value
        return 0

    def cublasLtCreate(self, ref):
        return self._new(ref, "handle")

    def cublasLtMatmulDescCreate(self, ref, compute, scale):
        return self._new(ref, "desc", compute=compute, scale=scale)

    def cublasLtMatrixLayoutCreate(self, ref, dtype, rows, cols, ld):
        assert ld >= max(rows, 1)
        return self._new(ref, "layout", dtype=dtype, rows=rows, cols=cols, ld=ld)

    def cublasLtMatmulPreferenceCreate(self, ref):
        return self._new(ref, "pref")

    def cublasLtMatmulDescSetAttribute(self, *args):
        return self._set("desc", *args)

    def cublasLtMatrixLayoutSetAttribute(self, *args):
        return self._set("layout", *args)

    def cublasLtMatmulPreferenceSetAttribute(self, *args):
        return self._set("pref", *args)

    def _destroy(self, obj):
        del self.objects[obj.value if isinstance(obj, ctypes.c_void_p) else obj]
        return 0

    cublasLtMatmulDescDestroy = cublasLtMatrixLayoutDestroy = _destroy
    cublasLtMatmulPreferenceDestroy = _destroy

    def cublasLtMatmulAlgoGetHeuristic(self, hd, desc, a, b, c, d, pref, count, result, found):
        assert count >= 1 and self.objects[pref.value][1] == blas_lt.WORKSPACE_BYTES
        found._obj.value = 1
        result._obj.state = 0
        return 0

    def _matrices(self, ptr, lay):
        """The batch of column-major matrices a layout describes at an address, as a view."""
        dt = np.dtype(DTYPES[lay["dtype"]])
        rows, cols, ld = lay["rows"], lay["cols"], lay["ld"]
        count, stride = lay.get(5, 1), lay.get(6, 0)
        extent = ((count - 1) * stride + (cols - 1) * ld + rows) * dt.itemsize
        self.cp.check(ptr, ptr + extent)
        raw = np.ctypeslib.as_array((ctypes.c_char * extent).from_address(ptr)).view(dt)
        return np.lib.stride_tricks.as_strided(
            raw, (count, rows, cols), (stride * dt.itemsize, dt.itemsize, ld * dt.itemsize))

    def cublasLtMatmul(self, hd, desc, alpha, a, ad, b, bd, beta, c, cd, d, dd, algo, ws,
                       ws_bytes, stream):
        o = self.objects[desc.value if isinstance(desc, ctypes.c_void_p) else desc]
        lay = {k: self.objects[v.value if isinstance(v, ctypes.c_void_p) else v]
               for k, v in (("a", ad), ("b", bd), ("c", cd), ("d", dd))}
        ma = self._matrices(a, lay["a"]).astype(np.float64)
        mb = self._matrices(b, lay["b"]).astype(np.float64)
        if o.get(3, 0):
            ma = ma.transpose(0, 2, 1)
        if o.get(4, 0):
            mb = mb.transpose(0, 2, 1)
        r = alpha._obj.value * (ma @ mb)
        if beta._obj.value:
            r = r + beta._obj.value * self._matrices(c, lay["c"]).astype(np.float64)
        if o.get(7, 1) == blas_lt.EPILOGUE_BIAS:
            n = lay["d"]["rows"]
            dt = np.dtype(DTYPES[lay["d"]["dtype"]])
            self.cp.check(o[8], o[8] + n * dt.itemsize)
            raw = (ctypes.c_char * (n * dt.itemsize)).from_address(o[8])
            r = r + np.ctypeslib.as_array(raw).view(dt).astype(np.float64)[None, :, None]
        out = self._matrices(d, lay["d"])
        out[...] = np.broadcast_to(r, out.shape).astype(out.dtype)
        self.calls.append(dict(o, **{k: dict(v) for k, v in lay.items()}))
        return 0


@pytest.fixture
def emulated(monkeypatch):
    cp = FakeCupy()
    lt = FakeLt(cp)
    monkeypatch.setattr(blas, "cupy", lambda: cp)
    monkeypatch.setattr(blas_lt, "cupy", lambda: cp)
    monkeypatch.setattr(blas_lt, "library", lambda: lt)
    monkeypatch.setattr(blas_lt, "_handles", {})
    monkeypatch.setattr(blas_lt, "_plans", {})
    monkeypatch.setattr(blas, "_GEOMETRY", {})
    monkeypatch.setattr(blas_lt, "WORKSPACE_BYTES", 1 << 10)

    def no_fallback(*args, **kwargs):
        raise AssertionError("the emulated Lt offers every algorithm: no fallback expected")
    monkeypatch.setattr(blas, "_gemm", no_fallback)
    return cp, lt


def _arr(cp, shape, dtype, seed):
    return cp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _want(a, b, bias=None):
    r = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    return r if bias is None else r + np.asarray(bias, np.float64)


TOL = {np.float32: 1e-5, np.float64: 1e-12, np.float16: 2e-3, ml_dtypes.bfloat16: 2e-2}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", ["plain", "ta", "tb", "both", "batch", "bcast_a", "bcast_b",
                                  "vec_a", "vec_b", "ones", "offset"])
def test_layouts(case, dtype, emulated):
    cp, lt = emulated
    shapes = {"plain": ((5, 7), (7, 3)), "batch": ((2, 3, 5, 4), (2, 3, 4, 6)),
              "bcast_a": ((5, 4), (3, 4, 6)), "bcast_b": ((3, 5, 4), (4, 6)),
              "vec_a": ((7,), (7, 3)), "vec_b": ((5, 7), (7,)), "ones": ((1, 1), (1, 1)),
              "ta": ((7, 5), (7, 3)), "tb": ((5, 7), (3, 7)), "both": ((2, 7, 5), (2, 3, 7)),
              "offset": ((6, 7), (9, 3))}[case]
    a, b = _arr(cp, shapes[0], dtype, 0), _arr(cp, shapes[1], dtype, 1)
    if case in ("ta", "both"):
        a = np.swapaxes(a, -1, -2)
    if case in ("tb", "both"):
        b = np.swapaxes(b, -1, -2)
    if case == "offset":
        a, b = a[1:], b[2:]
    got = blas.matmul(a, b)
    np.testing.assert_allclose(np.asarray(got, np.float64), _want(a, b),
                               rtol=TOL[dtype], atol=TOL[dtype] * 8)
    assert len(lt.calls) == 1
    call = lt.calls[0]
    assert call[3] == (1 if case in ("tb", "both") else 0)      # Lt's A is our b
    assert call[4] == (1 if case in ("ta", "both") else 0)
    if case == "bcast_b":  # one b for a batch of a's: one tall product
        assert call["d"]["rows"] == 6 and call["d"]["cols"] == 15 and call["d"].get(5, 1) == 1
    if case == "bcast_a":
        assert call["b"][6] == 0 and call["a"][6] == 24 and call["d"][5] == 3


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("bias_shape", [(6,), (1, 6), (5, 6), (5, 1), ()], ids=str)
def test_bias(bias_shape, dtype, emulated):
    cp, lt = emulated
    a, b = _arr(cp, (2, 5, 4), dtype, 0), _arr(cp, (6, 4), dtype, 1).T
    bias = _arr(cp, bias_shape, dtype, 2)
    got = blas.matmul(a, b, bias=np.broadcast_to(bias, (2, 5, 6), subok=True))
    np.testing.assert_allclose(np.asarray(got, np.float64), _want(a, b, bias),
                               rtol=TOL[dtype], atol=TOL[dtype] * 8)
    epilogue = lt.calls[0].get(7, blas_lt.EPILOGUE_DEFAULT)
    row = bias_shape in ((6,), (1, 6))
    assert epilogue == (blas_lt.EPILOGUE_BIAS if row else blas_lt.EPILOGUE_DEFAULT)
    assert lt.calls[0]["d"]["rows"] == 6 and lt.calls[0]["d"]["cols"] == 10


def test_plans_are_cached_and_the_bias_pointer_follows(emulated):
    """One plan for a product whatever the bias's address (of one alignment): the epilogue
    reads the bias of each call."""
    cp, lt = emulated
    a, w = _arr(cp, (8, 4), np.float32, 0), _arr(cp, (6, 4), np.float32, 1)
    out = cp.empty((8, 6), np.float32)
    biases = _arr(cp, (3, 64), np.float32, 2)  # rows 256 bytes apart: one alignment
    before = blas_lt.STATS["heuristics"]
    for bias in biases:
        got = blas.matmul(a, w.T, out=out, bias=np.broadcast_to(bias[:6], (8, 6), subok=True))
        np.testing.assert_allclose(got, _want(a, w.T, bias[:6]), rtol=1e-5, atol=1e-5)
    assert blas_lt.STATS["heuristics"] - before == 1 and len(lt.calls) == 3
    assert len(blas_lt._plans) == 1
    blas.matmul(a, w.T, out=out)
    blas.matmul(a, w.T, out=out)
    assert len(blas_lt._plans) == 2 and blas_lt.STATS["heuristics"] - before == 2


def test_a_layout_is_worked_out_once(emulated):
    """The argument work of a product (broadcasting, layouts, the bias check) is cached per
    layout: later calls with other data of that layout reuse it; a layout cuBLAS cannot read
    in place (a strided row) is remembered as one for the general path, which copies."""
    cp, lt = emulated
    w = _arr(cp, (6, 4), np.float32, 1)
    bias = _arr(cp, (6,), np.float32, 2)
    for seed in range(3):
        a = _arr(cp, (2, 8, 4), np.float32, 10 + seed)
        got = blas.matmul(a, w.T, bias=bias)
        np.testing.assert_allclose(got, _want(a, w.T, bias), rtol=1e-5, atol=1e-5)
    assert len(blas._GEOMETRY) == 1 and len(lt.calls) == 3
    assert lt.calls[-1]["d"]["cols"] == 16  # the batch folded into one tall product
    strided = _arr(cp, (8, 8), np.float32, 3)[:, ::2]
    for _ in range(2):
        np.testing.assert_allclose(blas.matmul(strided, w.T), _want(strided, w.T), rtol=1e-5,
                                   atol=1e-5)
    assert [bool(g) for g in blas._GEOMETRY.values()] == [True, False]


def test_k_zero_and_empty(emulated):
    cp, lt = emulated
    a, b = _arr(cp, (3, 0), np.float32, 0), _arr(cp, (0, 2), np.float32, 1)
    assert np.array_equal(blas.matmul(a, b), np.zeros((3, 2), np.float32))
    bias = _arr(cp, (2,), np.float32, 2)
    got = blas.matmul(a, b, bias=np.broadcast_to(bias, (3, 2), subok=True))
    assert np.array_equal(got, np.broadcast_to(bias, (3, 2)))
    assert blas.matmul(_arr(cp, (0, 3), np.float32, 0), _arr(cp, (3, 2), np.float32, 1)).shape \
        == (0, 2)
    assert lt.calls == []


def test_no_algorithm_falls_back(emulated, monkeypatch):
    cp, lt = emulated
    monkeypatch.setattr(lt, "cublasLtMatmulAlgoGetHeuristic",
                        lambda *args: blas_lt.STATUS_NOT_SUPPORTED)
    seen = []
    monkeypatch.setattr(blas, "_gemm", lambda ga, gb, c, m, n, k, count, beta=0:
                        seen.append((m, n, k, count, beta)))
    a, b = _arr(cp, (5, 4), np.float32, 0), _arr(cp, (4, 6), np.float32, 1)
    bias = _arr(cp, (6,), np.float32, 2)
    out = blas.matmul(a, b, bias=np.broadcast_to(bias, (5, 6), subok=True))
    assert seen == [(5, 6, 4, 1, 1)] and lt.calls == []
    assert np.array_equal(out, np.broadcast_to(bias, (5, 6)))  # the bias copy, for beta=1


def test_lt_errors_name_the_call(emulated, monkeypatch):
    cp, lt = emulated
    monkeypatch.setattr(lt, "cublasLtMatmul", lambda *args: 13)
    a, b = _arr(cp, (5, 4), np.float32, 0), _arr(cp, (4, 6), np.float32, 1)
    with pytest.raises(RuntimeError, match=r"CUBLAS_STATUS_EXECUTION_FAILED when calling "
                                           r"`cublasLtMatmul\(handle, N, N, n=6, m=5, k=4"):
        blas.matmul(a, b)
