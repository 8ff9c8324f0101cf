"""A reference Philox 4x32-10 in numpy, written from the paper (Salmon, Moraes, Dror and Shaw,
"Parallel random numbers: as easy as 1, 2, 3", SC 2011), for the tests of ember's Philox kernels
(tests/test_triton_rng.py in the interpreter, tests/test_cuda_rng.py on a GPU)."""

from __future__ import annotations

import numpy as np

_M = (0xD2511F53, 0xCD9E8D57)
_W = (0x9E3779B9, 0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)


def philox_ref(ctr, key) -> list:
    """Philox 4x32-10 (Salmon et al. 2011) in numpy: ``ctr`` four words (arrays), ``key`` two."""
    c = [np.asarray(x, np.uint64) for x in ctr]
    k = [np.uint64(x) for x in key]
    for _ in range(10):
        p0, p1 = c[0] * np.uint64(_M[0]), c[2] * np.uint64(_M[1])
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k[0], p1 & _MASK,
             (p0 >> np.uint64(32)) ^ c[3] ^ k[1], p0 & _MASK]
        k = [(k[0] + np.uint64(_W[0])) & _MASK, (k[1] + np.uint64(_W[1])) & _MASK]
    return c


def words(seed: int, offset: int, n: int) -> list:
    """The four words ember's element ``i`` uses: counter ``offset + i`` (low, high, 0, 0),
    key ``seed`` (low, high)."""
    ctr = np.arange(n, dtype=np.uint64) + np.uint64(offset)
    zero = np.zeros(n, np.uint64)
    return philox_ref((ctr & _MASK, ctr >> np.uint64(32), zero, zero),
                      (seed & 0xFFFFFFFF, seed >> 32))


KAT = [  # Random123's known-answer vectors for philox4x32-10
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]
