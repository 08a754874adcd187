"""Helper processes: one episode stage's units over several browsers on one machine.

One Chromium and its Python driver keep about 1.2 cores busy however many contexts they
run (the renderer, the browser process and the driver take turns on the same episode
steps), so a stage that plays alone, as collect does while every later stage waits on
its data, leaves the rest of the machine idle. With `processes` N > 1 the stage's
process (the first) starts N - 1 copies of its own command, each with
RMSWEB_LOCAL_PROCESS=r/N. Process r plays units r, r + N, ... (`EpisodeRunner.run`'s
`shard`) into the same output folder under its own writer id (`proc<r>`; the store
takes one writer per id), with its own browser. The first process waits for every copy
before it reads the folder for metrics; a copy that fails fails the stage.

The data are those of one process: every unit is seeded by (task, seed, attempt), not by
the order in which units are played. A rerun after a kill resumes, as one process does:
each process skips the units of its share already stored in the folder.

Only the local path uses helpers: across SkyPilot nodes each node plays its own share
(rmsweb.rollout.sharded) and `processes` is ignored.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rmsweb.errors import UserError

ENV = "RMSWEB_LOCAL_PROCESS"  # "r/N" in helper r of N
STOP_TIMEOUT_S = 30.0  # after SIGTERM, before SIGKILL, when the first process fails


def helper_share() -> tuple[int, int] | None:
    """(r, N) in helper process r of N (r >= 1); None in the first or only process."""
    value = os.environ.get(ENV)
    if not value:
        return None
    try:
        rank, count = (int(part) for part in value.split("/"))
    except ValueError:
        raise UserError(f"{ENV}={value!r}: expected r/N, e.g. 1/2") from None
    if not 1 <= rank < count:
        raise UserError(f"{ENV}={value!r}: r must be in 1..N-1 (process 0 starts the others)")
    return rank, count


def is_helper() -> bool:
    """Whether this process is a helper: it plays its share and leaves the rest (merges,
    floor rounds, metrics) to the first process."""
    return helper_share() is not None


def stage_command(argv: Sequence[str]) -> list[str]:
    """The command line of a copy of the stage `rmsweb <argv>` (this interpreter)."""
    return [sys.executable, "-m", "rmsweb", *argv]


@contextmanager
def helper_processes(count: int, command: Sequence[str]) -> Iterator[None]:
    """Start helpers 1..count-1 running `command`; on exit wait for all of them and raise
    a UserError naming any that failed. If the body raises, the helpers are stopped
    (SIGTERM, then SIGKILL) so no browser outlives the stage."""
    procs: list[subprocess.Popen] = []
    try:
        for rank in range(1, count):
            env = {**os.environ, ENV: f"{rank}/{count}"}
            # stdout and stderr are the stage's: its log interleaves every process's lines.
            procs.append(subprocess.Popen(list(command), env=env))
        yield
    except BaseException:
        _stop(procs)
        raise
    failed = [(rank, proc.wait()) for rank, proc in enumerate(procs, start=1)]
    failed = [(rank, code) for rank, code in failed if code != 0]
    if failed:
        which = ", ".join(f"process {rank} of {count} exited {code}" for rank, code in failed)
        raise UserError(
            f"{which}; its output is in the stage log above. The units it stored are kept: "
            "rerun the stage to play the rest."
        )


def _stop(procs: Sequence[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
