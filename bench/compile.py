"""ember eager vs ember.compile vs torch eager vs torch.compile on fusable workloads."""

from __future__ import annotations

import numpy as np

from .harness import run

SHAPE = (4096, 1024)


def _gelu_tanh(lib, x):
    return 0.5 * x * (1 + lib.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def _softmax(lib, x):
    return lib.softmax(x, dim=-1)


class _Lib:
    """One column of the table: a library and whether its compiler is used."""

    def __init__(self, mod, compiled: bool):
        self.mod, self.compiled = mod, compiled


def _case(body):
    a = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)

    def make(lib: _Lib):
        m = lib.mod
        x = m.from_numpy(a.copy())
        fn = (lambda t: body(m, t))
        if lib.compiled:
            fn = m.compile(fn) if hasattr(m, "compile") else _ember_compile()(fn)
        with _no_grad(m):
            fn(x)  # compile outside the timed region
        return lambda: fn(x)
    return make


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
             (f"row softmax {SHAPE[0]}x{SHAPE[1]}", _case(_softmax))]
    with ember.no_grad(), torch.no_grad():
        run("ember.compile (inference, float32)", cases, libs, budget=1.0)


if __name__ == "__main__":
    main()
