"""Peak memory of a GPT training step with every block checkpointed, over the plain step's,
in ember and in PyTorch on the CPU (issue 20's proof for activation checkpointing).

    python -m bench.checkpoint_memory [layers]

ember's peak is tracemalloc's: numpy reports every array allocation to it, and nothing else
in the step allocates much. PyTorch's CPU allocator is invisible to tracemalloc, so its peak
comes from its profiler's memory events (every allocation and free of the CPU allocator,
in order: the running sum's maximum). Both count from the moment the step starts, with the
model, its gradients (kept from a warm-up step) and the batch already allocated.
"""

from __future__ import annotations

import functools
import sys
import tracemalloc


def gpt(lib, layers: int, dim: int = 64, heads: int = 4, vocab: int = 64, seq: int = 64,
        seed: int = 0):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, -1)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)
            self.checkpointed = False

        def forward(self, idx):
            x = self.tok(idx) + self.pos(lib.arange(idx.shape[1]))
            for blk in self.blocks:
                if self.checkpointed:
                    x = lib.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)
                else:
                    x = blk(x)
            return self.head(self.ln(x))

    lib.manual_seed(seed)
    return GPT()


def step(lib, model, idx, target):
    logits = model(idx)
    loss = lib.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           target.reshape(-1))
    loss.backward()
    return loss.item()


def _batch(lib, batch, seq, vocab=64):
    g = lib.Generator().manual_seed(1)
    idx = lib.randint(vocab, (batch, seq), generator=g)
    return idx, lib.roll(idx, -1, 1)


def peak_ember(model, idx, target) -> tuple[int, float]:
    import ember
    step(ember, model, idx, target)  # gradients allocated, caches warm
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    loss = step(ember, model, idx, target)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak, loss


def peak_torch(model, idx, target) -> tuple[int, float]:
    import torch
    step(torch, model, idx, target)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True) as prof:
        loss = step(torch, model, idx, target)
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    now = peak = 0
    for _, n in events:
        now += n
        peak = max(peak, now)
    return peak, loss


def ratios(layers: int = 12, dim: int = 64, seq: int = 64, batch: int = 8) -> dict:
    """{lib: (plain peak, checkpointed peak, ratio, loss, checkpointed loss)}."""
    import ember
    import torch
    out = {}
    for lib, measure in ((ember, peak_ember), (torch, peak_torch)):
        model = gpt(lib, layers, dim=dim, seq=seq)
        idx, target = _batch(lib, batch, seq)
        plain, loss = measure(model, idx, target)
        model.checkpointed = True
        model.zero_grad(set_to_none=False)
        ckpt, loss2 = measure(model, idx, target)
        out[lib.__name__] = (plain, ckpt, ckpt / plain, loss, loss2)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    layers = int(argv[0]) if argv else 12
    for name, (plain, ckpt, r, loss, loss2) in ratios(layers).items():
        print(f"{name:6s} plain {plain / 2**20:8.2f} MiB  checkpointed {ckpt / 2**20:8.2f} MiB  "
              f"ratio {r:.3f}  (loss {loss:.4f} / {loss2:.4f})")


if __name__ == "__main__":
    functools.partial(main)()
