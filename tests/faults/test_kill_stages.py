"""kill -9 of real pipeline stages at chosen points, then a rerun: nothing lost, nothing twice.

Each stage runs as `rmsweb <stage>` in a child process under tests/faults/killer.py,
which SIGKILLs it at a named point (see its doc). Then the plain command runs again
on the same output folder and must finish the job:
- episode stages (collect, eval): the rerun's episodes are exactly those of an
  uninterrupted reference run (same ids, each once, same outcome and length; the
  teacher and the experts are deterministic per task, seed and attempt) and so are
  the metrics;
- training stages (sft, rl): the rerun resumes from the last whole checkpoint (the
  corrupt one a kill mid-save leaves is skipped, with a warning for SFT) and runs
  only the steps left; rl's group log equals an uninterrupted run's, row for row.
Also: Chromium killed again and again during a stage, two collectors writing
disjoint shards of one run (one of them killed), and a stage on a full disk.

Adding a stage's kill -9 case is one KillCase entry (mine: see the end of KILL_CASES);
a new kill point is one function in killer.py.

Slow (each case runs a stage two or three times): `make faults` runs them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rmsweb.env.launch import group_pids
from rmsweb.store.reader import read_records, read_rows

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
KILLER = Path(__file__).with_name("killer.py")
EXP = "faults"
# experiments/smoke.yaml, shrunk: 2 tasks x 3 train seeds (collect: 6 units, ~8 attempts),
# 3 test seeds (eval: 6 episodes); SFT 12 steps of 4 with a checkpoint every 4; RL 4 steps
# of 4 states x 2 samples with a checkpoint every 2.
OVERRIDES = [
    f"name={EXP}",
    "suite.train.count=3",
    "suite.test.count=3",
    "model.corpus_seeds_per_task=2",  # the tokenizer's corpus: a few pages are enough here
    "sft.max_steps=12",
    "sft.batch_size=4",
    "sft.save_steps=4",
    "sft.logging_steps=4",
    "sft.torch_threads=1",
    "rl.steps=4",
    "rl.save_steps=2",
    "rl.batch_size=4",
    "rl.group_size=2",
    "rl.torch_threads=1",
    # An episode in flight when Chromium is killed is rerun, up to this many times: as
    # many as test_chromium_killed_again_and_again kills it, so every episode completes.
    "suite.browser.max_env_retries=3",
]
SFT_STEPS, SAVE_STEPS = 12, 4
RL_STEPS, RL_SAVE_STEPS = 4, 2
# Metrics that depend on the clock, not on what was stored.
CLOCK_KEYS = {"wall_s", "teacher_seconds_per_kept", "samples_per_s", "rollout_wall_s"}
# Metrics of what this invocation did, not of what is stored (a resumed mine run does less).
CLOCK_KEYS |= {"episodes_per_s", "rollout_episodes_now", "generations_now"}


# The upstream outputs a stage reads (--in ROLE=DIR), as dvc.yaml wires them, and the
# other arguments of its command (the uninterrupted upstream and reference runs too).
INPUTS = {"sft": ("collect", "model"), "mine": ("sft", "collect"), "rl": ("mine", "sft")}
ARGS = {
    "model": ("--seed", "0"),
    "sft": ("--seed", "0"),
    "mine": ("--seed", "0"),
    "rl": ("--seed", "0"),
    "eval": ("--policy", "expert"),
}
EPISODE_STAGES = {"collect", "eval", "mine"}  # checked episode by episode against a reference


@dataclass(frozen=True)
class KillCase:
    stage: str  # the CLI verb
    kill: str  # killer.py's kill point

    def __str__(self) -> str:
        return f"{self.stage}-{self.kill}"


KILL_CASES = [
    KillCase("collect", "write:3"),  # finished episodes still in the writer's buffer
    KillCase("collect", "precommit:2"),  # a shard's companions in place, not committed
    KillCase("collect", "commit:2"),  # right after a commit
    KillCase("eval", "commit:1"),
    KillCase("sft", f"checkpoint:{2 * SAVE_STEPS}"),
    # Killed while saving: the newest checkpoint lacks trainer_state.json (corrupt).
    KillCase("sft", f"mid-checkpoint:{2 * SAVE_STEPS}"),
    # Killed while saving its last checkpoint: the temp folder is ignored on resume.
    KillCase("rl", f"rl-mid-checkpoint:{RL_STEPS}"),
    KillCase("mine", "commit:1"),  # rollouts half stored; mined_states not yet written
]


# --------------------------------------------------------------------------- running stages


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the params.yaml of the shrunk experiment (what stages read)."""
    from rmsweb.compile.dvcfile import render_params_yaml
    from rmsweb.spec import load_experiment

    root = tmp_path_factory.mktemp("faults")
    spec = load_experiment(ROOT / "experiments" / "smoke.yaml", OVERRIDES)
    (root / "params.yaml").write_text(render_params_yaml([spec]))
    return root


def stage_command(stage: str, project: Path, out: Path, inputs: dict[str, Path]) -> list[str]:
    cmd = [stage, "--exp", EXP, "--params", str(project / "params.yaml"), *ARGS.get(stage, ())]
    cmd += ["--out", str(out), "--metrics", str(out.parent / f"{out.name}.metrics.json")]
    for role in INPUTS.get(stage, ()):
        cmd += ["--in", f"{role}={inputs[role]}"]
    return cmd


ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "DVC_NO_ANALYTICS": "1"}


def killer_argv(cmd: list[str], log: Path, *opts: str, script: Path | None = None) -> list[str]:
    argv = [sys.executable, str(KILLER), "--log", str(log), *opts]
    if script is not None:
        argv += ["--script", str(script)]
    return [*argv, "--", *cmd]


def run_killer(
    cmd: list[str], log: Path, *opts: str, script: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        killer_argv(cmd, log, *opts, script=script),
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
        check=False,
    )


def events(log: Path, kind: str) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    return [r for r in rows if r["event"] == kind]


def metrics(out: Path) -> dict[str, Any]:
    data = json.loads((out.parent / f"{out.name}.metrics.json").read_text())
    return without_clock(data)


def without_clock(data: dict[str, Any]) -> dict[str, Any]:
    """The metrics minus the clock's, also inside per-split blocks (eval: `val: {...}`)."""
    return {
        k: without_clock(v) if isinstance(v, dict) else v
        for k, v in data.items()
        if k not in CLOCK_KEYS
    }


def episodes(out: Path) -> dict[str, tuple[bool, int, int, str | None]]:
    """episode id -> what an uninterrupted run would store the same; asserts each is once."""
    recs = read_records(out)
    ids = [r.episode.episode_id for r in recs]
    assert len(ids) == len(set(ids)), "an episode is stored twice"
    return {
        r.episode.episode_id: (
            r.episode.success,
            r.episode.n_steps,
            len(r.steps),
            r.episode.error or r.episode.policy_error,
        )
        for r in recs
    }


def assert_no_browser_left(log: Path, timeout: float = 15.0) -> None:
    """Every Chromium the (killed) stage launched is gone, with all its processes."""
    pids = [e["pid"] for e in events(log, "browser") if e["pid"]]
    assert pids, "the stage launched no browser?"
    deadline = time.monotonic() + timeout
    while any(group_pids(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {p: group_pids(p) for p in pids if group_pids(p)}
    for p in left:  # do not leave them to the next test
        os.killpg(p, signal.SIGKILL)
    assert not left, f"Chromium processes outlived their stage: {left}"


class Pipeline:
    """Uninterrupted runs of the stages, made on first use and shared by the cases."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.outs: dict[str, Path] = {}

    def inputs(self, stage: str) -> dict[str, Path]:
        return {role: self.out(role) for role in INPUTS.get(stage, ())}

    def out(self, stage: str) -> Path:
        if stage not in self.outs:
            out = self.project / "runs" / stage / EXP
            cmd = stage_command(stage, self.project, out, self.inputs(stage))
            proc = run_killer(cmd, self.project / f"{stage}.jsonl")
            assert proc.returncode == 0, proc.stderr[-3000:]
            self.outs[stage] = out
        return self.outs[stage]


@pytest.fixture(scope="module")
def pipeline(project: Path) -> Pipeline:
    return Pipeline(project)


# --------------------------------------------------------------------------- kill -9, rerun


@pytest.mark.parametrize("case", KILL_CASES, ids=str)
def test_kill_9_then_rerun(case: KillCase, pipeline: Pipeline, tmp_path: Path) -> None:
    out = tmp_path / "runs" / case.stage / EXP
    cmd = stage_command(case.stage, pipeline.project, out, pipeline.inputs(case.stage))
    killed_log, rerun_log = tmp_path / "killed.jsonl", tmp_path / "rerun.jsonl"
    opts = ["--probe-training"] if case.stage == "sft" else []  # HF Trainer probes

    killed = run_killer(cmd, killed_log, "--kill", case.kill, "--shard-episodes", "2", *opts)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert [e["point"] for e in events(killed_log, "kill")] == [case.kill]
    if case.stage in EPISODE_STAGES:
        assert_no_browser_left(killed_log)

    rerun = run_killer(cmd, rerun_log, *opts)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Traceback" not in rerun.stderr
    if case.stage in EPISODE_STAGES:
        reference = pipeline.out(case.stage)
        assert episodes(out) == episodes(reference)  # 0 lost, 0 twice, the same episodes
        assert metrics(out) == metrics(reference)
        assert not [p for p in out.rglob(".*") if p.is_file()], "temp files left behind"
        if case.stage == "mine":  # the states derived from the rollouts, once each
            ids = [r.state_id for r in read_rows(out, "mined_states")]
            assert len(ids) == len(set(ids))
            assert sorted(ids) == sorted(r.state_id for r in read_rows(reference, "mined_states"))
    elif case.stage == "sft":
        check_resumed_sft(case, out, rerun_log, rerun.stderr)
    else:
        check_resumed_rl(case, out, pipeline.out("rl"))


def check_resumed_rl(case: KillCase, out: Path, reference: Path) -> None:
    killed_at = int(case.kill.rpartition(":")[2])
    resumed_at = killed_at if case.kill.startswith("rl-checkpoint") else killed_at - RL_SAVE_STEPS
    got, want = metrics(out), metrics(reference)
    assert (got["resumed_from"], want["resumed_from"]) == (resumed_at, 0)
    for key in ("steps", "groups", "accepted", "samples_generated", "reasons"):
        assert got[key] == want[key], key

    def log(run: Path) -> list[tuple]:
        rows = read_rows(run, "rl_groups")
        return sorted((g.rl_step, g.state_id, g.rewards, g.accepted, g.reason) for g in rows)

    # Each step's groups once (none lost, none logged twice), with the very same draws.
    assert log(out) == log(reference)
    assert (out / "model" / "config.json").exists() and not (out / "checkpoints").exists()


def check_resumed_sft(case: KillCase, out: Path, log: Path, stderr: str) -> None:
    killed_at = int(case.kill.rpartition(":")[2])
    if case.kill.startswith("mid-checkpoint"):
        # The newest checkpoint is corrupt: skipped with a warning, the one before is used.
        assert (
            f"checkpoint-{killed_at} cannot be resumed from: trainer_state.json is missing"
            in stderr
        )
        resumed_at = killed_at - SAVE_STEPS
    else:
        resumed_at = killed_at
    (train,) = events(log, "train")
    assert Path(train["resume_from_checkpoint"]).name == f"checkpoint-{resumed_at}"
    (trained,) = events(log, "trained")
    assert trained["global_step"] == SFT_STEPS
    assert trained["micro_steps"] == SFT_STEPS - resumed_at  # only the steps left (grad_accum 1)
    assert (out / "model" / "config.json").exists()
    assert not (out / "checkpoints").exists()  # deleted once the model is saved
    m = metrics(out)
    assert m["steps"] == SFT_STEPS and m["loss_final"] is not None


# --------------------------------------------------------------------------- other faults


def test_chromium_killed_again_and_again(pipeline: Pipeline, tmp_path: Path) -> None:
    out = tmp_path / "runs" / "eval" / EXP
    log = tmp_path / "events.jsonl"
    # At every 3rd policy call, 3 times: each episode (1-2 calls) in flight at a kill is
    # rerun on a fresh browser, within its max_env_retries (3), so every one completes.
    cmd = stage_command("eval", pipeline.project, out, {})
    proc = run_killer(cmd, log, "--kill-chromium-every", "3", "--chromium-kills", "3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    kills = events(log, "chromium_killed")
    assert len(kills) == 3
    assert len(events(log, "browser")) >= len(kills) + 1  # a fresh browser after each kill
    reference = pipeline.out("eval")
    assert episodes(out) == episodes(reference)  # every episode completed, as without kills
    assert metrics(out) == metrics(reference)  # env_errors 0 in both
    assert sum(r.episode.env_retries for r in read_records(out)) >= len(kills)
    assert_no_browser_left(log)


def test_two_collectors_on_disjoint_shards_of_one_run(pipeline: Pipeline, tmp_path: Path) -> None:
    out = tmp_path / "runs" / "collect" / EXP
    script = Path(__file__).with_name("shard_collect.py")

    def node(i: int, *opts: str) -> subprocess.Popen:
        args = [str(pipeline.project / "params.yaml"), EXP, str(out), str(i), "2"]
        log = tmp_path / f"node{i}.jsonl"
        return subprocess.Popen(
            killer_argv(args, log, "--shard-episodes", "2", *opts, script=script),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )

    # Both at once on one folder; node 0 is killed after its first commit.
    nodes = [node(0, "--kill", "commit:1"), node(1)]
    (_, err0), (_, err1) = (n.communicate(timeout=600) for n in nodes)
    assert nodes[0].returncode == -signal.SIGKILL, err0[-3000:]
    assert nodes[1].returncode == 0, err1[-3000:]
    rerun = node(0)
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err[-3000:]
    writers = {p.name.split("-")[1] for p in (out / "episodes").glob("part-*")}
    assert writers == {"node0", "node1"}
    assert episodes(out) == episodes(pipeline.out("collect"))  # the union is the whole run


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "--user", "--map-root-user", "--mount", "true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


FULL_DISK = """
set -u
mount -t tmpfs -o size=1m tmpfs "$MNT"
head -c $((1024 * 1024 - 40 * 1024)) /dev/zero > "$MNT/filler" 2>/dev/null  # ~40 KB left
"$@" > "$OUT/first.out" 2> "$OUT/first.err"; echo $? > "$OUT/first.rc"
find "$MNT/runs" -type f -printf '%P\\n' > "$OUT/first.files" 2>/dev/null
rm "$MNT/filler"
"$@" > "$OUT/second.out" 2> "$OUT/second.err"; echo $? > "$OUT/second.rc"
cp -r "$MNT/runs" "$MNT"/*.json "$OUT/"
"""


@pytest.mark.skipif(not _unshare_works(), reason="no user+mount namespaces here for a tmpfs")
def test_a_stage_on_a_full_disk_says_so_and_the_rerun_completes(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    mnt, res = tmp_path / "mnt", tmp_path / "result"
    mnt.mkdir()
    res.mkdir()
    cmd = stage_command("eval", pipeline.project, mnt / "runs" / "eval" / EXP, {})
    cmd[cmd.index("--metrics") + 1] = str(mnt / "metrics.json")
    argv = killer_argv(cmd, tmp_path / "events.jsonl", "--shard-episodes", "2")
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "bash", "-c", FULL_DISK, "x", *argv],
        env={**ENV, "MNT": str(mnt), "OUT": str(res)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    first_err = (res / "first.err").read_text()
    assert (res / "first.rc").read_text().strip() == "2", first_err[-3000:]
    assert "error: disk full while writing " in first_err
    assert "Traceback" not in first_err
    files = [Path(f) for f in (res / "first.files").read_text().split()]
    assert not [f for f in files if f.name.startswith(".")], "temp files left behind"
    committed = {f.name for f in files if f.parent.name == "episodes"}
    assert {f.name for f in files} <= committed, "files of an uncommitted shard left behind"
    assert (res / "second.rc").read_text().strip() == "0", (res / "second.err").read_text()[-3000:]
    out = res / "runs" / "eval" / EXP
    reference = pipeline.out("eval")
    assert episodes(out) == episodes(reference)
    got = json.loads((res / "metrics.json").read_text())
    assert without_clock(got) == metrics(reference)
