"""Every collective on this rank against a single-process reference (run by
tests/test_distributed_mp.py under ``python -m ember.distributed.run``). Rank r's inputs are
functions of r, so each rank computes what every rank sent and checks its result with numpy.
Half-precision all-reduce results are saved to $EMBER_TEST_OUT for the parent to compare with
torch."""

import os
import sys

import numpy as np

import ember
import ember.distributed as dist

dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "gloo" and dist.is_initialized()
rng = np.random.default_rng(0)


def inputs(rank, shape, dtype=np.float32, seed=0):
    g = np.random.default_rng(seed * 100 + rank)
    if np.issubdtype(dtype, np.integer):
        return g.integers(1, 6, shape).astype(dtype)
    if dtype == np.bool_:
        return g.integers(0, 2, shape).astype(bool)
    return g.standard_normal(shape).astype(dtype)


def T(a):
    return ember.tensor(a)


def eq(got, want, what, exact=True):
    got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    ok = np.array_equal(got, want) if exact else np.allclose(got, want, rtol=1e-6, atol=1e-6)
    if not ok:
        sys.exit(f"rank {r}: {what}: got {got!r}, want {want!r}")


ALL = [inputs(k, (3, 4)) for k in range(n)]
REF = {"SUM": sum(ALL), "MAX": np.maximum.reduce(ALL), "MIN": np.minimum.reduce(ALL),
       "PRODUCT": np.prod(ALL, axis=0), "AVG": sum(ALL) / n}
for name, want in REF.items():
    t = T(inputs(r, (3, 4)))
    dist.all_reduce(t, op=getattr(dist.ReduceOp, name))
    eq(t, want, f"all_reduce {name}", exact=False)
    w = dist.all_reduce(t := T(inputs(r, (3, 4))), op=getattr(dist.ReduceOp, name), async_op=True)
    assert w.wait() is True and w.is_completed() and w.is_success()
    eq(t, want, f"all_reduce async {name}", exact=False)
    assert w.result()[0] is t

for dtype in (np.int32, np.int64, np.uint8):
    ints = [inputs(k, (5,), dtype, 1) for k in range(n)]
    for name, fn in (("BAND", np.bitwise_and), ("BOR", np.bitwise_or),
                     ("BXOR", np.bitwise_xor), ("SUM", np.add), ("MAX", np.maximum)):
        t = T(inputs(r, (5,), dtype, 1))
        dist.all_reduce(t, op=getattr(dist.ReduceOp, name))
        eq(t, fn.reduce(ints), f"all_reduce {name} {dtype}")
bools = [inputs(k, (6,), np.bool_, 2) for k in range(n)]
t = T(inputs(r, (6,), np.bool_, 2))
dist.all_reduce(t, op=dist.ReduceOp.SUM)
eq(t, np.logical_or.reduce(bools), "all_reduce SUM bool")
t = T(inputs(r, (6,), np.bool_, 2))
dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
eq(t, np.logical_and.reduce(bools), "all_reduce PRODUCT bool")

# non-contiguous: reduced through a contiguous copy and written back in place
base = T(inputs(r, (4, 3)))
view = base.t()
dist.all_reduce(view)
eq(base, sum(inputs(k, (4, 3)) for k in range(n)), "all_reduce of a transposed view",
   exact=False)
col = T(inputs(r, (4, 3)))
dist.broadcast(col[:, 1], src=n - 1)
want = inputs(r, (4, 3))
want[:, 1] = inputs(n - 1, (4, 3))[:, 1]
eq(col, want, "broadcast into a column view")

# half types (saved for the parent to compare with torch)
out = {}
for hname in ("bfloat16", "float16"):
    for op in ("SUM", "AVG", "MAX"):
        t = T(inputs(r, (64,), seed=3)).to(getattr(ember, hname))
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        out[f"{hname}_{op}"] = t.float().numpy()
np.savez(os.path.join(os.environ["EMBER_TEST_OUT"], f"half_rank{r}.npz"), **out)

# broadcast from every root, sync and async
for src in range(n):
    t = T(inputs(r, (2, 3), np.float64, 4))
    dist.broadcast(t, src=src)
    eq(t, inputs(src, (2, 3), np.float64, 4), f"broadcast src={src}")
t = T(inputs(r, (7,), np.int64, 5))
dist.broadcast(t, src=0, async_op=True).wait()
eq(t, inputs(0, (7,), np.int64, 5), "broadcast async")

# gathers
outs = [ember.zeros(2, 3) for _ in range(n)]
dist.all_gather(outs, T(inputs(r, (2, 3))))
for k in range(n):
    eq(outs[k], inputs(k, (2, 3)), f"all_gather[{k}]")
big = ember.zeros(2 * n, 3)
dist.all_gather_into_tensor(big, T(inputs(r, (2, 3))))
eq(big, np.concatenate([inputs(k, (2, 3)) for k in range(n)]), "all_gather_into_tensor")
stacked = ember.zeros(n, 2, 3)
dist.all_gather_into_tensor(stacked, T(inputs(r, (2, 3))), async_op=True).wait()
eq(stacked, np.stack([inputs(k, (2, 3)) for k in range(n)]), "all_gather_into_tensor stacked")

# reduce_scatter_tensor
full = [inputs(k, (n * 2, 3), seed=6) for k in range(n)]
o = ember.zeros(2, 3)
dist.reduce_scatter_tensor(o, T(full[r]))
eq(o, sum(full)[2 * r:2 * r + 2], "reduce_scatter_tensor SUM", exact=False)
o = ember.zeros(2, 3)
dist.reduce_scatter_tensor(o, T(full[r]), op=dist.ReduceOp.MAX)
eq(o, np.maximum.reduce(full)[2 * r:2 * r + 2], "reduce_scatter_tensor MAX")

o = ember.zeros(2, 3)
dist.reduce_scatter(o, [T(full[r][2 * k:2 * k + 2]) for k in range(n)])
eq(o, sum(full)[2 * r:2 * r + 2], "reduce_scatter (a list)", exact=False)

# all_to_all_single: equal and uneven splits
x = T(np.arange(n * 2, dtype=np.float32) + 100 * r)
y = ember.zeros(n * 2)
dist.all_to_all_single(y, x)
eq(y, np.concatenate([np.arange(2 * r, 2 * r + 2) + 100 * k for k in range(n)]),
   "all_to_all_single")
in_splits = [k + 1 for k in range(n)]  # rank r sends k+1 rows to rank k
out_splits = [r + 1] * n  # and receives r+1 rows from each
x = T(np.arange(sum(in_splits) * 2, dtype=np.float32).reshape(-1, 2) + 1000 * r)
y = ember.zeros(sum(out_splits), 2)
dist.all_to_all_single(y, x, out_splits, in_splits)
start = sum(in_splits[:r])
want = np.concatenate([np.arange(sum(in_splits) * 2, dtype=np.float32).reshape(-1, 2)[
    start:start + r + 1] + 1000 * k for k in range(n)])
eq(y, want, "all_to_all_single with split sizes")

# all_to_all with tensors of different sizes and dtypes per peer
ins = [T(np.full((r + 1, k + 1), 10 * r + k, np.int64)) for k in range(n)]
outs = [ember.zeros(k + 1, r + 1, dtype=ember.int64) for k in range(n)]
dist.all_to_all(outs, ins)
for k in range(n):
    eq(outs[k], np.full((k + 1, r + 1), 10 * k + r, np.int64), f"all_to_all[{k}]")

# reduce, gather, scatter to/from the last rank
root = n - 1
t = T(inputs(r, (3,)))
dist.reduce(t, dst=root)
eq(t, sum(inputs(k, (3,)) for k in range(n)) if r == root else inputs(r, (3,)), "reduce",
   exact=False)
gl = [ember.zeros(3) for _ in range(n)] if r == root else None
dist.gather(T(inputs(r, (3,))), gl, dst=root)
if r == root:
    for k in range(n):
        eq(gl[k], inputs(k, (3,)), f"gather[{k}]")
t = ember.zeros(3)
dist.scatter(t, [T(inputs(k, (3,), seed=7)) for k in range(n)] if r == root else None, src=root)
eq(t, inputs(r, (3,), seed=7), "scatter")
dist.barrier()
dist.barrier(async_op=True).wait()

# point to point: a ring with send/recv, then with batch_isend_irecv
nxt, prv = (r + 1) % n, (r - 1) % n
t = ember.zeros(4)
if r % 2 == 0:
    dist.send(T(inputs(r, (4,))), nxt)
    src = dist.recv(t, prv)
else:
    src = dist.recv(t, prv)
    dist.send(T(inputs(r, (4,))), nxt)
assert src == prv
eq(t, inputs(prv, (4,)), "send/recv ring")
t = ember.zeros(4)
works = dist.batch_isend_irecv([dist.P2POp(dist.isend, T(inputs(r, (4,), seed=8)), nxt),
                                dist.P2POp(dist.irecv, t, prv)])
for w in works:
    w.wait()
eq(t, inputs(prv, (4,), seed=8), "batch_isend_irecv ring")
if r == 1:
    t = ember.zeros(2)
    assert dist.recv(t) == 0  # any source
    eq(t, np.array([5.0, 6.0], np.float32), "recv from any source")
elif r == 0:
    dist.isend(T(np.array([5.0, 6.0], np.float32)), 1).wait()

# objects
objs = [None] * n
dist.all_gather_object(objs, {"rank": r, "data": list(range(r))})
assert objs == [{"rank": k, "data": list(range(k))} for k in range(n)], objs
lst = [("x", 1), {"y": [2]}] if r == root else [None, None]
dist.broadcast_object_list(lst, src=root)
assert lst == [("x", 1), {"y": [2]}], lst
got = [None]
dist.scatter_object_list(got, [{"to": k} for k in range(n)] if r == root else None, src=root)
assert got == [{"to": r}], got
gathered = [None] * n if r == 0 else None
dist.gather_object(r * 10, gathered, dst=0)
assert r != 0 or gathered == [k * 10 for k in range(n)], gathered

# a subgroup: ranks 0 and n-1 (global ranks as src/dst)
sub = dist.new_group([0, n - 1])
if r in (0, n - 1):
    assert dist.get_world_size(sub) == 2 and dist.get_rank(sub) == (0 if r == 0 else 1)
    t = T(inputs(r, (3,)))
    dist.all_reduce(t, group=sub)
    eq(t, inputs(0, (3,)) + inputs(n - 1, (3,)), "all_reduce on a subgroup", exact=False)
    t = T(inputs(r, (3,)))
    dist.broadcast(t, src=n - 1, group=sub)
    eq(t, inputs(n - 1, (3,)), "broadcast on a subgroup (global src)")
    assert dist.get_process_group_ranks(sub) == [0, n - 1]
else:
    assert sub is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(sub) == -1

# bad input: PyTorch's exception types and messages
def raises(exc, text, fn):
    try:
        fn()
    except exc as e:
        if text not in str(e):
            sys.exit(f"rank {r}: expected {text!r} in {e!r}")
        return
    sys.exit(f"rank {r}: expected {exc.__name__} ({text})")


raises(RuntimeError, "invalid tensor size at index 0 (expected",
       lambda: dist.all_gather_into_tensor(ember.zeros(2 * n + 1), ember.zeros(2)))
raises(RuntimeError, "invalid tensor type at index 0",
       lambda: dist.all_gather_into_tensor(ember.zeros(2 * n, dtype=ember.int32),
                                           ember.zeros(2)))
raises(RuntimeError, "Cannot use ReduceOp.BAND with non-integral dtype",
       lambda: dist.all_reduce(ember.ones(2), op=dist.ReduceOp.BAND))
raises(RuntimeError, "result type Float can't be cast to the desired output type Int",
       lambda: dist.all_reduce(ember.ones(2, dtype=ember.int32), op=dist.ReduceOp.AVG))
raises(RuntimeError, f"invalid root rank: {n + 2}",
       lambda: dist.broadcast(ember.ones(2), n + 2))
raises(TypeError, "Expected parameter `tensor` of type torch.Tensor",
       lambda: dist.all_reduce([1.0]))
raises(ValueError, "Invalid destination rank: should not be the same as rank of the current",
       lambda: dist.send(ember.ones(1), r))
raises(ValueError, "Expected ``op`` to be of type ``torch.distributed.isend``",
       lambda: dist.P2POp(dist.send, ember.ones(1), nxt))
raises(ValueError, "trying to initialize the default process group twice",
       lambda: dist.init_process_group("gloo"))
dist.barrier()  # nobody leaves while others still check
dist.destroy_process_group()
assert not dist.is_initialized()
print(f"rank {r} of {n}: collectives OK", flush=True)
