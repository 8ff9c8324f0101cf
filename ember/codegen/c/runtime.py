"""Runtime: find the C compiler, build generated C into a shared object (through the cache),
load it with ctypes."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable

from ..._version import __version__
from .. import cache

_PROBED: dict = {}
# Called with each kernel library loaded. Layers above register here (backends/cpu.py hands
# the library's OpenMP runtime to set_num_threads).
ON_LOAD: list[Callable[[ctypes.CDLL], None]] = []


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


# -O3 with IEEE results kept: no -ffast-math, no FMA contraction (results match the eager
# kernels op by op). -fno-trapping-math changes no value, only the assumption that a
# floating-point exception may be observed: the compiler may then compute both sides of a
# select without masking them (GELU's kernels: ~10% faster). No kernel reads the FP flags.
BASE_FLAGS = ("-O3", "-std=c11", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math")


def target_arch() -> str:
    """The ``-march=`` value kernels are built for: ``native`` (this CPU's full instruction
    set) unless ``EMBER_MARCH`` names another, e.g. ``x86-64-v3`` (AVX2 + FMA, no AVX-512) to
    build and test on an AVX-512 machine what an AVX2-only CPU runs."""
    return os.environ.get("EMBER_MARCH", "").strip() or "native"


def compiler_flags(cc: str, openmp: bool = True) -> list[str]:
    """BASE_FLAGS, plus -march=<target_arch()> and -fopenmp when the compiler accepts them.
    Probing compiles small programs (~0.5 s), so its answer is kept in the cache directory per
    compiler, machine, target and base flags; a missing or unreadable record is probed again.
    ``-march=native`` is dropped where the compiler refuses it; an ``EMBER_MARCH`` target is
    not (a refused one fails the build with the compiler's message, never builds generic
    code in silence)."""
    march = target_arch()
    key = (cc, openmp, march)
    if key not in _PROBED:
        record = os.path.join(cache.cache_dir(), "flags-" + cache.key_of(
            _compiler_id(cc), str(openmp), _machine_id(), march, *BASE_FLAGS)[:32])
        try:
            with open(record) as f:
                flags = f.read().split()
        except OSError:
            flags = []
        if not flags or flags[0] != "-O3":
            flags = list(BASE_FLAGS)
            if march != "native" or _try(cc, flags + ["-march=native"]):
                flags.append(f"-march={march}")  # a target asked for is kept: a compiler
                # that refuses it fails the build with its own message (CompileError)
            if openmp and _try(cc, flags + ["-fopenmp"]):
                flags.append("-fopenmp")
            elif _try(cc, flags + ["-fopenmp-simd"]):
                flags.append("-fopenmp-simd")  # vector loops without the threading runtime
            tmp = f"{record}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(" ".join(flags))
            os.replace(tmp, record)  # atomic: a concurrent reader sees all of it or nothing
        _PROBED[key] = flags
    return list(_PROBED[key])


def _compiler_id(cc: str) -> str:
    """The compiler's path and version line: part of every cache key."""
    key = ("version", cc)
    if key not in _PROBED:
        r = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False)
        _PROBED[key] = cc + ": " + (r.stdout.splitlines()[0] if r.stdout else "")
    return _PROBED[key]


def _machine_id() -> str:
    """The CPU's identity (model and feature flags): objects built with -march=native are only
    valid on such a CPU, and a home directory (the cache) may be shared between machines."""
    if "machine" not in _PROBED:
        import platform
        lines = []
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    name = line.split(":", 1)[0].strip()
                    if name in ("model name", "flags", "Features", "CPU part") and \
                            not any(x.startswith(name + ":") for x in lines):
                        lines.append(f"{name}:{line.split(':', 1)[1].strip()}")
        except OSError:
            pass
        _PROBED["machine"] = platform.machine() + ";" + ";".join(lines)
    return _PROBED["machine"]


def build(source: str, openmp: bool = True) -> ctypes.CDLL:
    """Compile ``source`` (or reuse the cached object) and load it."""
    return build_many([source], openmp)[0]


def build_many(sources: list[str], openmp: bool = True) -> list[ctypes.CDLL]:
    """Compile several translation units at once, one compiler process each, running side by
    side (a big graph's kernels split into units build in about 1/cores of the time); every
    unit goes through the cache on its own. Raises CompileError once all have finished."""
    cc = find_c_compiler()
    if cc is None:
        raise CompilerUnavailable("no C compiler found on PATH (looked for $CC, cc, gcc, clang)")
    flags = compiler_flags(cc, openmp)
    ident = _compiler_id(cc)
    libs: list = [None] * len(sources)
    jobs = []  # (index, key, process, output path, temporary directory)
    try:
        for i, source in enumerate(sources):
            key = cache.key_of(source, " ".join(flags), ident, __version__)
            libs[i] = _cached(key)
            if libs[i] is None:
                jobs.append((i, key, *_start(cc, flags, key, source)))
        errors = []
        for i, key, proc, out, tmp in jobs:
            _, err = proc.communicate()
            if proc.returncode != 0:
                errors.append(err)
                continue
            libs[i] = _load(cache.store(key, out))
            cache.STATS["builds"] += 1
    finally:
        for _, _, proc, out, tmp in jobs:
            if proc.poll() is None:  # an exception while waiting: do not leave it running
                proc.kill()
                proc.wait()
            tmp.cleanup()
            if os.path.exists(out):
                os.remove(out)
    if errors:
        raise CompileError(f"the C compiler failed on generated code:\n{errors[0][-2000:]}")
    return libs


# How long an idle OpenMP thread spins before it sleeps. A compiled graph is a run of short
# parallel regions on one pool (gemm.py): a thread that slept after each would be woken ~150
# times a GPT step (that step: 75-80 ms with sleeping threads, 54-66 ms spinning). libgomp's
# default spin (300,000 rounds, milliseconds) would hold the cores long after a graph, against
# numpy's BLAS threads in the eager code that follows; a short spin keeps the threads warm from
# one kernel to the next and no longer. libgomp reads it once, when it is first loaded, which
# happens with ember's first kernel library: the variable is set for that load alone, so the
# process environment (and any program ember starts) is left as the user had it. A user's
# OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
GOMP_SPINCOUNT = "20000"
_ENV_LOCK = threading.Lock()


def _load(path: str) -> ctypes.CDLL:
    with _ENV_LOCK:
        scoped = "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ
        if scoped:
            os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT
        try:
            lib = ctypes.CDLL(path)
        finally:
            if scoped:
                del os.environ["GOMP_SPINCOUNT"]
    for hook in ON_LOAD:
        hook(lib)
    return lib


def _cached(key: str) -> ctypes.CDLL | None:
    """The cached object for ``key``, loaded; None when absent or damaged (then removed)."""
    path = cache.lookup(key)
    if path is None:
        return None
    try:
        lib = _load(path)
    except OSError:  # damaged although the checksum matched: rebuild
        cache.discard(key)
        cache.STATS["rebuilds"] += 1
        return None
    cache.STATS["hits"] += 1
    return lib


def _start(cc: str, flags: list[str], key: str, source: str) -> tuple:
    """Start compiling ``source`` into a private file of the cache directory (renamed into
    place by ``cache.store`` once built): (process, output path, temporary source dir)."""
    tmp = tempfile.TemporaryDirectory()
    src = os.path.join(tmp.name, "kernels.c")
    with open(src, "w") as f:
        f.write(source)
    out = os.path.join(cache.cache_dir(), f".{key}.{os.getpid()}.{id(tmp)}.so")
    proc = subprocess.Popen([cc, *flags, "-shared", "-fPIC", src, "-o", out, "-lm"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, out, tmp
