"""Arms over training seeds: means with intervals, and paired differences between arms.

An arm is one evaluated policy of one experiment (`miniwob-cpu/rl`); a trained arm
has one eval run per training seed. Everything here is computed from episode rows
of one split (the report uses test), so every number says which split it is from.

How the numbers are defined (the eval stage's definitions, per seed):
1. A seed's success is the mean over tasks of the task's success rate (each task
   weighs the same), an environment error counting as a failure.
2. Mean over seeds with a t-interval over seeds: the spread of training runs. With
   one seed there is no interval (None), not a zero-width one.
3. Pooled Wilson: all episodes of all seeds as one sample. It ignores that the
   seeds' policies differ, so it is narrower than the seed interval; both shown.
4. Paired difference A - B: over the (task, episode seed) units both arms ran,
   each unit's outcome averaged over the arm's training seeds, difference of the
   task-weighted means. Its 95% interval is a bootstrap that resamples units
   within each task (keeping the task weights), so the interval covers the
   uncertainty of which test seeds were drawn, given these training runs.
5. Paired difference per training seed: seed k of A minus seed k of B on the
   units both ran (an untrained arm, one run, pairs with every seed), and a
   t-interval over those per-seed differences. This one covers the spread of
   training runs, which the unit bootstrap holds fixed: with 3 seeds, two arms
   whose runs swing by 15 points can have a narrow unit interval and a seed
   interval that spans 0. An arm is called better only when both intervals
   exclude 0 on the same side (the unit interval alone when fewer than two
   seeds pair up).
6. Steps on solved episodes A vs B: over units solved by both arms (in at least
   one seed each), the ratio of mean steps minus one, with the unit bootstrap; and
   per training seed (units both runs of the pair solved) with a t-interval.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rmsweb.store.stats import wilson_interval

BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 0  # fixed: the report is a deterministic function of its inputs

# Two-sided 95% Student t quantiles by degrees of freedom (scipy is not a dependency).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}  # fmt: skip


def t95(df: int) -> float:
    """The 95% t quantile for `df` degrees of freedom (beyond 10: the next smaller tabled
    df, which errs wide; beyond 30: the normal 1.96)."""
    if df < 1:
        raise ValueError("need at least 2 values for a t-interval")
    if df > 30:
        return 1.96
    return T95[max(k for k in T95 if k <= df)]


@dataclass(frozen=True)
class Episode:
    """One eval episode as the arm statistics need it."""

    arm: str  # "<experiment>/<policy>"
    train_seed: int | None  # None for untrained policies (expert, random, teacher)
    task_id: str
    seed: int  # the episode seed (test seed)
    success: bool
    n_steps: int


@dataclass(frozen=True)
class ArmSummary:
    arm: str
    seeds: tuple[int | None, ...]
    per_seed: tuple[float, ...]  # success per training seed (task-weighted)
    mean: float
    seed_low: float | None  # t-interval over seeds (None with one seed)
    seed_high: float | None
    n: int  # episodes, all seeds
    successes: int
    pooled_low: float  # Wilson interval of all episodes
    pooled_high: float
    steps_solved: float | None  # mean steps of successful episodes


@dataclass(frozen=True)
class Difference:
    a: str
    b: str
    units: int  # (task, episode seed) units both arms ran
    diff: float  # success(a) - success(b), task-weighted, seed-averaged
    low: float
    high: float
    steps_units: int  # units solved by both
    steps_ratio: float | None  # mean steps(a) / mean steps(b) - 1 on those units
    steps_low: float | None
    steps_high: float | None
    per_seed: tuple[tuple[int | None, float], ...] = ()  # (training seed, diff) pairs
    steps_per_seed: tuple[tuple[int | None, float], ...] = ()  # (seed, steps ratio) pairs

    @property
    def seed_low(self) -> float | None:
        """Low end of the t-interval over per_seed (None below two pairs)."""
        return t_interval([d for _, d in self.per_seed])[0]

    @property
    def seed_high(self) -> float | None:
        return t_interval([d for _, d in self.per_seed])[1]

    @property
    def steps_seed_low(self) -> float | None:
        return t_interval([r for _, r in self.steps_per_seed])[0]

    @property
    def steps_seed_high(self) -> float | None:
        return t_interval([r for _, r in self.steps_per_seed])[1]

    @property
    def verdict(self) -> str:
        seed_low, seed_high = t_interval([d for _, d in self.per_seed])
        if self.low > 0:
            if seed_low is not None and seed_low <= 0:
                return "no difference shown (interval over seeds contains 0)"
            return f"{self.a} better"
        if self.high < 0:
            if seed_high is not None and seed_high >= 0:
                return "no difference shown (interval over seeds contains 0)"
            return f"{self.b} better"
        return "no difference shown (interval contains 0)"


def task_weighted(outcomes: Iterable[tuple[str, float]]) -> float:
    """Mean over tasks of each task's mean outcome."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for task, value in outcomes:
        by_task[task].append(value)
    if not by_task:
        return math.nan
    return sum(sum(v) / len(v) for v in by_task.values()) / len(by_task)


def summarize(arm: str, episodes: Sequence[Episode]) -> ArmSummary:
    by_seed = _by_seed(episodes)
    seeds = tuple(sorted(by_seed, key=lambda s: -1 if s is None else s))
    per_seed = tuple(
        task_weighted((e.task_id, float(e.success)) for e in by_seed[s]) for s in seeds
    )
    mean = sum(per_seed) / len(per_seed)
    low, high = t_interval(per_seed)
    wins = sum(e.success for e in episodes)
    p_low, p_high = wilson_interval(wins, len(episodes))
    solved = [e.n_steps for e in episodes if e.success]
    return ArmSummary(
        arm,
        seeds,
        per_seed,
        mean,
        low,
        high,
        len(episodes),
        wins,
        p_low,
        p_high,
        sum(solved) / len(solved) if solved else None,
    )


Unit = tuple[str, int]  # (task, episode seed)


def _units(episodes: Sequence[Episode]) -> dict[Unit, list[Episode]]:
    out: dict[Unit, list[Episode]] = defaultdict(list)
    for e in episodes:
        out[(e.task_id, e.seed)].append(e)
    return out


def _percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def paired_difference(
    a: str,
    b: str,
    episodes_a: Sequence[Episode],
    episodes_b: Sequence[Episode],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Difference:
    episodes_a, episodes_b = common_training_seeds(episodes_a, episodes_b)
    ua, ub = _units(episodes_a), _units(episodes_b)
    shared = sorted(set(ua) & set(ub))
    if not shared:
        raise ValueError(f"arms {a} and {b} share no (task, seed) units; compare them on one split")
    # Per unit: success averaged over each arm's training seeds.
    diff_of = {
        u: sum(e.success for e in ua[u]) / len(ua[u]) - sum(e.success for e in ub[u]) / len(ub[u])
        for u in shared
    }
    by_task: dict[str, list[Unit]] = defaultdict(list)
    for u in shared:
        by_task[u[0]].append(u)
    diff = task_weighted((u[0], diff_of[u]) for u in shared)
    rng = random.Random(seed)

    def resample() -> list[Unit]:
        return [u for units in by_task.values() for u in rng.choices(units, k=len(units))]

    boot = [task_weighted((u[0], diff_of[u]) for u in resample()) for _ in range(samples)]
    # Steps on units both arms solved (in some seed): mean solved steps per arm.
    solved = {}
    for u in shared:
        sa = [e.n_steps for e in ua[u] if e.success]
        sb = [e.n_steps for e in ub[u] if e.success]
        if sa and sb:
            solved[u] = (sum(sa) / len(sa), sum(sb) / len(sb))
    ratio = s_low = s_high = None
    if solved:

        def steps_ratio(units: Iterable[Unit]) -> float:
            pairs = [solved[u] for u in units]
            return sum(p[0] for p in pairs) / sum(p[1] for p in pairs) - 1

        ratio = steps_ratio(solved)
        keys = sorted(solved)
        boots = [steps_ratio(rng.choices(keys, k=len(keys))) for _ in range(samples)]
        s_low, s_high = _percentile(boots, 0.025), _percentile(boots, 0.975)
    return Difference(
        a,
        b,
        len(shared),
        diff,
        _percentile(boot, 0.025),
        _percentile(boot, 0.975),
        len(solved),
        ratio,
        s_low,
        s_high,
        seed_differences(episodes_a, episodes_b),
        seed_steps_ratios(episodes_a, episodes_b),
    )


def per_task_differences(
    episodes_a: Sequence[Episode], episodes_b: Sequence[Episode]
) -> dict[str, float]:
    """success(A) - success(B) per task, as `paired_difference` pools it: on the shared
    training seeds and the units both arms ran, each unit averaged over seeds."""
    episodes_a, episodes_b = common_training_seeds(episodes_a, episodes_b)
    ua, ub = _units(episodes_a), _units(episodes_b)
    by_task: dict[str, list[float]] = defaultdict(list)
    for u in sorted(set(ua) & set(ub)):
        by_task[u[0]].append(_mean_success(ua[u]) - _mean_success(ub[u]))
    return {task: sum(v) / len(v) for task, v in sorted(by_task.items())}


def common_training_seeds(
    episodes_a: Sequence[Episode], episodes_b: Sequence[Episode]
) -> tuple[list[Episode], list[Episode]]:
    """Both arms' episodes on the training seeds both have, when both are trained.

    A study may train some arms on more seeds than others (the paper study: SFT, the
    full recipe and the controls on 5, the other arms on 3). A paired difference then
    uses the shared seeds only, so each unit compares runs from the same initial models,
    not a 5-seed average with a 3-seed one. An untrained arm (seed None) pairs with all.
    """
    seeds_a, seeds_b = {e.train_seed for e in episodes_a}, {e.train_seed for e in episodes_b}
    if None in seeds_a or None in seeds_b:
        return list(episodes_a), list(episodes_b)
    both = seeds_a & seeds_b
    return (
        [e for e in episodes_a if e.train_seed in both],
        [e for e in episodes_b if e.train_seed in both],
    )


def _seed_pairs(
    episodes_a: Sequence[Episode], episodes_b: Sequence[Episode]
) -> list[tuple[int | None, dict[Unit, list[Episode]], dict[Unit, list[Episode]]]]:
    """(training seed, A's units, B's units) for each pair of runs compared seed by seed.

    Seeds pair by number: arms of one study train seed k from the same initial model
    (and RL arms from the same SFT checkpoint), so seed k of A and of B differ only in
    what the arms ablate. A one-run arm (untrained, seed None) pairs with every seed.
    """
    runs_a, runs_b = _by_seed(episodes_a), _by_seed(episodes_b)
    if list(runs_b) == [None]:
        pairs = [(s, s, None) for s in runs_a]
    elif list(runs_a) == [None]:
        pairs = [(s, None, s) for s in runs_b]
    else:
        pairs = [
            (s, s, s)
            for s in sorted(set(runs_a) & set(runs_b), key=lambda x: -1 if x is None else x)
        ]
    return [(seed, _units(runs_a[sa]), _units(runs_b[sb])) for seed, sa, sb in pairs]


def seed_differences(
    episodes_a: Sequence[Episode], episodes_b: Sequence[Episode]
) -> tuple[tuple[int | None, float], ...]:
    """(training seed, success(A seed) - success(B seed)) on the units both runs have."""
    out = []
    for seed, ua, ub in _seed_pairs(episodes_a, episodes_b):
        shared = sorted(set(ua) & set(ub))  # sorted: one summation order, whatever the hash seed
        if shared:
            diffs = ((u[0], _mean_success(ua[u]) - _mean_success(ub[u])) for u in shared)
            out.append((seed, task_weighted(diffs)))
    return tuple(out)


def seed_steps_ratios(
    episodes_a: Sequence[Episode], episodes_b: Sequence[Episode]
) -> tuple[tuple[int | None, float], ...]:
    """(training seed, mean steps(A seed) / mean steps(B seed) - 1) on the units both
    runs solved; a seed pair with no unit solved by both is left out."""
    out = []
    for seed, ua, ub in _seed_pairs(episodes_a, episodes_b):
        steps_a = steps_b = 0.0
        for u in sorted(set(ua) & set(ub)):
            sa = [e.n_steps for e in ua[u] if e.success]
            sb = [e.n_steps for e in ub[u] if e.success]
            if sa and sb:
                steps_a += sum(sa) / len(sa)
                steps_b += sum(sb) / len(sb)
        if steps_b:
            out.append((seed, steps_a / steps_b - 1))
    return tuple(out)


def t_interval(values: Sequence[float]) -> tuple[float | None, float | None]:
    """95% t-interval of the mean of `values`; (None, None) below two values."""
    if len(values) < 2:
        return None, None
    mean = sum(values) / len(values)
    half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean - half, mean + half


def _by_seed(episodes: Sequence[Episode]) -> dict[int | None, list[Episode]]:
    out: dict[int | None, list[Episode]] = defaultdict(list)
    for e in episodes:
        out[e.train_seed].append(e)
    return dict(out)


def _mean_success(episodes: Sequence[Episode]) -> float:
    return sum(e.success for e in episodes) / len(episodes)


def group_by_arm(episodes: Iterable[Episode]) -> dict[str, list[Episode]]:
    out: dict[str, list[Episode]] = defaultdict(list)
    for e in episodes:
        out[e.arm].append(e)
    return dict(out)


def arm_of_run(run_path_parts: Sequence[str], experiment: str) -> tuple[str, int | None]:
    """(arm, training seed) of an eval run folder runs/eval/<owner>/<policy>[/s<k>].

    The arm is named after the experiment that reported it, not the stage's owner:
    a shared stage belongs to every experiment that shares it.
    """
    parts = list(run_path_parts)
    i = len(parts) - 1 - parts[::-1].index("eval")
    rest = parts[i + 2 :]  # after eval/<owner>
    seed = None
    if len(rest) == 2 and rest[1].startswith("s") and rest[1][1:].isdigit():
        seed = int(rest[1][1:])
    return f"{experiment}/{rest[0]}", seed


def summaries(by_arm: Mapping[str, Sequence[Episode]]) -> dict[str, ArmSummary]:
    return {arm: summarize(arm, eps) for arm, eps in by_arm.items()}
