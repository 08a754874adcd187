"""The stage graph of each experiment, and the sharing of identical stages across experiments.

Pure: resolved specs in, a list of stages out. A stage's identity is the hash
of its kind, the config keys it reads and the identities of its upstream
stages, so two experiments that agree on everything a stage (and its
ancestors) reads share that stage, its outputs and its cache.

A shared stage is named after its owner, and ownership is stable: adding a spec
never renames an existing stage or moves its outputs (README's
`-S 'miniwob-cpu.sft...'` keeps reaching the stage it names, and dvc.lock stays
valid). The owner of a stage is
1. the experiment that owned a stage of the same role (`sft-s0`, `eval-sft-s0`)
   in the previous dvc.yaml, if it still shares this one: the previous names are
   an input (`previous_names`), read from the committed dvc.yaml. Keyed by role
   rather than identity, so when the owner's config changes the changed stage
   keeps the owner's name and an unchanged copy elsewhere gets a name of its own;
2. else (a new stage, or no previous dvc.yaml) the sharer with the shortest
   name (ties: alphabetical), so an ablation `miniwob-cpu-grpo` reuses
   `sft-s0_miniwob-cpu` rather than the other way round.
Renaming the owning spec renames its stages: the name is the owner's.

Training seeds (`seeds: [0, 1, 2]`) give one instance per seed of every stage that
trains or samples from a trained model (model, sft, mine, rl, eval of a checkpoint):
the seed is part of the identity and of the name (`sft-s1_miniwob-cpu`) and is passed
as `--seed`, not read from params, so adding a seed leaves the others' stages cached.
Collection and the evals of untrained policies do not depend on it and stay shared.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rmsweb.errors import UserError
from rmsweb.spec import ExperimentSpec
from rmsweb.spec.regime import regime_enabled
from rmsweb.spec.sweep import Metric
from rmsweb.stages import STAGES, StageDef


@dataclass(frozen=True)
class Read:
    """A config path a stage reads, optionally minus some of its children."""

    path: str
    exclude: frozenset[str] = frozenset()
    # Children added after stages were run, left out while null (their "off"), so adding
    # the field neither changes a stage's params nor its identity and dvc.lock stays valid.
    optional: frozenset[str] = frozenset()

    def drops(self, key: str, value: Any) -> bool:
        return key in self.exclude or (key in self.optional and value is None)


@dataclass
class Stage:
    kind: str
    experiment: str  # the experiment this instance was planned for
    reads: tuple[Read, ...]
    upstream: dict[str, Stage]  # role -> stage
    variant: str | None = None  # eval: the policy name
    seed: int | None = None  # the training seed of a per-seed stage
    identity: str = ""
    owner: str = ""  # set when stages are shared
    sharers: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)  # dotted keys under the owner
    # Stages that must have passed before this one starts, read by nothing (the GPU
    # preflight before SFT): a dep on their PASSED marker in dvc.yaml.
    after: list[Stage] = field(default_factory=list)

    @property
    def _suffix(self) -> list[str]:
        return ([self.variant] if self.variant else []) + (
            [f"s{self.seed}"] if self.seed is not None else []
        )

    @property
    def role(self) -> str:
        """How a report names this stage among its inputs: eval-sft-s1, sft-s1, collect."""
        return "-".join([self.kind, *self._suffix])

    @property
    def stem(self) -> str:
        if self.kind == "sweep":
            return str(self.variant)  # sweep names are unique in the project: metrics/sweep/<name>
        return "-".join([self.owner, *self._suffix])

    @property
    def name(self) -> str:
        """DVC stage name: only letters, digits, '-' and '_' are allowed there."""
        return f"{self.role}_{self.owner}"

    @property
    def out(self) -> str:
        if self.kind == "sweep":
            return f"runs/sweep/{self.variant}"  # beside metrics/sweep/<name>: one name
        return "/".join(["runs", self.kind, self.owner, *self._suffix])

    @property
    def metrics(self) -> str:
        return f"metrics/{self.kind}/{self.stem}.json"

    @property
    def definition(self) -> StageDef:
        return STAGES[self.kind]

    @property
    def plots(self) -> list[tuple[str, str, str]]:
        return [
            (f"metrics/{self.kind}/{self.stem}.{p.file}", p.x, p.y) for p in self.definition.plots
        ]


def _get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def expand_params(data: dict[str, Any], reads: Iterable[Read]) -> list[str]:
    """Dotted param keys of the reads, one level below each section (key granularity)."""
    keys: list[str] = []
    for read in reads:
        value = _get(data, read.path)
        if isinstance(value, dict):
            keys.extend(f"{read.path}.{k}" for k, v in value.items() if not read.drops(k, v))
        else:
            keys.append(read.path)
    return keys


def _identity(stage: Stage, data: dict[str, Any]) -> str:
    # Keyed by what is read, not where: an eval policy is the same stage whatever
    # its position in the experiment's policy list.
    config: dict[str, Any] = {}
    for r in stage.reads:
        value = _get(data, r.path)
        if isinstance(value, dict) and (r.exclude or r.optional):
            value = {k: v for k, v in value.items() if not r.drops(k, v)}
        key = "eval.policy" if r.path.startswith("eval.policies.") else r.path
        config["eval.suite" if r.path.startswith("eval.suites.") else key] = value
    payload = {
        "kind": stage.kind,
        "variant": stage.variant,
        "seed": stage.seed,
        "config": config,
        "upstream": {role: up.identity for role, up in sorted(stage.upstream.items())},
    }
    if stage.kind in ("report", "sweep"):
        payload["experiment"] = stage.experiment  # a report is always its experiment's own
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def plan_experiment(spec: ExperimentSpec) -> list[Stage]:
    """The stages of one experiment, in topological order, with identities."""
    data = spec.model_dump(mode="json")
    name = spec.name
    stages: list[Stage] = []

    def add(
        kind: str,
        reads: list[Read],
        upstream: dict[str, Stage],
        variant: str | None = None,
        seed: int | None = None,
    ) -> Stage:
        stage = Stage(kind, name, tuple(reads), upstream, variant, seed)
        stage.params = expand_params(data, stage.reads)
        stage.identity = _identity(stage, data)
        stages.append(stage)
        return stage

    # `seed` is the data seed (the teacher's mistakes); held-out seeds are not read.
    collect_reads = [
        Read("seed"),
        Read("suite", frozenset({"val", "test", "mine"})),
        Read("collect", frozenset({"processes"})),  # how fast, not what: same data
    ]
    if spec.collect.teacher.kind == "openai":
        collect_reads.append(Read("model.prompt"))  # the LLM teacher is prompted like the policy
    collect = add("collect", collect_reads, {})
    preflight = None
    if spec.compute.accelerators:
        # A GPU spec checks its stack on its own accelerators before anything expensive
        # runs (rmsweb/train/preflight): what it sizes is the model, SFT and RL steps.
        # SFT waits for it (not collect, which specs on other accelerators may share);
        # the sky task runs it first (it leads the registry's order).
        preflight = add(
            "preflight",
            [
                Read("model"),
                # sizes steps, not data; replay (null: off) came after stages were run
                Read("sft", frozenset({"demos_per_task"}), frozenset({"replay"})),
                Read("rl"),
                Read("suite.browser"),
                Read("compute"),
            ],
            {},
        )

    trained: dict[str, dict[int, Stage]] = {"sft": {}, "rl": {}}
    regimes: list[Stage] = []  # headroom, reach and length before RL, per seed
    pretrained = _pretrained_model(spec, add, preflight)
    for seed in spec.seeds:
        sft_upstream = {"collect": collect}
        if pretrained is not None:
            sft_upstream["model"] = pretrained  # one pretrained model for every seed
        elif spec.model.kind == "tiny":
            # Tokenizer and initial weights come from the suite and the model config only,
            # so every arm of a study starts from the same model (per training seed).
            sft_upstream["model"] = add(
                "model",
                [
                    Read("suite", frozenset({"val", "test", "mine"})),
                    Read("model", frozenset({"prompt", "backend", "lora"})),
                ],
                {},
                seed=seed,
            )
            if preflight is not None:
                sft_upstream["model"].after.append(preflight)
        sft_read = Read(
            "sft",
            frozenset({"save_minutes"}),  # when checkpoints are written, not what is trained
            # null: max_steps decides, and every collected seed is trained on, as before
            # these fields existed
            frozenset({"epochs", "demos_per_task", "replay"}),
        )
        sft = add("sft", [Read("model"), sft_read], sft_upstream, seed=seed)
        if preflight is not None:
            sft.after.append(preflight)  # the days-long stage: its own accelerators checked
        mine = add(
            "mine",
            [
                Read("suite", frozenset({"val", "test"})),
                Read("mine"),
                Read("model.prompt"),
                Read("model.backend"),
            ],
            {"sft": sft, "collect": collect},
            seed=seed,
        )
        rl = add("rl", [Read("model"), Read("rl")], {"mine": mine, "sft": sft}, seed=seed)
        trained["sft"][seed], trained["rl"][seed] = sft, rl
        if regime_enabled(spec):
            regime_reads = [
                Read("suite", frozenset({"train", "test", "mine"})),
                Read("model.prompt"),
                Read("model.backend"),
                Read("rl.group_size"),
                Read("rl.temperature"),
                Read("rl.reward", frozenset({"kind", "format_bonus", "invert"})),
                Read("regime", frozenset({"enabled"})),
            ]
            regimes.append(add("regime", regime_reads, {"sft": sft, "mine": mine}, seed=seed))

    evals: list[Stage] = []
    for i, policy in enumerate(spec.eval.policies if not spec.eval.suites else []):
        # A policy with its own splits does not read eval.splits: experiments that
        # differ there still share its stage.
        own = {"splits"} if policy.splits is not None else set()
        reads = [
            Read("seed"),
            Read("suite", frozenset({"train", "mine"})),
            # eval.suites: null (the offline studies) leaves their params as they were
            Read("eval", frozenset({"policies", *own}), frozenset({"suites"})),
            # every_checkpoint adds a stage of its own (evalckpt); the eval stage does
            # not read it, so turning it on leaves the eval stage shared and cached.
            Read(f"eval.policies.{i}", frozenset({"every_checkpoint"})),
        ]
        reads += policy_reads(spec, policy)
        if policy.kind == "checkpoint":
            for seed, source in trained[policy.source].items():
                evals.append(add("eval", reads, {"policy": source}, policy.name, seed))
            # Validation allows every_checkpoint on rl policies only.
            curve_seeds = policy.checkpoint_seeds(spec.seeds)
            if curve_seeds:
                evals += _checkpoint_evals(add, policy.name, trained, curve_seeds)
            continue
        evals.append(add("eval", reads, {}, variant=policy.name))
    evals += _suite_evals(spec, add, trained)

    # The report reads the evals and every run upstream of them (collect yield,
    # SFT loss, and mining / RL curves when an evaluated policy comes from RL).
    report_upstream: dict[str, Stage] = {}

    def visit(stage: Stage) -> None:
        if stage.role in report_upstream:
            return
        report_upstream[stage.role] = stage
        for up in stage.upstream.values():
            visit(up)

    for ev in evals:
        visit(ev)
    for regime in regimes:
        visit(regime)
    add("report", [Read("name"), Read("report")], report_upstream)
    return stages


# What of model.pretrain the model stage reads: the seed (initial weights) and the skills
# (its tokenizer's sample of synthetic texts); the rest is the pretrain stage's.
_PRETRAIN_TRAINING = frozenset(
    {"steps", "batch_size", "learning_rate", "warmup_ratio", "samples", "max_seq_len"}
    | {"eval_per_skill", "until"}
)


def _pretrained_model(
    spec: ExperimentSpec, add: Callable[..., Stage], preflight: Stage | None
) -> Stage | None:
    """With model.pretrain set (tiny models): ONE model stage and ONE pretrain stage for
    every training seed and every arm of a study, so neither has a seed.

    Both read the suite's tasks and the model section only: not suite.train.count (a
    demonstration budget study varies it and shares one pretrained model), nor val, test
    or mine seeds, nor any sft, rl, mine or collect key. The model stage's corpus runs
    on its own seeds from suite.train.start (rmsweb/train/tiny/corpus.py budget_free).
    None without pretraining (the model stage per training seed, as before).
    """
    if spec.model.kind != "tiny" or spec.model.pretrain is None:
        return None
    suite = [Read("suite", frozenset({"val", "test", "mine", "train"}))]
    if "train" in type(spec.suite).model_fields:
        suite.append(Read("suite.train", frozenset({"count"})))
    model = add(
        "model",
        [
            *suite,
            Read("model", frozenset({"prompt", "backend", "lora", "pretrain"})),
            Read("model.pretrain", _PRETRAIN_TRAINING),
        ],
        {},
    )
    if preflight is not None:
        model.after.append(preflight)
    # The synthetic prompts are built with model.prompt, as the policy's are.
    return add("pretrain", [Read("model", frozenset({"backend", "lora"}))], {"model": model})


def policy_reads(spec: ExperimentSpec, policy: Any) -> list[Read]:
    """What an eval stage reads of the policy beyond its own entry: a checkpoint's prompt
    and backend; an LLM's prompt; the collect stage's teacher (its mistake model, or its
    endpoint and prompt; adherence only matters with reflections, which an eval episode
    never has)."""
    if policy.kind == "checkpoint":
        return [Read("model.prompt"), Read("model.backend")]
    if policy.kind == "openai":
        return [Read("model.prompt")]
    if policy.kind == "teacher":
        reads = [Read("collect.teacher", frozenset({"adherence"}))]
        if spec.collect.teacher.kind == "openai":
            reads.append(Read("model.prompt"))
        return reads
    return []


def _suite_evals(
    spec: ExperimentSpec, add: Callable[..., Stage], trained: dict[str, dict[int, Stage]]
) -> list[Stage]:
    """`eval.suites`: each policy on each evaluation suite, one stage per (suite, policy,
    training seed), variant `<suite>-<policy>`. It reads its evaluation suite (not the
    training suite: its judge, split and step limit are its own), the policy, and what
    an eval of the training suite reads of `eval` and the model; so adding a benchmark
    leaves the other benchmarks' stages cached."""
    evals: list[Stage] = []
    for j, ev in enumerate(spec.eval.suites or []):
        for i, policy in enumerate(spec.eval.policies):
            variant = spec.eval.variant(ev, policy)
            reads = [
                Read("seed"),
                Read(f"eval.suites.{j}"),
                Read("eval", frozenset({"policies", "splits", "suites"})),
                Read(f"eval.policies.{i}", frozenset({"every_checkpoint", "splits"})),
            ]
            reads += policy_reads(spec, policy)
            if policy.kind == "checkpoint":
                for seed, source in trained[policy.source].items():
                    evals.append(add("eval", reads, {"policy": source}, variant, seed))
                continue
            evals.append(add("eval", reads, {}, variant=variant))
    return evals


def _checkpoint_evals(
    add: Callable[..., Stage],
    policy: str,
    trained: dict[str, dict[int, Stage]],
    seeds: list[int],
) -> list[Stage]:
    """`evalckpt`, one per training seed of `seeds`: SFT (step 0) and every RL checkpoint
    on val.

    It replays the RL run (the rl stage keeps no checkpoints: rmsweb/evalckpt/replay.py),
    so it reads what the rl stage reads, and what a val eval reads (suite, browser,
    eval.seeds_per_task / temperature, the prompt). Inputs: the mined states and SFT
    model the replay starts from, and the rl stage's model to check the replay against.
    """
    reads = [
        Read("suite", frozenset({"train", "mine", "test"})),
        Read("eval", frozenset({"policies", "splits"}), frozenset({"suites"})),
        Read("model"),
        Read("rl"),
    ]
    return [
        add(
            "evalckpt",
            reads,
            {"sft": trained["sft"][seed], "mine": rl.upstream["mine"], "rl": rl},
            policy,
            seed,
        )
        for seed, rl in trained["rl"].items()
        if seed in seeds
    ]


def previous_owners(previous_names: Iterable[str]) -> set[tuple[str, str]]:
    """(role, owner) of each stage name `<role>_<owner>` (names hold no `_`, see
    spec/common.py, so the split is unique)."""
    pairs = set()
    for name in previous_names:
        role, sep, owner = name.partition("_")
        if sep and owner:
            pairs.add((role, owner))
    return pairs


def _owner_order(
    instances: dict[str, Stage], kept: set[tuple[str, str]], points: set[str] = frozenset()
) -> list[str]:
    """The sharers of one stage, its owner first (see the module docstring); a spec owns
    before a sweep's point, so a point never takes a stage its spec shares."""
    role = next(iter(instances.values())).role
    by_name = sorted(instances, key=lambda n: (n in points, len(n), n))
    owner = next((n for n in by_name if (role, n) in kept), by_name[0])
    # Only the owner comes from the previous dvc.yaml; the other sharers keep name order,
    # so a second compile after a merge of stages writes the same file as the first.
    return [owner] + [n for n in by_name if n != owner]


def plan_project(
    specs: Iterable[ExperimentSpec], previous_names: Iterable[str] = ()
) -> list[Stage]:
    """All experiments' stages with shared ones merged; deterministic order.

    `previous_names`: the stage names of the previous dvc.yaml, whose owners keep
    their stages (module docstring)."""
    specs = list(specs)
    kept = previous_owners(previous_names)
    plans = {spec.name: plan_experiment(spec) for spec in specs}
    variants = _plan_grids(specs, plans)
    points = _plan_sweeps(specs, plans) | set(variants)
    # `report.compare`: the other experiments' collect and eval stages feed this report;
    # with a grid, so do the cells of the spec and of every compared spec.
    for spec in specs:
        report = next(s for s in plans[spec.name] if s.kind == "report")
        for other in _compared(spec, variants):
            if other not in plans:
                raise UserError(
                    f"experiment {spec.name}: report.compare names {other!r}, which is not an "
                    f"experiment under experiments/ (have: {', '.join(sorted(plans))})."
                )
            for stage in plans[other]:
                # "<experiment>.<role>": a dot cannot occur in names, so the report can
                # tell which experiment an input reports for.
                if stage.kind in ("collect", "eval", "evalckpt"):
                    report.upstream[f"{other}.{stage.role}"] = stage
    planned: dict[str, dict[str, Stage]] = {}  # identity -> experiment -> its instance
    for name, stages in plans.items():
        for stage in stages:
            planned.setdefault(stage.identity, {})[name] = stage
    canonical: dict[str, Stage] = {}
    for ident, instances in planned.items():
        names = _owner_order(instances, kept, points)
        stage = instances[names[0]]  # the owner's instance: its params keys are the owner's
        # A shared stage waits for every sharer's preflight (each checks its own GPUs).
        stage.after = [a for n in names for a in instances[n].after]
        stage.owner = names[0]
        stage.sharers = names
        canonical[ident] = stage
    for stage in canonical.values():
        stage.upstream = {role: canonical[up.identity] for role, up in stage.upstream.items()}
        stage.after = list({s.identity: canonical[s.identity] for s in stage.after}.values())
    rank = {k: i for i, k in enumerate(STAGES)}
    return sorted(
        canonical.values(),
        key=lambda s: (rank[s.kind], s.owner, s.variant or "", -1 if s.seed is None else s.seed),
    )


def _plan_grids(specs: list[ExperimentSpec], plans: dict[str, list[Stage]]) -> dict[str, str]:
    """Add each grid cell's experiment (every stage but a report) to `plans`; returns
    variant name -> its spec's name. Variant names must be new names."""
    from rmsweb.spec.variants import other_variants

    out: dict[str, str] = {}
    for spec in specs:
        for variant in other_variants(spec):
            if variant.name in plans:
                raise UserError(
                    f"experiment {spec.name}: grid cell {variant.name} has the name of another "
                    "experiment or cell. Rename the grid's labels or the other experiment."
                )
            plans[variant.name] = [s for s in plan_experiment(variant.spec) if s.kind != "report"]
            out[variant.name] = spec.name
    return out


def _compared(spec: ExperimentSpec, variants: dict[str, str]) -> list[str]:
    """report.compare, and with a grid the cells of the spec and of each compared spec."""
    names = list(spec.report.compare)
    if spec.grid is None:
        return names
    owners = [spec.name, *names]
    cells = [v for o in owners for v, parent in variants.items() if parent == o]
    return names + [c for c in cells if c not in names]


# The role prefix of a sweep stage's input that is a point's `against` baseline.
AGAINST = "against-"


def _metric_stages(stages: list[Stage], metric: Metric) -> list[Stage]:
    """The stages of one point whose metrics files hold the sweep's metric."""
    return [
        s
        for s in stages
        if s.kind == metric.stage and (metric.policy is None or s.variant == metric.policy)
    ]


def _ancestors(stages: Iterable[Stage]) -> list[Stage]:
    seen: dict[int, Stage] = {}
    todo = list(stages)
    while todo:
        stage = todo.pop()
        if id(stage) not in seen:
            seen[id(stage)] = stage
            todo.extend(stage.upstream.values())
    return list(seen.values())


def _plan_sweeps(specs: list[ExperimentSpec], plans: dict[str, list[Stage]]) -> set[str]:
    """Add each sweep's points (only the stages their metric needs) and its sweep stage
    to `plans`; returns the points' names. Sweep and point names must be new names."""
    from rmsweb.spec.points import all_points

    taken = set(plans)
    sweeps: dict[str, str] = {}  # sweep -> its spec
    point_names: set[str] = set()
    for spec in specs:
        for name in spec.sweep:
            if name in sweeps:
                raise UserError(
                    f"sweep name {name!r} is used by experiments {sweeps[name]} and "
                    f"{spec.name}; sweep names are unique in the project "
                    "(metrics/sweep/<name>.json). Rename one."
                )
            sweeps[name] = spec.name
        by_sweep: dict[str, dict[str, Stage]] = {}
        for point in all_points(spec):
            if point.name in taken:
                raise UserError(
                    f"experiment {spec.name}: sweep point {point.name} has the name of another "
                    "experiment or point. Rename the sweep or the other experiment."
                )
            taken.add(point.name)
            point_names.add(point.name)
            planned = plan_experiment(point.spec)
            sweep = spec.sweep[point.sweep]
            wanted = _metric_stages(planned, Metric(sweep.metric))
            # The baseline each point is paired with (`against`): its eval stages, read
            # by the sweep stage as "<point>.against-<role>" (often one stage all share).
            paired = (
                _metric_stages(planned, Metric(f"eval.{sweep.against}.success"))
                if sweep.against
                else []
            )
            keep = {id(s) for s in _ancestors(wanted + paired)}
            plans[point.name] = [s for s in planned if id(s) in keep]
            # role key "<point>.<role>", as report.compare's inputs
            inputs = by_sweep.setdefault(point.sweep, {})
            inputs.update({f"{s.experiment}.{s.role}": s for s in wanted})
            inputs.update({f"{s.experiment}.{AGAINST}{s.role}": s for s in paired})
        if not spec.sweep:
            continue
        data = spec.model_dump(mode="json")
        for name in spec.sweep:
            upstream = dict(by_sweep.get(name, {}))
            # `against` is left out of the params while unset, so adding the field did not
            # change the sweeps run before it.
            reads = (Read("name"), Read(f"sweep.{name}", optional=frozenset({"against"})))
            stage = Stage("sweep", spec.name, reads, upstream, name)
            stage.params = expand_params(data, stage.reads)
            stage.identity = _identity(stage, data)
            plans[spec.name].append(stage)
    return point_names
