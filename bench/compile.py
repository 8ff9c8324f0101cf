"""ember eager vs ember.compile vs torch eager vs torch.compile on fusable workloads:
a tanh-GELU chain, row softmax and LayerNorm (inference, 4096x1024 float32; softmax also
over 64 rows of 262144, which no cache holds) and an MLP
training step (forward, backward and an SGD update; the model is compiled, the optimizer
runs eagerly in every column).

    python -m bench compile
"""

from __future__ import annotations

import numpy as np

from .harness import run

SHAPE = (4096, 1024)


def _gelu_tanh(lib, x):
    return 0.5 * x * (1 + lib.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def _softmax(lib, x):
    return lib.softmax(x, dim=-1)


def _layer_norm(lib, x, w, b):
    return lib.nn.functional.layer_norm(x, (SHAPE[1],), w, b)


LONG = (64, 262144)  # rows far beyond the caches: where an online softmax could pay
MLP = (256, 1024, 4096)  # batch, width, hidden
TARGET_COMPILE = 1.0  # ember.compile / torch.compile
TARGET_EAGER = 0.25  # ember.compile / ember eager (GELU chain)


class _Lib:
    """One column of the table: a library and whether its compiler is used."""

    def __init__(self, mod, compiled: bool):
        self.mod, self.compiled = mod, compiled


def _case(body, n_params: int = 0, shape: tuple = SHAPE):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    params = [rng.standard_normal(shape[1:]).astype(np.float32) for _ in range(n_params)]

    def make(lib: _Lib):
        m = lib.mod
        x = m.from_numpy(a.copy())
        ps = [m.from_numpy(p.copy()) for p in params]
        fn = (lambda t: body(m, t, *ps))
        if lib.compiled:
            fn = m.compile(fn) if hasattr(m, "compile") else _ember_compile()(fn)
        with _no_grad(m):
            fn(x)  # compile outside the timed region
        return lambda: fn(x)
    return make


def _mlp_case(lib: _Lib):
    """One training step of Linear-GELU(tanh)-Linear under an MSE loss, plain SGD."""
    m = lib.mod
    rng = np.random.default_rng(0)
    batch, width, hidden = MLP
    x = m.from_numpy(rng.standard_normal((batch, width)).astype(np.float32))
    y = m.from_numpy(rng.standard_normal((batch, width)).astype(np.float32))
    m.manual_seed(0)
    model = m.nn.Sequential(m.nn.Linear(width, hidden), m.nn.GELU(approximate="tanh"),
                            m.nn.Linear(hidden, width))
    net = m.compile(model) if lib.compiled else model
    opt = m.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        with m.enable_grad():
            opt.zero_grad()
            loss = m.nn.functional.mse_loss(net(x), y)
            loss.backward()
            opt.step()
    step()  # compile outside the timed region
    return step


def _ember_compile():
    from ember.compiler import compile
    return compile


def _no_grad(m):
    return m.no_grad()


def _torch_compile_error() -> str | None:
    import torch
    try:
        f = torch.compile(lambda t: t * 2 + 1)
        f(torch.ones(4))
        return None
    except Exception as e:  # no C++ compiler, unsupported Python, ...
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def main() -> None:
    import torch

    import ember

    libs = [("ember", _Lib(ember, False)), ("ember.compile", _Lib(ember, True)),
            ("torch", _Lib(torch, False))]
    err = _torch_compile_error()
    if err is None:
        libs.append(("torch.compile", _Lib(torch, True)))
    else:
        print(f"torch.compile unavailable, column skipped: {err}")
    cases = [(f"tanh-GELU chain {SHAPE[0]}x{SHAPE[1]}", _case(_gelu_tanh)),
             (f"row softmax {SHAPE[0]}x{SHAPE[1]}", _case(_softmax)),
             (f"LayerNorm {SHAPE[0]}x{SHAPE[1]}", _case(_layer_norm, 2)),
             (f"row softmax {LONG[0]}x{LONG[1]} (long rows)", _case(_softmax, shape=LONG)),
             (f"MLP train step {MLP[0]}x{MLP[1]}x{MLP[2]}", _mlp_case)]
    with ember.no_grad(), torch.no_grad():
        rows = run("ember.compile (float32)", cases, libs, budget=1.0)
    print(f"\n{'workload':34s}{'ember.compile/ember':>22s}{'ember.compile/torch.compile':>30s}"
          f"  (targets: <= {TARGET_EAGER} on the GELU chain, <= {TARGET_COMPILE})")
    for name, times, _ in rows:
        vs_eager = times["ember.compile"] / times["ember"]
        vs_torch = times["ember.compile"] / times["torch.compile"] \
            if "torch.compile" in times else float("nan")
        print(f"{name:34s}{vs_eager:21.2f}x{vs_torch:29.2f}x")


if __name__ == "__main__":
    main()
