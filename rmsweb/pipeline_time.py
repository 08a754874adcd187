"""How long a `rmsweb repro` takes, before it runs: every planned stage at the wall its
last run recorded, scheduled as `rmsweb.pipeline.reproduce` schedules them (a stage
starts when its upstream is done, `jobs` at a time, the longest chain first).

A stage's wall is the `wall_s` of a JSON metrics file among its outputs: what the stage
wrote when it last ran. A stage that has not run (no file, or no `wall_s` in it) borrows
the median of the measured stages of the same kind (`sft`, `mine`, `eval-rl`, ...) in
the nearest experiment: its own, then its name with one trailing `-part` dropped at a
time (`miniwob-cpu-budget-grpo-b200` -> `miniwob-cpu-budget-grpo` ->
`miniwob-cpu-budget`), then any experiment; with none, it counts as 0 and is named.

What the estimate leaves out: the walls were measured under whatever the machine did
then (most beside another stage, as --jobs 2 runs them), the install, DVC's seconds to
check and commit each stage, and the every-core speed-up of a stage that runs alone.
benchmarks/study_time.py writes it for a target as a results file.
"""

from __future__ import annotations

import heapq
import json
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path

from rmsweb.errors import UserError
from rmsweb.pipeline import StageNode, chain_lengths, stages_to_run, stale_stages

SEED = re.compile(r"-s\d+$")


def stage_kind(name: str) -> tuple[str, str]:
    """("rl", "miniwob-cpu-budget-b25") for "rl-s0_miniwob-cpu-budget-b25": the command
    with its seed dropped, and the experiment (or sweep point) the stage belongs to."""
    command, _, experiment = name.partition("_")
    return SEED.sub("", command), experiment


def measured_wall(node: StageNode, root: Path) -> float | None:
    """The `wall_s` of the first JSON metrics file among the stage's outputs."""
    for out in node.outs:
        path = root / out
        if not (out.startswith("metrics/") and out.endswith(".json") and path.is_file()):
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        wall = data.get("wall_s") if isinstance(data, dict) else None
        if isinstance(wall, (int, float)) and wall >= 0:
            return float(wall)
    return None


def nearer_experiments(experiment: str) -> list[str]:
    """The experiment, then its name with one trailing `-part` dropped at a time."""
    names = [experiment]
    while "-" in names[-1]:
        names.append(names[-1].rsplit("-", 1)[0])
    return names


def estimate_walls(
    wanted: Mapping[str, StageNode], graph: Mapping[str, StageNode], root: Path
) -> tuple[dict[str, float], dict[str, str]]:
    """Per planned stage, its wall (s) and how it was found: "measured",
    "borrowed:<experiment>" (median of that experiment's measured stages of the kind),
    "borrowed:any" or "unknown" (counted as 0)."""
    by_kind: dict[tuple[str, str], list[float]] = defaultdict(list)
    for name, node in graph.items():
        wall = measured_wall(node, root)
        if wall is not None:
            by_kind[stage_kind(name)].append(wall)
    walls: dict[str, float] = {}
    how: dict[str, str] = {}
    for name, node in wanted.items():
        wall = measured_wall(node, root)
        if wall is not None:
            walls[name], how[name] = wall, "measured"
            continue
        kind, experiment = stage_kind(name)
        for candidate in nearer_experiments(experiment):
            if by_kind.get((kind, candidate)):
                walls[name] = statistics.median(by_kind[(kind, candidate)])
                how[name] = f"borrowed:{candidate}"
                break
        else:
            anywhere = [w for (k, _), ws in by_kind.items() if k == kind for w in ws]
            if anywhere:
                walls[name], how[name] = statistics.median(anywhere), "borrowed:any"
            else:
                walls[name], how[name] = 0.0, "unknown"
    return walls, how


def schedule(wanted: Mapping[str, StageNode], walls: dict[str, float], jobs: int) -> float:
    """The wall of `rmsweb repro --jobs N` over these stages: list scheduling, of the
    ready stages the longest chain first, then by name (rmsweb.pipeline.reproduce)."""
    priority = chain_lengths(wanted)
    needs = {n: node.needs & wanted.keys() for n, node in wanted.items()}
    done: set[str] = set()
    running: list[tuple[float, str]] = []  # (finish time, stage)
    now = 0.0
    while len(done) < len(wanted):
        started = {name for _, name in running}
        ready = sorted(
            (n for n in wanted if n not in done and n not in started and needs[n] <= done),
            key=lambda n: (-priority[n], n),
        )
        for name in ready[: jobs - len(running)]:
            heapq.heappush(running, (now + walls[name], name))
        if not running:
            raise UserError("the stage graph has a cycle: no stage can start")
        now, finished = heapq.heappop(running)
        done.add(finished)
        while running and running[0][0] == now:
            done.add(heapq.heappop(running)[1])
    return now


def critical_path(wanted: Mapping[str, StageNode], walls: dict[str, float]) -> float:
    """The longest chain of stage walls: no number of jobs finishes sooner."""
    memo: dict[str, float] = {}

    def finish(name: str) -> float:
        if name not in memo:
            ups = wanted[name].needs & wanted.keys()
            memo[name] = walls[name] + max((finish(u) for u in ups), default=0.0)
        return memo[name]

    return max((finish(n) for n in wanted), default=0.0)


def estimate(
    wanted: Mapping[str, StageNode],
    graph: Mapping[str, StageNode],
    root: Path,
    jobs: list[int],
    scale: Mapping[str, float] | None = None,
) -> dict:
    """The planned stages' serial time, critical path and wall per number of jobs, per
    kind, and per stage with where its wall came from. `scale` ({kind: factor}) multiplies
    every wall of a kind: a what-if for a change measured on one stage of it."""
    walls, how = estimate_walls(wanted, graph, root)
    for name in walls:
        walls[name] *= (scale or {}).get(stage_kind(name)[0], 1.0)
    per_kind: dict[str, dict[str, float]] = defaultdict(lambda: {"stages": 0, "serial_s": 0.0})
    for name, wall in walls.items():
        kind = stage_kind(name)[0]
        per_kind[kind]["stages"] += 1
        per_kind[kind]["serial_s"] += wall
    rules = Counter(
        "measured" if h == "measured" else "unknown" if h == "unknown" else "borrowed"
        for h in how.values()
    )
    return {
        "stages": len(wanted),
        "measured": rules["measured"],
        "borrowed": rules["borrowed"],
        "unknown": sorted(n for n, h in how.items() if h == "unknown"),
        "serial_s": round(sum(walls.values()), 1),
        "critical_path_s": round(critical_path(wanted, walls), 1),
        "wall_s": {str(j): round(schedule(wanted, walls, j), 1) for j in jobs},
        "per_kind": {
            k: {"stages": v["stages"], "serial_s": round(v["serial_s"], 1)}
            for k, v in sorted(per_kind.items(), key=lambda kv: -kv[1]["serial_s"])
        },
        "stages_detail": {
            n: {"wall_s": round(walls[n], 1), "from": how[n]} for n in sorted(wanted)
        },
    }


def summary_lines(result: dict, budget_h: float | None = None) -> list[str]:
    """The estimate in words: stage counts, serial and critical path, wall per jobs, kinds."""
    h = 3600.0
    lines = [
        f"{result['stages']} stages ({result['measured']} at their last recorded wall, "
        f"{result['borrowed']} borrowed from their kind, {len(result['unknown'])} unknown)",
        f"  serial {result['serial_s'] / h:.2f} h; critical path {result['critical_path_s'] / h:.2f} h",
    ]
    for jobs, wall in result["wall_s"].items():
        line = f"  --jobs {jobs}: {wall / h:.2f} h"
        if budget_h:
            line += f" ({wall / h / budget_h:.2f}x the {budget_h:g} h budget)"
        lines.append(line)
    for kind, v in result["per_kind"].items():
        share = v["serial_s"] / result["serial_s"] if result["serial_s"] else 0.0
        lines.append(
            f"    {kind:<14} {v['stages']:>3} stages {v['serial_s'] / h:6.2f} h ({share:.0%})"
        )
    return lines


def dry_run_lines(
    targets: list[str],
    root: Path,
    jobs: int,
    status: Callable[[Path, list[str]], set[str] | None] = stale_stages,
) -> list[str]:
    """`rmsweb repro --dry-run`: the stages a run would start, and the estimate."""
    lines: list[str] = []
    graph, wanted = stages_to_run(targets, root, lines.append, status=status)
    lines.append(f"repro --dry-run: {len(wanted)} stage(s) would run, {jobs} at a time")
    lines.extend(f"  {name}" for name in sorted(wanted))
    summary = summary_lines(estimate(wanted, graph, root, sorted({1, jobs})))
    lines.append("from the walls their last runs recorded: " + summary[0])
    return lines + summary[1:]


def estimate_line(
    graph: Mapping[str, StageNode], wanted: Mapping[str, StageNode], root: Path, jobs: int
) -> str:
    """One line for the start of a run: its estimated wall at `jobs`, and how many of
    the stages' walls are their own last ones."""
    if not wanted:
        return "repro: nothing to run"
    result = estimate(wanted, graph, root, [jobs])
    known = result["measured"] + result["borrowed"]
    return (
        f"repro: about {result['wall_s'][str(jobs)] / 3600:.2f} h at --jobs {jobs}, from "
        f"the walls of {result['measured']} stage(s)' last runs"
        + (f" and {result['borrowed']} borrowed from their kind" if result["borrowed"] else "")
        + (f"; {len(wanted) - known} with no wall to go by" if len(wanted) > known else "")
        + " (rmsweb repro --dry-run lists them)"
    )
