"""The stage graph of each experiment, and the sharing of identical stages across experiments.

Pure: resolved specs in, a list of stages out. A stage's identity is the hash
of its kind, the config keys it reads and the identities of its upstream
stages, so two experiments that agree on everything a stage (and its
ancestors) reads share that stage, its outputs and its cache. A shared stage
is named after its owner: of the experiments sharing it, the one with the
shortest name (ties: alphabetical), so an ablation `miniwob-cpu-grpo` reuses
`sft_miniwob-cpu` rather than the other way round.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rmsweb.errors import UserError
from rmsweb.spec import ExperimentSpec
from rmsweb.stages import STAGES, StageDef


@dataclass(frozen=True)
class Read:
    """A config path a stage reads, optionally minus some of its children."""

    path: str
    exclude: frozenset[str] = frozenset()


@dataclass
class Stage:
    kind: str
    experiment: str  # the experiment this instance was planned for
    reads: tuple[Read, ...]
    upstream: dict[str, Stage]  # role -> stage
    variant: str | None = None  # eval: the policy name
    identity: str = ""
    owner: str = ""  # set when stages are shared
    sharers: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)  # dotted keys under the owner

    @property
    def stem(self) -> str:
        return f"{self.owner}-{self.variant}" if self.variant else self.owner

    @property
    def name(self) -> str:
        """DVC stage name: only letters, digits, '-' and '_' are allowed there."""
        kind = f"{self.kind}-{self.variant}" if self.variant else self.kind
        return f"{kind}_{self.owner}"

    @property
    def out(self) -> str:
        if self.variant:
            return f"runs/{self.kind}/{self.owner}/{self.variant}"
        return f"runs/{self.kind}/{self.owner}"

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
            keys.extend(f"{read.path}.{k}" for k in value if k not in read.exclude)
        else:
            keys.append(read.path)
    return keys


def _identity(stage: Stage, data: dict[str, Any]) -> str:
    # Keyed by what is read, not where: an eval policy is the same stage whatever
    # its position in the experiment's policy list.
    config = {
        ("eval.policy" if r.path.startswith("eval.policies.") else r.path): _get(data, r.path)
        for r in stage.reads
    }
    for r in stage.reads:
        section = config.get(r.path)
        if isinstance(section, dict) and r.exclude:
            config[r.path] = {k: v for k, v in section.items() if k not in r.exclude}
    payload = {
        "kind": stage.kind,
        "variant": stage.variant,
        "config": config,
        "upstream": {role: up.identity for role, up in sorted(stage.upstream.items())},
    }
    if stage.kind == "report":
        payload["experiment"] = stage.experiment  # a report is always its experiment's own
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def plan_experiment(spec: ExperimentSpec) -> list[Stage]:
    """The stages of one experiment, in topological order, with identities."""
    data = spec.model_dump(mode="json")
    name = spec.name
    stages: list[Stage] = []

    def add(kind: str, reads: list[Read], upstream: dict[str, Stage], variant: str | None = None):
        stage = Stage(kind, name, tuple(reads), upstream, variant)
        stage.params = expand_params(data, stage.reads)
        stage.identity = _identity(stage, data)
        stages.append(stage)
        return stage

    collect_reads = [Read("seed"), Read("suite", frozenset({"test"})), Read("collect")]
    if spec.collect.teacher.kind == "openai":
        collect_reads.append(Read("model.prompt"))  # the LLM teacher is prompted like the policy
    collect = add("collect", collect_reads, {})

    sft_upstream = {"collect": collect}
    if spec.model.kind == "tiny":
        # The tiny model's tokenizer is trained on the collected texts.
        sft_upstream["model"] = add(
            "model",
            [Read("seed"), Read("model", frozenset({"prompt", "backend", "lora"}))],
            {"collect": collect},
        )
    sft = add("sft", [Read("seed"), Read("model"), Read("sft")], sft_upstream)
    mine = add(
        "mine",
        [
            Read("seed"),
            Read("suite", frozenset({"test"})),
            Read("mine"),
            Read("model.prompt"),
            Read("model.backend"),
        ],
        {"sft": sft, "collect": collect},
    )
    rl = add("rl", [Read("seed"), Read("model"), Read("rl")], {"mine": mine, "sft": sft})

    evals: list[Stage] = []
    for i, policy in enumerate(spec.eval.policies):
        reads = [
            Read("seed"),
            Read("suite", frozenset({"train"})),
            Read("eval", frozenset({"policies"})),
            Read(f"eval.policies.{i}"),
        ]
        upstream: dict[str, Stage] = {}
        if policy.kind == "checkpoint":
            reads += [Read("model.prompt"), Read("model.backend")]
            upstream["policy"] = sft if policy.source == "sft" else rl
        elif policy.kind == "openai":
            reads.append(Read("model.prompt"))
        elif policy.kind == "teacher":
            # The collect stage's teacher: its mistake model, or its endpoint and prompt.
            # Adherence only matters with reflections, which an eval episode never has.
            reads.append(Read("collect.teacher", frozenset({"adherence"})))
            if spec.collect.teacher.kind == "openai":
                reads.append(Read("model.prompt"))
        evals.append(add("eval", reads, upstream, variant=policy.name))

    # The report reads the evals and every run upstream of them (collect yield,
    # SFT loss, and mining / RL curves when an evaluated policy comes from RL).
    report_upstream: dict[str, Stage] = {}

    def visit(stage: Stage, role: str) -> None:
        if role in report_upstream:
            return
        report_upstream[role] = stage
        for up in stage.upstream.values():
            visit(up, up.kind)

    for ev in evals:
        visit(ev, f"eval-{ev.variant}")
    add("report", [Read("name"), Read("report")], report_upstream)
    return stages


def plan_project(specs: Iterable[ExperimentSpec]) -> list[Stage]:
    """All experiments' stages with shared ones merged; deterministic order."""
    specs = list(specs)
    plans = {spec.name: plan_experiment(spec) for spec in specs}
    # `report.compare`: the other experiments' collect and eval stages feed this report.
    for spec in specs:
        report = next(s for s in plans[spec.name] if s.kind == "report")
        for other in spec.report.compare:
            if other not in plans:
                raise UserError(
                    f"experiment {spec.name}: report.compare names {other!r}, which is not an "
                    f"experiment under experiments/ (have: {', '.join(sorted(plans))})."
                )
            for stage in plans[other]:
                if stage.kind == "collect":
                    report.upstream[f"{other}-collect"] = stage
                elif stage.kind == "eval":
                    report.upstream[f"{other}-eval-{stage.variant}"] = stage
    planned: dict[str, dict[str, Stage]] = {}  # identity -> experiment -> its instance
    for name, stages in plans.items():
        for stage in stages:
            planned.setdefault(stage.identity, {})[name] = stage
    canonical: dict[str, Stage] = {}
    for ident, instances in planned.items():
        names = sorted(instances, key=lambda n: (len(n), n))
        stage = instances[names[0]]  # the owner's instance: its params keys are the owner's
        stage.owner = names[0]
        stage.sharers = names
        canonical[ident] = stage
    for stage in canonical.values():
        stage.upstream = {role: canonical[up.identity] for role, up in stage.upstream.items()}
    rank = {k: i for i, k in enumerate(STAGES)}
    return sorted(canonical.values(), key=lambda s: (rank[s.kind], s.owner, s.variant or ""))
