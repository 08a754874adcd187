"""The report's figures as PNG bytes (matplotlib's object API, Agg canvas: no display, no pyplot
global state)."""

from __future__ import annotations

import io
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from rmsweb.report.arms import ArmSummary
from rmsweb.store.rows import EvalRow

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 110


def _figure(width: float, height: float, rows: int = 1) -> tuple[Figure, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, 1, sharex=rows > 1)
    return fig, axes


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _style(ax: Any) -> None:
    ax.grid(True, axis="both", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def success_plot(rows: list[EvalRow]) -> bytes:
    """Success rate per policy with its 95% Wilson interval."""
    fig, ax = _figure(6.5, 0.5 + 0.45 * len(rows))
    labels = [f"{r.policy} ({r.suite})" for r in rows][::-1]
    rates = [r.success_rate for r in rows][::-1]
    lows = [r.success_rate - r.ci_low for r in rows][::-1]
    highs = [r.ci_high - r.success_rate for r in rows][::-1]
    ax.barh(labels, rates, xerr=[lows, highs], color="#4c72b0", capsize=4)
    for y, (rate, up) in enumerate(zip(rates, highs, strict=True)):
        # Right of the interval's upper end, so the label never sits on the error bar.
        ax.text(rate + up + 0.015, y, f"{100 * rate:.1f}%", va="center", fontsize=9)
    ax.set_xlim(0, 1.13)
    ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel("success rate (bars: 95% Wilson CI)")
    _style(ax)
    return _png(fig)


def yield_plot(attempts: list[dict], first_success: list[dict]) -> bytes:
    """Per attempt index: the attempt's success rate, and the yield (units solved so far)."""
    fig, ax = _figure(6.5, 3.2)
    by_run: dict[str, list[dict]] = defaultdict(list)
    for r in attempts:
        by_run[r["run"]].append(r)
    width = 0.8 / max(1, len(by_run))
    for i, (run, rs) in enumerate(by_run.items()):
        xs = [r["attempt"] + i * width for r in rs]
        ax.bar(
            xs, [r["successes"] / r["attempts"] for r in rs], width, label=f"{run}: attempt success"
        )
        units = [u for u in first_success if u["run"] == run]
        total = sum(u["units"] for u in units)
        solved, cum = 0, []
        for r in rs:
            solved += sum(u["units"] for u in units if u["first_ok"] == r["attempt"])
            cum.append(solved / total if total else 0.0)
        ax.plot(xs, cum, "o-", color="#dd8452", label=f"{run}: yield (solved by this attempt)")
    ax.set_xlabel("attempt (0: first try; k: after k reflections)")
    ax.set_ylabel("share")
    ax.set_ylim(0, 1.05)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8, loc="upper left")
    _style(ax)
    return _png(fig)


def kept_steps_plot(hist: list[dict]) -> bytes:
    """Histogram of the kept trajectories' lengths."""
    fig, ax = _figure(6.5, 2.8)
    by_run: dict[str, list[dict]] = defaultdict(list)
    for r in hist:
        by_run[r["run"]].append(r)
    for run, rs in by_run.items():
        ax.bar([r["n_steps"] for r in rs], [r["kept"] for r in rs], alpha=0.8, label=run)
    ax.set_xlabel("steps of the kept (shortest successful) attempt")
    ax.set_ylabel("trajectories")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8)
    _style(ax)
    return _png(fig)


def rl_plot(curve: list[dict], reasons: list[dict]) -> bytes:
    """Three panels over optimizer steps: group reward, gate decisions by reason, losses."""
    fig, (ax_r, ax_g, ax_l) = _figure(7.5, 7.0, rows=3)
    runs = list(dict.fromkeys(r["run"] for r in curve))
    for run in runs:
        rs = [r for r in curve if r["run"] == run]
        steps = [r["step"] for r in rs]
        mean = [r["reward_mean"] for r in rs]
        std = [r["reward_std"] for r in rs]
        ax_r.plot(steps, mean, label=f"{run}: mean group reward")
        ax_r.fill_between(
            steps,
            [m - s for m, s in zip(mean, std, strict=True)],
            [m + s for m, s in zip(mean, std, strict=True)],
            alpha=0.15,
        )
        pg = [(r["step"], r["pg_loss"]) for r in rs if r["pg_loss"] is not None]
        anchor = [(r["step"], r["anchor_loss"]) for r in rs if r["anchor_loss"] is not None]
        if pg:
            ax_l.plot(*zip(*pg, strict=True), label=f"{run}: PG loss (accepted)")
        if anchor:
            ax_l.plot(*zip(*anchor, strict=True), label=f"{run}: anchor NLL (rejected)")
    ax_r.set_ylabel("reward")
    ax_r.legend(fontsize=8)
    # Gate decisions, as shares of the step's groups (first run only when several).
    first = [r for r in reasons if r["run"] == runs[0]] if runs else []
    steps = sorted({r["step"] for r in first})
    names = sorted({r["reason"] for r in first}, key=lambda n: (n != "accepted", n))
    totals = defaultdict(int)
    for r in first:
        totals[r["step"]] += r["groups"]
    counts = {(r["step"], r["reason"]): r["groups"] for r in first}
    shares = [[counts.get((s, n), 0) / totals[s] for s in steps] for n in names]
    if steps:
        ax_g.stackplot(steps, shares, labels=names, alpha=0.85)
        ax_g.legend(fontsize=8, loc="upper left", ncols=min(4, len(names)))
    ax_g.set_ylabel("share of groups")
    ax_g.set_ylim(0, 1)
    ax_l.set_ylabel("loss")
    ax_l.set_xlabel("RL step")
    if ax_l.get_legend_handles_labels()[0]:
        ax_l.legend(fontsize=8)
    for ax in (ax_r, ax_g, ax_l):
        _style(ax)
    return _png(fig)


def arms_plot(rows: list[tuple[str, ArmSummary]]) -> bytes:
    """Test success per arm: bar = mean over seeds, whiskers = 95% CI over seeds (pooled
    Wilson with one seed), dots = the training seeds themselves."""
    items = rows[::-1]
    fig, ax = _figure(6.5, 0.6 + 0.45 * len(items))
    means = [s.mean for _, s in items]
    lows = [s.mean - (s.seed_low if s.seed_low is not None else s.pooled_low) for _, s in items]
    highs = [(s.seed_high if s.seed_high is not None else s.pooled_high) - s.mean for _, s in items]
    ax.barh([label for label, _ in items], means, xerr=[lows, highs], color="#55a868", capsize=4)
    for y, (_, s) in enumerate(items):
        ax.plot(s.per_seed, [y] * len(s.per_seed), "k.", markersize=5)
        ax.text(min(1.0, s.mean + highs[y]) + 0.015, y, f"{100 * s.mean:.1f}%", va="center")
    ax.set_xlim(0, 1.15)
    ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel("test success (dots: training seeds)")
    _style(ax)
    return _png(fig)
