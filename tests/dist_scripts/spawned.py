"""``ember.multiprocessing.spawn`` of processes that form a world over tcp:// (run by
tests/test_distributed_mp.py); with ``fail`` process 1 raises after the group is formed."""

import socket
import sys

import ember
import ember.distributed as dist
import ember.multiprocessing as mp


def work(i, port, n, fail):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                            rank=i)
    if fail and i == 1:
        raise RuntimeError("process 1 fails")
    t = ember.ones(2) * (i + 1)
    dist.all_reduce(t)
    assert t.tolist() == [n * (n + 1) / 2] * 2, t
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fail = sys.argv[1:] == ["fail"]
    try:
        mp.spawn(work, args=(port, 2, fail), nprocs=2)
    except mp.ProcessRaisedException as e:
        print(f"spawn raised: {e}", flush=True)
        sys.exit(3)
    print("spawn OK", flush=True)
