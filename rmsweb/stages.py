"""The pipeline stages: the one list of them (DESIGN.md §2).

Each `StageDef` says where a stage's code is and how the pipeline runs it. The CLI
makes one command per stage from it (`rmsweb <kind>`), the compiler makes the
dvc.yaml entries (the stage's module goes into `desc` and first into `deps`, so
dvc.yaml leads to the code in one hop), and the report stage reads its plot
files' headers from it. Nothing else lists stages.

Adding a stage: one entry here, a `<package>/stage.py` with `main(io: StageIO)`, and
its place in the experiment graph (rmsweb/compile/graph.py `plan_experiment`).

This module imports nothing from rmsweb: every layer may read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plot:
    """A plot data file the stage writes next to its metrics file (a DVC `plots:` entry).

    The file is metrics/<kind>/<stem>.<file>; `columns` is its CSV header where the
    stage writes a fixed header (so an empty section still leaves a valid file).
    """

    file: str
    x: str
    y: str
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class StageDef:
    kind: str  # the DVC stage name's prefix and the CLI verb: `rmsweb <kind>`
    module: str  # dotted module whose `main(io: StageIO)` is the stage
    help: str  # one line for `rmsweb --help`
    # Code whose change reruns the stage (besides `module`): the stage's own package and
    # what shapes its output (prompts shape SFT samples, the env shapes episodes), not
    # every import, so a report tweak does not retrain a model.
    deps: tuple[str, ...]
    plots: tuple[Plot, ...] = ()
    distributed: bool = False  # trains a model: under torchrun across SkyPilot nodes
    # Plays (task, seed) units through rmsweb.rollout.sharded.run_sharded: each SkyPilot
    # node plays its share (the head posts the stage to the workers).
    sharded: bool = False
    variant: str | None = None  # a CLI option naming the stage's variant (eval: --policy)
    # The CLI words when they are not the kind: the sweep stage is `rmsweb sweep report`,
    # beside `rmsweb sweep show` and `pick`.
    command: str | None = None

    @property
    def verb(self) -> str:
        """One verb per stage, named as the stage is named (or its `command`)."""
        return self.command or self.kind

    @property
    def module_file(self) -> str:
        """The module as a path relative to the project root (a dvc.yaml dep)."""
        return self.module.replace(".", "/") + ".py"


_ROLLOUT = ("rmsweb/rollout", "rmsweb/agents", "rmsweb/suites", "rmsweb/env")

STAGE_LIST: tuple[StageDef, ...] = (
    StageDef(
        "preflight",
        "rmsweb.train.preflight.stage",
        "Preflight on the spec's GPUs: SFT and RL steps at full size against `rmsweb plan`, "
        "a checkpoint through the bucket, vLLM serving an SFT folder, a cross-node all-reduce.",
        (
            "rmsweb/train/preflight",
            "rmsweb/train/sft",
            "rmsweb/train/salvage_ds",
            "rmsweb/models",
        ),
        distributed=True,
    ),
    StageDef(
        "collect",
        "rmsweb.collect.stage",
        "Collect teacher trajectories (with reflection retries).",
        ("rmsweb/collect", "rmsweb/judge", *_ROLLOUT),
        plots=(Plot("yield.csv", "attempt", "yield"),),
        sharded=True,
    ),
    StageDef(
        "model",
        "rmsweb.train.tiny.stage",
        "Build the tiny random model and its tokenizer offline.",
        # Not rmsweb/train/pretrain (its tokenizer sample of synthetic texts, when
        # model.pretrain is set): a dep added here would rerun every spec's model stage.
        ("rmsweb/train/tiny", "rmsweb/models", *_ROLLOUT),
    ),
    StageDef(
        "pretrain",
        "rmsweb.train.pretrain.stage",
        "Pretrain the tiny model on synthetic web tasks (model.pretrain), before SFT.",
        (
            "rmsweb/train/pretrain",
            "rmsweb/train/sft/trainer.py",
            "rmsweb/train/sft/completion_loss.py",
            "rmsweb/agents/prompt.py",
            "rmsweb/env/observe.py",  # renders the synthetic pages
        ),
        plots=(Plot("loss.csv", "step", "loss"),),
    ),
    StageDef(
        "sft",
        "rmsweb.train.sft.stage",
        "Supervised fine-tuning on the kept trajectories.",
        ("rmsweb/train/sft", "rmsweb/agents/prompt.py", "rmsweb/models"),
        # dvclive: a folder DVCLive fills while training runs (rmsweb/train/live_log.py)
        plots=(Plot("loss.csv", "step", "loss"), Plot("dvclive", "step", "train/loss")),
        distributed=True,
    ),
    StageDef(
        "mine",
        "rmsweb.mine.stage",
        "Mine critical and fragile states of the SFT policy.",
        ("rmsweb/mine", "rmsweb/judge", *_ROLLOUT),
        sharded=True,
    ),
    StageDef(
        "regime",
        "rmsweb.regime.stage",
        "Headroom, reach and length of the SFT policy on val, before RL (the recipe's regime).",
        (
            "rmsweb/regime",
            "rmsweb/mine",
            "rmsweb/evaluate",
            "rmsweb/train/salvage_ds/reward.py",
            *_ROLLOUT,
        ),
    ),
    StageDef(
        "rl",
        "rmsweb.train.salvage_ds.stage",
        "RL on mined states: grpo, dapo_ds or Salvage-DS.",
        ("rmsweb/train/salvage_ds", "rmsweb/agents/prompt.py", "rmsweb/models"),
        plots=(
            Plot("curves.csv", "step", "reward_mean"),
            Plot("dvclive", "step", "rl/reward_mean"),
        ),
        distributed=True,
    ),
    StageDef(
        "eval",
        "rmsweb.evaluate.stage",
        "Evaluate one policy on the eval splits (live suites: judged by their LLM judge).",
        ("rmsweb/evaluate", "rmsweb/judge", *_ROLLOUT),
        variant="policy",
    ),
    StageDef(
        "evalckpt",
        "rmsweb.evalckpt.stage",
        "Val success of SFT and every RL checkpoint (replays the RL run to keep them).",
        # The replay is the rl stage's training, the evaluation eval's: their code too.
        (
            "rmsweb/evalckpt",
            "rmsweb/train/salvage_ds",
            "rmsweb/evaluate",
            "rmsweb/models",
            *_ROLLOUT,
        ),
        plots=(
            Plot(
                "curve.csv",
                "step",
                "success",
                ("step", "success", "ci_low", "ci_high", "successes", "episodes"),
            ),
            Plot(
                "tasks.csv",
                "step",
                "success",
                ("step", "task_id", "successes", "episodes", "success"),
            ),
        ),
        variant="policy",
    ),
    StageDef(
        "sweep",
        "rmsweb.sweep.stage",
        "Rank a sweep's points by its metric: metrics/sweep/<name>.json, .csv and .png.",
        ("rmsweb/sweep",),
        plots=(
            # Columns: point, one per axis, value, its intervals, n (the axes vary).
            Plot("csv", "point", "value"),
        ),
        variant="sweep",
        command="sweep report",
    ),
    StageDef(
        "report",
        "rmsweb.report.stage",
        "Write the experiment's report (markdown + HTML).",
        ("rmsweb/report", "rmsweb/store"),
        plots=(
            Plot(
                "success.csv",
                "policy",
                "success",
                ("policy", "suite", "n", "success", "ci_low", "ci_high"),
            ),
            Plot(
                "yield.csv",
                "attempt",
                "yield",
                ("run", "attempt", "attempts", "successes", "attempt_success", "yield"),
            ),
            Plot(
                "failure_modes.csv",
                "failure_mode",
                "states",
                ("run", "failure_mode", "states", "weight"),
            ),
            Plot(
                "rl.csv",
                "step",
                "reward_mean",
                (
                    "run",
                    "step",
                    "groups",
                    "reward_mean",
                    "reward_std",
                    "accept_rate",
                    "pg_loss",
                    "anchor_loss",
                ),
            ),
        ),
    ),
)

# kind -> definition, in pipeline order (the compiler sorts stages by this order).
STAGES: dict[str, StageDef] = {s.kind: s for s in STAGE_LIST}
