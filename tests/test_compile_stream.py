"""Non-temporal stores (codegen_c.streams / streamed, em_stream): kernels whose outputs pass
STREAM_MIN_BYTES compute each block of output into an L1 buffer and stream it out. Streaming
changes how the values reach memory, never the values: every case here compiles once with
streaming forced on every kernel and once with it off, and the two must agree bit for bit
(and with eager ember within tolerance). Each case also checks the streaming path was
generated."""

from __future__ import annotations

import numpy as np
import pytest
from compile_util import close, fresh_compiler, rand  # noqa: F401 (autouse fixture)

import ember
from ember.compiler import codegen_c, compile, reset

F = ember.nn.functional
DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16]


def _sources(cf) -> str:
    run = cf._entries[-1].run
    while hasattr(run, "__wrapped__"):
        run = run.__wrapped__
    parts = [run.forward, run.backward] if hasattr(run, "forward") else [run]
    return "\n".join(p.c_source for p in parts if p is not None)


def _compiled(fn, inputs, monkeypatch, stream: bool, grad: bool = False):
    """fn compiled with every kernel streaming (``stream``) or none; its outputs (and the
    inputs' gradients of their sum when ``grad``) and the generated C."""
    reset()
    big = 1 << 62
    monkeypatch.setattr(codegen_c, "STREAM_MIN_BYTES", 0 if stream else big)
    monkeypatch.setattr(codegen_c, "STREAM_MIN_ROW_BYTES", 0 if stream else big)
    ins = [x.detach().requires_grad_(grad) if x.is_floating_point() else x for x in inputs]
    cf = compile(fn)
    out = cf(*ins)
    outs = out if isinstance(out, tuple) else (out,)
    if grad:
        sum(o.float().sum() for o in outs).backward()
        outs = outs + tuple(x.grad for x in ins if x.requires_grad)
    return [o.detach() for o in outs], _sources(cf)


def _bitwise(a: ember.Tensor, b: ember.Tensor) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    x, y = (t.float().numpy() if t.dtype is ember.bfloat16 else t.numpy() for t in (a, b))
    assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), np.abs(x - y).max()


def check(fn, *inputs, monkeypatch, grad=False, expect_stream=True, scale=1.0):
    on, src_on = _compiled(fn, inputs, monkeypatch, True, grad)
    off, src_off = _compiled(fn, inputs, monkeypatch, False, grad)
    assert ("em_stream(" in src_on) == expect_stream, src_on
    assert "em_stream(" not in src_off
    for a, b in zip(on, off):
        _bitwise(a, b)
    if not grad:
        ref = fn(*inputs)
        close(on if isinstance(ref, tuple) else on[0], ref, scale)
    return src_on


def _scale(dt) -> float:
    return 4.0 if dt in (ember.float16, ember.bfloat16) else 1.0


@pytest.mark.parametrize("shape", [(3, 5000), (10007,), (2, 3, 4097), (5, 33), (1, 1)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_pointwise_outputs_stream(shape, dtype, monkeypatch):
    """Blocks of STREAM_BLOCK and a partial last block, several outputs of several dtypes
    (a bool one among them), a non-contiguous input."""
    a = rand(*shape, dtype=dtype)
    b = rand(*reversed(shape), dtype=dtype, seed=1)
    b = b.permute(*reversed(range(len(shape))))
    src = check(lambda x, y: ((x * y + 1).tanh(), x > y, F.gelu(x) * 2), a, b,
                monkeypatch=monkeypatch, scale=_scale(dtype))
    assert "em_stream_fence();" in src


def test_integer_outputs_stream(monkeypatch):
    a = ember.arange(3 * 3000).reshape(3, 3000)
    check(lambda x: (x * 3 - 7, (x % 5).to(ember.int32)), a, monkeypatch=monkeypatch)


@pytest.mark.parametrize("n", [33, 1000, 5000])
@pytest.mark.parametrize("dtype", DTYPES)
def test_row_outputs_stream(n, dtype, monkeypatch):
    """Softmax keeps exp(x - max) in a row buffer on the stack for its row pass; LayerNorm
    and a centred row have no kept values; log_softmax and a row sum beside them."""
    x = rand(6, n, dtype=dtype)
    w, b = rand(n, dtype=dtype, seed=2), rand(n, dtype=dtype, seed=3)
    fns = lambda t: (ember.softmax(t, -1), F.log_softmax(t, -1),
                     F.layer_norm(t, (n,), w, b), t - t.mean(-1, keepdim=True),
                     t.sum(-1))
    src = check(fns, x, monkeypatch=monkeypatch, scale=_scale(dtype))
    assert "kept_row[" in src


def test_long_rows_with_kept_values_do_not_stream(monkeypatch):
    """Past KEPT_ROW_MAX a row's kept values live in its output (read back from the cache),
    so softmax does not stream there; LayerNorm, which keeps nothing, still does."""
    n = codegen_c.KEPT_ROW_MAX + 5
    x = rand(3, n)
    check(lambda t: ember.softmax(t, -1), x, monkeypatch=monkeypatch, expect_stream=False)
    check(lambda t: F.layer_norm(t, (n,)), x, monkeypatch=monkeypatch)


def test_training_graphs_stream(monkeypatch):
    """Forward and backward kernels of a compiled training step (GELU, softmax and
    LayerNorm backward rows) stream and give the same gradients bit for bit."""
    x, w = rand(4, 1500), rand(1500, seed=1)

    def fn(t, weight):
        return ember.softmax(F.layer_norm(F.gelu(t), (1500,), weight) * 2, -1)
    check(fn, x, w, monkeypatch=monkeypatch, grad=True)


def test_threshold_is_bytes_of_all_outputs(monkeypatch):
    """A kernel streams from STREAM_MIN_BYTES of output (all its outputs together) and
    runs of STREAM_MIN_ROW_BYTES; below either it stores plainly."""
    reset()
    x = rand(4, 256)  # 4 KB of float32 per output
    monkeypatch.setattr(codegen_c, "STREAM_MIN_ROW_BYTES", 1024)
    for limit, two_outputs, expect in [(8192, True, True), (8193, True, False),
                                       (4096, False, True), (4097, False, False)]:
        reset()
        monkeypatch.setattr(codegen_c, "STREAM_MIN_BYTES", limit)
        cf = compile((lambda t: (ember.softmax(t, -1), F.log_softmax(t, -1)))  # one kernel
                     if two_outputs else (lambda t: t * 2))
        cf(x)
        assert ("em_stream(" in _sources(cf)) == expect, (limit, two_outputs)
    reset()
    monkeypatch.setattr(codegen_c, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(codegen_c, "STREAM_MIN_ROW_BYTES", 1025)  # rows of 1024 bytes
    cf = compile(lambda t: t * 2)
    cf(x)
    assert "em_stream(" not in _sources(cf)


def test_default_threshold_follows_the_cache():
    """Half the last-level cache: a 16 MB output streams on a machine with a 32 MB cache,
    the activations of a small model do not."""
    assert codegen_c.STREAM_MIN_BYTES == codegen_c._last_level_cache_bytes() // 2
    assert codegen_c.STREAM_MIN_BYTES >= 1 << 20
