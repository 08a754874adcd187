"""A full disk while shards are written: a clear DiskFullError naming the file, nothing partial
committed, and a rerun after freeing space stores every episode exactly once.

Two ways to fill the disk: a real one (a 2 MiB tmpfs mounted in a private user and mount
namespace, `unshare --user --map-root-user --mount`; skipped where the kernel forbids
that), and ENOSPC injected into the Parquet writer (runs everywhere).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmsweb.errors import DiskFullError
from rmsweb.store.rows import EpisodeRecord, ScreenshotRow
from rmsweb.store.synthetic import make_episode
from rmsweb.store.views import connect
from rmsweb.store.writer import ShardWriter

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[2]
UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]  # root in a private namespace
N = 30  # episodes; 20 KB of incompressible screenshot each, 4 per shard


def episode(i: int) -> EpisodeRecord:
    """A synthetic episode with one unique, incompressible 20 KB screenshot (fills disks)."""
    rec = make_episode(
        run="collect/x", task=f"t{i % 3}", seed=i, policy="p", success=i % 2 == 0, n_steps=2
    )
    png = random.Random(i).randbytes(20_000)
    shot = ScreenshotRow(hashlib.sha256(png).hexdigest(), png, 1, 1)
    for step in rec.steps:
        step.screenshot = shot.sha256
    rec.screenshots = [shot]
    return rec


def write_all(run: Path) -> None:
    with ShardWriter(run, max_episodes=4) as sink:
        done = sink.completed_keys()
        for i in range(N):
            rec = episode(i)
            if rec.episode.episode_id not in done:
                sink.write(rec)


def stored(run: Path) -> tuple[int, int]:
    """(episodes, distinct episode ids) that readers see; asserts they are whole."""
    con = connect({"collect/x": run})
    partial = con.execute(
        """select count(*) from (select e.episode_id, e.n_steps, count(s.step) as n
           from episodes e left join steps s using (run, episode_id) group by all)
           where n <> n_steps"""
    ).fetchone()[0]
    assert partial == 0, "an episode is visible without all its steps"
    return con.execute("select count(*), count(distinct episode_id) from episodes").fetchone()


def leftovers(run: Path) -> list[str]:
    """Temp files, and shard files whose episodes file (the commit) is missing."""
    committed = {p.name for p in (run / "episodes").glob("part-*")}
    out = [str(p.relative_to(run)) for p in run.rglob(".*") if p.is_file()]
    out += [
        str(p.relative_to(run))
        for p in run.glob("*/part-*")
        if p.parent.name != "episodes" and p.name not in committed
    ]
    return out


def test_injected_enospc_commits_nothing_partial_and_the_rerun_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "runs" / "collect" / "x"
    real = pq.write_table
    full = {"on": False}

    def write_table(table, where, **kw):  # type: ignore[no-untyped-def]
        # The disk fills up during the second shard's episodes file: its steps and
        # screenshots files are already renamed into place by then.
        if Path(where).parent.name == "episodes" and "part-00001" in Path(where).name:
            full["on"] = True
        if full["on"]:
            real(table, where, **kw)
            Path(where).write_bytes(Path(where).read_bytes()[:100])  # what fit
            raise OSError(errno.ENOSPC, "Error writing bytes to file: No space left on device")
        return real(table, where, **kw)

    monkeypatch.setattr(pq, "write_table", write_table)
    with pytest.raises(DiskFullError) as info:
        write_all(run)
    message = str(info.value)
    assert message.startswith(f"disk full while writing {run / 'episodes' / 'part-00001.parquet'}")
    assert "4 finished episodes were not stored" in message
    assert "the 4 episodes already stored are kept" in message
    assert stored(run) == (4, 4)  # the first shard only
    assert leftovers(run) == []  # the failed shard's companions and temps are gone

    full["on"] = False  # space freed
    monkeypatch.setattr(pq, "write_table", real)
    write_all(run)
    assert stored(run) == (N, N)
    assert leftovers(run) == []


CHILD = r"""
import json, os, shutil, subprocess, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from test_disk_full import N, write_all, stored, leftovers
from rmsweb.errors import DiskFullError

mnt, out = Path(sys.argv[1]), Path(sys.argv[2])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
(mnt / "filler").write_bytes(b"x" * 1_500_000)  # room for ~4 shards of 4 episodes
run = mnt / "runs" / "collect" / "x"
report = {}
try:
    write_all(run)
except DiskFullError as exc:
    report["error"] = str(exc)
    report["stored_at_error"] = list(stored(run))
    report["leftovers_at_error"] = leftovers(run)
(mnt / "filler").unlink()  # free space, then rerun
write_all(run)
report["stored_after_rerun"] = list(stored(run))
report["leftovers_after_rerun"] = leftovers(run)
shutil.copytree(run, out)
print(json.dumps(report))
"""


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run([*UNSHARE, "true"], capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="no user+mount namespaces here for a tmpfs")
def test_real_full_tmpfs(tmp_path: Path) -> None:
    mnt, out = tmp_path / "mnt", tmp_path / "copy"
    mnt.mkdir()
    proc = subprocess.run(
        [*UNSHARE, sys.executable, "-c", CHILD, str(mnt), str(out), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["error"].startswith("disk full while writing ")
    assert "finished episodes were not stored; nothing partial was committed" in report["error"]
    at_error = report["stored_at_error"]
    assert 0 < at_error[0] < N and at_error[0] == at_error[1]  # whole shards only
    assert report["leftovers_at_error"] == []
    assert report["stored_after_rerun"] == [N, N]
    assert report["leftovers_after_rerun"] == []
    assert stored(out) == (N, N)  # the copy reads back outside the namespace
