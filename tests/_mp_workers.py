"""Functions run in child processes by test_multiprocessing.py (importable, light: ember only)."""

import os
import signal
import sys

import ember as torch


def put_square(i, q):
    q.put((i, torch.tensor([float(i)]) ** 2))


def raise_in_one(i):
    if i == 1:
        raise ValueError(f"boom from {i}")
    signal.pause() if hasattr(signal, "pause") else None  # the parent terminates us


def exit_with(i, code):
    sys.exit(code)


def kill_self(i):
    os.kill(os.getpid(), signal.SIGKILL)


def quiet(i, q):
    q.put(os.getpid())


def write_index(i, t, col):
    t[i] = i + 1.0
    col[i] = -(i + 1.0)  # a non-contiguous view of another shared tensor


def write_first(t, i):
    t[i] = 100.0 + i


def round_trip(i, t, q_in, q_out, go):
    """Reads a parent's later write through the spawn argument, takes a shared tensor from a
    queue and writes to it, sends a shared and a non-shared tensor back."""
    q_out.put("ready")
    go.wait(30)
    q_out.put(float(t.sum()))
    u, plain = q_in.get(timeout=30)
    u[1] = 42.0
    plain[0] = 42.0  # a copy: the parent's stays as it was
    q_out.put(u[1:])
    q_out.put((u.is_shared(), plain.is_shared(), float(plain[0])))
    go.clear()
    q_out.put("done")
    go.wait(30)  # stay alive until the parent has received the shared tensor


def hogwild(i, model, steps):
    torch.manual_seed(i)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 4)
    y = x.sum(1, keepdim=True)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
