"""The model grid of the regime issue's item 2: one row per capacity sweep, from its files.

Each capacity sweep (`rmsweb sweep capacity NAME`) is one point of the grid over the
model's size, its pretraining budget and the suite: SFT on val at a budget and at 4x
the budget, from one model. This gathers what those committed files say, so the choice
of model and pretraining reads from one results file a command wrote:

- the model (width, layers, whether it has a copy head) and pretraining settings of the
  sweep's low point (params.yaml); with
  `model.pretrain.until` the steps shown are the steps it trained (metrics file), not the cap;
- the pretraining stage's held-out exact next action (the mean over the skills it
  trained, and the copy skill's, which every point trains) and its speed (the metrics file
  of the pretrain stage dvc.yaml runs for that point: points that share a pretrained
  model share its stage);
- SFT on val at both budgets (pooled over tasks), the data-limited share of the pooled
  expert − SFT gap (the gap of the tasks where 4x closes at least half of theirs) and
  the closed share (the part of the pooled gap 4x closes, task by task summed; it does
  not hinge on which side of the 50% line a task falls) (metrics/sweep/<name>.capacity.json);
- reach on val failure states of the low point's SFT at G = 8 and the temperatures
  measured, where `benchmarks/val_reach.py` wrote a file for it
  (benchmarks/results/val_reach_<point>-t<T>.json), and at temperature 1.0 on the
  first failures alone (an episode's first wrong step: the kind of state mining keeps).

    python benchmarks/model_grid.py --out benchmarks/results/model_grid.json

A sweep whose files are missing is listed with what is missing, not skipped silently.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = (
    "capacity",
    "capacity-pre",
    "capacity-suite",
    "capacity-pre5k",
    "capacity-h128",
    "capacity-h128-suite2",
    "capacity-h128-skills",
    "capacity-h128-skills-p1",
    "capacity-h128-skills-until-p1",
    "capacity-h128-skills-until-p2",
    "capacity-h128-l4-skills-until-p1",
    "capacity-h128-copy-skills-until-p1",
    "capacity-click",
)
TEMPERATURES = ("0.5", "1.0")


def _commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    )
    return out.stdout.strip() or "unknown"


def _json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4)


def pretrain_metrics_files(dvc_yaml: dict[str, Any]) -> dict[str, str]:
    """point -> the metrics file of the pretrain stage that serves it (its `desc` names
    the points: "pretrain for A, B; code: ...", as rmsweb.compile.dvcfile.stage_entry
    writes it; its cmd the `--metrics` file)."""
    out: dict[str, str] = {}
    for name, stage in dvc_yaml.get("stages", {}).items():
        if not name.startswith("pretrain_"):
            continue
        points = stage.get("desc", "").removeprefix("pretrain for ").split(";")[0]
        words = stage.get("cmd", "").split()
        if "--metrics" not in words:
            continue
        metrics = words[words.index("--metrics") + 1]
        for point in points.split(","):
            out[point.strip()] = metrics
    return out


def grid_row(
    root: Path, params: dict[str, Any], pretrain_files: dict[str, str], name: str
) -> dict[str, Any]:
    """One sweep's row (module doc); `missing` lists the files it lacks."""
    row: dict[str, Any] = {"sweep": name, "missing": []}
    cap_path = root / "metrics" / "sweep" / f"{name}.capacity.json"
    cap = _json(cap_path)
    if cap is None:
        row["missing"].append(str(cap_path.relative_to(root)))
        return row
    group = cap["groups"]["all"]
    low, high = group["low"], group["high"]
    point = low["point"]
    tasks = group["tasks"]
    spec = params.get(point, {})
    model = spec.get("model", {})
    pretrain = model.get("pretrain") or {}
    row |= {
        "point": point,
        "tasks": sorted(tasks),
        "hidden_size": model.get("hidden_size"),
        "num_layers": model.get("num_layers"),
        "copy_head": bool(model.get("copy_head", False)),
        "pretrain_steps": pretrain.get("steps", 0),
        "pretrain_skills": pretrain.get("skills"),
        "budget_low": low["budget"],
        "budget_high": high["budget"],
        "sft_low": _mean([t["sft_low"] for t in tasks.values()]),
        "sft_high": _mean([t["sft_high"] for t in tasks.values()]),
        "data_limited_share": round(group["pooled"]["data_limited_share"], 4),
        "closed_share": round(group["pooled"]["closed_share"], 4),
        "data_limited_share_ci": group["pooled"].get("data_limited_share_ci"),
        "closed_share_ci": group["pooled"].get("closed_share_ci"),
        "capacity_limited": group["pooled"]["capacity_limited"],
    }
    if pretrain:
        pre_file = pretrain_files.get(point, f"metrics/pretrain/{point}.json")
        pre = _json(root / pre_file)
        if pre is None:
            row["missing"].append(pre_file)
        else:
            row |= {
                # The mean is over the skills pretrained, so it compares only runs on
                # the same skills; the copy skill's own figure compares them all.
                "pretrain_exact": pre.get("accuracy_after_mean"),
                "pretrain_copy": (pre.get("accuracy_after") or {}).get("copy"),
                "pretrain_samples_per_s": pre.get("samples_per_s"),
                "pretrain_train_s": pre.get("train_wall_s"),
                # With model.pretrain.until, steps is the cap: show the steps it took.
                "pretrain_steps": pre.get("steps_trained", row["pretrain_steps"]),
            }
        if pretrain.get("until"):
            row["pretrain_until"] = pretrain["until"]["accuracy"]
    for t in TEMPERATURES:
        reach = _json(root / "benchmarks" / "results" / f"val_reach_{point}-t{t}.json")
        if reach is not None:
            pooled = reach["pooled"]
            row[f"reach_val_t{t}"] = pooled.get("reach_val")
            row[f"reach_val_t{t}_states"] = pooled.get("reach_val_states")
            row[f"reach_val_first_t{t}"] = pooled.get("reach_val_first")
            row[f"reach_val_first_t{t}_states"] = pooled.get("reach_val_first_states")
    return row


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def render(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'sweep':<35}{'width':>6}{'layers':>7}{'copy head':>10}{'pretrain':>9}{'skills':>7}{'exact':>7}{'copy':>6}"
        f"{'SFT low':>9}{'SFT 4x':>8}{'data-lim':>9}{'closed':>8}{'reach T0.5':>11}{'reach T1':>9}"
        f"{'first T1':>9}"
    )
    lines = [head]
    for r in rows:
        if "point" not in r:
            lines.append(f"{r['sweep']:<35}missing: {', '.join(r['missing'])}")
            continue
        exact, copy = r.get("pretrain_exact"), r.get("pretrain_copy")
        skills = r.get("pretrain_skills")
        if r["missing"]:
            lines.append(f"{'':<35}missing: {', '.join(r['missing'])}")
        lines.append(
            f"{r['sweep']:<35}{r['hidden_size']!s:>6}{r['num_layers']!s:>7}"
            f"{'yes' if r.get('copy_head') else 'no':>10}"
            f"{r['pretrain_steps']:>9}{'—' if not skills else len(skills):>7}"
            f"{'—' if exact is None else f'{exact:.2f}':>7}"
            f"{'—' if copy is None else f'{copy:.2f}':>6}"
            f"{_pct(r['sft_low']):>9}{_pct(r['sft_high']):>8}"
            f"{_pct(r['data_limited_share']):>9}{_pct(r['closed_share']):>8}"
            f"{_pct(r.get('reach_val_t0.5')):>11}"
            f"{_pct(r.get('reach_val_t1.0')):>9}"
            f"{_pct(r.get('reach_val_first_t1.0')):>9}"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", nargs="*", default=list(SWEEPS), help="capacity sweeps")
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--dvc-yaml", type=Path, default=ROOT / "dvc.yaml")
    ap.add_argument("--out", type=Path, help="write the rows here as JSON")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from rmsweb.spec.safe_yaml import load_plain

    if not args.params.exists():
        print(f"{args.params}: not found (run `rmsweb compile`)", file=sys.stderr)
        return 2
    import yaml

    params, _ = load_plain(args.params.read_text())
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    dvc_yaml = yaml.load(args.dvc_yaml.read_text(), Loader=loader) if args.dvc_yaml.exists() else {}
    files = pretrain_metrics_files(dvc_yaml)
    rows = [grid_row(ROOT, params, files, name) for name in args.sweeps]
    print(render(rows))
    if args.out:
        result = {
            "note": __doc__.splitlines()[0],
            "command": "python benchmarks/model_grid.py " + " ".join(sys.argv[1:]),
            "commit": _commit(),
            "rows": rows,
        }
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
