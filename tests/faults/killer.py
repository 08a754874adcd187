"""Run an rmsweb command (or a script) and kill -9 it at a chosen point.

    python tests/faults/killer.py --kill commit:2 --shard-episodes 2 --log ev.jsonl \\
        -- collect --exp faults --params params.yaml --out runs/collect/faults --metrics m.json
    python tests/faults/killer.py --log ev.jsonl --script tests/faults/shard_collect.py -- ARGS

The process sends SIGKILL to itself when the point is reached: nothing runs after it
(no finally block, no atexit, no buffered writer's flush), exactly as after `kill -9`
from outside, but at a point a test can name and repeat. Kill points:

  write:N           the N-th episode was handed to a ShardWriter (buffered, not stored)
  precommit:N       the N-th shard's companion files are in place, its episodes file not
  commit:N          the N-th shard was just committed (its episodes file renamed in)
  checkpoint:N      checkpoint-N was just saved whole (trainer_state.json written last)
  mid-checkpoint:N  checkpoint-N's weights and optimizer are written, trainer_state.json not
  rl-checkpoint:N   the rl stage's checkpoint-N was just saved (renamed into place)
  rl-mid-checkpoint:N  its files are copied into checkpoint-N, its COMPLETE marker not yet

A stage with kill points of its own adds one function to POINTS. Other faults and probes:

  --shard-episodes K        ShardWriters commit a shard every K episodes (default 1000)
  --kill-chromium-every K   SIGKILL the browser at every K-th policy call; the run goes on
  --chromium-kills M        ... but M times at most (default 3)
  --log FILE                JSON lines of what happened: kills, browser pids, the
                            checkpoint training resumed from and the optimizer steps run

Only tests use this file; nothing in rmsweb knows about it.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOG: Path | None = None
COUNTS: dict[str, int] = {}


def event(kind: str, **fields: Any) -> None:
    if LOG is not None:
        LOG.parent.mkdir(parents=True, exist_ok=True)
        with LOG.open("a") as f:
            f.write(json.dumps({"event": kind, **fields}) + "\n")


def count(name: str) -> int:
    COUNTS[name] = COUNTS.get(name, 0) + 1
    return COUNTS[name]


def die(point: str) -> None:
    event("kill", point=point, counts=dict(COUNTS))
    os.kill(os.getpid(), signal.SIGKILL)


# --------------------------------------------------------------------------- kill points


def on_write(n: int) -> None:
    from rmsweb.store.writer import ShardWriter

    real = ShardWriter.write

    def write(self: ShardWriter, record: Any) -> None:
        real(self, record)
        if count("episodes_written") == n:
            die(f"write:{n}")

    ShardWriter.write = write  # type: ignore[method-assign]


def _on_episodes_file(n: int, before: bool, point: str) -> None:
    import rmsweb.store.writer as writer

    real = writer.write_parquet_atomic

    def write_parquet_atomic(path: Path, data: Any) -> None:
        is_commit = Path(path).parent.name == "episodes"
        if is_commit and before and count("commits_started") == n:
            die(point)
        real(path, data)
        if is_commit and not before and count("commits") == n:
            die(point)

    writer.write_parquet_atomic = write_parquet_atomic


def on_precommit(n: int) -> None:
    _on_episodes_file(n, before=True, point=f"precommit:{n}")


def on_commit(n: int) -> None:
    _on_episodes_file(n, before=False, point=f"commit:{n}")


def _on_trainer_state(step: int, before: bool, point: str) -> None:
    from transformers.trainer_callback import TrainerState

    real = TrainerState.save_to_json

    def save_to_json(self: TrainerState, json_path: str) -> None:
        here = Path(json_path).parent.name == f"checkpoint-{step}"
        if here and before:
            die(point)
        real(self, json_path)
        if here and not before:
            die(point)

    TrainerState.save_to_json = save_to_json  # type: ignore[method-assign]


def on_checkpoint(step: int) -> None:
    _on_trainer_state(step, before=False, point=f"checkpoint:{step}")


def on_mid_checkpoint(step: int) -> None:
    _on_trainer_state(step, before=True, point=f"mid-checkpoint:{step}")


def on_rl_checkpoint(step: int) -> None:
    from rmsweb.train.salvage_ds.trainer import SalvageDSTrainer

    real = SalvageDSTrainer.save_checkpoint

    def save_checkpoint(self: SalvageDSTrainer) -> Path:
        path = real(self)
        if self.step == step:
            die(f"rl-checkpoint:{step}")
        return path

    SalvageDSTrainer.save_checkpoint = save_checkpoint  # type: ignore[method-assign]


def on_rl_mid_checkpoint(step: int) -> None:
    import shutil

    from rmsweb.train.salvage_ds import checkpoint

    real = shutil.copyfile

    def copyfile(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
        # checkpoint-N's weights and optimizer are copied in, its COMPLETE marker not yet
        dst = Path(dst)
        if dst.name == checkpoint.COMPLETE and dst.parent.name == f"checkpoint-{step}":
            die(f"rl-mid-checkpoint:{step}")
        return real(src, dst, *args, **kwargs)

    checkpoint.shutil.copyfile = copyfile  # type: ignore[attr-defined]


POINTS: dict[str, Callable[[int], None]] = {
    "write": on_write,
    "precommit": on_precommit,
    "commit": on_commit,
    "checkpoint": on_checkpoint,
    "mid-checkpoint": on_mid_checkpoint,
    "rl-checkpoint": on_rl_checkpoint,
    "rl-mid-checkpoint": on_rl_mid_checkpoint,
}


# --------------------------------------------------------------------------- other faults, probes


def shard_episodes(k: int) -> None:
    from rmsweb.store.writer import ShardWriter

    ShardWriter.__init__.__kwdefaults__["max_episodes"] = k


def kill_chromium_every(k: int, most: int) -> None:
    from rmsweb.rollout.runner import EpisodeRunner

    real = EpisodeRunner.run_episode

    class KillingPolicy:
        """The stage's policy, but every k-th call first SIGKILLs the browser."""

        def __init__(self, inner: Any, runner: EpisodeRunner) -> None:
            self.inner, self.runner, self.name = inner, runner, inner.name

        async def act(self, request: Any) -> Any:
            pool = self.runner.pool
            due = count("policy_calls") % k == 0 and COUNTS.get("chromium_kills", 0) < most
            if due and pool is not None and pool.browser_pid:
                count("chromium_kills")
                event("chromium_killed", pid=pool.browser_pid)
                os.kill(pool.browser_pid, signal.SIGKILL)
            return await self.inner.act(request)

        async def close(self) -> None:
            await self.inner.close()

    async def run_episode(self: EpisodeRunner, policy: Any, *args: Any, **kw: Any) -> Any:
        return await real(self, KillingPolicy(policy, self), *args, **kw)

    EpisodeRunner.run_episode = run_episode  # type: ignore[method-assign]


def log_browsers() -> None:
    from rmsweb.env.pool import BrowserPool

    real = BrowserPool._launch

    async def launch(self: BrowserPool) -> None:
        await real(self)
        event("browser", pid=self.browser_pid)

    BrowserPool._launch = launch  # type: ignore[method-assign]


def probe_training() -> None:
    """Log the checkpoint a Trainer resumes from and how many optimizer steps it runs."""
    from transformers import Trainer

    real_train, real_step = Trainer.train, Trainer.training_step

    def train(self: Trainer, resume_from_checkpoint: Any = None, **kw: Any) -> Any:
        event("train", resume_from_checkpoint=resume_from_checkpoint)
        out = real_train(self, resume_from_checkpoint=resume_from_checkpoint, **kw)
        event(
            "trained", micro_steps=COUNTS.get("micro_steps", 0), global_step=self.state.global_step
        )
        return out

    def training_step(self: Trainer, *args: Any, **kw: Any) -> Any:
        count("micro_steps")
        return real_step(self, *args, **kw)

    Trainer.train = train  # type: ignore[method-assign]
    Trainer.training_step = training_step  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    global LOG
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kill", help="POINT:N, e.g. commit:2 (see the module doc)")
    parser.add_argument("--shard-episodes", type=int)
    parser.add_argument("--kill-chromium-every", type=int)
    parser.add_argument("--chromium-kills", type=int, default=3)
    parser.add_argument("--probe-training", action="store_true")
    parser.add_argument("--log", type=Path)
    parser.add_argument("--script", type=Path, help="run this script instead of `rmsweb`")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    args = opts.args[1:] if opts.args[:1] == ["--"] else opts.args
    LOG = opts.log
    log_browsers()
    if opts.kill:
        name, _, n = opts.kill.rpartition(":")
        POINTS[name](int(n))
    if opts.shard_episodes:
        shard_episodes(opts.shard_episodes)
    if opts.kill_chromium_every:
        kill_chromium_every(opts.kill_chromium_every, opts.chromium_kills)
    if opts.probe_training:
        probe_training()
    if opts.script:
        sys.argv = [str(opts.script), *args]
        runpy.run_path(str(opts.script), run_name="__main__")
    else:
        from rmsweb.cli import main as rmsweb

        sys.argv = ["rmsweb", *args]
        rmsweb()


if __name__ == "__main__":
    main(sys.argv[1:])
