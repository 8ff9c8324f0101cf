"""DistributedDataParallel on this rank (run by tests/test_distributed_mp.py under the
launcher with 1, 2 or 3 ranks): a small GPT trained for 20 steps must match the single-process
model trained on the full batch (losses within 1e-5; bit-identical with one rank), with the
hook-order log showing the first bucket's all-reduce issued before the last gradient; then
no_sync, find_unused_parameters, broadcast_buffers, state_dict keys, the sampler's defaults."""

import sys

import numpy as np

import ember
import ember.distributed as dist
from ember import nn
from ember.examples import load
from ember.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
GPT = load("train_gpt", "ember").GPT
B = 6  # the full batch: n divides it for n in 1, 2, 3


def fail(msg):
    sys.exit(f"rank {r}: {msg}")


def make_gpt():
    ember.manual_seed(0)
    return GPT(32, 8, 2, 2, 16)


rng = np.random.default_rng(0)
idx = ember.tensor(rng.integers(0, 32, (B, 8)))
tgt = ember.tensor(rng.integers(0, 32, (B, 8)))
ref = make_gpt()
# SGD: Adam would turn the rounding noise of gradients that are zero in exact arithmetic (the
# key bias's) into full-size steps, and the parameters could not be compared
ref_opt = ember.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
model = make_gpt()
if r != 0:  # construction broadcasts rank 0's parameters
    with ember.no_grad():
        for p in model.parameters():
            p.add_(0.5)
ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.004)
assert ddp.module is model
assert len(ddp.bucket_param_names) > 2, ddp.bucket_param_names
opt = ember.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
per = B // n
mine = slice(r * per, (r + 1) * per)
worst = 0.0
for step in range(20):
    ref_opt.zero_grad()
    _, ref_loss = ref(idx, tgt)
    ref_loss.backward()
    ref_opt.step()
    ddp._record_hooks = step == 0
    opt.zero_grad()
    _, loss = ddp(idx[mine], tgt[mine])
    loss.backward()
    opt.step()
    if n == 1:
        if loss.item() != ref_loss.item():
            fail(f"one rank: step {step} loss {loss.item()!r} != {ref_loss.item()!r}")
    mean = loss.detach().clone()
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)
    worst = max(worst, abs(mean.item() - ref_loss.item()))
if worst > 1e-5:
    fail(f"losses differ from the single-process model by {worst}")
for (name, p), q in zip(model.named_parameters(), ref.parameters()):
    same = np.array_equal(p.detach().numpy(), q.detach().numpy())
    if n == 1 and not same:
        fail(f"one rank: parameter {name} differs")
    if not np.allclose(p.detach().numpy(), q.detach().numpy(), atol=1e-5, rtol=0):
        fail(f"parameter {name} differs from the single-process model by "
             f"{np.abs(p.detach().numpy() - q.detach().numpy()).max()}")

# overlap: the first bucket's all-reduce is issued while backward still produces gradients
log = ddp._hook_log
first_allreduce = log.index(("allreduce", 0))
last_grad = max(i for i, e in enumerate(log) if e[0] == "grad")
if n > 1 and not first_allreduce < last_grad:
    fail(f"no overlap: {log}")
assert [e for e in log if e[0] == "allreduce"] == [("allreduce", k) for k in
                                                   range(len(ddp.bucket_param_names))]
assert list(ddp.state_dict())[0].startswith("module.")
assert set(ddp.state_dict()) == {"module." + k for k in model.state_dict()}

# no_sync: the first micro-batch's gradients stay local, the second backward averages the sum
lin_ref = nn.Linear(4, 2)
lin = nn.Linear(4, 2)
lin.load_state_dict(lin_ref.state_dict())
dist.broadcast(lin.weight.detach(), 0)
dist.broadcast(lin.bias.detach(), 0)
lin_ref.load_state_dict(lin.state_dict())
d2 = nn.parallel.DistributedDataParallel(lin)
xs = [ember.tensor(np.random.default_rng(10 + k).standard_normal((n, 4)).astype(np.float32))
      for k in range(2)]
with d2.no_sync():
    d2(xs[0][r:r + 1]).sum().backward()
local = lin.weight.grad.clone()
want_local = ember.ones(2, 1) * xs[0][r:r + 1]
if not np.allclose(local.numpy(), want_local.numpy(), atol=1e-6):
    fail("no_sync: gradient not local")
d2(xs[1][r:r + 1]).sum().backward()
want = (ember.ones(2, 1) * (xs[0].sum(0, keepdim=True) + xs[1].sum(0, keepdim=True))) / n
if not np.allclose(lin.weight.grad.numpy(), want.numpy(), atol=1e-5):
    fail(f"no_sync then sync: {lin.weight.grad.tolist()} != {want.tolist()}")


# find_unused_parameters: rank 0 uses branch a, the others branch b; c is used by none
class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 1)
        self.b = nn.Linear(3, 1)
        self.c = nn.Linear(3, 1)

    def forward(self, x):
        return (self.a if r == 0 else self.b)(x)


ember.manual_seed(1)
br = Branches()
d3 = nn.parallel.DistributedDataParallel(br, find_unused_parameters=True)
x = ember.ones(2, 3)
for _ in range(2):
    for p in br.parameters():
        p.grad = None
    d3(x).sum().backward()
    want_a = 2.0 / n
    if abs(br.a.bias.grad.item() - want_a) > 1e-6:
        fail(f"find_unused: a.bias.grad {br.a.bias.grad.item()} != {want_a}")
    if n > 1 and abs(br.b.bias.grad.item() - 2.0 * (n - 1) / n) > 1e-6:
        fail(f"find_unused: b.bias.grad {br.b.bias.grad.item()}")
    if n == 1 and br.b.bias.grad is not None:
        fail("find_unused: a parameter no rank used got a gradient")
    if br.c.weight.grad is not None:
        fail("find_unused: a parameter no rank used got a gradient")

# without find_unused_parameters an unused parameter stops the next iteration (PyTorch's error)
ember.manual_seed(1)
d4 = nn.parallel.DistributedDataParallel(Branches())
d4(x).sum().backward()
try:
    d4(x)
except RuntimeError as e:
    assert "Expected to have finished reduction in the prior iteration" in str(e), e
else:
    fail("an unused parameter without find_unused_parameters did not raise")

# broadcast_buffers: rank 0's BatchNorm statistics reach every rank before each forward
bn = nn.BatchNorm1d(3)
with ember.no_grad():
    bn.running_mean.fill_(float(r))
d5 = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(3, 3), bn))
with ember.no_grad():
    bn.running_mean.fill_(float(r + 7))
d5.eval()
d5(ember.ones(2, 3))
if bn.running_mean.tolist() != [7.0, 7.0, 7.0]:
    fail(f"broadcast_buffers: {bn.running_mean.tolist()}")

s = DistributedSampler(list(range(10)), shuffle=False)
padded = list(range(10)) + list(range(-10 % n))  # padded with the first indices
assert (s.num_replicas, s.rank) == (n, r) and list(s) == padded[r::n], (list(s), padded)
dist.destroy_process_group()
print(f"rank {r} of {n}: ddp OK, worst loss difference {worst:.2e}", flush=True)
