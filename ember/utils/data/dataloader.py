"""DataLoader: batches from a dataset, in the main process or in worker processes.

With ``num_workers > 0`` each worker process owns an index queue; all share one result queue.
The main process keeps ``prefetch_factor * num_workers`` batches in flight, hands results back
in sampler order (or as they arrive with ``in_order=False``), re-raises a worker's exception
with the worker named, and never hangs on a dead worker: it polls the queue with a short
timeout and checks that every worker is still alive.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import queue
import random
import sys
import traceback
from dataclasses import dataclass

from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler
from ._collate import default_collate, default_convert
from ._pin import pin_memory, pinning

_POLL = 0.1  # seconds between liveness checks while waiting for a worker


@dataclass
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """In a worker process: its id, the worker count, its seed and its dataset copy."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process with its traceback."""

    def __init__(self, where: str):
        exc_type, exc, tb = sys.exc_info()
        self.exc_type = exc_type
        self.msg = "".join(traceback.format_exception(exc_type, exc, tb))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.msg}"
        if self.exc_type is KeyError:
            msg = KeyError(msg)  # KeyError quotes its message; keep it readable
        try:
            exc = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exc


class _StopWorker:
    """Sent by an IterableDataset worker whose iterator is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _Fetcher:
    """Turns a batch of indices (or a request, for iterable datasets) into collated data."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last, batch_size):
        self.dataset, self.auto_collation = dataset, auto_collation
        self.collate_fn, self.drop_last, self.batch_size = collate_fn, drop_last, batch_size
        self.iterable = isinstance(dataset, IterableDataset)
        self._it = iter(dataset) if self.iterable else None

    def fetch(self, indices):
        if self.iterable:
            if self.auto_collation:
                data = list(itertools.islice(self._it, self.batch_size))
                if not data or (self.drop_last and len(data) < self.batch_size):
                    raise StopIteration
            else:
                data = next(self._it)
        elif self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            data = getitems(indices) if getitems else [self.dataset[i] for i in indices]
        else:
            data = self.dataset[indices]
        return self.collate_fn(data)


def _worker_loop(fetcher_args, index_q, result_q, seed, init_fn, worker_id, num_workers):
    global _worker_info
    from ..._random import manual_seed
    manual_seed(seed)
    random.seed(seed)
    dataset = fetcher_args[0]
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    where = f"in DataLoader worker process {worker_id}"
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = _Fetcher(*fetcher_args)
    except Exception:
        fetcher = ExceptionWrapper(where)
    while True:
        task = index_q.get()
        if task is None:
            break
        epoch, idx, indices = task
        if isinstance(fetcher, ExceptionWrapper):
            result_q.put((epoch, idx, fetcher))
            continue
        try:
            data = fetcher.fetch(indices)
        except StopIteration:
            data = _StopWorker(worker_id)
        except Exception:
            data = ExceptionWrapper(where)
        result_q.put((epoch, idx, data))


class DataLoader:
    """``DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
    num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
    worker_init_fn=None, multiprocessing_context=None, generator=None, *, prefetch_factor=None,
    persistent_workers=False, pin_memory_device='', in_order=True)``"""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset, self.num_workers, self.timeout = dataset, num_workers, timeout
        self.prefetch_factor, self.pin_memory = prefetch_factor, pin_memory
        self.worker_init_fn, self.generator = worker_init_fn, generator
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers, self.in_order = persistent_workers, in_order
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (None, False):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if iterable:
                sampler = _InfiniteSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset()
            return self._iterator
        return _MultiProcessIter(self)

    def _base_seed(self) -> int:
        from ..._dtype import int64
        from ...ops.creation import empty
        return int(empty((), dtype=int64).random_(generator=self.generator).item())


class _InfiniteSampler:
    def __iter__(self):
        while True:
            yield None


class _SingleProcessIter:
    def __init__(self, loader):
        self._loader = loader
        self._indices = iter(loader._index_sampler)
        self._fetcher = _Fetcher(loader.dataset, loader._auto_collation, loader.collate_fn,
                                 loader.drop_last, loader.batch_size)
        self._seed = loader._base_seed()
        self._pin = pinning(loader)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        indices = next(self._indices)
        data = self._fetcher.fetch(indices)
        return pin_memory(data) if self._pin else data


class _MultiProcessIter:
    def __init__(self, loader):
        self._loader = loader
        n = loader.num_workers
        ctx = loader.multiprocessing_context
        ctx = mp.get_context(ctx) if isinstance(ctx, str) or ctx is None else ctx
        self._result_q = ctx.Queue()
        self._index_qs, self._workers = [], []
        seed = loader._base_seed()
        args = (loader.dataset, loader._auto_collation, loader.collate_fn, loader.drop_last,
                loader.batch_size)
        for wid in range(n):
            iq = ctx.Queue()
            w = ctx.Process(target=_worker_loop, daemon=True,
                            args=(args, iq, self._result_q, seed + wid, loader.worker_init_fn,
                                  wid, n))
            w.start()
            self._index_qs.append(iq)
            self._workers.append(w)
        self._shutdown = False
        self._epoch = -1
        self._pin = pinning(loader)
        self._reset()

    def _reset(self):
        self._epoch += 1
        self._indices = iter(self._loader._index_sampler)
        self._send_idx = 0  # next task number to hand out
        self._rcvd_idx = 0  # next task number to return (in order)
        self._pending: dict[int, int] = {}  # task number -> worker id, for tasks in flight
        self._done: dict[int, object] = {}  # results that arrived early
        self._active = [True] * len(self._workers)
        self._next_worker = itertools.cycle(range(len(self._workers)))
        for _ in range(self._loader.prefetch_factor * len(self._workers)):
            self._put_task()

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def _put_task(self) -> bool:
        if not any(self._active):
            return False
        for _ in range(len(self._workers)):
            wid = next(self._next_worker)
            if self._active[wid]:
                break
        try:
            indices = next(self._indices)
        except StopIteration:
            return False
        self._index_qs[wid].put((self._epoch, self._send_idx, indices))
        self._pending[self._send_idx] = wid
        self._send_idx += 1
        return True

    def _get(self):
        """One result from any worker, with liveness checks and the user's timeout."""
        import time
        deadline = time.monotonic() + self._loader.timeout if self._loader.timeout else None
        while True:
            try:
                return self._result_q.get(timeout=_POLL)
            except queue.Empty:
                dead = [w.pid for w in self._workers if not w.is_alive()]
                if dead:
                    self._close()
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(map(str, dead))})"
                                       " exited unexpectedly") from None
                if deadline is not None and time.monotonic() > deadline:
                    self._close()
                    raise RuntimeError(f"DataLoader timed out after {self._loader.timeout} "
                                       "seconds") from None

    def __next__(self):
        while True:
            if self._loader.in_order:
                if self._rcvd_idx in self._done:
                    return self._deliver(self._rcvd_idx, self._done.pop(self._rcvd_idx))
                while self._rcvd_idx not in self._pending and self._rcvd_idx < self._send_idx:
                    self._rcvd_idx += 1  # skipped tasks of stopped iterable workers
            elif self._done:
                idx = next(iter(self._done))
                return self._deliver(idx, self._done.pop(idx))
            if not self._pending:
                if not self._loader.persistent_workers:
                    self._close()
                raise StopIteration
            epoch, idx, data = self._get()
            if epoch != self._epoch:
                continue  # a leftover from an epoch the user stopped early
            if isinstance(data, _StopWorker):
                self._active[data.worker_id] = False
                self._pending.pop(idx, None)
                continue
            self._done[idx] = data

    def _deliver(self, idx, data):
        self._pending.pop(idx, None)
        if idx == self._rcvd_idx:
            self._rcvd_idx += 1
        self._put_task()
        if isinstance(data, ExceptionWrapper):
            self._close()
            data.reraise()
        return pin_memory(data) if self._pin else data

    def _close(self):
        if self._shutdown:
            return
        self._shutdown = True
        for q, w in zip(self._index_qs, self._workers):
            if w.is_alive():
                try:
                    q.put(None)
                except (OSError, ValueError):
                    pass
        for w in self._workers:
            w.join(timeout=5)
            if w.is_alive():
                w.terminate()
        for q in self._index_qs + [self._result_q]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        self._close()
