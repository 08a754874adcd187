"""The key of one run of a stage: where its resumable state lives in the checkpoint bucket.

A checkpoint may be resumed only by a run that would produce the same model.
Stage.identity (graph.py) hashes the config a stage and its ancestors read, as
planned at compile time. The key adds what can differ at run time:
1. `dvc exp run -S` edits params.yaml without recompiling, so an identity baked
   into the dvc.yaml command would still be the old one. Here the identity is
   recomputed from the params the stage actually loaded.
2. A fix in the stage's code reruns the stage (its code is a DVC dep) and must
   not resume the old code's checkpoint: the code files are hashed in.
3. An upstream stage rerun after a code change may write other data under the
   same config: the input folders' contents are hashed in.
Cost: one read of the inputs (seconds per GB), small against a training run.
The key starts with the identity, so a person can match bucket folders to stages.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from rmsweb.spec import ExperimentSpec
from rmsweb.stages import STAGES

from .graph import plan_experiment

# The checkout the stage runs from: the registry's code paths are relative to it.
REPO_ROOT = Path(__file__).resolve().parents[2]
_SKIP = ("__pycache__", ".pyc")


def _hash_tree(h: hashlib._Hash, path: Path, label: str) -> None:
    """Names, sizes and bytes of every file under `path` (or of the file itself)."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        if any(part in _SKIP or part.endswith(_SKIP[1]) for part in f.parts):
            continue
        rel = label if f == path else f"{label}/{f.relative_to(path).as_posix()}"
        h.update(f"{rel}\0{f.stat().st_size}\0".encode())
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)


def stage_run_key(
    spec: ExperimentSpec,
    kind: str,
    variant: str | None = None,
    inputs: Mapping[str, Path] | None = None,
    code_root: Path = REPO_ROOT,
    seed: int | None = None,
) -> str:
    """`<identity>-<hash of code and inputs>` of the `kind` stage of `spec` (eval: `variant`,
    per-seed stages: `seed`, default the spec's first training seed)."""
    per_seed = ("sft", "mine", "rl")
    if getattr(spec.model, "pretrain", None) is None:
        per_seed += ("model",)  # with model.pretrain, one model stage for every seed
    if seed is None and kind in per_seed:
        seed = spec.seeds[0]
    planned = [
        s
        for s in plan_experiment(spec)
        if s.kind == kind and s.variant == variant and s.seed == seed
    ]
    if not planned:
        raise ValueError(
            f"experiment {spec.name} has no {kind} stage (variant {variant!r}, seed {seed})"
        )
    identity = planned[0].identity
    h = hashlib.sha256(identity.encode())
    definition = STAGES[kind]
    for rel in (definition.module_file, *definition.deps):
        if (code_root / rel).exists():
            _hash_tree(h, code_root / rel, rel)
    for role, path in sorted((inputs or {}).items()):
        _hash_tree(h, path, f"in:{role}")
    return f"{identity}-{h.hexdigest()[:12]}"


def checkpoint_dir(
    spec: ExperimentSpec,
    kind: str,
    local: Path,
    *,
    inputs: Mapping[str, Path],
    seed: int | None = None,
) -> Path:
    """Where a training stage keeps its resumable checkpoints: `local` (a folder of its
    output), or on clouds ($RMSWEB_CHECKPOINT_DIR set) the bucket under the stage's run
    key (config, code and inputs), so a changed config never resumes another model's
    checkpoints. Every rank uses the head's key ($RMSWEB_RUN_KEY) when it is posted."""
    import os

    root = os.environ.get("RMSWEB_CHECKPOINT_DIR")
    if not root:
        return local
    key = os.environ.get("RMSWEB_RUN_KEY") or stage_run_key(spec, kind, inputs=inputs, seed=seed)
    return Path(root) / kind / key
