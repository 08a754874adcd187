"""Mine-stage metrics: how the SFT policy did on its rollouts and what was mined."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rmsweb.mine.critical import Finding
from rmsweb.store.rows import EpisodeRecord, MinedStateRow


def mining_metrics(
    records: Sequence[EpisodeRecord],
    critical: Sequence[Finding],
    fragile: Sequence[Finding],
    rows: Sequence[MinedStateRow],
) -> dict[str, Any]:
    """Rollout outcomes, labelling coverage, and the written states by source and mode."""
    clean = [r for r in records if not r.episode.error]
    failed = [r for r in clean if not r.episode.success]
    with_critical = {f.record.episode.episode_id for f in critical}
    detoured = [r for r in clean if r.episode.success and r.episode.episode_id in with_critical]
    steps = sum(len(r.steps) for r in records)
    labelled = sum(1 for r in records for lab in r.labels if lab.acceptable)
    by_source = Counter(r.source for r in rows)
    by_mode = Counter(r.failure_mode or "routine" for r in rows)
    by_source_mode = Counter(f"{r.source}/{r.failure_mode or 'routine'}" for r in rows)
    return {
        "rollouts": len(records),
        "sft_success": round(sum(r.episode.success for r in clean) / len(clean), 4)
        if clean
        else None,
        "env_errors": len(records) - len(clean),
        "failed_episodes": len(failed),
        "detoured_episodes": len(detoured),
        # Failed rollouts in which no labelled step was wrong (labels missing or empty):
        # their failures are not mined.
        "failed_unlabelled": sum(1 for r in failed if r.episode.episode_id not in with_critical),
        "steps": steps,
        "labelled_steps": labelled,
        "found": {"critical": len(critical), "fragile": len(fragile)},
        "states": len(rows),
        "by_source": {s: by_source.get(s, 0) for s in ("critical", "fragile", "routine")},
        "by_mode": dict(sorted(by_mode.items())),
        "by_source_mode": dict(sorted(by_source_mode.items())),
        "weight_total": round(sum(r.weight for r in rows), 4),
    }
