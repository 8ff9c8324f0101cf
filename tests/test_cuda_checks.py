"""Data-dependent argument checks on the GPU (backends/cuda/checks.py; the GPU tier, ``-m
cuda``): a GPT training step reads nothing back to the host but the user's ``loss.item()``;
an index, target or probability out of range is recorded on the device and raised at the next
synchronising call as PyTorch's "device-side assert" RuntimeError naming the op and the value
(at the op with ``EMBER_CUDA_SYNC_CHECKS=1``), after which the process keeps working.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")

pytestmark = GPU_TIER


def stats():
    from ember.backends.cuda import checks
    return checks.STATS


@contextlib.contextmanager
def host_traffic(**expect):
    """Counts what the block reads back (``d2h``, ``syncs``, ``flag_reads``, ``checks``:
    backends/cuda/checks.py) into the yielded dict, and asserts those named in ``expect``."""
    before = dict(stats())
    counts: dict = {}
    yield counts
    counts.update({k: stats()[k] - before[k] for k in before})
    got = {k: counts[k] for k in expect}
    assert got == expect, f"host traffic {counts}, expected {expect}"


@pytest.fixture(autouse=True)
def deferred(monkeypatch):
    """Deferred checks, and no failure left pending by an earlier test."""
    monkeypatch.delenv("EMBER_CUDA_SYNC_CHECKS", raising=False)
    with contextlib.suppress(RuntimeError):
        ember.cuda.synchronize()


class Block(ember.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = ember.nn.LayerNorm(d), ember.nn.LayerNorm(d)
        self.qkv, self.proj = ember.nn.Linear(d, 3 * d), ember.nn.Linear(d, d)
        self.fc, self.out = ember.nn.Linear(d, 4 * d), ember.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (a.view(b, t, self.heads, d // self.heads).transpose(1, 2) for a in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(ember.nn.Module):
    def __init__(self, vocab=64, block=16, d=32, heads=2, layers=2):
        super().__init__()
        self.tok, self.pos = ember.nn.Embedding(vocab, d), ember.nn.Embedding(block, d)
        self.blocks = ember.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = ember.nn.LayerNorm(d)
        self.head = ember.nn.Linear(d, vocab, bias=False)

    def forward(self, ids, targets):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(ember.arange(t, device=ids.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def test_a_gpt_training_step_reads_back_only_the_users_item():
    ember.manual_seed(0)
    model = GPT().cuda()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    rng = np.random.default_rng(0)
    batches = [ember.tensor(rng.integers(0, 64, (4, 17))).cuda() for _ in range(4)]

    def step(ids):
        loss = model(ids[:, :-1], ids[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    losses = [step(batches[0]).item()]  # first launches: kernels compile, tables upload
    for ids in batches[1:]:
        with host_traffic(d2h=0, syncs=0, flag_reads=0) as c:
            loss = step(ids)
        assert c["checks"] >= 3  # token and position embeddings, the targets
        with host_traffic(d2h=1, syncs=1, flag_reads=1):
            losses.append(loss.item())  # the one read, which also reads the error flag
    assert all(np.isfinite(losses)) and losses[-1] < losses[0] + 0.5


def test_a_step_without_checks_reads_no_flag():
    x = ember.randn(64, 64, device="cuda")
    ember.cuda.synchronize()
    with host_traffic(d2h=1, syncs=1, flag_reads=0, checks=0):
        (x @ x).sum().item()


def _ops(dev):
    """(name in the message, the recorded value, a call with one bad value)."""
    w = ember.randn(5, 3, device=dev)
    x = ember.randn(3, 4, device=dev)
    t = lambda *v: ember.tensor(list(v), device=dev)  # noqa: E731
    return {
        "embedding": ("index 5", lambda: F.embedding(t(1, 5, 2), w)),
        "gather": ("index 4", lambda: x.gather(1, t([0, 4], [1, 2], [3, 3]))),
        "index_select": ("index -1", lambda: x.index_select(0, t(2, -1))),
        "index": ("index 3", lambda: x[t(0, 3)]),
        "nll_loss": ("target 7", lambda: F.cross_entropy(x, t(0, 7, 1))),
        "multinomial": ("probability tensor contains either `inf`, `nan` or element < 0",
                        None),
    }


BAD = [k for k in _ops("cpu") if k != "multinomial"]


@pytest.mark.parametrize("name", BAD)
def test_an_index_out_of_range_is_raised_at_the_next_sync(name):
    what, call = _ops("cuda")[name]
    call()  # no exception, no host read
    with pytest.raises(RuntimeError) as e:
        ember.cuda.synchronize()
    msg = str(e.value)
    assert msg.startswith(f"CUDA error: device-side assert triggered: {name}: {what} out of ")
    # the flag was cleared: the process goes on
    assert ember.ones(3, device="cuda").sum().item() == 3.0
    ember.cuda.synchronize()


@pytest.mark.parametrize("name", BAD)
def test_item_raises_the_recorded_failure(name):
    what, call = _ops("cuda")[name]
    call()
    y = ember.ones(2, device="cuda") * 2
    with pytest.raises(RuntimeError, match=f"device-side assert triggered: {name}: {what}"):
        y.sum().item()
    assert y.tolist() == [2.0, 2.0]


def test_other_reads_raise_too():
    x = ember.randn(3, 4, device="cuda")
    for read in (lambda a: a.cpu(), lambda a: a.tolist(), repr):
        F.embedding(ember.tensor([9], device="cuda"), x)
        with pytest.raises(RuntimeError, match="embedding: index 9 out of range for size 3"):
            read(x)
    read(x)


@pytest.mark.parametrize("name", BAD)
def test_sync_checks_raise_at_the_op(monkeypatch, name):
    monkeypatch.setenv("EMBER_CUDA_SYNC_CHECKS", "1")
    what, call = _ops("cuda")[name]
    with pytest.raises(RuntimeError) as e:
        call()
    assert str(e.value).startswith(f"CUDA error: device-side assert triggered: {name}: {what}")
    assert "EMBER_CUDA_SYNC_CHECKS" not in str(e.value)
    ember.cuda.synchronize()  # nothing left pending


@pytest.mark.parametrize("name", BAD)
def test_torch_cuda_fails_on_the_same_calls(name):
    """The reference: torch's CUDA kernels assert on the same inputs (checked in a child
    process, since a device-side assert poisons torch's CUDA context)."""
    import subprocess
    import sys
    calls = {
        "embedding": "F.embedding(t([1, 5, 2]), torch.randn(5, 3, device='cuda'))",
        "gather": "x.gather(1, t([[0, 4], [1, 2], [3, 3]]))",
        "index_select": "x.index_select(0, t([2, -1]))",
        "index": "x[t([0, 3])]",
        "nll_loss": "F.cross_entropy(x, t([0, 7, 1]))",
    }
    code = ("import torch, torch.nn.functional as F\n"
            "t = lambda v: torch.tensor(v, device='cuda')\n"
            "x = torch.randn(3, 4, device='cuda')\n"
            "try:\n"
            f"    {calls[name]}\n"
            "    torch.cuda.synchronize()\n"
            "except (RuntimeError, IndexError) as e:\n"
            "    print(type(e).__name__, str(e).splitlines()[0])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    out = r.stdout.strip()
    # (torch 2.11 names its device-side failures AcceleratorError, a RuntimeError)
    assert out.startswith(("RuntimeError", "IndexError", "AcceleratorError")), \
        (out, r.stderr[-2000:])


# multinomial's sampling does not run on CUDA yet (numpy's Generator: test_opdb_cuda's
# KNOWN_CUDA); its checks run first, so with EMBER_CUDA_SYNC_CHECKS=1 they raise at the op
@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf")])
@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial_probabilities(monkeypatch, bad, replacement):
    monkeypatch.setenv("EMBER_CUDA_SYNC_CHECKS", "1")
    p = ember.tensor([[0.2, 0.3, 0.5], [0.1, bad, 0.2]], device="cuda")
    with pytest.raises(RuntimeError) as e:
        ember.multinomial(p, 2, replacement)
    assert str(e.value) == (
        "CUDA error: device-side assert triggered: multinomial: probability tensor contains "
        "either `inf`, `nan` or element < 0 (element 4 of the rows).")


def test_multinomial_zero_rows(monkeypatch):
    monkeypatch.setenv("EMBER_CUDA_SYNC_CHECKS", "1")
    p = ember.tensor([[0.2, 0.3], [0.0, 0.0]], device="cuda")
    with pytest.raises(RuntimeError, match="invalid multinomial distribution \\(sum of "
                       "probabilities <= 0\\) \\(row 1\\)"):
        ember.multinomial(p, 1)


def test_bernoulli_and_bce_check_their_probabilities_on_the_device():
    p = ember.tensor([0.5, 1.5, 0.2], device="cuda")
    with host_traffic(d2h=0, syncs=0, checks=1):
        draws = ember.bernoulli(p)  # drawn on the device; the check does not wait
    with pytest.raises(RuntimeError, match="bernoulli: probability \\(element 1\\) is not in"):
        draws.sum().item()
    x = ember.tensor([0.5, float("nan")], device="cuda")
    with host_traffic(d2h=0, syncs=0):
        F.binary_cross_entropy(x, ember.zeros(2, device="cuda"))
    with pytest.raises(RuntimeError, match="binary_cross_entropy: input \\(element 1\\)"):
        ember.cuda.synchronize()
    ok = ember.tensor([0.0, 0.3, 1.0], device="cuda")
    assert ember.bernoulli(ok).tolist()[::2] == [0.0, 1.0]


def test_the_first_failure_wins_and_later_checks_run_clean():
    x = ember.randn(3, 4, device="cuda")
    x.index_select(0, ember.tensor([7], device="cuda"))
    F.embedding(ember.tensor([11], device="cuda"), x)
    with pytest.raises(RuntimeError, match="index_select: index 7") as e:
        ember.cuda.synchronize()
    assert "embedding" not in str(e.value)
    F.embedding(ember.tensor([2], device="cuda"), x)
    ember.cuda.synchronize()


def test_large_index_arrays():
    """Many programs; the failure is one of the bad values (whichever program wins)."""
    w = ember.randn(100, 8, device="cuda")
    a = np.arange(1 << 20) % 100
    F.embedding(ember.tensor(a).cuda(), w)
    ember.cuda.synchronize()
    a[123_456], a[999_999] = 100, -2
    F.embedding(ember.tensor(a).cuda(), w)
    with pytest.raises(RuntimeError, match=r"embedding: index (100|-2) out of range"):
        ember.cuda.synchronize()


# ops that read the device back by design: Python results, shapes that depend on the data
READS_BY_DESIGN = {
    "allclose", "equal", "is_nonzero", "item", "tolist", "__bool__",
    "nonzero", "nonzero_static", "argwhere", "masked_select", "unique", "unique_consecutive",
    "bincount", "histc", "repeat_interleave", "nn.functional.one_hot", "__getitem__",
    "index_put", "masked_scatter", "combinations", "nn.functional.embedding_bag",
    # tensor endpoints become the Python numbers the steps are computed from (PyTorch too)
    "linspace.tensor_overload", "logspace.tensor_overload",
    # PyTorch checks var >= 0 on the host too
    "nn.functional.gaussian_nll_loss",
}
# op id -> why it still reads the device back though it need not (to fix)
KNOWN_READS: dict[str, str] = {
    "randint": "draws on the host (numpy's Generator): needs a Philox kernel",
    "randint_like": "draws on the host (numpy's Generator): needs a Philox kernel",
}


def test_op_table_reads():
    """Over the OpInfo table on CUDA (tests/cuda_op_traffic.py, in a child process, ember's
    counters): no op copies to the host or waits for the device unless it returns a Python
    value or its output shape depends on the data, and no op runs a numpy kernel on the data
    (a host result moved to the device), apart from the ops that do not run on CUDA yet
    (test_opdb_cuda.KNOWN_CUDA) and the listed ones."""
    import json
    import pathlib
    import subprocess
    import sys
    from test_opdb_cuda import KNOWN_CUDA
    here = pathlib.Path(__file__).parent
    r = subprocess.run([sys.executable, str(here / "cuda_op_traffic.py")], capture_output=True,
                       text=True, cwd=here, timeout=1800, env=_child_env())
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    errors = got.pop("_errors")
    allowed = READS_BY_DESIGN | set(KNOWN_READS) | set(KNOWN_CUDA)
    reads = {k: v for k, v in got.items() if (v[0] or v[1]) and k not in allowed}
    host = {k: v for k, v in got.items() if v[2] and k not in set(KNOWN_CUDA) | set(KNOWN_READS)}
    new_errors = {k: v for k, v in errors.items() if k not in KNOWN_CUDA}
    assert not reads, f"ops reading the GPU back (op: [d2h, syncs, host results]): {reads}"
    assert not host, f"ops computing on the host (numpy-only kernels): {host}"
    assert not new_errors, f"ops failing on CUDA outside KNOWN_CUDA: {new_errors}"


def _child_env(**extra) -> dict:
    """The environment of a child Python that imports ember from this checkout."""
    import os
    import pathlib
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env
