"""Form the world with the init_method given (``env`` or a ``file://`` or ``tcp://`` URL),
however the processes were started, and check an all-reduce, a broadcast and the store."""

import os
import sys

import ember
import ember.distributed as dist

method = sys.argv[1]
if method == "env":
    dist.init_process_group("mpi")
else:
    rank = int(os.environ.get("RANK", os.environ.get("PMI_RANK", "-1")))
    size = int(os.environ.get("WORLD_SIZE", os.environ.get("PMI_SIZE", "-1")))
    dist.init_process_group("gloo", init_method=method, rank=rank, world_size=size)
r, n = dist.get_rank(), dist.get_world_size()
t = ember.full((3,), float(r + 1))
dist.all_reduce(t)
assert t.tolist() == [n * (n + 1) / 2] * 3, t
t = ember.full((2,), float(r))
dist.broadcast(t, n - 1)
assert t.tolist() == [n - 1.0] * 2
store = dist.get_default_store()
if store is not None:
    store.add("arrived", 1)
    store.wait(["arrived"])
dist.barrier()
dist.destroy_process_group()
print(f"rank {r} of {n} ({method}): OK", flush=True)
