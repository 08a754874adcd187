"""benchmarks/val_reach.py: runs `rmsweb regime` with an empty mine run, keeps val figures."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A stand-in `rmsweb`: checks the mine input is an empty folder and writes regime metrics.
FAKE = """#!{python}
import json, sys
from pathlib import Path
args = sys.argv[1:]
assert args[0] == "regime", args
ins = dict(a.split("=", 1) for a in args[args.index("--in") + 1 :: 2] if "=" in a)
mine = Path(ins["mine"])
assert mine.is_dir() and not any(mine.iterdir()), "mine must be an empty run"
params = Path(args[args.index("--params") + 1])
rl = json.loads(params.read_text())["e"]["rl"] if params.suffix == ".json" else {{}}
Path(args[args.index("--metrics") + 1]).write_text(json.dumps({{
    "group_size": rl.get("group_size", 8), "temperature": rl.get("temperature", 0.5),
    "similarity_tau": 1.0, "val_seeds_per_task": 25,
    "pooled": {{"headroom": 0.5, "reach_val": 0.25, "reach_val_states": 40,
                "reach_mined": 0.0, "sft_success_val": 0.5, "expert_steps": 3.1}},
    "per_task": {{"t": {{"reach_val": 0.25, "reach_mined_states": 0}}}},
    "wall_s": 1.0,
}}))
run = Path(args[args.index("--out") + 1])
run.mkdir(parents=True, exist_ok=True)
(run / "regime_states.parquet").write_text("states")
"""


def _fake_rmsweb(tmp_path: Path, script: str) -> dict[str, str]:
    """An environment whose PATH finds `script` as `rmsweb` first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "rmsweb"
    fake.write_text(script)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_val_reach_keeps_the_val_figures(tmp_path: Path) -> None:
    env = _fake_rmsweb(tmp_path, FAKE.format(python=sys.executable))
    out = tmp_path / "reach.json"
    cmd = [sys.executable, "benchmarks/val_reach.py", "--exp", "e", "--sft", "s", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["pooled"] == {
        "headroom": 0.5,
        "reach_val": 0.25,
        "reach_val_states": 40,
        "sft_success_val": 0.5,
        "expert_steps": 3.1,
    }  # the mined side (empty here) is left out
    assert result["per_task"] == {"t": {"reach_val": 0.25}}
    assert result["settings"]["group_size"] == 8 and result["experiment"] == "e"
    assert "benchmarks/val_reach.py --exp e" in result["command"]


def test_val_reach_fails_when_the_stage_fails(tmp_path: Path) -> None:
    env = _fake_rmsweb(tmp_path, f"#!{sys.executable}\nimport sys\nsys.exit(3)\n")
    out = tmp_path / "reach.json"
    cmd = [sys.executable, "benchmarks/val_reach.py", "--exp", "e", "--sft", "s", "--out", str(out)]
    assert subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True).returncode == 1
    assert not out.exists()


def test_val_reach_overrides_the_rl_temperature(tmp_path: Path) -> None:
    # The stage reads a params copy whose experiment has the asked rl settings; the
    # results file names the overrides and the settings the stage used.
    env = _fake_rmsweb(tmp_path, FAKE.format(python=sys.executable))
    params = tmp_path / "params.yaml"
    params.write_text("e:\n  rl:\n    temperature: 0.5\n    group_size: 8\n")
    out = tmp_path / "reach.json"
    cmd = [
        sys.executable, "benchmarks/val_reach.py", "--exp", "e", "--sft", "s",
        "--out", str(out), "--params", str(params), "--temperature", "1.0",
        "--group-size", "16",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["overrides"] == {"rl.temperature": 1.0, "rl.group_size": 16}
    assert result["settings"]["temperature"] == 1.0
    assert result["settings"]["group_size"] == 16


def test_val_reach_keeps_the_probed_states_when_asked(tmp_path: Path) -> None:
    env = _fake_rmsweb(tmp_path, FAKE.format(python=sys.executable))
    out, states = tmp_path / "reach.json", tmp_path / "kept" / "states.parquet"
    cmd = [
        sys.executable, "benchmarks/val_reach.py", "--exp", "e", "--sft", "s",
        "--out", str(out), "--states", str(states),
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert states.read_text() == "states" and out.exists()
    # The committed results file does not name where this machine kept the states.
    assert str(states) not in out.read_text()
    assert "--states FILE" in json.loads(out.read_text())["command"]


def test_the_command_keeps_a_states_file_inside_the_repository() -> None:
    spec = importlib.util.spec_from_file_location("val_reach", ROOT / "benchmarks/val_reach.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    argv = ["benchmarks/val_reach.py", "--exp", "e", "--states", str(ROOT / "runs/x.parquet")]
    assert mod.shown_command(argv).endswith(f"--states {ROOT / 'runs/x.parquet'}")
    assert mod.shown_command([*argv[:3], "--states", "/elsewhere/x"]).endswith("--states FILE")
