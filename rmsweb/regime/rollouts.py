"""The val episodes the headroom and the val failure states come from.

On the suite's val seeds, through one runner: the scripted expert (the eval stage's job:
one episode per (task, seed)) and the SFT policy decoding greedily, each of its states
labelled by the expert as mining's mode oracle labels them (rmsweb.mine.label's
MiningPolicy with an OracleLabeller, played by rmsweb.mine.rollouts: one sample per
(task, seed), no probes). Both are stored in the stage's run folder; a rerun skips the
(task, seed) units already stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rmsweb.agents.build import expert_policy
from rmsweb.evaluate.job import eval_job
from rmsweb.mine.label import MiningPolicy, OracleLabeller
from rmsweb.mine.rollouts import run_rollouts
from rmsweb.rollout.runner import EpisodeRunner
from rmsweb.store.rows import EpisodeSink

SPLIT = "val"


async def play_val(
    runner: EpisodeRunner,
    greedy: Any,  # the SFT checkpoint's policy at temperature 0
    tasks: Sequence[str],
    seeds: Sequence[int],
    sink: EpisodeSink,
) -> dict[str, Any]:
    """Play the expert and the labelled greedy SFT policy; what ran now, and how long."""
    expert = expert_policy(runner.suite, list(tasks))
    stats = await runner.run(
        expert,
        tasks,
        seeds,
        sink,
        split=SPLIT,
        job=eval_job(SPLIT),
        description="regime: expert (val)",
    )
    labelled = MiningPolicy(greedy, OracleLabeller(expert.experts), probes=0)
    episodes, wall = await run_rollouts(
        runner,
        labelled,
        list(tasks),
        list(seeds),
        sink,
        1,
        description="regime: greedy SFT (val)",
        split=SPLIT,
    )
    return {
        "expert_episodes_now": stats.episodes,
        "sft_episodes_now": episodes,
        "rollout_wall_s": round(stats.wall_s + wall, 1),
    }
