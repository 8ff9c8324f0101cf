"""The CPU backend: numpy arrays, plus process settings that make numpy kernels fast.

Every op allocates its result. For large arrays glibc's malloc hands out fresh pages from mmap
and returns them to the OS on free, so each big elementwise op pays for page faults on memory
it just gave back (a 16M-element add: 25 ms instead of 10 ms). PyTorch avoids this with its
caching allocator; ember asks glibc to keep large blocks on its heap and not to trim it. The
cost is that the process keeps its peak memory. ``EMBER_MALLOC_TUNING=0`` turns this off.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def tune_allocator() -> bool:
    """Keep large allocations on glibc's heap (Linux only); returns whether it applied."""
    if os.environ.get("EMBER_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl, ...): leave the allocator alone
        return False
    ok = libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30) and libc.mallopt(_M_TRIM_THRESHOLD,
                                                                      (1 << 31) - 1)
    return bool(ok)
