"""ember.multiprocessing: spawn and its errors, and CPU tensors in shared memory (Hogwild)."""

import copy
import io
import multiprocessing
import os
import pickle
import queue
from multiprocessing.reduction import ForkingPickler

import _mp_workers as W
import numpy as np
import pytest
import torch

import ember
import ember.multiprocessing as mp
from ember.backends.cpu import _root

SPAWN = multiprocessing.get_context("spawn")


def _same_storage(a, b) -> bool:
    return _root(a._data) is _root(b._data)


def test_reexports_and_strategies():
    for name in ("Process", "Queue", "SimpleQueue", "Pool", "Event", "Lock", "Manager",
                 "get_context", "set_start_method", "get_start_method",
                 "get_all_start_methods", "cpu_count", "current_process"):
        assert getattr(mp, name) is getattr(multiprocessing, name), name
        assert name in mp.__all__
    assert ember.multiprocessing is mp
    assert mp.get_all_sharing_strategies() == torch.multiprocessing.get_all_sharing_strategies()
    assert mp.get_sharing_strategy() == torch.multiprocessing.get_sharing_strategy()
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(AssertionError, match="invalid sharing strategy 'bogus'"):
        mp.set_sharing_strategy("bogus")


def test_spawn_results_through_queue():
    q = SPAWN.Queue()
    assert mp.spawn(W.put_square, args=(q,), nprocs=2) is None
    got = dict(q.get(timeout=30) for _ in range(2))
    assert {i: v.tolist() for i, v in got.items()} == {0: [0.0], 1: [1.0]}


def test_spawn_propagates_child_exception():
    with pytest.raises(mp.ProcessRaisedException) as e:
        mp.spawn(W.raise_in_one, nprocs=2)
    msg = str(e.value)
    assert msg.startswith("\n\n-- Process 1 terminated with the following error:\n")
    assert "Traceback" in msg and "ValueError: boom from 1" in msg
    assert e.value.error_index == 1 and isinstance(e.value.error_pid, int)


def test_spawn_exit_code_and_signal():
    with pytest.raises(mp.ProcessExitedException,
                       match="process 0 terminated with exit code 3") as e:
        mp.spawn(W.exit_with, args=(3,))
    assert e.value.exit_code == 3 and e.value.error_index == 0
    with pytest.raises(mp.ProcessExitedException,
                       match="process 0 terminated with signal SIGKILL") as e:
        mp.start_processes(W.kill_self, start_method="fork")
    assert e.value.exit_code == -9 and e.value.signal_name == "SIGKILL"


def test_spawn_join_false_context():
    q = SPAWN.Queue()
    ctx = mp.spawn(W.quiet, args=(q,), nprocs=2, join=False)
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.processes) == 2
    pids = ctx.pids()
    assert sorted(pids) == sorted(q.get(timeout=30) for _ in range(2))
    while not ctx.join(timeout=30):
        pass
    assert ctx.join() is True
    assert [p.exitcode for p in ctx.processes] == [0, 0]


def test_is_shared_and_share_memory_in_place():
    t = ember.arange(6.0)
    assert t.is_shared() is torch.arange(6.0).is_shared() is False
    assert t.share_memory_() is t
    assert t.is_shared() and t.tolist() == list(range(6))
    root = _root(t._data)
    t.share_memory_()  # already shared: stays on its block
    assert _root(t._data) is root
    t.add_(1)
    assert t.tolist() == [1.0, 2, 3, 4, 5, 6] and t.is_shared()
    assert not (t + 1).is_shared()  # results are new, unshared storages
    e = ember.empty(0).share_memory_()
    assert e.is_shared() and e.shape == (0,)


@pytest.mark.parametrize("which", ["base", "transpose", "row", "strided"])
def test_share_memory_on_views_matches_torch(which):
    def pick(base):
        return {"base": base, "transpose": base.t(), "row": base[1],
                "strided": base[:, ::2]}[which]

    results = []
    for lib in (ember, torch):
        base = lib.arange(12.0).reshape(3, 4)
        views = [base.t(), base[1], base[:, ::2]]
        target = pick(base)
        assert target.share_memory_() is target
        row = views[1]
        row[0] = 50.0  # a view taken before share_memory_ still aliases its base
        results.append(([base.is_shared()] + [v.is_shared() for v in views],
                        [v.stride() for v in views], target.stride(),
                        target.is_contiguous(), base.tolist(), views[0].tolist()))
    assert results[0] == results[1]


def test_views_and_parameters_keep_sharing():
    w = ember.nn.Parameter(ember.ones(2, 3))
    d = w.detach()  # over the same storage
    w.share_memory_()
    assert type(w) is ember.nn.Parameter and w.requires_grad and w.is_shared()
    assert d.is_shared() and _same_storage(d, w)
    d[0, 0] = 9.0
    assert w[0, 0].item() == 9.0


def test_queue_in_process_shared_is_same_memory_plain_is_copy():
    q = SPAWN.Queue()
    base = ember.zeros(3, 4).share_memory_()
    col = base[:, 2]
    plain = ember.zeros(3)
    p = ember.nn.Parameter(ember.ones(2)).share_memory_()
    q.put((base, col, plain, p))
    base2, col2, plain2, p2 = q.get(timeout=30)
    assert base2.is_shared() and col2.is_shared() and not plain2.is_shared()
    assert _same_storage(base2, base) and _same_storage(col2, base)
    assert col2.stride() == col.stride() == (4,)
    col2[1] = 5.0
    assert base[1, 2].item() == 5.0
    plain2[0] = 1.0
    assert plain[0].item() == 0.0
    assert type(p2) is ember.nn.Parameter and p2.requires_grad and _same_storage(p2, p)


def test_plain_pickle_deepcopy_and_save_copy_shared_tensors(tmp_path):
    t = ember.arange(4.0).share_memory_()
    for c in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert not c.is_shared() and c.tolist() == t.tolist()
        c[0] = 10.0
        assert t[0].item() == 0.0
    buf = io.BytesIO()
    ember.save({"t": t}, buf)
    buf.seek(0)
    assert torch.load(buf)["t"].tolist() == t.tolist()


def test_non_leaf_requiring_grad_refused():
    x = ember.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        ForkingPickler.dumps(x)
    assert ForkingPickler.loads(ForkingPickler.dumps(x.detach())).tolist() == [2.0, 2.0]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_block_freed_with_its_last_tensor():
    shm = set(os.listdir("/dev/shm"))
    before = _open_fds()
    t = ember.ones(1000).share_memory_()
    v = t[10:]
    assert _open_fds() == before + 1  # the block's one descriptor
    del t
    assert _open_fds() == before + 1  # the view keeps the block
    del v
    assert _open_fds() == before
    assert set(os.listdir("/dev/shm")) <= shm  # nothing named is ever created


def test_children_write_shared_tensor_spawn():
    t = ember.zeros(2).share_memory_()
    m = ember.zeros(2, 3).share_memory_()
    mp.spawn(W.write_index, args=(t, m[:, 1]), nprocs=2)
    assert t.tolist() == [1.0, 2.0]
    assert m.tolist() == [[0.0, -1.0, 0.0], [0.0, -2.0, 0.0]]


def test_children_write_shared_tensor_fork():
    fork = multiprocessing.get_context("fork")
    t = ember.zeros(3).share_memory_()
    plain = ember.zeros(3)
    ps = [fork.Process(target=W.write_first, args=(x, i)) for i, x in
          enumerate((t, t[1:], plain))]
    for p in ps:
        p.start()
    for p in ps:
        p.join(30)
    assert [p.exitcode for p in ps] == [0, 0, 0]
    assert t.tolist() == [100.0, 0.0, 101.0]  # t[1:][1] is t[2]
    assert plain.tolist() == [0.0] * 3  # forked copy-on-write memory: the child's own


def test_parent_and_child_see_each_others_writes():
    t = ember.zeros(4).share_memory_()
    u = ember.zeros(3).share_memory_()
    plain = ember.zeros(2)
    q_in, q_out, go = SPAWN.Queue(), SPAWN.Queue(), SPAWN.Event()
    ctx = mp.spawn(W.round_trip, args=(t, q_in, q_out, go), join=False)
    assert q_out.get(timeout=60) == "ready"
    t.fill_(3.0)  # after the child has its tensor
    go.set()
    assert q_out.get(timeout=30) == 12.0
    q_in.put((u, plain))  # to a running process: the descriptor goes through a socket
    tail = q_out.get(timeout=30)
    assert q_out.get(timeout=30) == (True, False, 42.0)
    assert q_out.get(timeout=30) == "done"
    go.set()
    assert u.tolist() == [0.0, 42.0, 0.0] and plain.tolist() == [0.0, 0.0]
    assert tail.is_shared() and _same_storage(tail, u)  # sent back: the parent's own storage
    tail[0] = 7.0
    assert u[1].item() == 7.0
    while not ctx.join(timeout=30):
        pass


def test_hogwild_training_updates_parent_parameters():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.BatchNorm1d(3),
                                ember.nn.Linear(3, 1))
    assert model.share_memory() is model
    assert all(p.is_shared() for p in model.parameters())
    assert all(b.is_shared() for b in model.buffers())
    before = [p.detach().clone() for p in model.parameters()]
    mp.spawn(W.hogwild, args=(model, 5), nprocs=2)
    for b, p in zip(before, model.parameters()):  # (the bias before BatchNorm barely moves)
        assert not ember.equal(b, p)
    assert not np.allclose(before[-2].numpy(), model[2].weight.detach().numpy())
    # buffers are shared too: both children's updates land (Hogwild may lose a racing one)
    assert model[1].num_batches_tracked.item() > 5


def test_queue_get_empty_still_raises():
    with pytest.raises(queue.Empty):
        SPAWN.Queue().get(timeout=0.01)
