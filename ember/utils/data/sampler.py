"""Samplers: the order in which a DataLoader visits a map-style dataset."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized

from ..._dtype import float64, int64
from ..._random import Generator
from ...ops.creation import as_tensor, empty
from ...ops.random import multinomial, randint, randperm


class Sampler:
    def __init__(self, data_source=None):
        pass

    def __iter__(self) -> Iterator:
        raise NotImplementedError


def _generator(generator):
    """The generator a sampler draws from: the given one, or a fresh one seeded from ember's
    default RNG (so ``ember.manual_seed`` makes shuffling reproducible, as in PyTorch)."""
    if generator is not None:
        return generator
    seed = int(empty((), dtype=int64).random_().item())
    return Generator().manual_seed(seed)


class SequentialSampler(Sampler):
    def __init__(self, data_source: Sized):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got replacement="
                            f"{replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        g = _generator(self.generator)
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from randint(high=n, size=(32,), dtype=int64, generator=g).tolist()
            yield from randint(high=n, size=(self.num_samples % 32,), dtype=int64,
                               generator=g).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from randperm(n, generator=g).tolist()
            yield from randperm(n, generator=g).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got replacement="
                             f"{replacement}")
        w = as_tensor(weights, dtype=float64)
        if w.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        self.weights, self.num_samples = w, num_samples
        self.replacement, self.generator = replacement, generator

    def __iter__(self):
        yield from multinomial(self.weights, self.num_samples, self.replacement,
                               generator=self.generator).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    def __init__(self, sampler: Iterable | Sampler, batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got drop_last="
                             f"{drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
