"""A world in which one rank fails (run by tests/test_distributed_mp.py): ``raise`` makes
rank 1 raise while the others wait in an all-reduce; ``hang`` makes rank 1 sleep while the
others time out in theirs (timeout 1.5 s)."""

import datetime
import sys
import time

import ember
import ember.distributed as dist

mode = sys.argv[1]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=1.5 if mode == "hang"
                                                                   else 120))
r = dist.get_rank()
if r == 1:
    if mode == "raise":
        raise ValueError("rank 1 gives up")
    time.sleep(120)
dist.all_reduce(ember.ones(5))
print(f"rank {r}: the all-reduce completed", flush=True)
