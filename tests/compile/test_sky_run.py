"""The generated sky `run` script, executed with fake dvc / vllm / curl on 127.0.0.1.

What it must do on a node: each stage pulled then pushed, in pipeline order;
`vllm serve` up (and answering) before the stages that call the teacher/judge
and down before the others; every server stopped when the script ends, even
after a failure.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rmsweb.compile import plan_project
from rmsweb.compile.skyfile import render_sky_yaml, stage_lines
from rmsweb.spec import load_experiment

FAKE_VLLM = """\
import http.server, os, signal, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
log = open(os.environ["FAKE_LOG"], "a", buffering=1)
log.write(f"vllm start {port} {args[1]}\\n")
if os.environ.get("FAKE_VLLM_FAIL"):
    print("CUDA out of memory", file=sys.stderr)
    sys.exit(1)
def stop(*_):
    log.write(f"vllm stop {port}\\n")
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""

FAKE_DVC = """\
#!/bin/sh
echo "dvc $*" >> "$FAKE_LOG"
case "$*" in *"$FAKE_DVC_FAIL_ON"*) [ -n "$FAKE_DVC_FAIL_ON" ] && exit 3;; esac
exit 0
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def node(tmp_path: Path) -> dict[str, str]:
    """A fake node: HOME with the venv activate script, fake tools first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vllm").write_text(f"#!{sys.executable}\n{FAKE_VLLM}")
    (bin_dir / "dvc").write_text(FAKE_DVC)
    # The readiness loop polls every 5 s; the fake server answers at once.
    (bin_dir / "sleep").write_text("#!/bin/sh\nexec /bin/sleep 0.05\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    venv = tmp_path / "home" / "rmsweb-venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "activate").write_text("")
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "FAKE_LOG": str(tmp_path / "calls.log"),
        "SKYPILOT_NUM_GPUS_PER_NODE": "8",
    }


# paper-8b judges with hosted o4-mini; these tests want its judge served on the node too
# (the teacher's model on the teacher's server), so the server runs around mine and eval.
# eval.suites null: the policies are evaluated on the training suite, by its served judge.
SERVED_JUDGE = [
    "eval.suites=null",
    "suite.judge.model=Qwen/Qwen3-VL-32B-Instruct",
    "suite.judge.serve={tensor_parallel_size: 8, gpu_memory_utilization: 0.4, "
    "max_model_len: 32768, extra_args: [--limit-mm-per-prompt, '{\"image\": 16}']}",
]


def _paper_8b_run(repo_root: Path, port: int) -> str:
    url = f"http://127.0.0.1:{port}/v1"
    spec = load_experiment(
        repo_root / "experiments" / "paper-8b.yaml",
        [*SERVED_JUDGE, f"suite.judge.base_url={url}", f"collect.teacher.base_url={url}"],
    )
    text = render_sky_yaml(spec, plan_project([spec]), "experiments/paper-8b.yaml")
    return yaml.safe_load(text)["run"]


def _execute(run: str, env: dict[str, str], tmp_path: Path, **extra: str):
    script = tmp_path / "run.sh"
    script.write_text(run)
    return subprocess.run(
        ["bash", str(script)],
        env={**env, **extra},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_run_script_serves_around_the_stages_that_call_the_server(
    repo_root: Path, node: dict[str, str], tmp_path: Path
) -> None:
    port = _free_port()
    proc = _execute(_paper_8b_run(repo_root, port), node, tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = Path(node["FAKE_LOG"]).read_text().splitlines()
    model = "Qwen/Qwen3-VL-32B-Instruct"

    def stage(name: str) -> list[str]:
        return [f"dvc repro --pull --single-item {name}", f"dvc push --run-cache {name}"]

    assert calls == [
        *stage("preflight_paper-8b"),  # first, with the GPUs to itself
        f"vllm start {port} {model}",
        *stage("collect_paper-8b"),
        f"vllm stop {port}",
        *stage("sft-s0_paper-8b"),
        f"vllm start {port} {model}",
        *stage("mine-s0_paper-8b"),
        f"vllm stop {port}",
        *stage("rl-s0_paper-8b"),
        f"vllm start {port} {model}",
        *stage("eval-rl-s0_paper-8b"),
        *stage("eval-sft-s0_paper-8b"),
        f"vllm stop {port}",
        *stage("report_paper-8b"),
    ]
    assert _port_closed(port)


def test_a_failed_stage_still_stops_the_server(
    repo_root: Path, node: dict[str, str], tmp_path: Path
) -> None:
    port = _free_port()
    proc = _execute(
        _paper_8b_run(repo_root, port),
        node,
        tmp_path,
        FAKE_DVC_FAIL_ON="repro --pull --single-item collect",
    )
    assert proc.returncode == 3
    calls = Path(node["FAKE_LOG"]).read_text().splitlines()
    assert calls[-1] == f"vllm stop {port}"  # the exit trap
    # The failed stage is not pushed (the preflight before it was).
    assert [c for c in calls if "push" in c] == ["dvc push --run-cache preflight_paper-8b"]
    assert _port_closed(port)


def test_a_server_that_dies_at_start_fails_the_run_with_its_log(
    repo_root: Path, node: dict[str, str], tmp_path: Path
) -> None:
    proc = _execute(_paper_8b_run(repo_root, _free_port()), node, tmp_path, FAKE_VLLM_FAIL="1")
    assert proc.returncode != 0
    assert "exited; its log ends" in proc.stderr and "CUDA out of memory" in proc.stderr
    calls = Path(node["FAKE_LOG"]).read_text().splitlines()
    # Only the preflight ran (it needs no server); nothing after the server's start.
    assert [c for c in calls if c.startswith("dvc")] == [
        "dvc repro --pull --single-item preflight_paper-8b",
        "dvc push --run-cache preflight_paper-8b",
    ]


def test_servers_follow_the_stages_that_call_them(repo_root: Path) -> None:
    """An eval of a served openai policy gets its own server beside the judge."""
    spec = load_experiment(
        repo_root / "experiments" / "paper-8b.yaml",
        [
            *SERVED_JUDGE,
            "suite.judge.base_url=http://127.0.0.1:8001/v1",
            "eval.policies=[{kind: checkpoint, name: sft, source: sft}, {kind: openai, "
            "name: teacher, model: Qwen/Qwen3-VL-32B-Instruct, base_url: 'http://127.0.0.1:8002/v1', "
            "serve: {tensor_parallel_size: 4}}]",
        ],
    )
    stages = plan_project([spec])
    lines = [ln.split(" ")[:2] for ln in stage_lines(stages, {spec.name: spec}, spec)]
    evals = [i for i, (verb, name) in enumerate(lines) if name.startswith("eval-")]
    assert [lines[i][1] for i in evals] == ["eval-sft-s0_paper-8b", "eval-teacher_paper-8b"]
    between = lines[evals[0] + 1 : evals[1]]
    assert between == [["serve", "8002"]]  # the judge (8001) keeps running across both evals
    assert lines[-3:] == [["unserve", "8001"], ["unserve", "8002"], ["stage", "report_paper-8b"]]
