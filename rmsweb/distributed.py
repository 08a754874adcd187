"""Distributed stages (sft, rl) under torchrun, across SkyPilot nodes.

How it fits together (see sky/<experiment>.yaml):
1. SkyPilot sets RMSWEB_TORCHRUN (torchrun's node arguments) on every node.
2. The head node runs `dvc repro`. When DVC reaches a distributed stage, the
   stage command (`rmsweb sft ...`) sees RMSWEB_TORCHRUN and re-executes itself
   under torchrun. With several nodes it first pushes the stage's inputs to the
   DVC remote and posts the command to the rendezvous folder (on the mounted
   checkpoint bucket).
3. Every other node runs `rmsweb worker`: it waits for posted commands, pulls
   their inputs and joins the same torchrun rendezvous with its own node rank.
   The head posts `done` at the end (`rmsweb worker --finish`).
Only the head's outputs are kept by DVC; workers contribute compute.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from rmsweb.errors import UserError

POLL_S = 5.0


def _torchrun() -> list[str]:
    return shlex.split(os.environ.get("RMSWEB_TORCHRUN_BIN", "torchrun"))


def _dvc() -> list[str]:
    return shlex.split(os.environ.get("RMSWEB_DVC_BIN", "dvc"))


def _node_rank() -> int:
    return int(os.environ.get("SKYPILOT_NODE_RANK", "0"))


def _num_nodes() -> int:
    return int(os.environ.get("SKYPILOT_NUM_NODES", "1"))


def stage_inputs(argv: list[str]) -> list[str]:
    """The DIRs of `--in ROLE=DIR` arguments."""
    return [argv[i + 1].partition("=")[2] for i, a in enumerate(argv[:-1]) if a == "--in"]


def post(rendezvous: Path, argv: list[str]) -> Path:
    """Head node: announce a distributed stage to the workers (atomic write)."""
    rendezvous.mkdir(parents=True, exist_ok=True)
    seq = len(list(rendezvous.glob("stage-*.json")))
    path = rendezvous / f"stage-{seq:04d}.json"
    tmp = rendezvous / f".stage-{seq:04d}.tmp"
    tmp.write_text(json.dumps({"argv": argv, "pull": stage_inputs(argv)}))
    tmp.replace(path)
    return path


def relaunch_under_torchrun(argv: list[str]) -> int | None:
    """Run this stage command under torchrun if the environment asks for it.

    Returns torchrun's exit code, or None when the caller should run the stage
    in this process (no RMSWEB_TORCHRUN, or already inside torchrun).
    """
    args = os.environ.get("RMSWEB_TORCHRUN")
    if not args or "LOCAL_RANK" in os.environ:
        return None
    rendezvous = os.environ.get("RMSWEB_RENDEZVOUS")
    if _num_nodes() > 1 and _node_rank() == 0:
        if not rendezvous:
            raise UserError("multi-node run without RMSWEB_RENDEZVOUS; launch via sky/*.yaml.")
        inputs = stage_inputs(argv)
        if inputs:
            subprocess.run([*_dvc(), "push", *inputs], check=True)
        post(Path(rendezvous), argv)
    cmd = [*_torchrun(), *shlex.split(args), "-m", "rmsweb", *argv]
    return subprocess.run(cmd, check=False).returncode


def worker_main(exp: str, finish: bool = False, timeout_s: float | None = None) -> None:
    """Non-head node: join each posted distributed stage until the head says done."""
    rendezvous = os.environ.get("RMSWEB_RENDEZVOUS")
    if not rendezvous:
        raise UserError("RMSWEB_RENDEZVOUS is not set; `rmsweb worker` runs under sky/*.yaml.")
    folder = Path(rendezvous)
    if finish:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "done").write_text(exp)
        return
    if not os.environ.get("RMSWEB_TORCHRUN"):
        raise UserError("RMSWEB_TORCHRUN is not set; `rmsweb worker` runs under sky/*.yaml.")
    deadline = time.monotonic() + (
        timeout_s
        if timeout_s is not None
        else float(os.environ.get("RMSWEB_WORKER_TIMEOUT_S", 86400))
    )
    joined: set[str] = set()
    while True:
        # Read `done` before listing: the head writes it only after its last post.
        done = (folder / "done").exists()
        posted = sorted(p for p in folder.glob("stage-*.json") if p.name not in joined)
        for path in posted:
            job = json.loads(path.read_text())
            if job["pull"]:
                subprocess.run([*_dvc(), "pull", *job["pull"]], check=True)
            cmd = [*_torchrun(), *shlex.split(os.environ["RMSWEB_TORCHRUN"]), "-m", "rmsweb"]
            code = subprocess.run([*cmd, *job["argv"]], check=False).returncode
            if code:
                raise UserError(
                    f"distributed stage {job['argv'][:1]} failed on this node ({code})."
                )
            joined.add(path.name)
        if done and not posted:
            print(f"worker: joined {len(joined)} distributed stage(s) of {exp}.", file=sys.stderr)
            return
        if time.monotonic() > deadline:
            raise UserError(f"worker: no word from the head node in {rendezvous}; giving up.")
        time.sleep(POLL_S)
