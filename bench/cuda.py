"""The CUDA backend against PyTorch on the same GPU: small-op overhead, memory-bound and
compute-bound kernels, and a small training step. ember and torch alternate rounds in one
process (bench/harness.py). Small ops are timed issue to issue (no synchronisation per call,
as a training loop issues them); large ones synchronise after each batch of ``REPEAT`` calls,
so the time is the GPU's."""

from __future__ import annotations

import numpy as np

from .harness import run

REPEAT = 10


def _sync(lib):
    lib.cuda.synchronize()


def _on_gpu(lib, a, dtype=None):
    t = lib.tensor(a).cuda()
    return t if dtype is None else t.to(getattr(lib, dtype))


def cases():
    rng = np.random.default_rng(0)
    small = rng.standard_normal((8, 8)).astype(np.float32)
    big = rng.standard_normal((4096, 4096)).astype(np.float32)  # 16M elements
    m = rng.standard_normal((4096, 4096)).astype(np.float32)
    huge = rng.standard_normal((8192, 8192)).astype(np.float32)
    batch = rng.standard_normal((16, 1024, 1024)).astype(np.float32)
    acts = rng.standard_normal((16384, 768)).astype(np.float32)  # a bias gradient's input

    def small_op(body):
        def make(lib):
            x, y = _on_gpu(lib, small), _on_gpu(lib, small)
            return lambda: body(lib, x, y)
        return make

    def repeated(body, a, b, dtype=None):
        def make(lib):
            x, y = _on_gpu(lib, a, dtype), _on_gpu(lib, b, dtype)

            def step():
                for _ in range(REPEAT):
                    body(lib, x, y)
                _sync(lib)
            return step
        return make

    def mlp(lib):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Linear(512, 2048), lib.nn.GELU(),
                                lib.nn.Linear(2048, 512)).cuda()
        opt = lib.optim.AdamW(net.parameters(), lr=1e-3)
        x = _on_gpu(lib, rng.standard_normal((256, 512)).astype(np.float32))

        def step():
            opt.zero_grad()
            net(x).square().mean().backward()
            opt.step()
            _sync(lib)
        return step

    return [
        ("add 8x8 (issue to issue)", small_op(lambda lib, x, y: x + y)),
        ("tanh 8x8 (issue to issue; generated Triton)", small_op(lambda lib, x, y: x.tanh())),
        ("mul+sum 8x8 (issue to issue)", small_op(lambda lib, x, y: (x * y).sum())),
        ("matmul 8x8 (issue to issue)", small_op(lambda lib, x, y: x @ y)),
        (f"add 16M float32 (x{REPEAT})", repeated(lambda lib, x, y: x + y, big, big)),
        (f"add 16M bfloat16 (x{REPEAT})",
         repeated(lambda lib, x, y: x + y, big, big, "bfloat16")),
        (f"sigmoid 16M float32 (x{REPEAT}; generated Triton)",
         repeated(lambda lib, x, y: x.sigmoid(), big, big)),
        (f"tanh 16M bfloat16 (x{REPEAT}; generated Triton)",
         repeated(lambda lib, x, y: x.tanh(), big, big, "bfloat16")),
        (f"softmax 4096x4096 float32 (x{REPEAT})",
         repeated(lambda lib, x, y: x.softmax(-1), big, big)),
        (f"sum over rows 16384x768 bf16 -> 768 (x{REPEAT})",
         repeated(lambda lib, x, y: x.sum(0), acts, acts, "bfloat16")),
        (f"sum of each row 16384x768 bf16 -> 16384 (x{REPEAT})",
         repeated(lambda lib, x, y: x.sum(-1), acts, acts, "bfloat16")),
        (f"sum 16M float32 (x{REPEAT})", repeated(lambda lib, x, y: x.sum(), big, big)),
        (f"layer_norm 4096x4096 float32 (x{REPEAT})", repeated(
            lambda lib, x, y: lib.nn.functional.layer_norm(x, (4096,)), big, big)),
        (f"matmul 4096^3 float32 (x{REPEAT})", repeated(lambda lib, x, y: x @ y, m, m)),
        (f"matmul 4096^3 float16 (x{REPEAT})",
         repeated(lambda lib, x, y: x @ y, m, m, "float16")),
        (f"matmul 8192^3 bfloat16 (x{REPEAT})",
         repeated(lambda lib, x, y: x @ y, huge, huge, "bfloat16")),
        (f"bmm 16x1024^3 bfloat16 (x{REPEAT})",
         repeated(lambda lib, x, y: lib.bmm(x, y), batch, batch, "bfloat16")),
        ("MLP 512-2048-512 train step, batch 256", mlp),
        ("CNN train step (ResNet-like, conv+BN+pool, batch 64 at 64x64, SGD momentum)",
         _cnn_step),
        ("LSTM layer fwd+bwd (256->512, seq 128, batch 64, fp32)", _lstm_layer),
        ("AdamW step, 148 params (GPT-2-like sizes, fp32; fused=True)", _adamw_gpt2),
        *_sdpa_cases(),
    ]


def _resnet_like(lib):
    """A small ResNet: a 3x3 stem (64) with batch norm, ReLU and max pooling, four basic
    blocks (64, 128, 256, 512; stride 2 from the second, with 1x1 projections), adaptive
    average pooling and a linear layer to 10 classes."""
    nn = lib.nn

    def conv_bn(cin, cout, k, stride):
        return [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(*conv_bn(cin, cout, 3, stride), nn.ReLU(),
                                      *conv_bn(cout, cout, 3, 1))
            self.skip = nn.Sequential(*conv_bn(cin, cout, 1, stride)) \
                if stride != 1 or cin != cout else nn.Identity()

        def forward(self, x):
            return (self.body(x) + self.skip(x)).relu()

    return nn.Sequential(*conv_bn(3, 64, 3, 1), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                         Block(64, 64, 1), Block(64, 128, 2), Block(128, 256, 2),
                         Block(256, 512, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(512, 10))


def _cnn_step(lib):
    """One training step of ``_resnet_like`` on a batch of 64 64x64 images, float32."""
    rng = np.random.default_rng(2)
    lib.manual_seed(0)
    net = _resnet_like(lib).cuda()
    opt = lib.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x = _on_gpu(lib, rng.standard_normal((64, 3, 64, 64)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 10, 64)).cuda()

    def step():
        opt.zero_grad()
        lib.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        _sync(lib)
    return step


def _lstm_layer(lib):
    """nn.LSTM(256, 512) over a (128, 64, 256) float32 sequence: forward, then
    output.sum().backward() (torch: cuDNN's LSTM)."""
    lib.manual_seed(0)
    net = lib.nn.LSTM(256, 512).cuda()
    x = _on_gpu(lib, np.random.default_rng(2).standard_normal((128, 64, 256))
                .astype(np.float32)).requires_grad_()

    def step():
        x.grad = None
        for p in net.parameters():
            p.grad = None
        out, _ = net(x)
        out.sum().backward()
        _sync(lib)
    return step


def _gpt2_shapes() -> list:
    """GPT-2 small's 148 parameter shapes (124M elements)."""
    layer = [(768,), (768,), (768, 2304), (2304,), (768, 768), (768,), (768,), (768,),
             (768, 3072), (3072,), (3072, 768), (768,)]
    return [(50257, 768), (1024, 768)] + layer * 12 + [(768,), (768,)]


def _adamw_gpt2(lib):
    """One optimizer step over GPT-2's parameters with their gradients in place."""
    ps = [lib.zeros(s, device="cuda", requires_grad=True) for s in _gpt2_shapes()]
    for p in ps:
        p.grad = lib.full_like(p, 1e-3)
    opt = lib.optim.AdamW(ps, lr=1e-4, fused=True)

    def step():
        opt.step()
        _sync(lib)
    return step


SDPA_SHAPE = (8, 12, 2048, 64)  # B, H, S, D: causal bf16 attention, as a GPT block runs it


def _sdpa_cases():
    """Causal bf16 attention forward, and forward + backward, each library pinned to its flash
    kernel (torch: ``sdpa_kernel(SDPBackend.FLASH_ATTENTION)``); ``REPEAT`` calls per step."""
    rng = np.random.default_rng(1)
    host = [rng.standard_normal(SDPA_SHAPE).astype(np.float32) for _ in range(4)]

    def make(backward):
        def build(lib):
            q, k, v, g = (_on_gpu(lib, a, "bfloat16") for a in host)
            if backward:
                for t in (q, k, v):
                    t.requires_grad_()
            attention = lib.nn.attention

            def step():
                with attention.sdpa_kernel(attention.SDPBackend.FLASH_ATTENTION):
                    for _ in range(REPEAT):
                        out = lib.nn.functional.scaled_dot_product_attention(q, k, v,
                                                                             is_causal=True)
                        if backward:
                            q.grad = k.grad = v.grad = None
                            out.backward(g)
                _sync(lib)
            return step
        return build
    shape = "x".join(map(str, SDPA_SHAPE))
    return [(f"SDPA causal {shape} bf16 fwd", make(False)),
            (f"SDPA causal {shape} bf16 fwd+bwd", make(True))]


def _print_sdpa_tflops(rows) -> None:
    """TFLOP/s of the SDPA rows (causal: half of 4 B H S^2 D for the forward; the backward
    is 2.5 times the forward)."""
    B, H, S, D = SDPA_SHAPE
    fwd = 4 * B * H * S * S * D / 2
    for name, times, _ in rows:
        if name.startswith("SDPA"):
            flops = fwd * (3.5 if name.endswith("fwd+bwd") else 1.0) * REPEAT
            print(f"{name}: " + ", ".join(f"{lib} {flops / t / 1e12:.0f} TFLOP/s"
                                         for lib, t in times.items()))


def main() -> None:
    import ember
    import torch
    if not ember.cuda.is_available() or not torch.cuda.is_available():
        print("\n## cuda: skipped (needs a GPU, ember's CUDA backend and a CUDA build of torch)")
        return
    print(f"\n{ember.cuda.get_device_name()}; torch {torch.__version__}")
    # both libraries at PyTorch's defaults, set explicitly: float32 matrix products in IEEE,
    # float32 convolutions (cuDNN's; ember's implicit GEMM) in TensorFloat-32
    for lib in (ember, torch):
        lib.backends.cuda.matmul.allow_tf32 = False
        lib.backends.cudnn.allow_tf32 = True
    rows = run("CUDA: ember vs torch on one GPU", cases(), [("ember", ember), ("torch", torch)],
               budget=1.0)
    _print_sdpa_tflops(rows)
    _print_bandwidth((ember, torch))


def _print_bandwidth(libs, calls: int = 50, rounds: int = 5) -> None:
    """The GPU's own time of a 16M-element add (float32 and bfloat16): ``calls`` launches
    back to back, timed by each library's CUDA events (the x10 rows above also hold the
    host's issue time of the first call and the synchronisation); the best of ``rounds``,
    libraries alternating, as bandwidth (two reads and a write)."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(16 << 20).astype(np.float32) for _ in range(2))
    for dtype, size in (("float32", 4), ("bfloat16", 2)):
        best = {}
        operands = {lib.__name__: (_on_gpu(lib, a, dtype), _on_gpu(lib, b, dtype))
                    for lib in libs}
        for _ in range(rounds):
            for lib in libs:
                x, y = operands[lib.__name__]
                for _ in range(3):
                    x + y
                start, end = (lib.cuda.Event(enable_timing=True) for _ in range(2))
                lib.cuda.synchronize()
                start.record()
                for _ in range(calls):
                    x + y
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end) / calls
                best[lib.__name__] = min(best.get(lib.__name__, ms), ms)
        gbs = {k: 3 * size * (16 << 20) / (ms * 1e-3) / 1e9 for k, ms in best.items()}
        names = list(gbs)
        print(f"add 16M {dtype}, {calls} back to back (CUDA events): " +
              ", ".join(f"{k} {best[k] * 1e3:.1f} us ({gbs[k]:.0f} GB/s)" for k in names) +
              f"; ember/torch bandwidth {gbs['ember'] / gbs['torch']:.2f}x")
