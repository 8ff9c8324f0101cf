"""ember.distributed in one process: the stores (against PyTorch's), the sampler's index order
(against PyTorch's DistributedSampler), the post-accumulate-grad hook DDP runs on, the
answers without a group, and the NCCL engine's absence. The multi-process tests are in
test_distributed_mp.py."""

from __future__ import annotations

import datetime
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
import torch.distributed as tdist

import ember
import ember.distributed as dist
from ember.utils.data.distributed import DistributedSampler


def _stores(tmp_path):
    ms = datetime.timedelta(milliseconds=200)
    e = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=ms)
    t = tdist.TCPStore("127.0.0.1", 0, 1, True, timeout=ms)
    yield "tcp", e, t
    yield "file", dist.FileStore(str(tmp_path / "e"), 1), tdist.FileStore(str(tmp_path / "t"), 1)


def test_stores_answer_as_pytorchs(tmp_path):
    for kind, e, t in _stores(tmp_path):
        for s in (e, t):
            s.set_timeout(datetime.timedelta(milliseconds=200))
        for name, call in (
                ("num_keys", lambda s: s.num_keys()),
                ("set", lambda s: s.set("a", "x")),
                ("set bytes", lambda s: s.set("b", b"\x00\xff")),
                ("get", lambda s: (s.get("a"), s.get("b"))),
                ("add", lambda s: (s.add("c", 3), s.add("c", -1), s.get("c"))),
                ("compare_set equal", lambda s: s.compare_set("a", "x", "y")),
                ("compare_set unequal", lambda s: s.compare_set("a", "q", "z")),
                ("compare_set missing", lambda s: s.compare_set("new", "e", "v")),
                ("compare_set missing, empty", lambda s: s.compare_set("new2", "", "v")),
                ("check", lambda s: (s.check(["a", "c"]), s.check(["a", "zz"]))),
                ("num_keys after", lambda s: s.num_keys()),
                ("delete_key", lambda s: (s.delete_key("a"), s.delete_key("a"))),
                ("wait present", lambda s: s.wait(["c"]))):
            assert call(e) == call(t), (kind, name)
        for s in (e, t):
            with pytest.raises(RuntimeError) as info:
                s.get("never")
            assert "never" in str(info.value)
        with pytest.raises(dist.DistStoreError):
            e.wait(["never"], datetime.timedelta(milliseconds=50))
    p = dist.PrefixStore("pre", e)
    p.set("k", "v")
    assert e.get("pre/k") == p.get("k") == b"v" and p.check(["k"]) and not p.check(["j"])


def test_tcp_store_clients_and_blocking_get():
    server = dist.TCPStore("127.0.0.1", 0, 2, True, wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", server.port, 2, False)
    got = []
    reader = threading.Thread(target=lambda: got.append(client.get("later")))
    reader.start()
    server.set("later", "here")
    reader.join(10)
    assert got == [b"here"]
    assert server.add("n", 1) == 1 and client.add("n", 1) == 2
    with pytest.raises(dist.DistStoreError, match=r"wait timeout after 100ms, keys: /nope"):
        client.wait(["nope"], datetime.timedelta(milliseconds=100))
    with pytest.raises(dist.DistNetworkError):
        dist.TCPStore("127.0.0.1", server.port, 1, True)  # the port is taken


@pytest.mark.parametrize("n", [0, 1, 7, 10, 13])
def test_distributed_sampler_is_pytorchs(n):
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for replicas in (1, 2, 3, 4):
        for shuffle in (True, False):
            for drop_last in (True, False):
                for seed, epoch in ((0, 0), (7, 3)):
                    for rank in range(replicas):
                        a = DistributedSampler(range(n), replicas, rank, shuffle, seed,
                                               drop_last)
                        b = TorchSampler(range(n), replicas, rank, shuffle, seed, drop_last)
                        a.set_epoch(epoch)
                        b.set_epoch(epoch)
                        assert (list(a), len(a)) == (list(b), len(b)), \
                            (replicas, rank, shuffle, drop_last, seed, epoch)


def test_distributed_sampler_large_shuffle_and_errors():
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    a = DistributedSampler(range(5000), 3, 2, seed=123)
    b = TorchSampler(range(5000), 3, 2, seed=123)
    assert list(a) == list(b)
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval "
                                         r"\[0, 2\]"):
        DistributedSampler(range(4), 3, 3)
    with pytest.raises(ValueError, match="init_process_group"):
        DistributedSampler(range(4))  # no group to take the replicas from


def test_post_accumulate_grad_hook_as_pytorchs():
    logs = []
    for m in (ember, torch):
        w = m.ones(2, requires_grad=True)
        log = []
        h = w.register_post_accumulate_grad_hook(lambda p: log.append(p.grad.tolist()))
        (w * 3).sum().backward()
        (w * 2).sum().backward()
        h.remove()
        (w * 5).sum().backward()
        logs.append(log)
        with pytest.raises(RuntimeError, match="non-leaf"):
            (w * 2).register_post_accumulate_grad_hook(print)
        with pytest.raises(RuntimeError, match="doesn't require gradient"):
            m.ones(1).register_post_accumulate_grad_hook(print)
    assert logs[0] == logs[1] == [[3.0, 3.0], [5.0, 5.0]]


def test_without_a_group():
    assert not dist.is_initialized() and dist.is_available()
    assert dist.Backend("GLOO") == "gloo" == tdist.Backend("GLOO")
    for call in (lambda m: m.get_rank(), lambda m: m.barrier(),
                 lambda m: m.all_gather_object([None], 1),
                 lambda m: m.new_group([0])):
        for m in (dist, tdist):
            with pytest.raises(ValueError, match="Default process group has not been "
                                                 "initialized, please make sure to call "
                                                 "init_process_group."):
                call(m)
    with pytest.raises(TypeError, match="Expected parameter `tensor` of type torch.Tensor"):
        dist.all_reduce(np.ones(2))
    with pytest.raises(RuntimeError, match="Invalid backend: 'foo'"):
        dist.init_process_group("foo", init_method="file:///nonexistent", rank=0,
                                world_size=1)
    with pytest.raises(TypeError, match="timedelta"):
        dist.init_process_group("gloo", timeout=5)


def test_importing_ember_does_not_import_mpi4py():
    code = ("import sys, ember, ember.distributed; "
            "assert 'mpi4py' not in sys.modules, 'mpi4py imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.xfail(strict=True, raises=RuntimeError,
                   reason="issue 19: the NCCL engine (CUDA process groups) is not built yet")
def test_nccl_process_group():
    try:
        dist.init_process_group("nccl", init_method="file:///nonexistent", rank=0,
                                world_size=1)
    except RuntimeError as e:
        assert "NCCL engine" in str(e) and "not built yet" in str(e)
        raise
    dist.destroy_process_group()
