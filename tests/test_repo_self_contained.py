"""The repository holds everything its tests and files refer to.

A user's clone has nothing beside it: no tracked file may point into a folder next to
the checkout (a sibling "shared" folder), and the tests read their data from the
repository (the judge tests' Online-Mind2Web example is vendored under tests/judge/data/
with its licence), so none of them skips for a missing file.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ("../" + "shared", "shared/" + "benchmarks")  # split: this file is tracked too


def tracked() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_refers_outside_the_repository() -> None:
    offenders = []
    for path in tracked():
        if not path.is_file():  # deleted in the working tree, not yet committed
            continue
        data = path.read_bytes()
        for s in OUTSIDE:
            if s.encode() in data:
                line = data[: data.index(s.encode())].count(b"\n") + 1
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {s}")
    assert not offenders, "files that point outside the repository:\n" + "\n".join(offenders)


def test_the_judge_examples_are_in_the_repository() -> None:
    data = ROOT / "tests" / "judge" / "data"
    for folder in ("om2w_example", "om2w_full_size"):
        assert (data / folder / "LICENSE.fara-MIT").is_file(), folder
        assert (data / folder / "README.md").is_file(), folder
    shots = sorted((data / "om2w_example").glob("*/trajectory/*_full_screenshot.png"))
    assert len(shots) == 5
    assert (data / "om2w_full_size" / "4_full_screenshot.png").stat().st_size > 100_000
