"""ShardWriter / TableWriter behaviour: buffering, exactly-once, dedup, recovery, naming."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmsweb.store import layout
from rmsweb.store.reader import read_column, read_records, read_rows
from rmsweb.store.rows import MinedStateRow, ReflectionRow
from rmsweb.store.synthetic import make_episode
from rmsweb.store.writer import ShardWriter, TableWriter


def ep(i: int, *, n_steps: int = 2, shots: bool = True, attempt: int = 0):
    return make_episode(
        run="collect/x",
        task=f"task{i % 3}",
        seed=i,
        policy="p",
        attempt=attempt,
        success=i % 2 == 0,
        n_steps=n_steps,
        screenshots=shots,
    )


def names(run: Path, table: str) -> list[str]:
    return [p.name for p in layout.part_files(run, table)]


def test_buffers_whole_episodes_until_max_episodes_then_on_close(tmp_path: Path) -> None:
    sink = ShardWriter(tmp_path, max_episodes=3, max_seconds=3600)
    sink.write(ep(0))
    sink.write(ep(1))
    assert names(tmp_path, "episodes") == []  # still buffered
    assert sink.completed_keys() == {ep(0).episode.episode_id, ep(1).episode.episode_id}
    sink.write(ep(2))
    assert names(tmp_path, "episodes") == ["part-00000.parquet"]
    sink.write(ep(3))
    sink.close()
    assert names(tmp_path, "episodes") == ["part-00000.parquet", "part-00001.parquet"]
    assert names(tmp_path, "steps") == names(tmp_path, "episodes")  # one shard = same name
    # Empty companions are not written: no reflections at all, and shard 1's screenshots
    # were all stored by shard 0 already (same task images, deduplicated).
    assert names(tmp_path, "screenshots") == ["part-00000.parquet"]
    assert names(tmp_path, "reflections") == []
    assert len(read_rows(tmp_path, "steps")) == 8


def test_flushes_on_age_and_on_size(tmp_path: Path) -> None:
    aged = ShardWriter(tmp_path / "a", max_episodes=100, max_seconds=0.05)
    aged.write(ep(0))
    time.sleep(0.06)
    aged.write(ep(1))  # the oldest buffered episode is older than max_seconds
    assert len(names(tmp_path / "a", "episodes")) == 1
    big = ShardWriter(tmp_path / "b", max_episodes=100, max_bytes=1)
    big.write(ep(0))
    assert len(names(tmp_path / "b", "episodes")) == 1


def test_a_unit_of_work_is_never_split_across_shards(tmp_path: Path) -> None:
    # A rerun skips a (task, seed) whose attempt 0 is stored: a flush between attempt 0
    # and attempt 1 followed by a kill would lose attempt 1 for good.
    sink = ShardWriter(tmp_path, max_episodes=2, max_seconds=3600)
    sink.write(ep(0))
    sink.write_unit([ep(1, attempt=0), ep(1, attempt=1), ep(1, attempt=2)])
    assert names(tmp_path, "episodes") == ["part-00000.parquet"]  # flushed after the unit
    sink.write_unit([ep(2)])
    sink.close()
    first = pq.read_table(tmp_path / "episodes" / "part-00000.parquet")
    assert first.column("attempt").to_pylist() == [0, 0, 1, 2]  # ep(0), then the whole unit
    assert len(read_column(tmp_path, "episodes", "episode_id")) == 5


def test_an_episode_is_stored_once_even_if_written_again(tmp_path: Path) -> None:
    with ShardWriter(tmp_path, max_episodes=2) as sink:
        sink.write(ep(0))
        sink.write(ep(0))  # buffered duplicate
        sink.write(ep(1))
        sink.write(ep(0))  # committed duplicate
    with ShardWriter(tmp_path) as again:  # a rerun that did not check completed_keys
        assert ep(0).episode.episode_id in again.completed_keys()
        again.write(ep(0))
        again.write(ep(2))
    ids = read_column(tmp_path, "episodes", "episode_id")
    assert sorted(ids) == sorted({ep(i).episode.episode_id for i in range(3)})
    assert len(read_rows(tmp_path, "steps")) == 6


def test_screenshots_are_deduplicated_by_sha_across_shards_and_restarts(tmp_path: Path) -> None:
    # make_episode draws 3 distinct images per task; 3 tasks -> at most 9 distinct shas.
    with ShardWriter(tmp_path, max_episodes=2) as sink:
        for i in range(6):
            sink.write(ep(i, n_steps=5))
    with ShardWriter(tmp_path) as sink:
        for i in range(6, 12):
            sink.write(ep(i, n_steps=5))
    shas = read_column(tmp_path, "screenshots", "sha256")
    assert len(shas) == len(set(shas)) == 9
    referenced = {s.screenshot for s in read_rows(tmp_path, "steps")}
    assert referenced == set(shas)


def test_reflections_travel_with_their_shard(tmp_path: Path) -> None:
    rec = ep(0)
    rec.reflections.append(ReflectionRow(rec.episode.episode_id, 0, "fill first", "rule"))
    with ShardWriter(tmp_path) as sink:
        sink.write(rec)
        sink.flush()
        sink.write_reflection(ReflectionRow(rec.episode.episode_id, 0, "later thought", "rule"))
    texts = [r.text for r in read_rows(tmp_path, "reflections")]
    assert texts == ["fill first", "later thought"]
    (back,) = read_records(tmp_path)
    assert [r.text for r in back.reflections] == texts


def test_child_rows_of_another_episode_are_refused(tmp_path: Path) -> None:
    rec = ep(0)
    rec.steps[0].episode_id = "someone/else"
    with pytest.raises(ValueError, match="someone/else"):
        ShardWriter(tmp_path).write(rec)


def test_recovery_deletes_own_leftovers_only(tmp_path: Path) -> None:
    with ShardWriter(tmp_path) as sink:
        sink.write(ep(0))
    # What a writer killed mid-commit leaves: a renamed companion, a temp episodes file.
    (tmp_path / "steps" / "part-00001.parquet").write_bytes(b"orphan")
    (tmp_path / "episodes" / ".part-00001.parquet.tmp-999").write_bytes(b"half")
    # ... and a live writer with another id: its files are not ours to delete.
    (tmp_path / "steps" / "part-node1-00000.parquet").write_bytes(b"theirs")
    (tmp_path / "episodes" / ".part-node1-00000.parquet.tmp-998").write_bytes(b"theirs")
    # Readers already ignore the orphan (no episodes file of that name).
    assert len(read_rows(tmp_path, "steps")) == 2
    ShardWriter(tmp_path)
    assert not (tmp_path / "steps" / "part-00001.parquet").exists()
    assert not (tmp_path / "episodes" / ".part-00001.parquet.tmp-999").exists()
    assert (tmp_path / "steps" / "part-node1-00000.parquet").exists()
    assert (tmp_path / "episodes" / ".part-node1-00000.parquet.tmp-998").exists()


def test_writers_with_ids_share_a_run(tmp_path: Path) -> None:
    with (
        ShardWriter(tmp_path, writer_id="node0") as a,
        ShardWriter(tmp_path, writer_id="node1") as b,
    ):
        a.write(ep(0))
        b.write(ep(1))
    assert names(tmp_path, "episodes") == ["part-node0-00000.parquet", "part-node1-00000.parquet"]
    assert len(read_records(tmp_path)) == 2
    with pytest.raises(ValueError, match="writer_id"):
        ShardWriter(tmp_path, writer_id="no/slash")


def test_table_writer_appends_new_parts_and_refuses_episode_tables(tmp_path: Path) -> None:
    row = MinedStateRow("s0", "e", 0, "obs", None, [], ["click(3)"], None, None, 1.0)
    with TableWriter(tmp_path, "mined_states", max_rows=2) as w:
        for _ in range(5):
            w.write(row)
    assert names(tmp_path, "mined_states") == [f"part-0000{i}.parquet" for i in range(3)]
    with TableWriter(tmp_path, "mined_states") as w:  # a second run appends after them
        w.write(row)
    assert names(tmp_path, "mined_states")[-1] == "part-00003.parquet"
    assert len(read_rows(tmp_path, "mined_states")) == 6
    with pytest.raises(ValueError, match="ShardWriter"):
        TableWriter(tmp_path, "steps")
    with pytest.raises(ValueError, match="unknown table"):
        TableWriter(tmp_path, "nope")


def test_run_names_and_discovery(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    with ShardWriter(root / "eval" / "exp" / "sft") as sink:
        sink.write(ep(0))
    with ShardWriter(root / "eval" / "exp" / ".sft.tmp") as sink:  # a stage's temp output
        sink.write(ep(1))
    (root / "sft" / "exp").mkdir(parents=True)  # a checkpoint folder: no tables
    deep = root / "benchmarks" / "venv" / "lib" / "site" / "pkg"  # below max_depth: not walked
    with ShardWriter(deep) as sink:
        sink.write(ep(2))
    assert layout.find_runs(root) == {"eval/exp/sft": root / "eval" / "exp" / "sft"}
    assert "benchmarks/venv/lib/site/pkg" in layout.find_runs(root, max_depth=6)
    assert layout.run_name(root / "eval" / "exp" / "sft") == "eval/exp/sft"
    assert layout.run_name(Path("elsewhere/thing")) == "thing"
    assert layout.find_runs(root / "eval" / "exp" / "sft") == {
        "eval/exp/sft": root / "eval" / "exp" / "sft"
    }
