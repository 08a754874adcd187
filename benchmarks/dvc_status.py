"""How long a DVC command waits on YAML: `dvc status <the default report>` on this
repository's dvc.yaml, dvc.lock and params.yaml, with ruamel.yaml's C parser (what the
project installs) against the pure-Python parser (the same command with the C
extension hidden), and on a scratch copy of the project with 4x the stages.

    python benchmarks/dvc_status.py [--repeat 3] [--target report_miniwob-cpu]

Prints one line per case (best of --repeat wall seconds, the file sizes) and the
ratios. Targets (issue "What a user trips on", item 11): <= 3 s today, <= 6 s at 4x.
Needs no runs: `dvc status` only compares what it parses with the workspace.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from rmsweb.spec.safe_yaml import load_plain

ROOT = Path(__file__).resolve().parents[1]
DVC = str(Path(sys.executable).with_name("dvc"))
# Imported first by Python (PYTHONPATH): hides the C extension, so ruamel.yaml parses
# in pure Python as it does where ruamel.yaml.clib is missing.
HIDE_C = "import sys\nsys.modules['_ruamel_yaml'] = None\n"


def timed(cmd: list[str], cwd: Path, env: dict[str, str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        took = time.perf_counter() - start
        if proc.returncode not in (0, 1):  # status exits 0 (clean) or prints changes
            raise SystemExit(f"{' '.join(cmd)} failed in {cwd}:\n{proc.stderr[-2000:]}")
        best = min(best, took)
    return best


def lines(root: Path) -> int:
    return sum(
        len((root / f).read_text(encoding="utf-8").splitlines())
        for f in ("dvc.yaml", "dvc.lock", "params.yaml")
        if (root / f).is_file()
    )


def scaled_copy(dest: Path, factor: int) -> Path:
    """The project with each spec copied factor-1 more times under other names (another
    data seed, so no stage is shared), compiled, and dvc.lock's entries copied to the
    copies' stages: DVC parses factor x the stages, as after adding many sweeps."""
    shutil.copytree(ROOT / "experiments", dest / "experiments")
    (dest / "rmsweb").symlink_to(ROOT / "rmsweb")
    for spec in sorted((dest / "experiments").glob("*.yaml")):
        data = load_plain(spec.read_text())[0]  # YAML 1.2, as rmsweb reads specs
        for k in range(1, factor):
            copy = dict(data, name=f"x{k}-{data['name']}"[:64], seed=1000 + k)
            if "extends" in copy:
                copy["extends"] = f"x{k}-{copy['extends']}"
            copy.pop("sweep", None)
            copy.pop("report", None)  # compare lists name the originals
            (dest / "experiments" / f"x{k}-{spec.name}").write_text(yaml.safe_dump(copy))
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    rmsweb = str(Path(sys.executable).with_name("rmsweb"))
    subprocess.run([rmsweb, "compile", "--root", str(dest)], env=env, check=True,
                   capture_output=True)  # fmt: skip
    subprocess.run([DVC, "init", "--no-scm", "-q"], cwd=dest, env=env, check=True)
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())
    stages = dict(lock["stages"])
    for k in range(1, factor):
        for name, entry in lock["stages"].items():
            role, _, owner = name.partition("_")
            stages[f"{role}_x{k}-{owner}"] = entry
    (dest / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--target", default="report_miniwob-cpu")
    ap.add_argument("--factor", type=int, default=4)
    args = ap.parse_args()
    cmd = [DVC, "status", args.target]
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        hide = Path(tmp) / "hide"
        hide.mkdir()
        (hide / "sitecustomize.py").write_text(HIDE_C)
        pure_env = {**env, "PYTHONPATH": f"{hide}:{env.get('PYTHONPATH', '')}"}
        c_now = timed(cmd, ROOT, env, args.repeat)
        pure_now = timed(cmd, ROOT, pure_env, args.repeat)
        big = scaled_copy(Path(tmp) / "big", args.factor)
        c_big = timed(cmd, big, env, args.repeat)
        print(f"dvc status {args.target}, best of {args.repeat} (wall s):")
        print(f"  this project ({lines(ROOT):,} lines of YAML), C parser:      {c_now:6.2f}")
        print(f"  this project, pure-Python parser:                      {pure_now:6.2f}")
        print(f"  {args.factor}x the stages ({lines(big):,} lines), C parser:        {c_big:6.2f}")
        print(f"ratio pure / C: {pure_now / c_now:.2f}; {args.factor}x / 1x: {c_big / c_now:.2f}")
        print(f"targets: <= 3 s now ({'met' if c_now <= 3 else 'MISSED'}), "
              f"<= 6 s at {args.factor}x ({'met' if c_big <= 6 else 'MISSED'})")  # fmt: skip


if __name__ == "__main__":
    main()
