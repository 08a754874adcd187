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


def _cumulative_yield(rs: list[dict], units: list[dict]) -> list[float]:
    total = sum(u["units"] for u in units)
    solved, cum = 0, []
    for r in rs:
        solved += sum(u["units"] for u in units if u["first_ok"] == r["attempt"])
        cum.append(solved / total if total else 0.0)
    return cum


def yield_plot(attempts: list[dict], first_success: list[dict]) -> bytes:
    """Per attempt index, two panels: the attempt's success rate (bars, 0-1), and the
    yield (units solved so far), on an axis zoomed to its range so a 91 -> 99.9% rise
    shows, each point labelled. Legends sit below the panels, off the data."""
    from matplotlib.ticker import PercentFormatter

    fig, (ax_a, ax_y) = _figure(6.5, 4.8, rows=2)
    by_run: dict[str, list[dict]] = defaultdict(list)
    for r in attempts:
        by_run[r["run"]].append(r)
    width = 0.8 / max(1, len(by_run))
    lows = []
    for i, (run, rs) in enumerate(by_run.items()):
        xs = [r["attempt"] + i * width for r in rs]
        rates = [r["successes"] / r["attempts"] for r in rs]
        ax_a.bar(xs, rates, width, label=f"{run}: attempt success")
        cum = _cumulative_yield(rs, [u for u in first_success if u["run"] == run])
        (line,) = ax_y.plot(xs, cum, "o-", label=f"{run}: yield (solved by this attempt)")
        for x, y in zip(xs, cum, strict=True):
            ax_y.annotate(
                f"{100 * y:.1f}%",
                (x, y),
                textcoords="offset points",
                xytext=(0, -13),
                ha="center",
                fontsize=8,
                color=line.get_color(),
            )
        lows += cum
    ax_a.set_ylabel("attempt success")
    ax_a.set_ylim(0, 1.05)
    ax_a.yaxis.set_major_formatter(PercentFormatter(1.0))
    low = min(lows, default=0.0)
    # Zoomed to the yields (at least 2 points of range), room below for the labels.
    span = max(1.0 - low, 0.02)
    ax_y.set_ylim(max(0.0, low - 0.25 * span), min(1.0, low + span) + 0.1 * span)
    ax_y.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=1 if span < 0.05 else 0))
    ax_y.set_ylabel("yield (axis zoomed)")
    ax_y.set_xlabel("attempt (0: first try; k: after k reflections)")
    ax_y.xaxis.get_major_locator().set_params(integer=True)
    for ax in (ax_a, ax_y):
        _style(ax)
    handles = [h for ax in (ax_a, ax_y) for h in ax.get_legend_handles_labels()[0]]
    labels = [t for ax in (ax_a, ax_y) for t in ax.get_legend_handles_labels()[1]]
    fig.legend(handles, labels, loc="outside lower center", fontsize=8, ncols=1)
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


# Gate reasons (rmsweb/train/salvage_ds/gate.py) in fixed colours, so a chart reads the same
# in every report: used groups green, rejections by kind (nothing learnable, red;
# already solved, blue; competence bounds, orange/purple; weak contrast, grey).
GATE_COLORS = {
    "accepted": "#2e8b57",
    "ungated": "#7fbf7f",
    "all_wrong": "#c0392b",
    "all_right": "#4c72b0",
    "low_std": "#95a5a6",
    "too_hard": "#e67e22",
    "too_easy": "#8e44ad",
}
OTHER_COLORS = ("#7f8c8d", "#bdc3c7", "#34495e")


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
        colors = [
            GATE_COLORS.get(n, OTHER_COLORS[i % len(OTHER_COLORS)]) for i, n in enumerate(names)
        ]
        ax_g.stackplot(steps, shares, labels=names, colors=colors, alpha=0.85)
        # Above the panel: inside, it would hide the shares it explains.
        ax_g.legend(
            fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0), ncols=len(names), frameon=False
        )
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


def sft_loss_plot(curves: dict[str, list[dict]]) -> bytes:
    """Training loss per logged step, one line per SFT run, on a log axis (the loss falls
    by orders of magnitude)."""
    fig, ax = _figure(6.5, 3.0)
    for role, rows in curves.items():
        pts = [(r["step"], r["loss"]) for r in rows if r.get("loss", 0) > 0]
        if pts:
            ax.plot(*zip(*pts, strict=True), label=role)
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    _style(ax)
    return _png(fig)


def rl_drift_plot(curves: dict[str, list[dict]]) -> bytes:
    """Two panels over RL steps, one line per RL run: the KL to SFT and the entropy,
    at the steps where the stage probed them (its checkpoints and last step)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, 2.8), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, column, label in zip(
        axes,
        ("kl_to_sft", "entropy"),
        ("KL to SFT (nats / token)", "entropy (nats / token)"),
        strict=True,
    ):
        for role, rows in curves.items():
            pts = [(r["step"], r[column]) for r in rows if column in r and "step" in r]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", markersize=3, label=role)
        ax.set_xlabel("RL step")
        ax.set_ylabel(label)
        _style(ax)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    return _png(fig)


def stage_time_plot(bars: list[tuple[str, float]]) -> bytes:
    """Minutes per stage (horizontal bars, pipeline order top to bottom)."""
    fig, ax = _figure(6.5, 0.6 + 0.3 * len(bars))
    labels = [b[0] for b in bars][::-1]
    minutes = [b[1] for b in bars][::-1]
    ax.barh(labels, minutes, color="#4c72b0")
    for y, m in enumerate(minutes):
        ax.text(m, y, f" {m:.1f}", va="center", fontsize=8)
    ax.set_xlabel("minutes")
    ax.set_xlim(0, max(minutes, default=1) * 1.15)
    ax.tick_params(axis="y", labelsize=8)
    _style(ax)
    return _png(fig)


def checkpoint_curve_plot(
    seeds: dict[str, dict[int, dict[int, float]]], means: dict[str, dict[int, float]]
) -> bytes:
    """Val success per RL step, one colour per arm: its mean over training seeds (thick,
    with markers) and each seed's curve (thin). Step 0 is the SFT model."""
    fig, ax = _figure(6.5, 3.2)
    colors = ["#4c72b0", "#c44e52", "#55a868", "#8172b2", "#ccb974", "#64b5cd"]
    for i, (arm, per_seed) in enumerate(seeds.items()):
        color = colors[i % len(colors)]
        for points in per_seed.values():
            steps = sorted(points)
            ax.plot(steps, [points[s] for s in steps], color=color, alpha=0.35, linewidth=1)
        steps = sorted(means[arm])
        ax.plot(
            steps,
            [means[arm][s] for s in steps],
            color=color,
            linewidth=2.2,
            marker="o",
            markersize=4,
            label=f"{arm} (mean of {len(per_seed)})",
        )
    from matplotlib.ticker import PercentFormatter

    ax.yaxis.set_major_formatter(PercentFormatter(1.0))  # decimals as the ticks need
    ax.set_xlabel("RL step (0: SFT)")
    ax.set_ylabel("val success")
    ax.legend(fontsize=8)
    _style(ax)
    return _png(fig)
