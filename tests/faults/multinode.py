"""Helpers of the two-node tests (test_multinode_collect.py, test_multinode_mine.py): real
`rmsweb` processes on 127.0.0.1, one folder per node, a shared "bucket" folder, as SkyPilot
would run them. Imported by path (tests/ is not a package).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlsplit

from rmsweb.store.reader import read_records, read_rows

ROOT = Path(__file__).resolve().parents[2]
CLOCK_COLUMNS = {"started_at", "wall_s"}
# Columns of any table that depend on the clock or the machine's load (tables() leaves
# them out): an episode rerun after an environment error (a browser hung) counts it.
TABLE_CLOCK_COLUMNS = CLOCK_COLUMNS | {"latency_s", "created_at", "env_retries"}
WORKER = [sys.executable, "-m", "rmsweb", "worker"]


def env(**extra: str) -> dict[str, str]:
    """This process's environment without SkyPilot's node variables, plus `extra`."""
    base = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "DVC_NO_ANALYTICS": "1"}
    for key in (
        "SKYPILOT_NODE_RANK",
        "SKYPILOT_NUM_NODES",
        "RMSWEB_RUN_ID",
        "RMSWEB_RUN_KEY",
        "RMSWEB_TORCHRUN",
        "RMSWEB_RENDEZVOUS_ROOT",
        "RMSWEB_CHECKPOINT_DIR",
    ):
        base.pop(key, None)
    return {**base, **extra}


def cluster(rdv: Path, run_id: str) -> dict[str, str]:
    """The variables of a two-node attempt `run_id` whose bucket holds `rdv`."""
    return {
        "SKYPILOT_NUM_NODES": "2",
        "SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.1",
        "RMSWEB_RUN_ID": run_id,
        "RMSWEB_RENDEZVOUS_ROOT": str(rdv),
        "RMSWEB_NODE_COMMIT_S": "0",  # a shard per unit: a kill finds some stored
    }


def start(cmd: list[str], cwd: Path, environ: dict[str, str], log: Path) -> subprocess.Popen:
    # Its own process group: a kill takes the node's stage process with it, as losing a node.
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        env=environ,
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def kill(*procs: subprocess.Popen) -> None:
    """SIGKILL each still running process group (a node lost, or cleanup)."""
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def join(
    head: subprocess.Popen,
    worker: subprocess.Popen,
    exp: str,
    head_dir: Path,
    head_env: dict[str, str],
    logs: tuple[Path, Path],
    timeout: int,
) -> None:
    """The end of a two-node stage: the head finishes, tells the worker to stop
    (`rmsweb worker --finish`, as the task's last command), and the worker exits 0."""
    assert head.wait(timeout=timeout) == 0, logs[0].read_text()[-3000:]
    finish = [*WORKER, "--exp", exp, "--finish"]
    subprocess.run(finish, cwd=head_dir, env=head_env, check=True)
    assert worker.wait(timeout=60) == 0, logs[1].read_text()[-3000:]


def node_folder(tmp: Path, name: str, params: str) -> Path:
    """A node's own disk: a folder with the params.yaml its stage commands read."""
    folder = tmp / name
    folder.mkdir(parents=True)
    (folder / "params.yaml").write_text(params)
    return folder


def shard_folder(rdv: Path, out: str) -> Path:
    """The one shard folder of stage output `out` in the bucket: shards/<run key>/<out>."""
    (folder,) = shard_folders(rdv, out)
    return folder


def shard_folders(rdv: Path, out: str) -> list[Path]:
    return sorted(p for p in (rdv / "shards").glob(f"*/{out}") if p.is_dir())


def wait_for_shards(
    rdv: Path,
    out: str,
    rank: int,
    running: dict[str, subprocess.Popen],
    log: Path,
    at_least: int = 1,
) -> None:
    """Until node `rank`'s folder (under any run key) holds `at_least` committed shards;
    fails if a process in `running` exits first or after 180 s."""
    deadline = time.monotonic() + 180
    pattern = f"shards/*/{out}/node-{rank}-of-2/episodes/part-*.parquet"
    while len(list(rdv.glob(pattern))) < at_least:
        for name, proc in running.items():
            assert proc.poll() is None, f"{name} exited: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"node {rank} stored nothing in 180 s"
        time.sleep(0.05)


def rows(out: Path) -> dict[str, dict]:
    """episode id -> its row without the clock; asserts each episode is stored once."""
    episodes = read_rows(out, "episodes")
    ids = [r.episode_id for r in episodes]
    assert len(ids) == len(set(ids)), "an episode is stored twice"
    return {
        r.episode_id: {k: v for k, v in asdict(r).items() if k not in CLOCK_COLUMNS}
        for r in episodes
    }


def units(folder: Path) -> set[tuple[str, int]]:
    return {(r.episode.task_id, r.episode.seed) for r in read_records(folder)}


def started(folder: Path) -> dict[tuple[str, int], float]:
    """(task, seed) -> when its first stored episode started (the unit was played)."""
    first: dict[tuple[str, int], float] = {}
    for e in read_rows(folder, "episodes"):
        key = (e.task_id, e.seed)
        first[key] = min(first.get(key, e.started_at), e.started_at)
    return first


def tables(out: Path) -> dict[str, list[dict]]:
    """Every table of run `out`: its rows without the clock, sorted (duplicates kept). A
    step's url loses its port: each process serves the task pages on a port of its own."""
    from rmsweb.store.schemas import TABLES

    found: dict[str, list[dict]] = {}
    for table in TABLES:
        if not (out / table).is_dir():
            continue
        stored = []
        for row in read_rows(out, table):
            values = {k: v for k, v in asdict(row).items() if k not in TABLE_CLOCK_COLUMNS}
            if table == "steps":
                values["url"] = urlsplit(values["url"]).path
            stored.append(values)
        found[table] = sorted(stored, key=repr)
    return found


def fake_dvc(path: Path, remote: Path) -> Path:
    """An executable `dvc` (for RMSWEB_DVC_BIN) whose `pull DIR...` copies each DIR from
    `remote` into the working folder: how a worker gets the stage's inputs."""
    path.write_text(
        f"#!{sys.executable}\n"
        "import shutil, sys\n"
        "assert sys.argv[1] == 'pull', sys.argv\n"
        "for d in sys.argv[2:]:\n"
        f"    shutil.copytree({str(remote)!r} + '/' + d, d, dirs_exist_ok=True)\n"
    )
    path.chmod(0o755)
    return path
