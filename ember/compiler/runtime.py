"""Runtime: find the C compiler, build generated C into a shared object (through the cache),
load it with ctypes."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile

from . import cache

_PROBED: dict = {}


class CompilerUnavailable(RuntimeError):
    """No working C compiler: the caller falls back to eager execution."""


class CompileError(RuntimeError):
    """The C compiler rejected generated code (e.g. a compiler without _Float16)."""


def find_c_compiler() -> str | None:
    """``$CC`` if set, else the first of cc, gcc, clang on PATH."""
    cands = [os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]
    for c in cands:
        path = shutil.which(c)
        if path:
            return path
    return None


def _try(cc: str, flags: list[str]) -> bool:
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "probe.c")
        with open(src, "w") as f:
            f.write("#include <math.h>\nint probe(int n){int s=0;\n#pragma omp parallel for "
                    "reduction(+:s)\nfor(int i=0;i<n;i++)s+=i;return s;}\n")
        r = subprocess.run([cc, *flags, "-shared", "-fPIC", src, "-o",
                            os.path.join(d, "probe.so")], capture_output=True, check=False)
        return r.returncode == 0


def compiler_flags(cc: str, openmp: bool = True) -> list[str]:
    """-O3 with IEEE semantics kept (no -ffast-math, no FMA contraction, so results match the
    eager kernels op by op), plus -march=native and -fopenmp when the compiler accepts them."""
    key = (cc, openmp)
    if key not in _PROBED:
        flags = ["-O3", "-std=c11", "-ffp-contract=off", "-fno-math-errno"]
        if _try(cc, flags + ["-march=native"]):
            flags.append("-march=native")
        if openmp and _try(cc, flags + ["-fopenmp"]):
            flags.append("-fopenmp")
        elif _try(cc, flags + ["-fopenmp-simd"]):
            flags.append("-fopenmp-simd")  # vector loops without the threading runtime
        _PROBED[key] = flags
    return list(_PROBED[key])


def _compiler_id(cc: str) -> str:
    key = ("version", cc)
    if key not in _PROBED:
        r = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False)
        _PROBED[key] = r.stdout.splitlines()[0] if r.stdout else cc
    return _PROBED[key]


def build(source: str, openmp: bool = True) -> ctypes.CDLL:
    """Compile ``source`` (or reuse the cached object) and load it."""
    from .. import __version__

    cc = find_c_compiler()
    if cc is None:
        raise CompilerUnavailable("no C compiler found on PATH (looked for $CC, cc, gcc, clang)")
    flags = compiler_flags(cc, openmp)
    key = cache.key_of(source, " ".join(flags), _compiler_id(cc), __version__)
    path = cache.lookup(key)
    if path is not None:
        try:
            lib = ctypes.CDLL(path)
            cache.STATS["hits"] += 1
            return lib
        except OSError:  # damaged although the checksum matched: rebuild
            cache.discard(key)
            cache.STATS["rebuilds"] += 1
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "kernels.c")
        with open(src, "w") as f:
            f.write(source)
        out = os.path.join(cache.cache_dir(), f".{key}.{os.getpid()}.so")
        r = subprocess.run([cc, *flags, "-shared", "-fPIC", src, "-o", out, "-lm"],
                           capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise CompileError(f"the C compiler failed on generated code:\n"
                               f"{r.stderr[-2000:]}")
    path = cache.store(key, out)
    cache.STATS["builds"] += 1
    return ctypes.CDLL(path)
