"""`rmsweb repro`: reproduce DVC targets with independent stages running side by side.

`dvc repro` runs one stage at a time, so on a 2-core machine most stages leave a core
idle (the default job averaged 1.06 cores). DVC's own answer is parallel stage
execution: separate `dvc repro` calls on independent parts of the graph, each taking
the repository lock only while it checks and commits, not while the command runs
(dvc.org/doc/command-reference/repro#parallel-stage-execution). This module is the
scheduler around that:

1. The graph comes from dvc.yaml: stage B needs stage A when one of B's deps is one of
   A's outs or lies inside it. The targets and everything upstream of them are planned.
2. A stage starts when everything it needs has finished, `jobs` at a time; of the
   ready stages, the one with the longest chain of stages after it goes first (the
   critical path: collect before the evals that need nothing).
3. Each stage runs as `dvc --wait-for-lock repro --single-item <stage>`, so DVC itself
   decides whether it is stale, removes and caches its outputs and writes its dvc.lock
   entry, exactly as a plain `dvc repro` would. --wait-for-lock makes a call wait for
   the repository lock held by a neighbour's check or commit instead of failing.
   A call that still fails on a lock (DVC's "Unable to acquire lock", or an output
   "is busy" under DVC's read/write locks) is retried after a pause, up to `retries`.
4. Each stage's output goes to a log file (interleaved progress bars are unreadable);
   the console gets a line when a stage starts and ends. When a stage fails, nothing
   new starts, the running ones finish, its log's tail is printed and the exit code is 1.
5. Each stage gets `cores // jobs` torch threads (rmsweb/models/threads.py): torch
   processes that each take every core oversubscribe the machine (measured there).
   A stage that starts alone (nothing running, nothing else ready) gets every core:
   no stage can become ready before it ends (readiness only changes when a stage
   finishes), so it stays alone. The default job's SFT and mine stages are such a
   chain; at half the cores the machine sat half idle under them. A stage left running
   with fewer neighbours than `jobs` (one ended and nothing was ready) gets the freed
   cores too: the scheduler writes each running stage's share, `cores // running`, to
   a file the stage names in RMSWEB_STAGE_THREADS_FILE (lowered again when new stages
   join it), and the training stages follow it between steps (rmsweb/models/threads.py).
   A thread count the user exported is kept fixed.
6. Stages that are up to date are not started at all: one `dvc status --json
   --with-deps` call over the targets names the stale ones, and those and everything
   downstream of them run. Each `dvc repro --single-item` parses dvc.yaml, dvc.lock and
   params.yaml (seconds on a large project), so a resumed sweep or study would pay that
   for every finished stage; and a finished stage never appears in the logs again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rmsweb.errors import UserError

LOCK_ERRORS = ("Unable to acquire lock", "is busy, it is being blocked by")
STAGE_THREADS_ENV = "RMSWEB_STAGE_THREADS"  # read by rmsweb/models/threads.py
STAGE_THREADS_FILE_ENV = "RMSWEB_STAGE_THREADS_FILE"  # the share while it runs (doc, 5)


def stage_threads(jobs: int, cores: int | None = None) -> int:
    """Each of `jobs` side-by-side stages' share of the cores, at least 1 (doc, 5)."""
    return max(1, (cores or os.cpu_count() or 1) // max(1, jobs))


@dataclass
class StageNode:
    name: str
    deps: list[str]
    outs: list[str]
    needs: set[str] = field(default_factory=set)  # upstream stage names


def _paths(entries: Iterable[object]) -> list[str]:
    """dvc.yaml lists paths as strings or as one-key mappings ({path: {cache: false}})."""
    out = []
    for e in entries:
        if isinstance(e, str):
            out.append(e)
        elif isinstance(e, dict):
            out.extend(str(k) for k in e)
    return [os.path.normpath(p) for p in out]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def load_graph(dvc_yaml: Path) -> dict[str, StageNode]:
    """The stages of a dvc.yaml with their upstream stages (see the module doc, 1)."""
    import yaml

    if not dvc_yaml.is_file():
        raise UserError(f"no {dvc_yaml}: run `rmsweb compile` first (or give --root).")
    stages = (yaml.safe_load(dvc_yaml.read_text(encoding="utf-8")) or {}).get("stages") or {}
    nodes = {
        name: StageNode(
            name,
            _paths(s.get("deps", [])),
            _paths(s.get("outs", [])) + _paths(s.get("metrics", [])) + _paths(s.get("plots", [])),
        )
        for name, s in stages.items()
    }
    producers = [(out, n.name) for n in nodes.values() for out in n.outs]
    for node in nodes.values():
        for dep in node.deps:
            node.needs |= {
                owner
                for out, owner in producers
                if owner != node.name and (_inside(dep, out) or _inside(out, dep))
            }
    return nodes


def plan(nodes: Mapping[str, StageNode], targets: Iterable[str]) -> dict[str, StageNode]:
    """The targets and every stage upstream of them."""
    wanted: dict[str, StageNode] = {}
    todo = list(targets)
    unknown = [t for t in todo if t not in nodes]
    if unknown:
        raise UserError(
            f"unknown stage(s): {', '.join(unknown)}. `dvc stage list --name-only` lists them."
        )
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted[name] = nodes[name]
            todo.extend(nodes[name].needs)
    return wanted


def chain_lengths(nodes: Mapping[str, StageNode]) -> dict[str, int]:
    """Per stage, the number of stages on the longest path from it downstream (itself 1)."""
    below: dict[str, set[str]] = {n: set() for n in nodes}
    for node in nodes.values():
        for up in node.needs:
            if up in below:
                below[up].add(node.name)
    memo: dict[str, int] = {}

    def length(name: str) -> int:
        if name not in memo:
            memo[name] = 1 + max((length(d) for d in below[name]), default=0)
        return memo[name]

    return {n: length(n) for n in nodes}


def _dvc() -> str:
    dvc = Path(sys.executable).with_name("dvc")
    return str(dvc) if dvc.exists() else "dvc"


def dvc_command(stage: str) -> list[str]:
    return [_dvc(), "--wait-for-lock", "repro", "--single-item", stage]


def stale_stages(root: Path, targets: Iterable[str]) -> set[str] | None:
    """The stages among the targets and their upstream that DVC would rerun, from one
    `dvc status --json --with-deps` call (module doc, 6); None when that call fails
    (then every stage is handed to DVC, which decides, as before)."""
    import json

    proc = subprocess.run(
        [_dvc(), "status", "--json", "--with-deps", *targets],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return None
    try:
        status = json.loads(proc.stdout or "{}")
    except json.JSONDecodeError:
        return None
    # Keys are stage names, or "dvc.yaml:name" for stages of another dvc.yaml.
    return {key.rpartition(":")[2] for key in status}


def to_run(wanted: Mapping[str, StageNode], stale: set[str]) -> set[str]:
    """The stale stages and everything downstream of them within `wanted`: a stage whose
    upstream reruns may get new inputs, though its status was clean before."""
    below: dict[str, set[str]] = {n: set() for n in wanted}
    for node in wanted.values():
        for up in node.needs:
            if up in below:
                below[up].add(node.name)
    out: set[str] = set()
    todo = [n for n in stale if n in wanted]
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(below[name])
    return out


@dataclass
class Outcome:
    stage: str
    returncode: int
    wall_s: float
    log: Path
    attempts: int


def stage_env(jobs: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a stage run `jobs` at a time: its share of the cores (doc, 5).

    A thread count the user exported (OMP_NUM_THREADS, RMSWEB_STAGE_THREADS) is kept."""
    env = dict(os.environ if base is None else base)
    share = user_threads(env) or str(stage_threads(jobs))
    for key in (STAGE_THREADS_ENV, "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(key, share)
    return env


def user_threads(env: Mapping[str, str]) -> str | None:
    """The thread count the user exported (RMSWEB_STAGE_THREADS, OMP_NUM_THREADS), if any:
    every stage keeps it, start to end (doc, 5)."""
    return next((env[k] for k in (STAGE_THREADS_ENV, "OMP_NUM_THREADS") if env.get(k)), None)


def write_share(path: Path, threads: int) -> None:
    """A running stage's thread share (doc, 5), replaced whole so a reader never sees
    half a file; unchanged shares are not rewritten."""
    text = f"{threads}\n"
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def run_one(
    stage: str,
    root: Path,
    log_dir: Path,
    retries: int,
    pause_s: float = 2.0,
    env: Mapping[str, str] | None = None,
) -> Outcome:
    """`dvc repro -s <stage>`, retried on DVC lock errors (module doc, 3)."""
    log = log_dir / f"{stage}.log"
    start = time.perf_counter()
    attempt = 0
    while True:
        attempt += 1
        with log.open("w", encoding="utf-8") as fh:
            proc = subprocess.run(
                dvc_command(stage),
                cwd=root,
                stdout=fh,
                stderr=subprocess.STDOUT,
                check=False,
                env=env,
            )
        if proc.returncode == 0 or attempt > retries:
            break
        text = log.read_text(encoding="utf-8", errors="replace")
        if not any(marker in text for marker in LOCK_ERRORS):
            break
        time.sleep(pause_s * attempt)
    return Outcome(stage, proc.returncode, time.perf_counter() - start, log, attempt)


def stages_to_run(
    targets: list[str],
    root: Path = Path("."),
    echo: Callable[[str], None] = print,
    skip_fresh: bool = True,
    status: Callable[[Path, list[str]], set[str] | None] = stale_stages,
) -> tuple[dict[str, StageNode], dict[str, StageNode]]:
    """dvc.yaml's whole graph, and the stages a run of the targets starts: the targets and
    their upstream, less those up to date (module doc, 6), each needing only the others."""
    graph = load_graph(root / "dvc.yaml")
    wanted = plan(graph, targets)
    total = len(wanted)
    if skip_fresh:
        stale = status(root, targets)
        if stale is not None:
            run = to_run(wanted, stale)
            fresh = len(wanted) - len(run)
            wanted = {n: node for n, node in wanted.items() if n in run}
            for node in wanted.values():
                node.needs &= wanted.keys()  # an up-to-date upstream is done already
            if fresh:
                echo(f"repro: {fresh} of {total} stage(s) up to date (dvc status)")
    return graph, wanted


def reproduce(
    targets: list[str],
    root: Path = Path("."),
    jobs: int = 2,
    retries: int = 5,
    echo: Callable[[str], None] = print,
    runner: Callable[..., Outcome] = run_one,
    skip_fresh: bool = True,
    status: Callable[[Path, list[str]], set[str] | None] = stale_stages,
    on_plan: Callable[[dict[str, StageNode], dict[str, StageNode]], None] | None = None,
) -> list[Outcome]:
    """Run the targets and their upstream stages, `jobs` at a time (module doc).
    `on_plan(graph, wanted)` sees the plan before anything starts (the CLI prints its
    time estimate)."""
    if jobs < 1:
        raise UserError(f"--jobs must be >= 1 (got {jobs}).")
    graph, wanted = stages_to_run(targets, root, echo, skip_fresh, status)
    if on_plan is not None:
        on_plan(graph, wanted)
    priority = chain_lengths(wanted)
    log_dir = root / ".dvc" / "tmp" / "rmsweb-repro"
    log_dir.mkdir(parents=True, exist_ok=True)
    shared_env, alone_env = stage_env(jobs), stage_env(1)
    # The share files (doc, 5), unless the user fixed the threads.
    shares = None if user_threads(os.environ) else log_dir / "threads"
    if shares is not None:
        shares.mkdir(parents=True, exist_ok=True)
    done: dict[str, Outcome] = {}
    running: dict[str, threading.Thread] = {}
    finished: list[Outcome] = []
    lock = threading.Condition()
    failed = False

    def work(stage: str, env: dict[str, str]) -> None:
        outcome = runner(stage, root, log_dir, retries, env=env)
        with lock:
            finished.append(outcome)
            lock.notify_all()

    started = time.perf_counter()
    echo(f"repro: {len(wanted)} stage(s), {jobs} at a time; logs in {log_dir}")
    with lock:
        while True:
            for outcome in finished:
                running.pop(outcome.stage).join()
                done[outcome.stage] = outcome
                status = "ok" if outcome.returncode == 0 else f"FAILED (exit {outcome.returncode})"
                echo(f"  done  {outcome.stage} in {outcome.wall_s:.0f}s: {status}")
                if outcome.returncode != 0:
                    failed = True
            finished.clear()
            ready = sorted(
                (
                    n
                    for n in wanted.values()
                    if n.name not in done and n.name not in running and n.needs <= done.keys()
                ),
                key=lambda n: (-priority[n.name], n.name),
            )
            while not failed and ready and len(running) < jobs:
                node = ready.pop(0)
                alone = not running and not ready  # module doc, 5
                echo(
                    f"  start {node.name}" + (" (alone: every core)" if alone and jobs > 1 else "")
                )
                env = alone_env if alone else shared_env
                if shares is not None:
                    env = {**env, STAGE_THREADS_FILE_ENV: str(shares / node.name)}
                    write_share(shares / node.name, int(env[STAGE_THREADS_ENV]))
                thread = threading.Thread(target=work, args=(node.name, env), daemon=True)
                running[node.name] = thread
                thread.start()
            if not running:
                break
            if shares is not None:
                for name in running:  # cores // running: freed cores given, or taken back
                    write_share(shares / name, stage_threads(len(running)))
            lock.wait()
    outcomes = list(done.values())
    bad = [o for o in outcomes if o.returncode != 0]
    for o in bad:
        tail = o.log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
        echo(f"--- {o.stage} failed; the end of {o.log}:")
        for line in tail:
            echo(f"    {line}")
    skipped = sorted(set(wanted) - set(done))
    if skipped:
        echo(f"not run (a stage failed): {', '.join(skipped)}")
    echo(
        f"repro: {len(outcomes) - len(bad)} of {len(wanted)} stage(s) ok in "
        f"{time.perf_counter() - started:.0f}s"
    )
    return outcomes
