"""``python -m ember.distributed.run``: torchrun's static launcher for ember programs.

    python -m ember.distributed.run --nproc-per-node N [--nnodes M --node-rank K
        --master-addr HOST --master-port PORT] script.py [args...]

starts N processes of ``script.py`` on this node with torchrun's environment (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
TORCHELASTIC_RUN_ID); ``init_process_group()`` (env://) then forms the world. With one node
and no ``--master-port`` a free port is chosen.

When a rank fails, the others are stopped: they see the abort through the store within a
fraction of a second when they wait in a collective, and whatever still runs after
``--grace`` seconds is terminated (SIGTERM, then SIGKILL). The launcher prints the failing
rank's traceback and exits with status 1.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ember.distributed.run",
                                description="Start a program on several ranks (torchrun's "
                                            "static launch).")
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", "--node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=None)
    p.add_argument("--standalone", action="store_true",
                   help="one node, a free port (the default with --nnodes 1)")
    p.add_argument("--grace", type=float, default=5.0,
                   help="seconds the other ranks get to stop after one fails")
    p.add_argument("-m", "--module", action="store_true",
                   help="run the program as a module (python -m)")
    p.add_argument("--no-python", "--no_python", action="store_true",
                   help="run the program as an executable, not through python")
    p.add_argument("training_script")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


# the child: run the program and keep its traceback for the launcher
_CHILD = (
    "import os, runpy, sys, traceback\n"
    "error_file, mode, target = sys.argv[1:4]\n"
    "sys.argv = [target] + sys.argv[4:]\n"
    "try:\n"
    "    if mode == 'module':\n"
    "        runpy.run_module(target, run_name='__main__', alter_sys=True)\n"
    "    else:\n"
    "        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))\n"
    "        runpy.run_path(target, run_name='__main__')\n"
    "except SystemExit as e:\n"
    "    if e.code not in (None, 0):\n"
    "        with open(error_file, 'w') as fh:\n"
    "            fh.write(f'SystemExit: {e.code}\\n')\n"
    "    raise\n"
    "except BaseException:\n"
    "    with open(error_file, 'w') as fh:\n"
    "        fh.write(traceback.format_exc())\n"
    "    raise\n"
)


def launch(args) -> int:
    n = args.nproc_per_node
    world = n * args.nnodes
    port = args.master_port
    if port is None:
        if args.nnodes != 1:
            raise SystemExit("ember.distributed.run: --master-port is needed with --nnodes > 1")
        port = _free_port()
    errdir = tempfile.mkdtemp(prefix="ember-run-")
    procs = []
    for local in range(n):
        rank = args.node_rank * n + local
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(n), GROUP_RANK=str(args.node_rank),
                   MASTER_ADDR=args.master_addr, MASTER_PORT=str(port),
                   TORCHELASTIC_RUN_ID=os.environ.get("TORCHELASTIC_RUN_ID", "none"))
        error_file = os.path.join(errdir, f"rank{rank}.err")
        if args.no_python:
            cmd = [args.training_script] + args.training_script_args
        else:
            mode = "module" if args.module else "path"
            cmd = [sys.executable, "-u", "-c", _CHILD, error_file, mode,
                   args.training_script] + args.training_script_args
        procs.append((rank, local, subprocess.Popen(cmd, env=env), error_file))

    def stop(signum=None, frame=None):
        for _, _, p, _ in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 3
        for _, _, p, _ in procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if signum is not None:
            sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    failures = []  # (rank, local, process, error file), in the order they were seen
    first_failure_at = None
    try:
        while True:
            running = False
            for entry in procs:
                code = entry[2].poll()
                if code is None:
                    running = True
                elif code != 0 and entry not in failures:
                    failures.append(entry)
                    first_failure_at = first_failure_at or time.monotonic()
            if not running:
                break
            if first_failure_at is not None and \
                    time.monotonic() - first_failure_at > args.grace:
                stop()
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        stop()
        return 130
    if not failures:
        return 0
    rank, local, p, err = _root_cause(failures)
    trace = open(err).read() if os.path.exists(err) else "(no traceback: the process died " \
        "without raising, see its output above)\n"
    print(f"ember.distributed.run: rank {rank} (local_rank {local}, pid {p.pid}) failed with "
          f"exit code {p.returncode}; the other ranks were stopped.\n"
          f"Traceback of rank {rank}:\n{trace}", file=sys.stderr, flush=True)
    return 1


def _root_cause(failures):
    """The failure to report: the first rank that failed on its own, not one that only
    stopped because another rank aborted the world (whichever process exited first)."""
    for entry in failures:
        err = entry[3]
        if os.path.exists(err):
            with open(err) as fh:
                if "stopped: rank" not in fh.read():
                    return entry
    return failures[0]


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
