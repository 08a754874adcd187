"""`collect.processes`: the collect stage's units over several local browsers.

The helper machinery alone (rmsweb.rollout.processes: starting copies, waiting, a failed
copy failing the stage, copies stopped when the first process fails), then the real stage
through the CLI: two processes must store exactly the episodes, reflections and metrics
one process stores, and each process its own share under its own writer id.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "faults"))  # the two-node tests' helpers
from multinode import ROOT, env, tables, units

from rmsweb.errors import UserError
from rmsweb.rollout.processes import ENV, helper_processes, helper_share
from rmsweb.store import layout


def test_helper_share_reads_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert helper_share() is None
    monkeypatch.setenv(ENV, "2/3")
    assert helper_share() == (2, 3)
    for bad in ("0/2", "2/2", "x/2", "1"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(UserError, match=ENV):
            helper_share()


def _child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_helpers_get_their_share_and_are_waited_for(tmp_path: Path) -> None:
    # Each copy sleeps, then writes its share: the context may only exit after both wrote.
    code = (
        "import os, pathlib, time; time.sleep(0.5); "
        f"r = os.environ[{ENV!r}]; pathlib.Path({str(tmp_path)!r}, r.replace('/', '-')).touch()"
    )
    with helper_processes(3, _child(code)):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1-3", "2-3"]


def test_a_failed_helper_fails_the_stage() -> None:
    code = f"import os, sys; sys.exit(3 if os.environ[{ENV!r}] == '2/3' else 0)"
    with (
        pytest.raises(UserError, match="process 2 of 3 exited 3"),
        helper_processes(3, _child(code)),
    ):
        pass


def test_helpers_are_stopped_when_the_first_process_fails(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    # Written under a temp name and renamed: the file appears with the pid in it.
    code = (
        f"import os, time; p = {str(pid_file)!r}; open(p + '.tmp', 'w').write(str(os.getpid())); "
        "os.rename(p + '.tmp', p); time.sleep(600)"
    )
    t0 = time.monotonic()
    with (
        pytest.raises(RuntimeError, match="first process failed"),
        helper_processes(2, _child(code)),
    ):
        while not pid_file.exists():
            time.sleep(0.02)
        raise RuntimeError("first process failed")
    assert time.monotonic() - t0 < 30  # stopped, not waited for (it sleeps 600 s)
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


# --------------------------------------------------------------------------- the stage

EXP = "procs"
# experiments/smoke.yaml with 2 tasks x 4 train seeds: 8 units, 4 per process.
OVERRIDES = [f"name={EXP}", "suite.train.count=4", "suite.test.count=1"]
OUT = "runs/collect/" + EXP
CLOCK_METRICS = {"wall_s", "teacher_seconds_per_kept"}


def _collect(folder: Path, *overrides: str) -> dict:
    from rmsweb.compile.dvcfile import render_params_yaml
    from rmsweb.spec import load_experiment

    folder.mkdir(parents=True)
    spec = load_experiment(ROOT / "experiments" / "smoke.yaml", [*OVERRIDES, *overrides])
    (folder / "params.yaml").write_text(render_params_yaml([spec]))
    cmd = [sys.executable, "-m", "rmsweb", "collect", "--exp", EXP, "--out", OUT]
    done = subprocess.run(
        [*cmd, "--metrics", "collect.json"], cwd=folder, env=env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((folder / "collect.json").read_text())
    return {k: v for k, v in metrics.items() if k not in CLOCK_METRICS}


@pytest.mark.browser
def test_two_processes_collect_what_one_does(tmp_path: Path) -> None:
    t0 = time.monotonic()
    one = _collect(tmp_path / "one")
    t1 = time.monotonic()
    two = _collect(tmp_path / "two", "collect.processes=2")
    t2 = time.monotonic()

    out1, out2 = tmp_path / "one" / OUT, tmp_path / "two" / OUT
    assert units(out2) == units(out1) and len(units(out1)) == 8
    assert tables(out2) == tables(out1)  # every table, row for row, apart from the clock
    assert two == one  # the metrics (yield, attempts, teacher calls ...) too
    # Each process wrote its own shards into the one folder: the first without a writer
    # id, the helper as proc1.
    writers = {layout.parse_part(p.name)[0] for p in layout.part_files(out2, "episodes")}
    assert writers == {None, "proc1"}
    print(f"\ncollect, 8 units: one process {t1 - t0:.0f} s, two {t2 - t1:.0f} s")
