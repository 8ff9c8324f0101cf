"""ember.utils.data: samplers, collation, and DataLoader in one process and with workers."""

import collections
import os
import time

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import ember
import ember.utils.data as eud
from oracle import assert_same


class Squares(eud.Dataset):
    def __init__(self, n=10, fail_at=None, die_at=None, sleep=0.0):
        self.n, self.fail_at, self.die_at, self.sleep = n, fail_at, die_at, sleep

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"bad sample {i}")
        if i == self.die_at:
            os._exit(3)
        if self.sleep:
            time.sleep(self.sleep)
        return {"x": ember.tensor([float(i), float(i * i)]), "y": i, "name": f"s{i}"}


def ids(batches):
    return [b["y"].tolist() for b in batches]


def test_sequential_batches_and_len():
    dl = eud.DataLoader(Squares(10), batch_size=4)
    out = list(dl)
    assert len(dl) == 3 and ids(out) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert out[0]["x"].shape == (4, 2) and out[0]["name"] == ["s0", "s1", "s2", "s3"]
    dl = eud.DataLoader(Squares(10), batch_size=4, drop_last=True)
    assert len(dl) == 2 and ids(list(dl)) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_seeded_shuffle_is_reproducible_and_a_permutation():
    def order(**kw):
        return sum(ids(eud.DataLoader(Squares(20), batch_size=5, shuffle=True, **kw)), [])

    ember.manual_seed(0)
    a = order()
    ember.manual_seed(0)
    b = order()
    assert a == b and sorted(a) == list(range(20)) and a != list(range(20))
    g1, g2 = ember.Generator().manual_seed(7), ember.Generator().manual_seed(7)
    assert order(generator=g1) == order(generator=g2)


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_give_the_same_batches(workers):
    base = ids(eud.DataLoader(Squares(11), batch_size=3))
    dl = eud.DataLoader(Squares(11), batch_size=3, num_workers=workers)
    assert ids(list(dl)) == base
    dl = eud.DataLoader(Squares(11), batch_size=3, num_workers=workers, in_order=False,
                        prefetch_factor=3)
    assert sorted(ids(list(dl))) == sorted(base)


def test_worker_exception_names_the_worker():
    dl = eud.DataLoader(Squares(10, fail_at=5), batch_size=2, num_workers=2)
    with pytest.raises(ValueError) as e:
        list(dl)
    assert "DataLoader worker process" in str(e.value) and "bad sample 5" in str(e.value)


def test_dead_worker_raises_instead_of_hanging():
    dl = eud.DataLoader(Squares(10, die_at=3), batch_size=2, num_workers=2)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(dl)
    assert time.monotonic() - t0 < 30


def test_timeout():
    dl = eud.DataLoader(Squares(4, sleep=3.0), batch_size=2, num_workers=1, timeout=0.5)
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        next(iter(dl))


class WorkerAware(eud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = eud.get_worker_info()
        wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(wid, self.n, nw))

    def __len__(self):
        return self.n


def test_iterable_dataset_with_workers_and_init_fn():
    seen = sorted(sum((b.tolist() for b in eud.DataLoader(WorkerAware(10), batch_size=3,
                                                            num_workers=2)), []))
    assert seen == list(range(10))
    assert sum((b.tolist() for b in eud.DataLoader(WorkerAware(7), batch_size=2)), []) == \
        list(range(7))
    with pytest.raises(ValueError, match="expected unspecified shuffle"):
        eud.DataLoader(WorkerAware(3), shuffle=True)


def _record_id(worker_id):
    info = eud.get_worker_info()
    assert info.id == worker_id and info.num_workers == 2
    os.environ["EMBER_TEST_WORKER"] = str(worker_id)


class WhoAmI(eud.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return int(os.environ.get("EMBER_TEST_WORKER", "-1"))


def test_worker_init_fn_and_persistent_workers():
    dl = eud.DataLoader(WhoAmI(), batch_size=1, num_workers=2, worker_init_fn=_record_id,
                        persistent_workers=True)
    first = sorted(b.item() for b in dl)
    second = sorted(b.item() for b in dl)
    assert first == second == [0, 0, 0, 1, 1, 1]


def test_bad_loader_arguments():
    ds = Squares(4)
    for kwargs, match in [(dict(num_workers=-1), "num_workers option should be non-negative"),
                          (dict(timeout=-1), "timeout option should be non-negative"),
                          (dict(persistent_workers=True), "needs num_workers > 0"),
                          (dict(prefetch_factor=2), "prefetch_factor option could only"),
                          (dict(sampler=eud.SequentialSampler(ds), shuffle=True),
                           "mutually exclusive with shuffle"),
                          (dict(batch_sampler=eud.BatchSampler(range(4), 2, False),
                                batch_size=3), "batch_sampler option is mutually exclusive"),
                          (dict(batch_size=None, drop_last=True), "disables auto-batching")]:
        with pytest.raises(ValueError, match=match):
            eud.DataLoader(ds, **kwargs)
        if "sampler" not in kwargs and "batch_sampler" not in kwargs:  # same words as torch
            with pytest.raises(ValueError, match=match):
                tud.DataLoader(tud.TensorDataset(torch.zeros(4)), **kwargs)


# ---------------------------------------------------------------------- collation vs torch
Point = collections.namedtuple("Point", "a b")
SAMPLES = [
    [1, 2, 3],
    [1.5, 2.5],
    [True, False],
    ["a", "b"],
    [np.arange(3), np.arange(3) + 1],
    [np.float32(1.5), np.float32(2.5)],
    [(1, 2.0), (3, 4.0)],
    [{"x": [1, 2], "y": (0.5,)}, {"x": [3, 4], "y": (1.5,)}],
    [Point(1, 2.0), Point(3, 4.0)],
]


def _tensorify(lib, batch, with_tensors):
    if not with_tensors:
        return batch
    return [lib.tensor([[i, i + 1.0]]) for i in range(3)]


@pytest.mark.parametrize("batch", SAMPLES + ["tensors"], ids=lambda b: str(b)[:30])
def test_default_collate_matches_torch(batch):
    if batch == "tensors":
        e = eud.default_collate(_tensorify(ember, None, True))
        t = tud.default_collate(_tensorify(torch, None, True))
    else:
        e = eud.default_collate(batch)
        t = tud.default_collate(batch)
    _same_structure(e, t)


def _same_structure(e, t):
    if isinstance(t, torch.Tensor):
        assert_same(e, t)
    elif isinstance(t, dict):
        assert e.keys() == t.keys()
        for k in t:
            _same_structure(e[k], t[k])
    elif isinstance(t, (list, tuple)):
        assert type(e) is type(t) and len(e) == len(t)
        for a, b in zip(e, t):
            _same_structure(a, b)
    else:
        assert e == t


def test_collate_errors():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        eud.default_collate([[1, 2], [3]])
    with pytest.raises(TypeError):
        eud.default_collate([object(), object()])


# ---------------------------------------------------------------------- datasets and samplers
def test_tensor_concat_subset_datasets():
    x, y = ember.arange(10.0).reshape(5, 2), ember.arange(5)
    ds = eud.TensorDataset(x, y)
    assert len(ds) == 5 and ds[2][1].item() == 2
    cat = ds + eud.TensorDataset(x * 10, y * 10)
    assert len(cat) == 10 and cat[7][1].item() == 20 and cat[-1][1].item() == 40
    sub = eud.Subset(cat, [9, 0])
    assert [sub[i][1].item() for i in range(2)] == [40, 0]
    with pytest.raises(AssertionError):
        eud.TensorDataset(x, ember.arange(4))


def test_random_split():
    ember.manual_seed(1)
    a, b = eud.random_split(range(10), [7, 3])
    assert len(a) == 7 and len(b) == 3 and sorted(list(a) + list(b)) == list(range(10))
    parts = eud.random_split(range(10), [0.5, 0.3, 0.2], generator=ember.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [5, 3, 2]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        eud.random_split(range(10), [3, 3])


def test_samplers():
    g = ember.Generator().manual_seed(3)
    w = eud.WeightedRandomSampler([0.0, 0.0, 1.0, 3.0], 4000, generator=g)
    counts = np.bincount(list(w), minlength=4)
    assert counts[0] == counts[1] == 0 and 2.5 < counts[3] / counts[2] < 3.5
    s = list(eud.SubsetRandomSampler([5, 6, 7], generator=g))
    assert sorted(s) == [5, 6, 7]
    assert list(eud.BatchSampler(range(7), 3, drop_last=False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(eud.BatchSampler(range(7), 3, drop_last=True)) == 2
    r = list(eud.RandomSampler(range(5), replacement=True, num_samples=50, generator=g))
    assert len(r) == 50 and set(r) <= set(range(5))
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        eud.RandomSampler(range(5), num_samples=0)
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        eud.BatchSampler(range(5), 0, False)
