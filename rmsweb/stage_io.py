"""The I/O contract every pipeline stage command follows.

`rmsweb <stage> --exp NAME [--policy P] [--seed N] --in ROLE=DIR ... --out DIR --metrics FILE`

- the resolved config is read from params.yaml by experiment name (what
  `dvc exp run -S` edits), never from experiments/*.yaml;
- `--seed` is the training seed of a stage that runs once per seed (model, sft,
  mine, rl and the eval of trained policies); stages that do not train have none;
- inputs are the upstream stages' output folders, by role (collect, model,
  sft, mine, rl, policy, eval-<name>);
- the stage writes only `out` (a folder) and `metrics` (a small JSON file),
  plus the plot files next to `metrics` that dvc.yaml declares;
- `out` is written under a temporary sibling and renamed at the end where the
  stage cannot resume, so a crash never leaves a half-written output that DVC
  would cache. Resumable stages (collect, sft, rl) keep their partial state in
  `out` and skip finished work on rerun.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmsweb.errors import DiskFullError, UserError, is_disk_full
from rmsweb.spec import ExperimentSpec, load_from_params


@dataclass
class StageIO:
    exp: str
    spec: ExperimentSpec
    inputs: dict[str, Path]
    out: Path
    metrics: Path
    policy: str | None = None
    seed: int | None = None  # the training seed of a per-seed stage instance
    # The stage's command line after `rmsweb` when the CLI runs it: what a stage that
    # plays its units over several local processes starts copies of. None: called in-process.
    argv: list[str] | None = None
    # params.yaml, where the CLI read the spec from: what a report reads its compared
    # experiments' resolved specs from. None: called in-process with a spec in hand.
    params: Path | None = None

    @property
    def train_seed(self) -> int:
        """The seed of this stage's training randomness (init, shuffles, sampling)."""
        return self.seed if self.seed is not None else self.spec.seeds[0]

    def input(self, role: str) -> Path:
        if role not in self.inputs:
            known = ", ".join(sorted(self.inputs)) or "none"
            raise StageInputError(f"stage needs input {role!r} (--in {role}=DIR); given: {known}.")
        path = self.inputs[role]
        if not path.exists():
            raise StageInputError(
                f"input {role}={path} does not exist; run its stage first (`dvc repro` does)."
            )
        return path

    def plot_path(self, suffix: str) -> Path:
        """A plot file declared next to the metrics file: metrics/<kind>/<stem>.<suffix>."""
        return self.metrics.with_name(self.metrics.stem + "." + suffix)

    def write_metrics(self, values: dict[str, Any]) -> None:
        write_json_atomic(self.metrics, values)


class StageInputError(UserError):
    """A stage was called with missing or unusable inputs (exit 2, no traceback)."""


def _clean(value: Any) -> Any:
    # JSON has no NaN/inf: DVC's metrics readers choke on them.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_json_atomic(path: Path, values: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(
            json.dumps(_clean(values), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if is_disk_full(exc):
            raise DiskFullError(f"disk full while writing {path}; free space and rerun") from exc
        raise


def parse_inputs(items: list[str]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for item in items:
        role, sep, path = item.partition("=")
        if not sep or not role or not path:
            raise StageInputError(f"--in {item!r}: expected ROLE=DIR, e.g. --in sft=runs/sft/x.")
        out[role] = Path(path)
    return out


def make_stage_io(
    exp: str,
    params: Path,
    inputs: list[str],
    out: Path,
    metrics: Path,
    policy: str | None = None,
    seed: int | None = None,
) -> StageIO:
    spec = load_from_params(params, exp)
    # The variant: an eval policy, or a sweep's name for the sweep stage.
    # eval.suites: an eval stage's variant is <suite>-<policy> (evalckpt's stays the policy)
    known = {p.name for p in spec.eval.policies} | set(spec.eval.variants()) | set(spec.sweep)
    if policy is not None and policy not in known:
        names = ", ".join(spec.eval.variants())
        raise StageInputError(f"experiment {exp!r} has no eval policy {policy!r} (has: {names}).")
    if seed is not None and seed not in spec.seeds:
        raise StageInputError(
            f"experiment {exp!r} has no training seed {seed} (seeds: {spec.seeds})."
        )
    return StageIO(exp, spec, parse_inputs(inputs), out, metrics, policy, seed, params=params)
