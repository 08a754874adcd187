"""Scale check of the report: DuckDB (the report's code path) vs pandas, up to 100M steps.

    python benchmarks/report_scale.py [--dir DIR] [--keep] [--scale S] [--pandas-scale P]
                                      [--repeat N]

The base size is 1,000,000 steps over 50,000 episodes: `--scale 100` gives 100M steps,
`--scale 0.001` 1,000 (the test tier's run). pandas holds every row in memory (about
2 GB at 10M), so `--pandas-scale 10` runs it at 10M beside DuckDB at `--scale`
(default: the same scale). The committed results are
`--scale 100 --pandas-scale 10` (benchmarks/results/report_scale_100m.txt).

1. Synthesizes runs shaped like a real experiment's (3 eval runs of 10k
   episodes, a collect run of 20k episodes with retries, mined states, RL
   groups; times the scale) as Parquet shards with the store's schemas, 1,000
   episodes a shard, as the store's ShardWriter writes them. One set per scale.
2. In a fresh process per scale, times the report's aggregations exactly as the
   report stage runs them: building the views (footer checks of every shard) plus
   `rmsweb.report.queries.QUERIES` plus `rmsweb.report.tables.eval_rows_from`.
3. In another fresh process, times the same aggregations in pandas at the pandas
   scale (reading the same columns with pyarrow, then groupby/merge).
4. Checks DuckDB and pandas give the same numbers at the pandas scale, then prints
   per-query times, each phase's peak RSS, the goals, and as the last line
   `rows=R duckdb_s=X duckdb_cpu_s=C peak_mb=M pandas_rows=Q duckdb_at_pandas_rows_s=Y
   pandas_s=Z speedup=S pandas_peak_mb=P memory_ratio=F agree=yes|no`: X, C and M are
   DuckDB's total (wall), its CPU seconds (every thread) and peak RSS at R rows; Y, Z,
   S, P and F the same-size comparison at Q rows (S = Z / Y, F = P over DuckDB's peak
   at Q rows). Each phase runs in a fresh process; the load average before and after
   the timed phases is printed (on a shared machine the wall times are only as good
   as that; CPU seconds over cores bound what an idle machine would take).

Goals: 100M rows in <= 30 s and <= 2 GB peak RSS (DuckDB); at the pandas scale >= 5x
faster than pandas and >= 5x less memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EPISODES = 50_000
STEPS = 1_000_000
SHARD_EPISODES = 1_000
EVAL_POLICIES = {"expert": 0.95, "random": 0.08, "sft": 0.6}  # 10k episodes each
EVAL_PER_POLICY = 10_000
COLLECT_EPISODES = EPISODES - EVAL_PER_POLICY * len(EVAL_POLICIES)  # 20k
TASKS = [f"task-{i:02d}" for i in range(50)]
MODES = ["wrong_element", "wrong_type", "wrong_argument", "premature_answer", "loop", None]
REASONS = ["accepted", "no_contrast", "too_hard", "too_easy"]


def peak_mb() -> float:
    """This process's peak RSS in MiB. Linux's VmHWM belongs to the address space, which
    exec replaces; ru_maxrss is carried over from the parent at fork and kept across exec,
    so a phase started after the synthesis would report the synthesis' peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def cpu_s() -> float:
    """CPU seconds of this process so far, every thread (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --------------------------------------------------------------------------- synthesis


def _episode_frame(rng, n: int, policy: str, rate: float, collect: bool) -> dict:
    """Column arrays of n episodes (collect: units of up to 4 attempts, stopping at success)."""
    import numpy as np

    if not collect:
        task = rng.integers(0, len(TASKS), n)
        seed = np.arange(n)
        attempt = np.zeros(n, dtype=np.int64)
        success = rng.random(n) < rate
    else:
        task, seed, attempt, success = [], [], [], []
        unit = 0
        while len(task) < n:
            for a in range(4):
                ok = rng.random() < 0.35 + 0.2 * a
                task.append(unit % len(TASKS))
                seed.append(unit)
                attempt.append(a)
                success.append(ok)
                if ok or len(task) == n:
                    break
            unit += 1
        task, seed = np.array(task), np.array(seed)
        attempt, success = np.array(attempt, dtype=np.int64), np.array(success)
    error = rng.random(n) < 0.01  # environment errors, counted apart
    return {"task": task, "seed": seed, "attempt": attempt, "success": success, "error": error}


def _write_run(run_dir: Path, rng, frame: dict, n_steps, policy: str, stage: str) -> None:
    import numpy as np
    import pyarrow as pa

    from rmsweb.store.layout import part_name
    from rmsweb.store.schemas import schema
    from rmsweb.store.writer import write_parquet_atomic

    obs_pool = pa.array(
        [
            "\n".join(f'  [{j}] button "Option {(i * 7 + j) % 97}"' for j in range(12))
            for i in range(500)
        ]
    )
    out_pool = pa.array([f"Thought: option {i} fits.\nAction: click({i % 12})" for i in range(200)])
    sha_pool = pa.array([f"{i:064x}" for i in range(300)])
    n = len(frame["task"])
    ids = np.array(
        [
            f"{TASKS[t]}/{s}/{policy}/{a}"
            for t, s, a in zip(frame["task"], frame["seed"], frame["attempt"], strict=True)
        ],
        dtype=object,
    )
    for part, start in enumerate(range(0, n, SHARD_EPISODES)):
        sl = slice(start, start + SHARD_EPISODES)
        k = len(ids[sl])
        lens = n_steps[sl]
        ep = {
            "episode_id": ids[sl],
            "run": [f"{stage}/bench"] * k,
            "stage": [stage] * k,
            "suite": ["miniwob"] * k,
            "task_id": [TASKS[t] for t in frame["task"][sl]],
            "seed": frame["seed"][sl],
            "split": ["train" if stage == "collect" else "test"] * k,
            "policy": [policy] * k,
            "attempt": frame["attempt"][sl],
            "success": frame["success"][sl] & ~frame["error"][sl],
            "reward": frame["success"][sl].astype(float),
            "n_steps": lens,
            "answer": [None] * k,
            "error": [("browser crashed" if e else None) for e in frame["error"][sl]],
            "started_at": np.full(k, 1.78e9),
            "wall_s": lens * 0.3,
            "tokens_in": lens * 350,
            "tokens_out": lens * 25,
            "instruction": ["Click the right option."] * k,
            "env_retries": np.zeros(k, dtype=np.int64),
            # collect runs know the oracle's gold length: about 1 in 5 successes detoured
            "reference_steps": (
                np.maximum(1, lens - (rng.random(k) < 0.2)) if stage == "collect" else [None] * k
            ),
        }
        total = int(lens.sum())
        step_ids = np.repeat(ids[sl], lens)
        step_no = np.concatenate([np.arange(m) for m in lens]) if total else np.array([], int)
        parse_ok = rng.random(total) > 0.03
        with_shot = rng.random(total) < 0.3
        shot_idx = rng.integers(0, len(sha_pool), total)
        shots = sha_pool.take(pa.array(shot_idx)).to_pylist()
        action_type = np.where(parse_ok, "click", None)
        steps = {
            "episode_id": step_ids,
            "step": step_no,
            "url": ["http://127.0.0.1:8765/miniwob/page.html"] * total,
            "obs_text": obs_pool.take(pa.array(rng.integers(0, len(obs_pool), total))),
            "screenshot": [s if w else None for s, w in zip(shots, with_shot, strict=True)],
            "output_text": out_pool.take(pa.array(rng.integers(0, len(out_pool), total))),
            "action": pa.array(
                [{"type": t, "target": "3"} if t else None for t in action_type],
                type=schema("steps").field("action").type,
            ),
            "parse_ok": parse_ok,
            "env_error": [None] * total,
            "reward": np.zeros(total),
            "done": np.concatenate([np.arange(m) == m - 1 for m in lens]) if total else [],
            "latency_s": rng.random(total) * 0.2,
            "parse_error": [None if ok else "no Action: line" for ok in parse_ok],
        }
        name = part_name(part)
        for table, cols in (("steps", steps), ("episodes", ep)):
            write_parquet_atomic(run_dir / table / name, _arrow(table, cols))


def _arrow(table: str, cols: dict):
    """The columns as an Arrow table of the store's schema. A column the synthesizer does
    not write takes its row type's default (the store adds columns with defaults, e.g.
    episodes.category); a column without a default is an error naming it."""
    import dataclasses

    import pyarrow as pa

    from rmsweb.store.schemas import ROW_TYPES, schema

    sch = schema(table)
    n = len(next(iter(cols.values())))
    defaults = {
        f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(ROW_TYPES[table])
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }
    arrays = []
    for f in sch:
        if f.name not in cols and f.name not in defaults:
            raise KeyError(
                f"{table}.{f.name}: the store's schema has a column without a default that "
                "benchmarks/report_scale.py does not synthesize; add it to the synthesizer"
            )
        arrays.append(pa.array(cols[f.name] if f.name in cols else [defaults[f.name]] * n, f.type))
    return pa.Table.from_arrays(arrays, schema=sch)


def _write_table(path: Path, table: str, cols: dict) -> None:
    from rmsweb.store.writer import write_parquet_atomic

    write_parquet_atomic(path, _arrow(table, cols))


def scaled(n: int, scale: float) -> int:
    return max(1, round(n * scale))


def synthesize(root: Path, scale: float = 1) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    per_policy, collect = scaled(EVAL_PER_POLICY, scale), scaled(COLLECT_EPISODES, scale)
    episodes, steps = per_policy * len(EVAL_POLICIES) + collect, scaled(STEPS, scale)
    frames = {
        f"eval/bench/{p}": (_episode_frame(rng, per_policy, p, r, False), p, "eval")
        for p, r in EVAL_POLICIES.items()
    }
    frames["collect/bench"] = (
        _episode_frame(rng, collect, "teacher", 0, True),
        "teacher",
        "collect",
    )
    # Step counts 1..39 (mean 20), then nudged so they sum to exactly `steps`.
    lengths = rng.integers(1, 40, episodes)
    diff = steps - int(lengths.sum())
    idx = rng.permutation(episodes)
    for i in idx:
        if diff == 0:
            break
        step = 1 if diff > 0 else -1
        if 1 <= lengths[i] + step <= 60:
            lengths[i] += step
            diff -= step
    offset = 0
    for run, (frame, policy, stage) in frames.items():
        n = len(frame["task"])
        _write_run(root / run, rng, frame, lengths[offset : offset + n], policy, stage)
        offset += n

    n_states = scaled(20_000, scale)
    _write_table(
        root / "mine/bench/mined_states/part-00000.parquet",
        "mined_states",
        {
            "state_id": [f"s{i}" for i in range(n_states)],
            "episode_id": [f"e{i}" for i in range(n_states)],
            "step": rng.integers(0, 20, n_states),
            "obs_text": ["[1] button"] * n_states,
            "screenshot": [None] * n_states,
            "history": [[{"output_text": "click(1)", "action_text": "click(1)"}]] * n_states,
            "reference_actions": [["click(3)"]] * n_states,
            "policy_action": ["click(2)"] * n_states,
            "failure_mode": [MODES[i] for i in rng.integers(0, len(MODES), n_states)],
            "weight": rng.random(n_states) + 0.5,
            "task_id": [TASKS[i] for i in rng.integers(0, len(TASKS), n_states)],
            "instruction": ["Click."] * n_states,
        },
    )
    steps, groups = scaled(200, scale), 64
    n = steps * groups
    rewards = rng.choice([-1.0, 1.0], size=(n, 8))
    accepted_reason = [REASONS[i] for i in rng.integers(0, len(REASONS), n)]
    accepted = [r == "accepted" for r in accepted_reason]
    _write_table(
        root / "rl/bench/rl_groups/part-00000.parquet",
        "rl_groups",
        {
            "rl_step": np.repeat(np.arange(steps), groups),
            "state_id": [f"s{i % n_states}" for i in range(n)],
            "rewards": rewards.tolist(),
            "mean": rewards.mean(axis=1),
            "std": rewards.std(axis=1),
            "accepted": accepted,
            "reason": accepted_reason,
            "pg_loss": [0.01 if a else None for a in accepted],
            "anchor_loss": [None if a else 1.0 for a in accepted],
        },
    )


# --------------------------------------------------------------------------- DuckDB phase


def duckdb_once(root: Path) -> tuple[dict[str, float], dict[str, list[dict]]]:
    """One pass of what the report stage does: views, every aggregation, the eval rows."""
    from rmsweb.report import queries
    from rmsweb.report.tables import eval_rows_from
    from rmsweb.store.layout import find_runs
    from rmsweb.store.views import connect

    timings: dict[str, float] = {}
    t = time.perf_counter()
    con = connect(find_runs(root))
    timings["views (find runs, footer checks)"] = time.perf_counter() - t
    results = {}
    for name, fn in queries.QUERIES.items():
        t = time.perf_counter()
        results[name] = fn(con)
        timings[name] = time.perf_counter() - t
    t = time.perf_counter()
    eval_rows_from(results["eval_by_task"])
    timings["eval rows + Wilson CIs"] = time.perf_counter() - t
    con.close()
    return timings, results


def run_phase(once, root: Path, repeat: int, imports: list[str]) -> dict:
    """Import, then time `once` `repeat` times in this process; medians per step."""
    import importlib
    import statistics

    # Library imports are a fixed start-up cost of any process, timed apart and the
    # same way in both phases: the goal is about the aggregations.
    t0 = time.perf_counter()
    for module in imports:
        importlib.import_module(module)
    t_import = time.perf_counter() - t0
    cpu0 = cpu_s()
    runs = [once(root) for _ in range(repeat)]
    cpu = (cpu_s() - cpu0) / repeat
    totals = [sum(timings.values()) for timings, _ in runs]
    names = list(runs[0][0])
    return {
        "timings": {n: statistics.median(t[n] for t, _ in runs) for n in names},
        "total_s": statistics.median(totals),
        "cpu_s": cpu,
        "min_s": min(totals),
        "max_s": max(totals),
        "import_s": t_import,
        "peak_mb": peak_mb(),
        "check": _canonical(runs[-1][1]),
    }


# --------------------------------------------------------------------------- pandas phase


def _pq_read_many(paths, columns):
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa.concat_tables([pq.read_table(p, columns=columns) for p in paths])


def pandas_once(root: Path) -> tuple[dict[str, float], dict[str, list[dict]]]:
    """The same aggregations in pandas, reading the same columns with pyarrow."""
    timings: dict[str, float] = {}
    results: dict[str, list[dict]] = {}

    def timed(name, fn):
        t = time.perf_counter()
        results[name] = fn()
        timings[name] = time.perf_counter() - t

    t = time.perf_counter()
    ep = _read_all(
        root,
        "episodes",
        [
            "episode_id",
            "policy",
            "suite",
            "split",
            "task_id",
            "seed",
            "attempt",
            "success",
            "error",
            "policy_error",
            "n_steps",
            "wall_s",
            "tokens_in",
            "tokens_out",
            "reference_steps",
        ],
    )
    st = _read_all(root, "steps", ["episode_id", "parse_ok"])
    ms = _read_all(root, "mined_states", ["failure_mode", "weight", "task_id"])
    rl = _read_all(
        root,
        "rl_groups",
        ["rl_step", "mean", "std", "accepted", "reason", "pg_loss", "anchor_loss"],
    )
    timings["read (pyarrow -> pandas)"] = time.perf_counter() - t

    def eval_by_task():
        e = ep[ep.stage == "eval"]
        s = st[st.stage == "eval"]
        per_ep = (
            s.assign(perr=~s.parse_ok)
            .groupby(["run", "episode_id"], sort=False)
            .agg(steps=("perr", "size"), parse_errors=("perr", "sum"))
            .reset_index()
        )
        m = e.merge(per_ep, on=["run", "episode_id"], how="left")
        m = m.assign(
            successes=m.success,
            env_errors=m.error.notna(),
            policy_errors=m.policy_error.notna(),
            solved_steps=m.n_steps.where(m.success, 0),
            steps=m.steps.fillna(0),
            parse_errors=m.parse_errors.fillna(0),
        )
        g = m.groupby(["run", "policy", "suite", "split", "task_id"]).agg(
            n=("successes", "size"),
            successes=("successes", "sum"),
            env_errors=("env_errors", "sum"),
            policy_errors=("policy_errors", "sum"),
            solved_steps=("solved_steps", "sum"),
            steps=("steps", "sum"),
            parse_errors=("parse_errors", "sum"),
            wall_s=("wall_s", "sum"),
        )
        return g.reset_index().to_dict("records")

    def steps_vs_expert():
        e = ep[(ep.stage == "eval") & ep.success]
        key = ["suite", "split", "task_id", "seed"]
        gold = e[e.policy == "expert"].groupby(key).n_steps.min().rename("gold")
        m = e[e.policy != "expert"].join(gold, on=key, how="inner")
        m = m[m.gold > 0]
        g = (m.n_steps / m.gold).groupby(m.run).agg(["size", "mean"])
        g.columns = ["matched", "steps_over_expert"]
        return g.reset_index().to_dict("records")

    def collect_attempts():
        c = ep[ep.stage == "collect"]
        g = (
            c.assign(ok=c.success)
            .groupby(["run", "attempt"])
            .agg(attempts=("ok", "size"), successes=("ok", "sum"))
        )
        return g.reset_index().to_dict("records")

    def collect_first_success():
        c = ep[ep.stage == "collect"]
        keys = ["run", "task_id", "seed", "policy"]
        first = c[c.success].groupby(keys).attempt.min().rename("first_ok")
        units = c[keys].drop_duplicates().merge(first.reset_index(), on=keys, how="left")
        g = units.groupby(["run", "first_ok"], dropna=False).size().rename("units")
        return g.reset_index().to_dict("records")

    def kept_frame():
        c = ep[(ep.stage == "collect") & ep.success]
        c = c.sort_values(["n_steps", "attempt"], kind="stable")
        return c, c.drop_duplicates(["run", "task_id", "seed", "policy"])

    def collect_kept():
        ok, kept = kept_frame()
        c = ep[ep.stage == "collect"]
        cost = c.groupby("run").agg(
            episodes=("episode_id", "size"),
            tokens_in=("tokens_in", "sum"),
            tokens_out=("tokens_out", "sum"),
            wall_s=("wall_s", "sum"),
            teacher_calls=("n_steps", "sum"),
        )
        cost["units"] = c.groupby("run")[["task_id", "seed", "policy"]].apply(
            lambda d: len(d.drop_duplicates())
        )
        k = kept.groupby("run").agg(
            kept=("n_steps", "size"),
            kept_steps_mean=("n_steps", "mean"),
            kept_steps_median=("n_steps", "median"),
            kept_attempt_mean=("attempt", "mean"),
        )
        first = ok[ok.attempt == 0].groupby("run").n_steps.mean().rename("attempt0_steps_mean")
        gold = kept[kept.reference_steps > 0]
        over = (gold.n_steps / gold.reference_steps).groupby(gold.run).mean()
        graded = ok[ok.reference_steps > 0]
        detour = (graded.n_steps > graded.reference_steps).astype(float).groupby(graded.run).mean()
        return (
            cost.join(k)
            .join(first)
            .join(over.rename("kept_over_gold"))
            .join(detour.rename("detour_fraction"))
            .reset_index()
            .to_dict("records")
        )

    def collect_kept_steps():
        _, kept = kept_frame()
        return (
            kept.groupby(["run", "n_steps"]).size().rename("kept").reset_index().to_dict("records")
        )

    def failure_modes():
        g = (
            ms.assign(failure_mode=ms.failure_mode.fillna("routine"))
            .groupby(["run", "failure_mode"])
            .agg(states=("weight", "size"), weight=("weight", "sum"), tasks=("task_id", "nunique"))
        )
        return g.reset_index().to_dict("records")

    def rl_curve():
        g = rl.groupby(["run", "rl_step"]).agg(
            groups=("mean", "size"),
            reward_mean=("mean", "mean"),
            reward_std=("std", "mean"),
            accepted=("accepted", "sum"),
            pg_loss=("pg_loss", "mean"),
            anchor_loss=("anchor_loss", "mean"),
        )
        g["rejected"] = g.groups - g.accepted
        return g.reset_index().rename(columns={"rl_step": "step"}).to_dict("records")

    def rl_reasons():
        g = rl.groupby(["run", "rl_step", "reason"]).size().rename("groups")
        return g.reset_index().rename(columns={"rl_step": "step"}).to_dict("records")

    for name, fn in [
        ("eval_by_task", eval_by_task),
        ("collect_attempts", collect_attempts),
        ("collect_first_success", collect_first_success),
        ("collect_kept", collect_kept),
        ("collect_kept_steps", collect_kept_steps),
        ("failure_modes", failure_modes),
        ("rl_curve", rl_curve),
        ("rl_reasons", rl_reasons),
        ("steps_vs_expert", steps_vs_expert),
    ]:
        timed(name, fn)
    return timings, results


def _read_all(root: Path, table: str, columns: list[str]):
    import pandas as pd

    from rmsweb.store.layout import committed_parts, find_runs

    frames = []
    for run, folder in find_runs(root).items():
        files = committed_parts(folder, table)
        if not files:
            continue
        df = _pq_read_many(files, columns).to_pandas()
        df["run"] = run
        df["stage"] = run.split("/")[0]
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------- agreement


def _canonical(results: dict[str, list[dict]]) -> dict[str, list]:
    """Order-independent, rounded fingerprints of each aggregation's result."""
    import math

    def norm(v):
        if v is None:
            return None
        if isinstance(v, float) and math.isnan(v):
            return None
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, int | float):
            return round(float(v), 6)
        try:  # numpy scalars
            return round(float(v), 6)
        except (TypeError, ValueError):
            return str(v)

    out = {}
    for name, rows in results.items():
        out[name] = sorted(
            json.dumps({k: norm(v) for k, v in sorted(r.items())}, sort_keys=True) for r in rows
        )
    return out


# --------------------------------------------------------------------------- driver


def _phase(phase: str, root: Path, repeat: int) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--phase", phase, "--dir", str(root), "--repeat", str(repeat)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        sys.exit(f"{phase} phase failed:\n{proc.stderr}")
    return json.loads(proc.stdout.splitlines()[-1])


def _ensure(root: Path, scale: float) -> None:
    """Synthesize the runs of `scale` under `root` unless they are there (--dir, --keep),
    in a process of its own: its memory is gone before anything is timed."""
    if root.exists():
        print(f"reusing {scaled(STEPS, scale):,} steps in {root}")
        return
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--phase",
            "synthesize",
            "--dir",
            str(root),
            "--scale",
            repr(scale),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        shutil.rmtree(root, ignore_errors=True)
        sys.exit(f"synthesis failed:\n{proc.stderr}")
    print(proc.stdout.strip())


def _synthesize_phase(root: Path, scale: float) -> None:
    t = time.perf_counter()
    synthesize(root, scale)
    size = sum(p.stat().st_size for p in root.rglob("*.parquet")) / 2**20
    shards = sum(1 for _ in root.rglob("part-*.parquet"))
    print(
        f"synthesized {scaled(STEPS, scale):,} steps / {scaled(EPISODES, scale):,} episodes "
        f"in {shards} shard files ({size:.0f} MiB) in {time.perf_counter() - t:.1f} s; "
        f"generator peak {peak_mb():.0f} MiB"
    )


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


def _print_phase(title: str, phase: dict) -> None:
    print(title)
    for name, s in phase["timings"].items():
        print(f"  {name:40s} {s:7.3f}")
    print(
        f"  {'total':40s} {phase['total_s']:7.3f}   "
        f"(passes {phase['min_s']:.3f}-{phase['max_s']:.3f}), peak RSS {phase['peak_mb']:.0f} MiB"
    )
    print(f"  {'(imports, not in total)':40s} {phase['import_s']:7.3f}")
    print(f"  {'(CPU seconds per pass, all threads)':40s} {phase['cpu_s']:7.3f}")


def _rows(scale: float) -> str:
    rows = scaled(STEPS, scale)
    return f"{rows / 1e6:g}M" if rows >= 10**6 else f"{rows:,}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, help="Where to write the runs (default: a temp dir).")
    ap.add_argument("--keep", action="store_true", help="Keep the synthesized runs.")
    ap.add_argument(
        "--scale",
        type=float,
        default=1,
        help="Multiply episodes and steps (100: 100M steps; 0.001: a seconds-long smoke run).",
    )
    ap.add_argument(
        "--pandas-scale",
        type=float,
        help="Scale of the pandas comparison (default: --scale; pandas needs ~2 GB at 10).",
    )
    ap.add_argument(
        "--repeat", type=int, default=5, help="Timed passes per phase; medians are reported."
    )
    ap.add_argument("--phase", choices=["synthesize", "duckdb", "pandas"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase == "synthesize":
        _synthesize_phase(args.dir, args.scale)
        return
    if args.phase == "duckdb":
        imports = ["duckdb", "pyarrow.parquet", "rmsweb.report.queries", "rmsweb.store.views"]
        print(json.dumps(run_phase(duckdb_once, args.dir, args.repeat, imports)))
        return
    if args.phase == "pandas":
        imports = ["pandas", "pyarrow.parquet", "rmsweb.store.layout"]
        print(json.dumps(run_phase(pandas_once, args.dir, args.repeat, imports)))
        return
    for name, value in (("--scale", args.scale), ("--pandas-scale", args.pandas_scale)):
        if value is not None and not 0 < value <= 1000:
            sys.exit(f"error: {name} must be above 0 and at most 1000, got {value:g}")
    if args.repeat < 1:
        sys.exit(f"error: --repeat must be at least 1, got {args.repeat}")
    pandas_scale = args.scale if args.pandas_scale is None else args.pandas_scale

    base = args.dir or Path(tempfile.mkdtemp(prefix="rmsweb-bench-"))
    # one folder per scale, so a kept --dir serves later runs at other scales
    roots = {
        scale: base / f"runs-x{scale:g}" for scale in dict.fromkeys([args.scale, pandas_scale])
    }
    try:
        for scale, root in roots.items():
            _ensure(root, scale)
        print(f"before the timed phases: {_load()}")
        duck = {scale: _phase("duckdb", root, args.repeat) for scale, root in roots.items()}
        pand = _phase("pandas", roots[pandas_scale], args.repeat)
        print(f"after them: {_load()}")
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(base, ignore_errors=True)

    big, same = duck[args.scale], duck[pandas_scale]
    compared = [k for k in same["check"] if k in pand["check"]]
    duck_only = [k for k in same["check"] if k not in pand["check"]]  # newer report queries
    mismatched = [k for k in compared if same["check"][k] != pand["check"][k]]
    print(f"\nmedians of {args.repeat} passes per phase, each phase in a fresh process")
    for scale in roots:
        _print_phase(
            f"DuckDB (the report's code path) at {_rows(scale)} steps, seconds:", duck[scale]
        )
    _print_phase(f"pandas (same aggregations) at {_rows(pandas_scale)} steps, seconds:", pand)
    print(
        f"results agree at {_rows(pandas_scale)} steps: "
        + (
            f"yes, all {len(compared)} aggregations"
            if not mismatched
            else f"NO, differ in {mismatched}"
        )
        + (f" (DuckDB only, not compared: {', '.join(duck_only)})" if duck_only else "")
    )
    speedup = pand["total_s"] / same["total_s"]
    memory_ratio = pand["peak_mb"] / same["peak_mb"]
    # On a shared machine noise only adds time: the best passes are the steadiest ratio.
    print(
        f"at {_rows(pandas_scale)} steps: speedup of medians {speedup:.1f}x, of best passes "
        f"{pand['min_s'] / same['min_s']:.1f}x; pandas' peak RSS {memory_ratio:.1f}x DuckDB's"
    )
    goals = [
        (f"{_rows(args.scale)} rows peak <= 2 GB", big["peak_mb"] <= 2048),
        (f">= 5x faster than pandas at {_rows(pandas_scale)}", speedup >= 5),
        (f">= 5x less memory than pandas at {_rows(pandas_scale)}", memory_ratio >= 5),
    ]
    if args.scale >= 100:  # the time goal is for 100M rows (30 s per 100M above that)
        bound_s = 30 * args.scale / 100
        goals.insert(0, (f"{_rows(args.scale)} rows <= {bound_s:g} s", big["total_s"] <= bound_s))
    print("goals: " + ", ".join(f"{g}: {'met' if ok else 'MISSED'}" for g, ok in goals))
    print(
        f"rows={scaled(STEPS, args.scale)} duckdb_s={big['total_s']:.3f} "
        f"duckdb_cpu_s={big['cpu_s']:.3f} peak_mb={big['peak_mb']:.0f} "
        f"pandas_rows={scaled(STEPS, pandas_scale)} "
        f"duckdb_at_pandas_rows_s={same['total_s']:.3f} pandas_s={pand['total_s']:.3f} "
        f"speedup={speedup:.1f} pandas_peak_mb={pand['peak_mb']:.0f} "
        f"memory_ratio={memory_ratio:.1f} agree={'yes' if not mismatched else 'no'}"
    )
    if mismatched:
        sys.exit(1)


if __name__ == "__main__":
    main()
