"""A writer killed with SIGKILL mid-shard: nothing partial is visible, readers work, a rerun
stores every episode exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from rmsweb.store.views import connect

N = 40  # episodes the child writes; 3 per shard -> 14 shards, room to be killed in between

CHILD = r"""
import os, sys, time
from pathlib import Path
from rmsweb.store.synthetic import make_episode
from rmsweb.store.writer import ShardWriter

run, n, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ready = run.parent / "READY"

def hang():
    ready.touch()
    time.sleep(3600)

if mode == "hang-before-commit":
    # Companions renamed into place, the episodes file (the commit) not yet.
    real_replace = os.replace
    def replace(src, dst):
        if Path(dst).parent.name == "episodes" and Path(dst).name != "part-00000.parquet":
            hang()
        real_replace(src, dst)
    os.replace = replace
elif mode == "hang-mid-write":
    # A temp file half written, as when the kill lands inside pq.write_table.
    import pyarrow.parquet as pq
    real_write = pq.write_table
    def write_table(table, where, **kw):
        real_write(table, where, **kw)
        if Path(where).parent.name == "steps" and ".part-00001" in Path(where).name:
            size = os.path.getsize(where)
            with open(where, "r+b") as f:
                f.truncate(size // 2)
            hang()
    pq.write_table = write_table

sink = ShardWriter(run, max_episodes=3, max_seconds=3600)
done = sink.completed_keys()
for i in range(n):
    rec = make_episode(run="collect/x", task=f"t{i % 3}", seed=i, policy="p",
                       success=i % 2 == 0, n_steps=1 + i % 4)
    if rec.episode.episode_id in done:
        continue
    sink.write(rec)
    if mode == "slow":
        time.sleep(0.05)
sink.close()
print("DONE", len(done))
"""


def start(run: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(run), str(N), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_when_ready(proc: subprocess.Popen, ready: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "child never reached the kill point"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ready.unlink()


def expected_steps(i: int) -> int:
    return 1 + i % 4


def check_consistent(run: Path) -> int:
    """Readers work on what a kill left, and see only whole episodes. Returns the episode count."""
    con = connect({"collect/x": run})
    per_episode = con.execute(
        """select e.episode_id, e.n_steps, count(s.step) as stored
           from episodes e left join steps s using (run, episode_id)
           group by all"""
    ).fetchall()
    for eid, n_steps, stored in per_episode:
        assert n_steps == stored, f"{eid}: {stored} of {n_steps} steps visible"
    orphans = con.execute(
        "select count(*) from steps s anti join episodes e using (run, episode_id)"
    ).fetchone()[0]
    assert orphans == 0, "steps of an uncommitted shard are visible"
    missing_shots = con.execute(
        "select count(*) from steps s anti join screenshots x on s.screenshot = x.sha256 "
        "where s.screenshot is not null"
    ).fetchone()[0]
    assert missing_shots == 0
    dupes = con.execute("select count(*) - count(distinct episode_id) from episodes").fetchone()[0]
    assert dupes == 0
    return len(per_episode)


def finish_and_check(run: Path) -> None:
    proc = start(run, "normal")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert check_consistent(run) == N
    con = connect({"collect/x": run})
    assert con.execute("select count(*) from steps").fetchone()[0] == sum(
        expected_steps(i) for i in range(N)
    )
    leftovers = [p for p in run.rglob(".*") if p.is_file()]
    assert leftovers == [], "the rerun cleans temp files of the killed writer"


def test_kill_between_companions_and_commit(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = start(run, "hang-before-commit")
    kill_when_ready(proc, tmp_path / "READY")
    # The kill landed mid-shard: shard 1's steps are renamed, its episodes file is a temp.
    assert (run / "steps" / "part-00001.parquet").exists()
    assert not (run / "episodes" / "part-00001.parquet").exists()
    assert list((run / "episodes").glob(".part-00001.parquet.tmp-*"))
    assert check_consistent(run) == 3  # shard 0 only
    finish_and_check(run)


def test_kill_inside_a_parquet_write(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = start(run, "hang-mid-write")
    kill_when_ready(proc, tmp_path / "READY")
    (temp,) = (run / "steps").glob(".part-00001.parquet.tmp-*")
    assert temp.stat().st_size > 0
    assert check_consistent(run) == 3
    finish_and_check(run)


def test_random_kills_then_resume(tmp_path: Path) -> None:
    run = tmp_path / "run"
    rng = random.Random(7)
    counts: list[int] = []
    for _ in range(4):
        proc = start(run, "slow")
        time.sleep(rng.uniform(0.5, 1.2))  # import ~0.4 s, then 50 ms per episode: 2+ s
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        counts.append(check_consistent(run))
    assert counts[0] < N, f"the first kill came too late to interrupt anything: {counts}"
    finish_and_check(run)


def test_readers_see_whole_episodes_while_a_writer_runs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = start(run, "slow")
    seen = []
    try:
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            seen.append(check_consistent(run))  # views built and queried mid-write
    finally:
        proc.kill()
        proc.wait()
    assert len(set(seen)) > 2, f"the reads did not overlap the writes: {seen}"
    assert seen == sorted(seen)  # committed episodes only ever grow


def test_companions_are_matched_against_the_readers_own_listing(tmp_path: Path) -> None:
    from rmsweb.store.layout import committed_parts
    from rmsweb.store.synthetic import make_episode
    from rmsweb.store.writer import ShardWriter

    with ShardWriter(tmp_path, max_episodes=1) as sink:
        sink.write(make_episode(run="r/x", task="t", seed=0, policy="p", success=True, n_steps=1))
        listed = {p.name for p in (tmp_path / "episodes").iterdir()}
        # A shard committed after the reader listed the episodes ...
        sink.write(make_episode(run="r/x", task="t", seed=1, policy="p", success=True, n_steps=1))
    # ... is invisible in all its tables to that reader, its episodes included.
    for table in ("episodes", "steps"):
        seen = [p.name for p in committed_parts(tmp_path, table, listed)]
        assert seen == ["part-00000.parquet"], table
        assert len(committed_parts(tmp_path, table)) == 2
