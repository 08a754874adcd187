"""Distributed stages (sft, rl) under torchrun, across SkyPilot nodes.

How it fits together (see sky/<experiment>.yaml):
1. SkyPilot sets RMSWEB_TORCHRUN (torchrun's node arguments) on every node.
2. The head node runs the stages one at a time and pushes each finished stage's
   outputs to the DVC remote. When a distributed stage's command (`rmsweb sft
   ...`) sees RMSWEB_TORCHRUN it re-executes itself under torchrun. With several
   nodes it first posts the command, the head's dvc.lock (which names the
   versions of the stage's inputs), the stage's run key (RMSWEB_RUN_KEY: its
   checkpoint folder) and a master port to the rendezvous folder.
3. Every other node runs `rmsweb worker`: it waits for posted commands, pulls
   their inputs at the posted versions, says it is ready (a `stage-<k>.ready-node-<r>`
   marker beside the post) and joins the same torchrun rendezvous with its own node
   rank. The head starts its torchrun only once every worker is ready: a worker's
   `dvc pull` of a large model (17.5 GB for paper-8b's SFT) takes longer than
   torchrun's rendezvous waits. A worker whose pull fails leaves
   `stage-<k>.failed-node-<r>` with the reason, and the head stops with it. The head
   posts `done` at the end (`rmsweb worker --finish`).
Only the head's outputs are kept by DVC; workers contribute compute.

Sharded stages (collect, mine: episodes by (task, seed) unit) are posted the same
way with mode "shards": a worker runs the posted command as a plain process on its
node, which plays its share of the units into its own node folder of the shared
shard folder (`node_dir`); the head plays its share, waits for every node's
`done` marker and merges the node folders into the stage's output
(rmsweb.rollout.sharded). A worker reruns a sharded command that died (resuming:
units already stored are skipped) up to SHARD_RETRIES times, then marks its node
`failed` so the head stops waiting.

The shard folder is keyed by the stage's run key (config, code and inputs: as its
checkpoints are), not by the attempt's run id, so a recovered managed job that
replays the stage resumes the units the lost attempt stored. On clouds a one-node
stage keeps its units there too (its output folder is on a disk the recovery loses).

The rendezvous folder is $RMSWEB_RENDEZVOUS_ROOT/<run id>, and the run id
changes with every attempt of a managed job:
- SKYPILOT_TASK_ID alone does not: it stays the same across recoveries, so a
  recovered worker would read the lost attempt's posts and `done` (and exit, or
  join a stage the new head never runs).
- A recovery provisions new nodes, so the run id hashes SKYPILOT_TASK_ID with
  SKYPILOT_NODE_IPS. Should a recovery get every old IP back, a stale post
  still cannot pair two nodes on different stages: each post has its own
  master port, so a worker joining a stale one waits on a port nobody opens
  and fails loudly (torchrun's rendezvous timeout), and the job is retried.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rmsweb.errors import UserError

POLL_S = 5.0
# How long the head waits for every worker to be ready (its inputs pulled) before it
# starts torchrun; RMSWEB_READY_TIMEOUT_S overrides it.
READY_TIMEOUT_S = 7200.0
MASTER_PORT_BASE = 29500  # post k uses MASTER_PORT_BASE + k
# What the head's stage process knows that every rank on every node must agree on:
# the stage's run key (its checkpoint folder), computed once on the head.
SHARED_ENV = ("RMSWEB_RUN_KEY",)
SHARD_RETRIES = 2  # reruns of a sharded command that died on a worker (an OOM kill, say)
DONE, FAILED = "done", "failed"  # markers in a node folder of a sharded stage


def _torchrun() -> list[str]:
    return shlex.split(os.environ.get("RMSWEB_TORCHRUN_BIN", "torchrun"))


def _dvc() -> list[str]:
    return shlex.split(os.environ.get("RMSWEB_DVC_BIN", "dvc"))


def node_rank() -> int:
    """This node's rank (0: the head, which runs the pipeline); 0 outside SkyPilot."""
    return int(os.environ.get("SKYPILOT_NODE_RANK", "0"))


def num_nodes() -> int:
    """Nodes of this SkyPilot task; 1 outside SkyPilot."""
    return int(os.environ.get("SKYPILOT_NUM_NODES", "1"))


def run_id() -> str:
    """This attempt's id: $RMSWEB_RUN_ID, else a hash of the task id and the node IPs."""
    explicit = os.environ.get("RMSWEB_RUN_ID")
    if explicit:
        return explicit
    task = os.environ.get("SKYPILOT_TASK_ID", "")
    ips = os.environ.get("SKYPILOT_NODE_IPS", "").split()
    if not task or not ips:
        raise UserError(
            "cannot name this attempt: SKYPILOT_TASK_ID / SKYPILOT_NODE_IPS are not set. "
            "Launch via sky/*.yaml, or set RMSWEB_RUN_ID (the same on every node)."
        )
    blob = task + "\n" + "\n".join(ips)  # IPs in rank order, the same string on every node
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def rendezvous_dir() -> Path:
    root = os.environ.get("RMSWEB_RENDEZVOUS_ROOT")
    if not root:
        raise UserError(
            "RMSWEB_RENDEZVOUS_ROOT is not set; multi-node stages run under sky/*.yaml, which "
            "points it at the checkpoint bucket."
        )
    return Path(root) / run_id()


def stage_inputs(argv: list[str]) -> list[str]:
    """The DIRs of `--in ROLE=DIR` arguments."""
    return [argv[i + 1].partition("=")[2] for i, a in enumerate(argv[:-1]) if a == "--in"]


def post(
    rendezvous: Path,
    argv: list[str],
    dvc_lock: str | None = None,
    mode: str = "torchrun",
    servers: Sequence[tuple[int, int, list[str]]] = (),
) -> dict:
    """Head node: announce a distributed stage to the workers (atomic write).

    `mode`: "torchrun" (every node joins one torchrun job) or "shards" (every node runs
    the command as a plain process and plays its share of the stage's units, with the
    local `servers` started on its node: see post_sharded).
    """
    rendezvous.mkdir(parents=True, exist_ok=True)
    seq = len(list(rendezvous.glob("stage-*.json")))
    job = {
        "mode": mode,
        "argv": argv,
        "pull": stage_inputs(argv),
        "dvc_lock": dvc_lock,
        "master_port": MASTER_PORT_BASE + seq % 1000,
        "env": {k: os.environ[k] for k in SHARED_ENV if k in os.environ},
        "servers": [[port, timeout, list(args)] for port, timeout, args in servers],
    }
    job["seq"] = seq
    _write_atomic(rendezvous / f"stage-{seq:04d}.json", json.dumps(job))
    return job


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def ready_marker(rendezvous: Path, seq: int, rank: int, failed: bool = False) -> Path:
    """Worker `rank`'s marker for post `seq`: ready to join its torchrun, or failed."""
    return rendezvous / f"stage-{seq:04d}.{'failed' if failed else 'ready'}-node-{rank}"


def wait_until_ready(
    rendezvous: Path, seq: int, nodes: int, timeout_s: float | None = None
) -> None:
    """Head: wait until every worker node (1 .. nodes - 1) has pulled the inputs of post
    `seq` and said so; a worker's failure marker or the timeout stops the stage."""
    limit = (
        timeout_s
        if timeout_s is not None
        else float(os.environ.get("RMSWEB_READY_TIMEOUT_S", READY_TIMEOUT_S))
    )
    deadline = time.monotonic() + limit
    waiting = set(range(1, nodes))
    while True:
        for rank in sorted(waiting):
            failed = ready_marker(rendezvous, seq, rank, failed=True)
            if failed.exists():
                why = failed.read_text().strip()
                raise UserError(f"worker node {rank} cannot join stage-{seq:04d}: {why}")
            if ready_marker(rendezvous, seq, rank).exists():
                waiting.discard(rank)
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise UserError(
                f"worker node(s) {sorted(waiting)} not ready for stage-{seq:04d} after "
                f"{limit:.0f} s (still pulling inputs? see each worker's log); raise "
                "RMSWEB_READY_TIMEOUT_S or check `rmsweb worker` runs on every node."
            )
        time.sleep(POLL_S)


def _read_lock() -> str | None:
    lock = Path("dvc.lock")
    return lock.read_text(encoding="utf-8") if lock.is_file() else None


def relaunch_under_torchrun(argv: list[str]) -> int | None:
    """Run this stage command under torchrun if the environment asks for it.

    Returns torchrun's exit code, or None when the caller should run the stage
    in this process (no RMSWEB_TORCHRUN, or already inside torchrun).
    """
    args = os.environ.get("RMSWEB_TORCHRUN")
    if not args or "LOCAL_RANK" in os.environ:
        return None
    torchrun_args = shlex.split(args)
    if num_nodes() > 1 and node_rank() == 0:
        # No `dvc push` here: the sky task pushed every upstream stage when it finished,
        # and a push without a remote would fail the stage for nothing.
        folder = rendezvous_dir()
        job = post(folder, argv, _read_lock())
        # The workers pull the stage's inputs first; torchrun starts when all are ready.
        wait_until_ready(folder, job["seq"], num_nodes())
        torchrun_args.append(f"--master_port={job['master_port']}")
    cmd = [*_torchrun(), *torchrun_args, "-m", "rmsweb", *argv]
    return subprocess.run(cmd, check=False).returncode


def shards_in_bucket() -> bool:
    """Whether a sharded stage plays into the shared shard folder rather than straight
    into its output: on several nodes, and on clouds (sky sets RMSWEB_RENDEZVOUS_ROOT),
    where the output's disk does not survive a recovery but the bucket does."""
    return num_nodes() > 1 or bool(os.environ.get("RMSWEB_RENDEZVOUS_ROOT"))


def shard_dir(out: Path, run_key: str | None = None) -> Path:
    """The shared folder of a sharded stage writing `out`:
    $RMSWEB_RENDEZVOUS_ROOT/shards/<run key>/<out>.

    The run key ($RMSWEB_RUN_KEY, set by the head's stage command and posted to the
    workers) is the same for every attempt of a managed job that runs the same config,
    code and inputs, so a recovery finds the lost attempt's units. `out` as the stage
    command names it (dvc.yaml: runs/<stage>/<experiment>...), the same on every node,
    keeps the folder readable; an absolute path is taken without its leading `/`.
    """
    root = os.environ.get("RMSWEB_RENDEZVOUS_ROOT")
    if not root:
        raise UserError(
            "RMSWEB_RENDEZVOUS_ROOT is not set; multi-node stages run under sky/*.yaml, which "
            "points it at the checkpoint bucket."
        )
    key = run_key or os.environ.get("RMSWEB_RUN_KEY")
    if not key:
        raise UserError(
            "RMSWEB_RUN_KEY is not set: the stage command (`rmsweb collect`, `rmsweb mine`) "
            "sets it on the head and posts it to the workers; run the stage through it."
        )
    relative = Path(*out.parts[1:]) if out.is_absolute() else out
    return Path(root) / "shards" / key / relative


def node_dir(out: Path, rank: int, count: int, run_key: str | None = None) -> Path:
    """Node `rank`'s own folder of a sharded stage: its shards and its done/failed marker."""
    return shard_dir(out, run_key) / f"node-{rank}-of-{count}"


def post_sharded(argv: list[str], servers: Sequence[tuple[int, int, list[str]]] = ()) -> None:
    """Head node of several: post a sharded stage, so every worker plays its share.

    `servers`: (port, readiness timeout s, `vllm serve` arguments) of the local endpoints
    the stage calls; each worker starts them on its node around its share.
    A `failed` marker a lost attempt left in the stage's shard folder is removed first,
    so the head waits on this attempt's nodes only (a `done` stays true: the units are
    the same, the run key says so).
    """
    if num_nodes() > 1 and node_rank() == 0:
        out = _argv_value(argv, "--out")
        if out is not None:
            for stale in shard_dir(Path(out)).glob(f"node-*/{FAILED}"):
                stale.unlink(missing_ok=True)
        post(rendezvous_dir(), argv, _read_lock(), mode="shards", servers=servers)


def _argv_value(argv: list[str], option: str) -> str | None:
    return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == option), None)


def _vllm() -> list[str]:
    return shlex.split(os.environ.get("RMSWEB_VLLM_BIN", "vllm"))


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


@contextmanager
def serving(servers: Sequence[Sequence]) -> Iterator[None]:
    """Worker: `vllm serve` on 127.0.0.1 for each (port, timeout s, args) until ready; stopped
    on exit. What the sky script's `serve`/`unserve` do on the head, for a sharded stage."""
    procs: list[subprocess.Popen] = []
    try:
        for port, timeout, args in servers:
            log = Path.home() / f"vllm-{port}.log"
            cmd = [*_vllm(), "serve", *args, "--host", "127.0.0.1", "--port", str(port)]
            with log.open("ab") as out:
                proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
            procs.append(proc)
            deadline = time.monotonic() + timeout
            while not _ready(port):
                if proc.poll() is not None:
                    raise UserError(f"worker: vllm serve on port {port} exited; see {log}.")
                if time.monotonic() > deadline:
                    raise UserError(f"worker: vllm serve on port {port} not ready; see {log}.")
                time.sleep(min(POLL_S, 1.0))
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _run_shards(job: dict) -> None:
    """Worker: this node's share of a sharded stage, rerun (resuming) if it dies; when it
    cannot be done, a `failed` marker in the node's folder tells the head, which waits."""
    cmd = [sys.executable, "-m", "rmsweb", *job["argv"]]
    env = {**os.environ, **job.get("env", {})}
    why = ""
    try:
        with serving(job.get("servers", [])):
            for attempt in range(1, SHARD_RETRIES + 2):
                code = subprocess.run(cmd, env=env, check=False).returncode
                if code == 0:
                    return
                why = f"exit {code} after {attempt} tries"
                print(f"worker: sharded {job['argv'][0]}: {why}", file=sys.stderr)
    except UserError as exc:
        why = str(exc)
    out = _argv_value(job["argv"], "--out")
    if out is not None:
        folder = node_dir(Path(out), node_rank(), num_nodes(), env.get("RMSWEB_RUN_KEY"))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / FAILED).write_text(why + "\n")
    raise UserError(f"sharded stage {job['argv'][:1]} failed on this node: {why}.")


def _pull(job: dict) -> None:
    """Worker: the stage's inputs at the head's versions (its dvc.lock), from the remote."""
    if job.get("dvc_lock") is not None:
        Path("dvc.lock").write_text(job["dvc_lock"], encoding="utf-8")
    if not job["pull"]:
        return
    proc = subprocess.run([*_dvc(), "pull", *job["pull"]], check=False)
    if proc.returncode:
        raise UserError(
            f"worker: `dvc pull {' '.join(job['pull'])}` failed ({proc.returncode}); the head "
            "pushes each stage when it ends, so check the DVC remote (compute.dvc_remote)."
        )


def _read_job(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None  # still being copied into the bucket: read it on the next poll


def _run_torchrun(job: dict) -> None:
    """Worker: join the posted torchrun job with this node's rank."""
    if not os.environ.get("RMSWEB_TORCHRUN"):
        raise UserError("RMSWEB_TORCHRUN is not set; `rmsweb worker` runs under sky/*.yaml.")
    cmd = [*_torchrun(), *shlex.split(os.environ["RMSWEB_TORCHRUN"])]
    cmd += [f"--master_port={job['master_port']}", "-m", "rmsweb", *job["argv"]]
    env = {**os.environ, **job.get("env", {})}
    code = subprocess.run(cmd, env=env, check=False).returncode
    if code:
        raise UserError(f"distributed stage {job['argv'][:1]} failed on this node ({code}).")


def worker_main(exp: str, finish: bool = False, timeout_s: float | None = None) -> None:
    """Non-head node: join each posted distributed stage until the head says done."""
    folder = rendezvous_dir()
    if finish:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "done").write_text(exp)
        return
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
            job = _read_job(path)
            if job is None:
                break
            if job.get("mode") == "shards":
                _pull(job)
                _run_shards(job)
            else:
                seq = int(job.get("seq", path.stem.split("-")[-1]))
                try:
                    _pull(job)
                except UserError as exc:  # the head waits on this node: tell it why
                    _write_atomic(ready_marker(folder, seq, node_rank(), failed=True), f"{exc}\n")
                    raise
                _write_atomic(ready_marker(folder, seq, node_rank()), "ready\n")
                _run_torchrun(job)
            joined.add(path.name)
        if done and not posted:
            print(f"worker: joined {len(joined)} distributed stage(s) of {exp}.", file=sys.stderr)
            return
        if time.monotonic() > deadline:
            raise UserError(f"worker: no word from the head node in {folder}; giving up.")
        time.sleep(POLL_S)
