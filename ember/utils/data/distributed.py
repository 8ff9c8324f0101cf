"""``DistributedSampler``: each rank of a process group takes its own part of a dataset.

The index order is PyTorch's, element for element: with ``shuffle`` a permutation drawn from a
generator seeded with ``seed + epoch`` (PyTorch's CPU ``randperm``: a Fisher-Yates pass over
the 32-bit outputs of the Mersenne Twister seeded with that number, which numpy's legacy
``RandomState`` reproduces), padded by repeating the start (or cut, with ``drop_last``) to a
multiple of the number of replicas, then every ``num_replicas``-th index from ``rank`` on.

The number of replicas and the rank default to those of the default process group:
``ember.distributed`` (a higher layer) registers the function that answers them here.
"""

from __future__ import annotations

import math

import numpy as np

from .sampler import Sampler

# set by ember.distributed: () -> (world_size, rank) of the default group; raises when there
# is none
group_info = None


def _torch_randperm(n: int, seed: int) -> list:
    """PyTorch's CPU ``randperm(n)`` from a generator seeded with ``seed``."""
    rs = np.random.RandomState(seed & 0xFFFFFFFF)
    draws = rs.randint(0, 2 ** 32, size=max(n - 1, 0), dtype=np.uint64).tolist()
    r = list(range(n))
    for i in range(n - 1):
        z = draws[i] % (n - i) + i
        r[i], r[z] = r[z], r[i]
    return r


class DistributedSampler(Sampler):
    """``DistributedSampler(dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
    drop_last=False)``: the indices of this rank's share of ``dataset``; call
    ``set_epoch(epoch)`` before each epoch for a new shuffle."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False):
        if num_replicas is None or rank is None:
            if group_info is None:
                raise RuntimeError("Requires distributed package to be available")
            world, me = group_info()
            num_replicas = world if num_replicas is None else num_replicas
            rank = me if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, "
                             f"{num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        indices = _torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        indices = indices[self.rank:self.total_size:self.num_replicas]
        assert len(indices) == self.num_samples
        return iter(indices)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose shuffle ``__iter__`` gives (every replica the same)."""
        self.epoch = epoch
