"""`rmsweb suite list`: what the suites hold. (`suite check` is rmsweb.evaluate.experts.)"""

from __future__ import annotations

from rmsweb.suites.factory import LIVE_SUITES, SUITE_KINDS, check_suite_name


def list_tasks(suite: str | None = None) -> None:
    """Print the suites, or one suite's tasks marking those with a scripted expert."""
    from rich.console import Console
    from rich.table import Table

    from rmsweb.spec.miniwob_tasks import MINIWOB_TASKS
    from rmsweb.suites.miniwob_experts import EXPERTS

    console = Console()
    if suite is None:
        table = Table(title="Suites")
        for col in ("suite", "kind", "tasks", "experts", "notes"):
            table.add_column(col)
        table.add_row(
            "miniwob",
            "offline",
            str(len(MINIWOB_TASKS)),
            str(len(EXPERTS)),
            "served from the miniwob package on 127.0.0.1",
        )
        for name in LIVE_SUITES:
            table.add_row(name, "live", "-", "0", "not available in this build")
        console.print(table)
        return
    name = check_suite_name(suite)
    if name in LIVE_SUITES:
        console.print(
            f"{name}: a live suite; its tasks come from its task file, which this "
            "build does not ship."
        )
        return
    table = Table(title=f"miniwob: {len(MINIWOB_TASKS)} tasks, {len(EXPERTS)} with an expert")
    table.add_column("task")
    table.add_column("expert", justify="center")
    for task in MINIWOB_TASKS:
        table.add_row(task, "yes" if task in EXPERTS else "")
    console.print(table)


__all__ = ["SUITE_KINDS", "list_tasks"]
