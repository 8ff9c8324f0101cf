"""Train a character-level GPT on text that every machine has: Python's own standard library.

    python -m ember.examples.train_gpt [--steps 1600] [--out out/gpt] [--data FILE]

The model is a small GPT (token and position embeddings, pre-norm blocks with causal
self-attention through ``scaled_dot_product_attention`` and a GELU MLP, LayerNorm, output
weights tied to the token embedding). Training uses AdamW with linear warmup and cosine decay,
gradient clipping, and a held-out validation split evaluated periodically. At the end the
script saves a checkpoint (``ember.save``) and a loss-curve PNG to ``--out`` and prints a sample.

The program is written against the PyTorch API: ``EMBER_EXAMPLE_BACKEND=torch`` runs the very
same file on PyTorch, for comparison.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import math
import os
import sys
import time

# The library the program runs on: ember, unless EMBER_EXAMPLE_BACKEND names another one with
# the same API (ember itself never needs PyTorch; a user comparing the two asks for it here).
torch = importlib.import_module(os.environ.get("EMBER_EXAMPLE_BACKEND", "ember"))

nn = torch.nn
F = torch.nn.functional


# ---------------------------------------------------------------------- data
def stdlib_text(max_chars: int) -> str:
    """Source of the standard library's modules, in a fixed order (same on every machine with
    the same Python)."""
    root = os.path.dirname(os.__file__)
    files = sorted(glob.glob(os.path.join(root, "*.py")))
    parts, total = [], 0
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(text)
        total += len(text)
        if total >= max_chars:
            break
    return "".join(parts)[:max_chars]


class CharData:
    """Token ids of a text: its characters (``tokens="chars"``, the vocabulary is the characters
    seen) or its UTF-8 bytes (``tokens="bytes"``, a vocabulary of 256)."""

    def __init__(self, text: str, val_fraction: float = 0.1, tokens: str = "chars"):
        self.bytes = tokens == "bytes"
        if self.bytes:
            ids = list(text.encode("utf-8"))
            self.itos = [bytes([i]) for i in range(256)]
        else:
            self.itos = sorted(set(text))
            self.stoi = {c: i for i, c in enumerate(self.itos)}
            ids = [self.stoi[c] for c in text]
        data = torch.tensor(ids, dtype=torch.int64)
        n = int(len(data) * (1 - val_fraction))
        self.train, self.val = data[:n], data[n:]

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def batch(self, split: str, batch_size: int, block: int, generator, device="cpu"):
        """Inputs and next-character targets, drawn on the host and moved to ``device``."""
        data = self.train if split == "train" else self.val
        ix = torch.randint(len(data) - block - 1, (batch_size,), generator=generator)
        offsets = torch.arange(block)
        idx = ix.unsqueeze(1) + offsets
        return data[idx].to(device), data[idx + 1].to(device)

    def decode(self, ids) -> str:
        if self.bytes:
            return bytes(ids).decode("utf-8", errors="replace")
        return "".join(self.itos[i] for i in ids)

    def encode(self, text: str) -> list:
        return list(text.encode("utf-8")) if self.bytes else [self.stoi.get(c, 0) for c in text]

    def unigram_loss(self) -> float:
        """Cross-entropy of the best context-free model (character frequencies) on val."""
        counts = torch.bincount(self.train, minlength=self.vocab_size).double() + 1.0
        logp = (counts / counts.sum()).log()
        return float(-logp[self.val].mean())


# ---------------------------------------------------------------------- model
class Block(nn.Module):
    def __init__(self, d: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, n_layer: int, n_head: int, d: int):
        super().__init__()
        self.block = block
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, n_head) for _ in range(n_layer))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied output weights
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    @torch.no_grad()
    def generate(self, idx, n: int, generator, temperature: float = 0.8):
        for _ in range(n):
            logits, _ = self(idx[:, -self.block:])
            probs = F.softmax(logits[:, -1, :] / temperature, dim=-1)
            # the generator is the host's: sample there, then continue on the model's device
            nxt = torch.multinomial(probs.cpu(), 1, generator=generator).to(idx.device)
            idx = torch.cat([idx, nxt], dim=1)
        return idx


# ---------------------------------------------------------------------- training
def lr_at(step: int, args) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * progress))


def autocast(args):
    """The forward pass's autocast context (``--amp``)."""
    dtype = torch.bfloat16 if args.amp == "bf16" else None
    return torch.autocast(torch.device(args.device).type, dtype=dtype, enabled=dtype is not None)


@torch.no_grad()
def evaluate(model, data, args, generator) -> float:
    model.eval()
    losses = []
    for _ in range(args.eval_batches):
        x, y = data.batch("val", args.batch_size, args.block, generator, args.device)
        with autocast(args):
            losses.append(model(x, y)[1].item())
    model.train()
    return sum(losses) / len(losses)


# GPT-2 small's shape (124M parameters with its 50257-token vocabulary; byte tokens here) and a
# short run of it
PRESETS = {"gpt2": dict(n_layer=12, n_head=12, n_embd=768, block=1024, tokens="bytes",
                        amp="auto", batch_size=16, steps=300, lr=6e-4, min_lr=6e-5, warmup=30,
                        chars=4_000_000, eval_every=100, eval_batches=4, clip=1.0)}


def parse(argv=None):
    p = argparse.ArgumentParser(description="Train a character-level GPT with ember.")
    p.add_argument("--data", help="a text file to train on (default: Python's stdlib source)")
    p.add_argument("--chars", type=int, default=1_000_000, help="characters of stdlib text")
    p.add_argument("--out", default="out/gpt", help="directory for checkpoint and plot")
    p.add_argument("--steps", type=int, default=1600)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block", type=int, default=64, help="context length")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--min-lr", type=float, default=3e-4)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=8)
    p.add_argument("--sample-chars", type=int, default=300)
    p.add_argument("--device", default=None, help="default: cuda where a GPU is, else cpu")
    p.add_argument("--tokens", choices=["chars", "bytes"], default="chars",
                   help="token ids: the text's characters, or its UTF-8 bytes (vocabulary 256)")
    p.add_argument("--amp", choices=["off", "bf16", "auto"], default="off",
                   help="autocast dtype for the forward pass; auto: bf16 on a GPU, else off")
    p.add_argument("--preset", choices=sorted(PRESETS), help="a named model and run shape; "
                   "flags given explicitly override it")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--no-progress", action="store_true", help="plain log lines, no tqdm bar")
    preset = p.parse_known_args(argv)[0].preset
    if preset:
        p.set_defaults(**PRESETS[preset])
    args = p.parse_args(argv)
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.amp == "auto":
        args.amp = "bf16" if torch.device(args.device).type == "cuda" else "off"
    return args


def main(argv=None) -> dict:
    args = parse(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if args.data:
        with open(args.data, encoding="utf-8", errors="replace") as f:
            text = f.read()
    else:
        text = stdlib_text(args.chars)
    data = CharData(text, tokens=args.tokens)
    unit = "byte" if args.tokens == "bytes" else "char"
    gen = torch.Generator().manual_seed(args.seed)
    model = GPT(data.vocab_size, args.block, args.n_layer, args.n_head, args.n_embd).to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr,
                            fused=device.type == "cuda")  # one launch per step on a GPU
    n_params = sum(p.numel() for p in model.parameters())
    baseline = data.unigram_loss()
    print(f"{len(data.train) + len(data.val):,} {unit}s, vocabulary {data.vocab_size}, model "
          f"{n_params:,} parameters, on {device}"
          + (f" with {args.amp} autocast" if args.amp != "off" else ""))
    print(f"unigram baseline (validation): {baseline:.3f} nats/{unit}; uniform: "
          f"{math.log(data.vocab_size):.3f}")

    bar = None
    if not args.no_progress:
        try:
            from tqdm import tqdm
            bar = tqdm(total=args.steps, unit="step", dynamic_ncols=True, file=sys.stdout)
        except ImportError:
            pass
    history = {"step": [], "train": [], "val_step": [], "val": []}
    tokens = args.batch_size * args.block
    t0 = time.perf_counter()
    val = float("nan")
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        x, y = data.batch("train", args.batch_size, args.block, gen, device)
        with autocast(args):
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        lv = loss.item()
        history["step"].append(step)
        history["train"].append(lv)
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            val = evaluate(model, data, args, gen)
            history["val_step"].append(step)
            history["val"].append(val)
        tps = tokens * (step + 1) / (time.perf_counter() - t0)
        shown = "-" if math.isnan(val) else f"{val:.3f}"  # no validation loss yet
        if bar is not None:
            bar.set_postfix(loss=f"{lv:.3f}", val=shown, tok_s=f"{tps:,.0f}")
            bar.update(1)
        elif (step + 1) % 50 == 0 or step + 1 == args.steps:
            print(f"step {step + 1:5d}  loss {lv:.3f}  val {shown}  {tps:,.0f} tok/s")
    if bar is not None:
        bar.close()
    elapsed = time.perf_counter() - t0
    print(f"trained {args.steps} steps in {elapsed:.0f}s; validation loss {val:.3f} nats/{unit} "
          f"(unigram baseline {baseline:.3f})")

    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "model.pt")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "vocab": data.itos, "args": vars(args), "step": args.steps}, ckpt)
    print(f"checkpoint: {ckpt}")
    plot = os.path.join(args.out, "loss.png")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(history["step"], history["train"], lw=0.8, label="train")
        ax.plot(history["val_step"], history["val"], "o-", label="validation")
        ax.axhline(baseline, color="gray", ls="--", label="unigram baseline")
        ax.set_xlabel("step")
        ax.set_ylabel(f"cross-entropy (nats/{unit})")
        ax.legend()
        fig.tight_layout()
        fig.savefig(plot, dpi=100)
        plt.close(fig)
        print(f"loss curve: {plot}")
    except ImportError:
        print("matplotlib is not installed; no loss curve (pip install -e '.[demo]')")
    start = torch.tensor([data.encode("d")], dtype=torch.int64, device=device)
    sample = model.generate(start, args.sample_chars, gen)
    print("sample:\n" + data.decode(sample[0].tolist()))
    return {"val": val, "baseline": baseline, "seconds": elapsed}


if __name__ == "__main__":
    main()
