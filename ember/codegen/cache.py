"""On-disk cache of compiled kernels: one shared object per (source, flags, compiler, ember).

Layout: ``<cache dir>/<key>.so`` plus ``<key>.sha256`` holding the object's checksum. A file
whose checksum does not match, or that fails to load, is rebuilt. Writes go to a temporary
file and are renamed into place, so a concurrent reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

STATS = {"hits": 0, "builds": 0, "rebuilds": 0}


def cache_dir() -> str:
    """``$EMBER_CACHE_DIR``, else ``$XDG_CACHE_HOME/ember`` or ``~/.cache/ember``, plus
    ``/kernels``; created on first use (per user: it lives in the user's home)."""
    base = os.environ.get("EMBER_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                 ".cache")
        base = os.path.join(xdg, "ember")
    path = os.path.join(base, "kernels")
    os.makedirs(path, exist_ok=True)
    return path


def key_of(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def lookup(key: str) -> str | None:
    """The cached object's path if present and intact, else None (and a damaged entry is
    removed)."""
    so = os.path.join(cache_dir(), key + ".so")
    sums = so[:-3] + ".sha256"
    if not os.path.exists(so):
        return None
    try:
        with open(sums) as f:
            ok = f.read().strip() == _digest(so)
    except OSError:
        ok = False
    if ok:
        return so
    discard(key)
    STATS["rebuilds"] += 1
    return None


def discard(key: str) -> None:
    for ext in (".so", ".sha256"):
        try:
            os.remove(os.path.join(cache_dir(), key + ext))
        except OSError:
            pass


def store(key: str, built: str) -> str:
    """Move a freshly built object into the cache (atomically) and record its checksum."""
    d = cache_dir()
    so = os.path.join(d, key + ".so")
    digest = _digest(built)
    os.replace(built, so)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(digest)
    os.replace(tmp, so[:-3] + ".sha256")
    return so
