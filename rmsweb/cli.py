"""The `rmsweb` command line.

Start-up stays light: this module imports typer, the spec package and the
compiler only. Every stage body (torch, transformers, trl, playwright, duckdb)
is imported inside its command, so `rmsweb --help`, `validate` and `compile`
never load them.
"""

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from rmsweb.errors import UserError
from rmsweb.spec import SpecErrors
from rmsweb.stages import STAGE_LIST, StageDef

app = typer.Typer(
    name="rmsweb",
    help="Reflection, failure-mode mining and Salvage-DS for web agents, as config-as-code.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
suite_app = typer.Typer(
    help="Suites: list and show them, check the scripted experts.", no_args_is_help=True
)
app.add_typer(suite_app, name="suite")
sweep_app = typer.Typer(
    help="Sweeps (a spec's `sweep:` grids on val): show a table, pick a point into the spec.",
    no_args_is_help=True,
)
app.add_typer(sweep_app, name="sweep")


def fail(message: str, code: int = 2) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(code)


def run_guarded(fn: Callable[[], Any]) -> Any:
    """Turn the errors a user can fix into messages and exit code 2, never a traceback."""
    try:
        return fn()
    except SpecErrors as exc:
        for err in exc.errors:
            typer.echo(str(err), err=True)
        typer.echo(f"{len(exc.errors)} error(s).", err=True)
        raise typer.Exit(2) from None
    except UserError as exc:
        fail(f"error: {exc}")
    except KeyboardInterrupt:
        fail("interrupted.", 130)


def load_impl(module: str, attr: str = "main") -> Callable[..., Any]:
    """A command's body, imported only when the command runs (heavy imports stay lazy)."""
    return getattr(importlib.import_module(module), attr)


# --------------------------------------------------------------------------- specs


Overrides = Annotated[
    list[str] | None,
    typer.Option("--override", "-o", help="Dotted override KEY=VALUE (repeatable)."),
]


@app.command()
def validate(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Spec files or folders (default: experiments/).")
    ] = None,
    override: Overrides = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print errors only.")] = False,
) -> None:
    """Validate experiment specs; report every error as file:line:col key: message."""
    from rmsweb.compile import discover, load_specs
    from rmsweb.spec.judge_check import self_judging
    from rmsweb.spec.loader import display_path

    def go() -> None:
        targets = paths or [Path("experiments")]
        missing = [p for p in targets if not p.exists()]
        if missing:
            raise UserError("no such file or folder: " + ", ".join(map(str, missing)))
        files = discover(targets)
        specs, sources, errors = load_specs(files, override or [])
        if errors:
            raise SpecErrors(errors)
        from rmsweb.models.plan import fit_problems

        unfit = []
        for spec in specs:  # a GPU stage that cannot fit (`rmsweb plan` shows the numbers)
            # Missing features (model sharding for 32B on 80 GB GPUs) are `plan`'s refusals:
            # no field of the spec fixes them on its hardware.
            problems, _ = fit_problems(spec)
            where = display_path(sources[spec.name])
            unfit += [f"{where} {key}: {message}" for _, key, message in problems]
        for line in unfit:
            typer.echo(line, err=True)
        if unfit:
            raise UserError(f"{len(unfit)} stage(s) cannot fit; `rmsweb plan <spec>` shows why.")
        from rmsweb.suites.overlap import located_overlaps

        overlaps = [located_overlaps(s, sources[s.name], override or []) for s in specs]
        for _, lines in overlaps:
            for line in lines:
                typer.echo(f"warning: {line}", err=True)
        if any(errs for errs, _ in overlaps):  # an evaluation task the policies trained on
            raise SpecErrors([e for errs, _ in overlaps for e in errs])
        from rmsweb.models.plan import checkpoint_warnings

        for spec in specs:  # warnings: the spec is valid, exit 0
            for warning in [*self_judging(spec), *checkpoint_warnings(spec)]:
                typer.echo(f"warning: {display_path(sources[spec.name])} {warning}", err=True)
        if not quiet:
            for spec in specs:
                typer.echo(f"ok  {spec.name}")
            typer.echo(f"{len(specs)} spec(s) valid.")

    run_guarded(go)


@app.command()
def plan(
    path: Annotated[Path, typer.Argument(help="An experiment spec file.")],
    override: Overrides = None,
    mfu: Annotated[
        float | None,
        typer.Option(help="One MFU (of the datasheet) for every stage; default: per stage."),
    ] = None,
    usd_per_gpu_hour: Annotated[
        float | None, typer.Option(help="Price of one GPU-hour (default: a list price).")
    ] = None,
) -> None:
    """Memory per GPU, FLOPs, time and cost of each GPU stage; exit 2 if one cannot fit."""
    from rmsweb.compile import load_specs
    from rmsweb.models.plan import plan as make_plan
    from rmsweb.models.plan import render

    def go() -> None:
        specs, _, errors = load_specs([path], override or [])
        if errors:
            raise SpecErrors(errors)
        for spec in specs:
            if not spec.compute.accelerators:
                typer.echo(f"{spec.name}: CPU only (compute.accelerators unset): no GPU plan")
                continue
            units = _suite_units(spec.suite)
            if units is not None and spec.eval.suites:  # each evaluation benchmark's tasks
                from rmsweb.suites.overlap import evaluated_tasks

                units.update({f"eval:{e.name}": len(evaluated_tasks(e)) for e in spec.eval.suites})
            result = make_plan(spec, mfu=mfu, usd_per_gpu_hour=usd_per_gpu_hour, units=units)
            typer.echo(render(result))
            if result.problems:
                raise typer.Exit(2)

    run_guarded(go)


def _suite_units(suite_spec: Any) -> dict[str, int] | None:
    """(task, seed) units per split of a suite (what `plan` prices collect, mine and eval
    by); None when the suite cannot be built here."""
    from rmsweb.suites.factory import build_suite

    try:
        suite = build_suite(suite_spec)
    except Exception:  # a suite that needs what this machine lacks: plan without units
        return None
    units: dict[str, int] = {}
    for split in ("train", "val", "test", "mine"):
        try:
            units[split] = len(suite.task_ids(split)) * len(suite.seeds(split))
        except Exception:  # a suite without this split
            continue
    return units


@app.command("compile")
def compile_cmd(
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 with a diff if the committed files are stale.")
    ] = False,
    root: Annotated[Path, typer.Option(help="Project root.")] = Path("."),
    out: Annotated[
        Path | None,
        typer.Option(
            help="Write the generated files under this folder instead of the project root "
            "(to look at them before committing; dvc and sky read them only at the root)."
        ),
    ] = None,
) -> None:
    """Compile experiments/*.yaml into dvc.yaml, params.yaml, sky/<name>.yaml and
    schemas/ at the project root (or under --out)."""
    from rmsweb.compile import compile_project, diff_generated, write_generated

    def go() -> None:
        if check and out is not None:
            raise UserError("--check compares with the project root; it takes no --out.")
        files = compile_project(root)
        if check:
            diff = diff_generated(root, files)
            if diff:
                typer.echo(diff, nl=False)
                fail("generated files are stale: run `rmsweb compile` and commit.", 1)
            typer.echo(f"up to date: {len(files)} generated file(s).")
            return
        target = root if out is None else out
        changed = write_generated(target, files)
        for rel in changed:
            typer.echo(f"wrote {target / rel if out is not None else rel}")
        typer.echo(f"{len(files)} file(s), {len(changed)} changed.")

    run_guarded(go)


@app.command()
def repro(
    targets: Annotated[
        list[str], typer.Argument(help="DVC stage names (e.g. report_miniwob-cpu).")
    ],
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Stages run at once.")] = 2,
    root: Annotated[Path, typer.Option(help="Project root (holds dvc.yaml).")] = Path("."),
    retries: Annotated[int, typer.Option(help="Retries of a stage that hit a DVC lock.")] = 5,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="List the stages that would run and estimate the time from their last "
            "recorded walls; run nothing.",
        ),
    ] = False,
) -> None:
    """`dvc repro` the targets with independent stages side by side (DVC's parallel
    stage execution: one `dvc repro --single-item` per stage, scheduled by the graph)."""
    from rmsweb.pipeline import reproduce

    def go() -> None:
        if dry_run:
            from rmsweb.pipeline_time import dry_run_lines

            for line in dry_run_lines(targets, root, jobs):
                typer.echo(line)
            return
        from rmsweb.pipeline_time import estimate_line

        outcomes = reproduce(
            targets,
            root=root,
            jobs=jobs,
            retries=retries,
            echo=typer.echo,
            on_plan=lambda graph, wanted: typer.echo(estimate_line(graph, wanted, root, jobs)),
        )
        if any(o.returncode != 0 for o in outcomes):
            raise typer.Exit(1)

    run_guarded(go)


@app.command()
def schema(
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("schemas"),
) -> None:
    """Write the JSON Schema of experiment specs (for editor completion and checks)."""
    from rmsweb.spec.schema import write_schema

    typer.echo(f"wrote {write_schema(out)}")


# --------------------------------------------------------------------------- stages

Exp = Annotated[str, typer.Option("--exp", help="Experiment name (its section of params.yaml).")]
Params = Annotated[Path, typer.Option("--params", help="Resolved params file.")]
Ins = Annotated[
    list[str] | None, typer.Option("--in", help="Upstream output ROLE=DIR (repeatable).")
]
Out = Annotated[Path, typer.Option("--out", help="Output folder (the stage's DVC out).")]
Metrics = Annotated[Path, typer.Option("--metrics", help="Metrics JSON (DVC metrics file).")]
Seed = Annotated[
    int | None,
    typer.Option("--seed", help="Training seed of a per-seed stage (one of the spec's seeds)."),
]


def _run_stage(
    stage: StageDef,
    exp: str,
    params: Path,
    ins: list[str] | None,
    out: Path,
    metrics: Path,
    seed: int | None,
    variant: str | None = None,
) -> None:
    from rmsweb.stage_io import make_stage_io

    def go() -> None:
        io = make_stage_io(exp, params, ins or [], out, metrics, variant, seed)
        io.argv = sys.argv[1:]
        from rmsweb.distributed import shards_in_bucket

        if (stage.distributed and os.environ.get("RMSWEB_CHECKPOINT_DIR")) or (
            stage.sharded and shards_in_bucket()
        ):
            # Checkpoints and shard folders in the bucket are keyed by what the stage would
            # produce (config, code, inputs), computed once here so every torchrun rank and
            # node agrees, and a recovered attempt finds what the lost one stored.
            from rmsweb.compile.identity import stage_run_key

            os.environ.setdefault(
                "RMSWEB_RUN_KEY",
                stage_run_key(io.spec, stage.kind, variant, io.inputs, seed=io.seed),
            )
        if stage.sharded:
            from rmsweb.compile.skyfile import served_by_stage
            from rmsweb.distributed import post_sharded

            # Head of several nodes: the workers play their shares, each with the local
            # servers (vllm serve) the stage calls, as the head's sky script started them.
            post_sharded(sys.argv[1:], served_by_stage(io.spec, stage.kind, variant))
        if stage.distributed:
            from rmsweb.distributed import relaunch_under_torchrun

            code = relaunch_under_torchrun(sys.argv[1:])
            if code is not None:  # ran under torchrun (SkyPilot multi-GPU)
                raise typer.Exit(code)
        load_impl(stage.module)(io)

    run_guarded(go)


def _stage_command(stage: StageDef) -> None:
    """`rmsweb <kind>`: the stage's I/O contract (rmsweb.stage_io) around its module's main.

    (This module has no `from __future__ import annotations`: typer reads the options'
    annotations, and the variant option's name comes from the registry entry.)
    """
    if stage.variant:

        def command(
            exp: Exp,
            variant: Annotated[
                str, typer.Option(f"--{stage.variant}", help=f"Name of the {stage.variant}.")
            ],
            out: Out,
            metrics: Metrics,
            params: Params = Path("params.yaml"),
            ins: Ins = None,
            seed: Seed = None,
        ) -> None:
            _run_stage(stage, exp, params, ins, out, metrics, seed, variant)

    else:

        def command(  # type: ignore[misc]
            exp: Exp,
            out: Out,
            metrics: Metrics,
            params: Params = Path("params.yaml"),
            ins: Ins = None,
            seed: Seed = None,
        ) -> None:
            _run_stage(stage, exp, params, ins, out, metrics, seed)

    command.__doc__ = f"{stage.help}\n\nCode: {stage.module_file} (its main(io))."
    if stage.verb == "sweep report":  # under `rmsweb sweep`, beside show and pick
        sweep_app.command("report", rich_help_panel="Pipeline stages")(command)
    else:
        app.command(stage.verb, rich_help_panel="Pipeline stages")(command)


for _stage in STAGE_LIST:
    if _stage.kind != "preflight":  # its own command below: a spec file or a stage's --exp
        _stage_command(_stage)


@app.command("preflight", rich_help_panel="Pipeline stages")
def preflight(
    spec_file: Annotated[
        Path | None, typer.Argument(help="An experiment spec (instead of --exp and --params).")
    ] = None,
    exp: Annotated[
        str | None, typer.Option("--exp", help="Experiment name (its section of params.yaml).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default runs/preflight/NAME).")
    ] = None,
    metrics: Annotated[
        Path | None,
        typer.Option("--metrics", help="Metrics JSON (default: metrics.json in --out)."),
    ] = None,
    params: Params = Path("params.yaml"),
    ins: Ins = None,
    seed: Seed = None,
    override: Overrides = None,
    skip_vllm: Annotated[
        bool, typer.Option("--skip-vllm", help="Leave out the vLLM serving check.")
    ] = False,
) -> None:
    """Preflight a GPU spec before anything expensive runs: one SFT and one RL step (KL probe
    included) at full size with peak memory against `rmsweb plan`, a checkpoint through the
    bucket, a saved VL SFT folder served by vLLM, an all-reduce across the nodes.

    Code: rmsweb/train/preflight/stage.py (checks.py). Exit 2 naming the check and its fix."""

    def go() -> None:
        from rmsweb.stage_io import StageIO, make_stage_io

        if (spec_file is None) == (exp is None):
            raise UserError("give a spec file or --exp NAME (a stage of dvc.yaml), not both.")
        if spec_file is not None:
            from rmsweb.compile import load_specs

            specs, _, errors = load_specs([spec_file], override or [])
            if errors:
                raise SpecErrors(errors)
            spec = specs[0]
            folder = out or Path("runs/preflight") / spec.name
            io = StageIO(spec.name, spec, {}, folder, metrics or folder / "metrics.json")
        else:
            if out is None or metrics is None:
                raise UserError("--exp needs --out and --metrics (as dvc.yaml gives them).")
            io = make_stage_io(exp or "", params, ins or [], out, metrics, None, seed)
        from rmsweb.distributed import relaunch_under_torchrun

        code = relaunch_under_torchrun(sys.argv[1:])  # RMSWEB_TORCHRUN: every rank, every node
        if code is not None:
            raise typer.Exit(code)
        load_impl("rmsweb.train.preflight.stage", "run_command")(io, skip_vllm)

    run_guarded(go)


# --------------------------------------------------------------------------- tools


@sweep_app.command("show")
def sweep_show(
    name: Annotated[str, typer.Argument(help="The sweep's name (a key of a spec's sweep:).")],
    root: Annotated[Path, typer.Option(help="Project root.")] = Path("."),
    as_json: Annotated[bool, typer.Option("--json", help="Print the results file.")] = False,
) -> None:
    """Print a sweep's table (metrics/sweep/NAME.json, written by its sweep stage)."""
    run_guarded(lambda: load_impl("rmsweb.sweep.commands", "show")(name, root, as_json, typer.echo))


@sweep_app.command("pick")
def sweep_pick(
    name: Annotated[str, typer.Argument(help="The sweep's name.")],
    point: Annotated[
        str, typer.Argument(help="A point of it (its name, or its label, e.g. lr3e-05).")
    ],
    root: Annotated[Path, typer.Option(help="Project root.")] = Path("."),
) -> None:
    """Write POINT's axis values into the spec that holds the sweep, each with a comment
    naming the results file; then run `rmsweb compile`."""
    run_guarded(lambda: load_impl("rmsweb.sweep.commands", "pick")(name, point, root, typer.echo))


@sweep_app.command("capacity")
def sweep_capacity(
    name: Annotated[str, typer.Argument(help="A sweep with an axis on sft.demos_per_task.")],
    expert: Annotated[
        Path | None,
        typer.Option(help="The expert's eval metrics on the sweep's split (default: 1.0)."),
    ] = None,
    root: Annotated[Path, typer.Option(help="Project root.")] = Path("."),
) -> None:
    """The share of each task's expert - SFT gap that the sweep's highest budget of
    demonstrations closes over its lowest (writes metrics/sweep/NAME.capacity.json)."""
    run_guarded(
        lambda: load_impl("rmsweb.sweep.commands", "capacity")(name, root, expert, typer.echo)
    )


@suite_app.command("list")
def suite_list(
    suite: Annotated[str | None, typer.Argument(help="Suite name (default: all).")] = None,
) -> None:
    """List suites and their tasks."""
    run_guarded(lambda: load_impl("rmsweb.suites.commands", "list_tasks")(suite))


@suite_app.command("show")
def suite_show(
    suite: Annotated[str, typer.Argument(help="Suite name, e.g. webvoyager.")],
) -> None:
    """Show a suite: task counts, categories (sites, levels, segments) and splits."""
    run_guarded(lambda: load_impl("rmsweb.suites.commands", "show_suite")(suite))


@suite_app.command("check")
def suite_check(
    suite: Annotated[str, typer.Argument(help="Suite name, e.g. miniwob.")],
    split: Annotated[str, typer.Option(help="train or test.")] = "test",
    seeds: Annotated[int, typer.Option(help="Seeds per task.")] = 50,
    tasks: Annotated[
        list[str] | None, typer.Option("--task", help="Only these tasks (default: all experts).")
    ] = None,
    contexts: Annotated[int, typer.Option(help="Parallel browser contexts.")] = 2,
) -> None:
    """Run each scripted expert and print a per-task success table (exit 1 below 95%)."""
    code = run_guarded(
        lambda: load_impl("rmsweb.evaluate.experts", "check_experts")(
            suite, split=split, seeds=seeds, tasks=tasks or None, contexts=contexts
        )
    )
    raise typer.Exit(code or 0)


@app.command()
def query(
    sql: Annotated[str | None, typer.Argument(help="SQL over the run tables.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, md, csv or json.")] = "table",
    runs: Annotated[Path, typer.Option(help="Root folder of the runs.")] = Path("runs"),
    print_views: Annotated[
        bool, typer.Option("--print-views", help="Print the view SQL (for `duckdb -init`).")
    ] = False,
    skip_corrupt: Annotated[
        bool, typer.Option("--skip-corrupt", help="Skip unreadable shards with a warning.")
    ] = False,
    width: Annotated[
        int,
        typer.Option(help="--format table: cut cells at this many characters (0: never)."),
    ] = 60,
) -> None:
    """Query episodes, steps, evals, ... of every run with DuckDB SQL (read-only; SELECT,
    PIVOT, DESCRIBE, SUMMARIZE, ...)."""
    run_guarded(
        lambda: load_impl("rmsweb.store.query", "main")(
            sql,
            fmt=fmt,
            runs=runs,
            print_views=print_views,
            skip_corrupt=skip_corrupt,
            width=width,
        )
    )


@app.command()
def view(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="A run folder with an episodes table (or the folder of one, e.g. sft for sft/s0)."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(help="HTML file to write (default: ./<run>-<split>-viewer.html)."),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(help="test, val, train, mine or all (default: the report's, test)."),
    ] = None,
    max_episodes: Annotated[
        int, typer.Option(help="Episodes on the page (with --compare: units), spread over tasks.")
    ] = 200,
    compare: Annotated[
        Path | None,
        typer.Option(help="A second run: both side by side on the (task, seed) units they share."),
    ] = None,
) -> None:
    """Write a static HTML trajectory viewer for a run (or two runs side by side)."""
    run_guarded(
        lambda: load_impl("rmsweb.report.viewer", "main")(
            run_dir, out=out, split=split, max_episodes=max_episodes, compare=compare
        )
    )


@app.command("export-om2w")
def export_om2w(
    run_dir: Annotated[Path, typer.Argument(help="A run folder, e.g. runs/eval/paper-8b/rl/s0.")],
    out: Annotated[Path, typer.Argument(help="Folder to write <task_id>/ folders into.")],
) -> None:
    """Write a run's episodes in the Online-Mind2Web judge-input layout (result.json and
    trajectory/<N>_full_screenshot.png per task), for the benchmark authors' evaluator:
    one folder per task (per task and seed when a task ran at several seeds), episodes
    that ended in an environment error included, further attempts under <task>/attempts/."""

    def go() -> None:
        done = load_impl("rmsweb.judge.om2w_layout", "export_run_dir")(run_dir, out)
        typer.echo(
            f"wrote {len(done.folders)} task folder(s) to {out} ({done.env_errors} ended in "
            f"an environment error; {done.attempts} further attempt(s) under <task>/attempts/)"
        )

    run_guarded(go)


@app.command("judge-om2w")
def judge_om2w(
    dirs: Annotated[
        list[Path], typer.Argument(help="Runs in the Online-Mind2Web layout (or task folders).")
    ],
    out: Annotated[Path, typer.Option(help="Run folder to write (episodes + judgments).")],
    suite: Annotated[
        str, typer.Option(help="Benchmark of the tasks: categories and default protocol.")
    ] = "online_mind2web",
    protocol: Annotated[
        str, typer.Option(help="suite (the benchmark's own), webvoyager, webjudge, webtailbench.")
    ] = "suite",
    base_url: Annotated[
        str, typer.Option(help="OpenAI-compatible endpoint of the judge.")
    ] = "http://127.0.0.1:8000/v1",
    model: Annotated[str, typer.Option(help="Judge model name.")] = "Qwen/Qwen3-VL-32B-Instruct",
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the key.")
    ] = "OPENAI_API_KEY",
    concurrency: Annotated[int, typer.Option(help="Judge requests in flight.")] = 8,
    max_tokens: Annotated[
        int | None, typer.Option(help="Completion tokens per call (default: protocol's).")
    ] = None,
    input_usd_per_mtok: Annotated[float, typer.Option(help="Judge prompt price, $/M.")] = 0.0,
    output_usd_per_mtok: Annotated[float, typer.Option(help="Judge completion price, $/M.")] = 0.0,
    agent: Annotated[str, typer.Option(help="Policy name for the episodes rows.")] = "imported",
    cache: Annotated[
        Path | None,
        typer.Option(help="Judge answer cache (default: $RMSWEB_JUDGE_CACHE or .rmsweb-cache)."),
    ] = None,
) -> None:
    """Judge another agent's run in the Online-Mind2Web layout with a live benchmark's judge;
    write a run folder (episodes + judgments tables) and print accuracy per category."""
    options = {
        "protocol": protocol,
        "base_url": base_url,
        "model": model,
        "api_key_env": api_key_env,
        "concurrency": concurrency,
        "max_tokens": max_tokens,
        "prices": {
            "input_usd_per_mtok": input_usd_per_mtok,
            "output_usd_per_mtok": output_usd_per_mtok,
        },
    }

    def go() -> None:
        summary = load_impl("rmsweb.evaluate.imported", "judge_om2w")(
            dirs, out, suite=suite, policy=agent, judge_options=options, cache_dir=cache
        )
        load_impl("rmsweb.evaluate.imported", "print_summary")(summary)

    run_guarded(go)


@app.command()
def worker(
    exp: Exp,
    finish: Annotated[
        bool, typer.Option("--finish", help="Head node: tell the workers the pipeline is done.")
    ] = False,
) -> None:
    """Multi-node: join the distributed stages the head node posts (SkyPilot workers)."""
    run_guarded(lambda: load_impl("rmsweb.distributed", "worker_main")(exp, finish=finish))


def main() -> None:
    try:
        app()
    except BrokenPipeError:  # `rmsweb query ... | head`
        sys.stderr.close()


if __name__ == "__main__":
    main()
