"""Multi-process tests of ember.distributed over MPI (2 and 3 ranks): every collective against
a single-process reference, DDP training against the single-process model, a rank that raises,
a rank that hangs, the launcher, ``ember.multiprocessing.spawn``, ``mpiexec``, and the
init methods. The programs are in tests/dist_scripts/. Every subprocess runs in its own
session under a hard timeout (the whole session is killed when it passes), ports are chosen
free by the launcher or the program, and the ranks run one thread each."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py")
pytestmark = pytest.mark.xdist_group("distributed")

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "dist_scripts"
ROOT = HERE.parent


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "MASTER_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    env.update(PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", EMBER_NUM_THREADS="1",
               PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def run(cmd, timeout: float = 60, **env):
    """Run ``cmd`` in a new session; kill the session if it outlives ``timeout``."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=_env(**env), cwd=str(ROOT), start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"{cmd} did not finish within {timeout}s\n{out}\n{err}")
    return p.returncode, out, err, time.monotonic() - start


def launch(n: int, script: str, *args, timeout: float = 60, grace: float = 2, **env):
    return run([sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(n),
                "--grace", str(grace), str(SCRIPTS / script), *args], timeout, **env)


def _half_reference(n: int, hname: str, op: str):
    """PyTorch's gloo all-reduce of the collectives script's half inputs, from torch's own
    half arithmetic: gloo adds two half values in float and rounds; with 3 ranks its ring
    accumulates segment c from rank c+1 round to rank c, rounding after each step."""
    import torch
    dt = getattr(torch, hname)
    xs = [torch.from_numpy(np.random.default_rng(300 + k).standard_normal(64)
                           .astype(np.float32)).to(dt) for k in range(n)]
    if op == "MAX":
        out = xs[0]
        for x in xs[1:]:
            out = torch.maximum(out, x)
        return out.float().numpy()
    seg = -(-64 // n)
    out = torch.empty(64, dtype=dt)
    for c in range(n):
        sl = slice(c * seg, min(64, (c + 1) * seg))
        acc = xs[(c + 1) % n][sl]
        for j in range(2, n + 1):
            acc = acc + xs[(c + j) % n][sl]
        out[sl] = acc
    if op == "AVG":
        out = out / n
    return out.float().numpy()


@pytest.mark.parametrize("n", [2, 3])
def test_collectives(n, tmp_path):
    code, out, err, _ = launch(n, "collectives.py", EMBER_TEST_OUT=str(tmp_path))
    assert code == 0, out + err
    # (the ranks share the launcher's stdout: their lines may run together)
    assert sorted(re.findall(rf"rank (\d) of {n}: collectives OK", out)) == \
        [str(k) for k in range(n)], out
    for k in range(n):
        got = np.load(tmp_path / f"half_rank{k}.npz")
        for hname in ("bfloat16", "float16"):
            for op in ("SUM", "AVG", "MAX"):
                np.testing.assert_array_equal(got[f"{hname}_{op}"],
                                              _half_reference(n, hname, op),
                                              err_msg=f"rank {k} {hname} {op}")


@pytest.mark.parametrize("n", [1, 2, 3])
def test_ddp_trains_as_the_single_process_model(n):
    code, out, err, _ = launch(n, "ddp.py", timeout=90)
    assert code == 0, out + err
    assert out.count("ddp OK") == n, out + err


def test_a_rank_that_raises_stops_the_world():
    code, out, err, took = launch(3, "failing.py", "raise")
    assert code == 1, out + err
    assert "the all-reduce completed" not in out
    assert "ember.distributed.run: rank 1 (local_rank 1" in err, err
    assert "ValueError: rank 1 gives up" in err.split("Traceback of rank 1:")[1], err
    # the ranks waiting in the all-reduce learn of the failure from the store
    assert "stopped: rank 1 failed with ValueError: rank 1 gives up" in err, err
    assert took < 30


def test_a_rank_that_hangs_times_out_the_others():
    code, out, err, took = launch(2, "failing.py", "hang")
    assert code == 1, out + err
    assert "[Rank 0] Watchdog caught collective operation timeout: WorkMPI(SeqNum=1, " \
           "OpType=ALLREDUCE, NumelIn=5, NumelOut=5, Timeout(ms)=1500)" in err, err
    assert "ember.distributed.run: rank 0" in err and "DistBackendError" in err
    assert took < 30  # the sleeping rank is terminated after the launcher's grace period


def test_spawn_forms_a_world_and_reports_a_failure():
    code, out, err, _ = run([sys.executable, str(SCRIPTS / "spawned.py")])
    assert code == 0 and "spawn OK" in out, out + err
    code, out, err, _ = run([sys.executable, str(SCRIPTS / "spawned.py"), "fail"])
    assert code == 3, out + err
    assert "spawn raised" in out and "RuntimeError: process 1 fails" in out, out + err


def test_mpiexec_world_and_init_methods(tmp_path):
    from ember.distributed._engine import _mpiexec
    code, out, err, _ = run([_mpiexec(), "-n", "2", sys.executable,
                             str(SCRIPTS / "world.py"), "env"])
    assert code == 0 and out.count("(env): OK") == 2, out + err
    url = f"file://{tmp_path / 'store'}"
    code, out, err, _ = launch(2, "world.py", url)
    assert code == 0 and out.count(f"({url}): OK") == 2, out + err


def test_two_launchers_as_two_nodes():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmds = [[sys.executable, "-m", "ember.distributed.run", "--nnodes", "2", "--node-rank",
             str(node), "--nproc-per-node", "1", "--master-port", str(port),
             str(SCRIPTS / "world.py"), "env"] for node in (0, 1)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(), cwd=str(ROOT), start_new_session=True) for c in cmds]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=60))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0].strip() == "rank 0 of 2 (env): OK" and \
        outs[1][0].strip() == "rank 1 of 2 (env): OK", outs
