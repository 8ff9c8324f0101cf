"""Per-op dispatch overhead on small tensors and throughput on large ones."""

from __future__ import annotations

import numpy as np

from .harness import run


def _t(lib, a):
    return lib.from_numpy(a.copy())


def small_cases():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)

    def case(body):
        def make(lib):
            x, y = _t(lib, a), _t(lib, b)
            return lambda: body(lib, x, y)
        return make

    return [
        ("add 8x8", case(lambda lib, x, y: x + y)),
        ("mul 8x8", case(lambda lib, x, y: x * y)),
        ("sum 8x8", case(lambda lib, x, y: x.sum())),
        ("matmul 8x8", case(lambda lib, x, y: x @ y)),
        ("index x[1, 2:5]", case(lambda lib, x, y: x[1, 2:5])),
        ("view x.view(64)", case(lambda lib, x, y: x.view(64))),
        ("add+backward 8x8 (requires_grad)", _backward_case(a, b)),
    ]


def _backward_case(a, b):
    def make(lib):
        x = _t(lib, a).requires_grad_()
        y = _t(lib, b)

        def step():
            (x * y + x).sum().backward()
        return step
    return make


def large_cases():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((4096, 4096)).astype(np.float32)  # 16M elements
    big2 = rng.standard_normal((4096, 4096)).astype(np.float32)
    rows = rng.standard_normal((4096, 1024)).astype(np.float32)
    m1 = rng.standard_normal((1024, 1024)).astype(np.float32)
    m2 = rng.standard_normal((1024, 1024)).astype(np.float32)
    idx = rng.integers(0, 4096 * 4096, 1_000_000)  # 1M elements gathered from 16M

    def make_add(lib):
        x, y = _t(lib, big), _t(lib, big2)
        return lambda: x + y

    def make_mul_add(lib):
        x, y = _t(lib, big), _t(lib, big2)
        return lambda: x * y + 1.0

    def make_sum(lib):
        x = _t(lib, big)
        return lambda: x.sum()

    def make_softmax(lib):
        x = _t(lib, rows)
        return lambda: lib.softmax(x, dim=-1)

    def make_matmul(lib):
        x, y = _t(lib, m1), _t(lib, m2)
        return lambda: x @ y

    def make_gather(lib):
        x = _t(lib, big).view(-1)
        i = lib.from_numpy(idx.copy())
        return lambda: x[i]

    return [
        ("add 16M", make_add),
        ("mul+add 16M", make_mul_add),
        ("sum 16M", make_sum),
        ("softmax 4096x1024 (dim=-1)", make_softmax),
        ("matmul 1024x1024", make_matmul),
        ("advanced index x[idx] (1M of 16M)", make_gather),
    ]


def main():
    import ember
    import torch
    libs = [("ember", ember), ("torch", torch)]
    run("Small tensors: per-op overhead", small_cases(), libs, target=3.0)
    run("Large tensors: throughput", large_cases(), libs, budget=1.0, target=1.5)


if __name__ == "__main__":
    main()
