"""Synthetic runs with every table filled, for tests, demos and the viewer.

Deterministic (seeded), small, and shaped like the real stages' output:
eval runs per policy, a collect run with reflection retries, a mine run with
mined states, an rl run with group logs. `write_demo_runs(root)` writes them
below a runs root through the real writers.
"""

from __future__ import annotations

import functools
import hashlib
import random
import struct
import zlib
from pathlib import Path

from rmsweb.env.actions import ActionRow
from rmsweb.env.types import HistoryItem
from rmsweb.store.rows import (
    EpisodeRecord,
    EpisodeRow,
    MinedStateRow,
    ReflectionRow,
    RLGroupRow,
    ScreenshotRow,
    StepRow,
    episode_key,
)
from rmsweb.store.writer import ShardWriter, TableWriter

TASKS = ("click-button", "enter-text", "login-user", "click-checkboxes", "choose-list")
FAILURE_MODES = ("wrong_element", "wrong_argument", "premature_answer", "loop", "parse_error")


def tiny_png(width: int, height: int, boxes: list[tuple[int, int, int, int, tuple]]) -> bytes:
    """An RGB PNG: white, with filled boxes (x, y, w, h, (r, g, b)). Only zlib needed."""
    pixels = [[(255, 255, 255)] * width for _ in range(height)]
    for x0, y0, w, h, color in boxes:
        for y in range(max(0, y0), min(height, y0 + h)):
            row = pixels[y]
            for x in range(max(0, x0), min(width, x0 + w)):
                row[x] = color
    raw = b"".join(b"\x00" + bytes(c for px in row for c in px) for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


@functools.cache
def _screenshot_png(task: str, variant: int) -> bytes:
    shade = variant * 60
    tint = TASKS.index(task) * 40 if task in TASKS else sum(map(ord, task)) % 200
    boxes = [
        (0, 0, 160, 50, (250 - tint, 230, 150)),  # the utterance band MiniWoB draws
        (20, 80 + variant * 30, 80, 22, (70, 110, 200 - shade)),
        (20, 150, 120, 18, (200, 200, 200)),
    ]
    return tiny_png(160, 210, boxes)


def _screenshot(task: str, step: int) -> ScreenshotRow:
    # A few distinct images per task, so runs exercise deduplication by sha256.
    png = _screenshot_png(task, step % 3)
    return ScreenshotRow(hashlib.sha256(png).hexdigest(), png, 160, 210)


def _observation(task: str, step: int) -> str:
    return "\n".join(
        [
            f'RootWebArea "{task}"',
            f'  [1] textbox "Username" value="{"user" if step else ""}"',
            '  [2] textbox "Password"',
            f'  [3] button "Submit" {"focused" if step > 1 else ""}'.rstrip(),
            '  [4] link "Cancel"',
        ]
    )


def make_episode(
    *,
    run: str,
    task: str,
    seed: int,
    policy: str,
    success: bool,
    n_steps: int,
    attempt: int = 0,
    parse_errors: int = 0,
    screenshots: bool = True,
    env_error: str | None = None,
    policy_error: str | None = None,
) -> EpisodeRecord:
    """One plausible episode: `n_steps` steps, the first `parse_errors` unparseable."""
    eid = episode_key(task, seed, policy, attempt)
    steps, shots = [], {}
    for i in range(n_steps):
        last = i == n_steps - 1
        shot = _screenshot(task, i) if screenshots else None
        if shot:
            shots[shot.sha256] = shot
        if i < parse_errors:
            action, text, perr = None, "Thought: the form.\nclick the thing", "no Action: line"
        elif last and success:
            action, text, perr = ActionRow("click", "3"), "Thought: submit.\nAction: click(3)", None
        elif i % 2:
            action = ActionRow("fill", "1", text="user")
            text, perr = 'Thought: type the name.\nAction: fill(1, "user")', None
        else:
            action, text, perr = ActionRow("click", "4"), "Action: click(4)", None
        steps.append(
            StepRow(
                episode_id=eid,
                step=i,
                url=f"http://127.0.0.1:8765/miniwob/{task}.html",
                obs_text=_observation(task, i),
                screenshot=shot.sha256 if shot else None,
                output_text=text,
                action=action,
                parse_ok=action is not None,
                env_error="element 4 is not visible" if (i == 2 and not success) else None,
                reward=1.0 if (last and success) else 0.0,
                done=last,
                latency_s=0.05 + 0.01 * i,
                parse_error=perr,
            )
        )
    episode = EpisodeRow(
        episode_id=eid,
        run=run,
        stage=run.split("/", 1)[0],
        suite="miniwob",
        task_id=task,
        seed=seed,
        split="test" if run.startswith("eval") else "train",
        policy=policy,
        attempt=attempt,
        success=success,
        reward=1.0 if success else 0.0,
        n_steps=n_steps,
        answer=None,
        error=env_error,
        policy_error=policy_error,
        started_at=1_780_000_000.0 + seed,
        wall_s=0.2 * n_steps,
        tokens_in=300 * n_steps,
        tokens_out=20 * n_steps,
        instruction=f"Solve {task} (seed {seed}).",
    )
    return EpisodeRecord(episode, steps, list(shots.values()))


def write_eval_run(root: Path, owner: str, policy: str, rate: float, seeds: int = 6) -> Path:
    run = f"eval/{owner}/{policy}"
    rng = random.Random(f"{run}")
    with ShardWriter(root / run, max_episodes=7) as sink:
        for task in TASKS:
            for seed in range(seeds):
                ok = rng.random() < rate
                sink.write(
                    make_episode(
                        run=run,
                        task=task,
                        seed=seed,
                        policy=policy,
                        success=ok,
                        n_steps=rng.randint(2, 4) if ok else rng.randint(3, 6),
                        parse_errors=0 if ok or rng.random() < 0.7 else 1,
                    )
                )
    return root / run


def write_collect_run(root: Path, owner: str, seeds: int = 4, max_retries: int = 2) -> Path:
    run = f"collect/{owner}"
    rng = random.Random(run)
    with ShardWriter(root / run, max_episodes=5) as sink:
        for task in TASKS:
            for seed in range(seeds):
                for attempt in range(max_retries + 1):
                    # Reflection retries: later attempts succeed more often and more directly.
                    ok = rng.random() < 0.4 + 0.25 * attempt
                    rec = make_episode(
                        run=run,
                        task=task,
                        seed=seed,
                        policy="expert",
                        attempt=attempt,
                        success=ok,
                        n_steps=max(2, rng.randint(3, 6) - attempt),
                    )
                    if not ok:
                        rec.reflections.append(
                            ReflectionRow(
                                rec.episode.episode_id,
                                attempt,
                                "step 2 clicked Cancel instead of Submit; fill the username first.",
                                "rule",
                            )
                        )
                    sink.write(rec)
                    if ok:
                        break
    return root / run


def write_mine_run(root: Path, owner: str, states: int = 40) -> Path:
    run = f"mine/{owner}"
    rng = random.Random(run)
    with ShardWriter(root / run) as sink:
        for seed in range(4):
            sink.write(
                make_episode(
                    run=run, task=TASKS[seed % 5], seed=seed, policy="sft", success=False, n_steps=4
                )
            )
    with TableWriter(root / run, "mined_states", max_rows=16) as writer:
        for i in range(states):
            routine = i % 4 == 0
            seed = i % 4  # mined states point at the run's episodes (the viewer marks them)
            task = TASKS[seed % 5]
            writer.write(
                MinedStateRow(
                    state_id=f"s{i:04d}",
                    episode_id=episode_key(task, seed, "sft"),
                    step=i % 3,
                    obs_text=_observation(task, i % 3),
                    screenshot=None,
                    history=[HistoryItem("Action: click(4)", "click(4)", None)] * (i % 3),
                    reference_actions=["click(3)"],
                    policy_action=None if routine else "click(4)",
                    failure_mode=None if routine else rng.choice(FAILURE_MODES),
                    weight=0.5 if routine else 1.0 + rng.random(),
                    task_id=task,
                    instruction=f"Solve {task}.",
                    source="routine" if routine else ("fragile" if i % 4 == 1 else "critical"),
                )
            )
    return root / run


def write_rl_run(root: Path, owner: str, steps: int = 30, groups: int = 8) -> Path:
    run = f"rl/{owner}"
    rng = random.Random(run)
    with TableWriter(root / run, "rl_groups", max_rows=64) as writer:
        for step in range(steps):
            p = min(0.9, 0.3 + step / steps * 0.5)  # the policy improves
            for g in range(groups):
                rewards = [1.0 if rng.random() < p else -1.0 for _ in range(8)]
                mean = sum(rewards) / len(rewards)
                std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
                frac = rewards.count(1.0) / len(rewards)
                if std < 0.1:
                    reason = "no_contrast"
                elif frac < 0.125:
                    reason = "too_hard"
                elif frac > 0.875:
                    reason = "too_easy"
                else:
                    reason = "accepted"
                accepted = reason == "accepted"
                writer.write(
                    RLGroupRow(
                        rl_step=step,
                        state_id=f"s{(step * groups + g) % 40:04d}",
                        rewards=rewards,
                        mean=mean,
                        std=std,
                        accepted=accepted,
                        reason=reason,
                        pg_loss=rng.gauss(0.0, 0.05) if accepted else None,
                        anchor_loss=None if accepted else 2.0 * (1 - step / steps) + 0.1,
                    )
                )
    return root / run


def write_demo_runs(root: Path, owner: str = "demo") -> dict[str, Path]:
    """Every kind of run of one experiment below `root`; role -> folder (the report's inputs)."""
    root = Path(root)
    runs = {
        "collect": write_collect_run(root, owner),
        "mine": write_mine_run(root, owner),
        "rl": write_rl_run(root, owner),
    }
    for policy, rate in (("expert", 0.95), ("random", 0.1), ("sft", 0.55), ("rl", 0.7)):
        runs[f"eval-{policy}"] = write_eval_run(root, owner, policy, rate)
    return runs
