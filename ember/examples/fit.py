"""Fit a small two-layer network to y = sin(3x) with ember's autograd and plain SGD.

    python -m ember.examples.fit [--steps 2000] [--seed 0]

Written against the PyTorch API only: replacing ``import ember as torch`` with
``import torch`` runs the same program on PyTorch.
"""

from __future__ import annotations

import argparse
import time

import ember as torch


def main(argv=None) -> float:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    x = torch.linspace(-1.0, 1.0, 256).unsqueeze(1)
    y = torch.sin(3 * x)
    w1 = (torch.randn(1, args.hidden) * 1.0).requires_grad_()
    b1 = torch.zeros(args.hidden, requires_grad=True)
    w2 = (torch.randn(args.hidden, 1) / args.hidden ** 0.5).requires_grad_()
    b2 = torch.zeros(1, requires_grad=True)
    params = [w1, b1, w2, b2]

    t0 = time.perf_counter()
    for step in range(args.steps + 1):
        pred = torch.tanh(x @ w1 + b1) @ w2 + b2
        loss = ((pred - y) ** 2).mean()
        for q in params:
            q.grad = None
        loss.backward()
        with torch.no_grad():
            for q in params:
                q -= args.lr * q.grad
        if step % (args.steps // 10 or 1) == 0:
            print(f"step {step:5d}  loss {loss.item():.6f}")
    print(f"done in {time.perf_counter() - t0:.1f}s; final mse {loss.item():.6f}")
    return loss.item()


if __name__ == "__main__":
    main()
