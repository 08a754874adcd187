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
    help="Suites: list tasks, check the scripted experts.", no_args_is_help=True
)
app.add_typer(suite_app, name="suite")


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

    def go() -> None:
        targets = paths or [Path("experiments")]
        missing = [p for p in targets if not p.exists()]
        if missing:
            raise UserError("no such file or folder: " + ", ".join(map(str, missing)))
        files = discover(targets)
        specs, _, errors = load_specs(files, override or [])
        if errors:
            raise SpecErrors(errors)
        if not quiet:
            for spec in specs:
                typer.echo(f"ok  {spec.name}")
            typer.echo(f"{len(specs)} spec(s) valid.")

    run_guarded(go)


@app.command("compile")
def compile_cmd(
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 with a diff if the committed files are stale.")
    ] = False,
    root: Annotated[Path, typer.Option(help="Project root.")] = Path("."),
) -> None:
    """Compile experiments/*.yaml into dvc.yaml, params.yaml and sky/<name>.yaml."""
    from rmsweb.compile import compile_project, diff_generated, write_generated

    def go() -> None:
        files = compile_project(root)
        if check:
            diff = diff_generated(root, files)
            if diff:
                typer.echo(diff, nl=False)
                fail("generated files are stale: run `rmsweb compile` and commit.", 1)
            typer.echo(f"up to date: {len(files)} generated file(s).")
            return
        changed = write_generated(root, files)
        for rel in changed:
            typer.echo(f"wrote {rel}")
        typer.echo(f"{len(files)} file(s), {len(changed)} changed.")

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
        if stage.distributed and os.environ.get("RMSWEB_CHECKPOINT_DIR"):
            # Checkpoints in the bucket are keyed by what the stage would produce (config,
            # code, inputs), computed once here so every torchrun rank and node agrees.
            from rmsweb.compile.identity import stage_run_key

            os.environ.setdefault(
                "RMSWEB_RUN_KEY",
                stage_run_key(io.spec, stage.kind, variant, io.inputs, seed=io.seed),
            )
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
    app.command(stage.verb, rich_help_panel="Pipeline stages")(command)


for _stage in STAGE_LIST:
    _stage_command(_stage)


# --------------------------------------------------------------------------- tools


@suite_app.command("list")
def suite_list(
    suite: Annotated[str | None, typer.Argument(help="Suite name (default: all).")] = None,
) -> None:
    """List suites and their tasks."""
    run_guarded(lambda: load_impl("rmsweb.suites.commands", "list_tasks")(suite))


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
) -> None:
    """Query episodes, steps, evals, ... of every run with DuckDB SQL (read-only)."""
    run_guarded(
        lambda: load_impl("rmsweb.store.query", "main")(
            sql, fmt=fmt, runs=runs, print_views=print_views, skip_corrupt=skip_corrupt
        )
    )


@app.command()
def view(
    run_dir: Annotated[Path, typer.Argument(help="A run folder with episodes/steps tables.")],
    out: Annotated[
        Path | None,
        typer.Option(help="HTML file to write (default: ./<run>-viewer.html)."),
    ] = None,
) -> None:
    """Write a static HTML trajectory viewer for a run."""
    run_guarded(lambda: load_impl("rmsweb.report.viewer", "main")(run_dir, out=out))


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
