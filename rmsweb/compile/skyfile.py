"""Render one SkyPilot task file per experiment: resources, secrets, mounts, one script.

What the task does on the node, and why:
1. setup: uv installs Python 3.11 (SkyPilot's default images ship 3.10, rmsweb needs
   >= 3.11), rmsweb with the `gpu` (vLLM) and `cloud` (DVC's s3/gs/azure) extras
   (pinned by constraints-gpu.txt on GPU nodes),
   Chromium, and the spec's DVC remote.
2. run: the experiment's stages one at a time, in pipeline order. Each is
   `dvc repro --pull --single-item` (restored from the remote's run cache when an
   earlier attempt or another machine already ran it) then `dvc push --run-cache`,
   so a managed-job recovery on a fresh disk resumes after the last finished stage.
   A stage in flight resumes from its own state in the checkpoint bucket (SFT/RL
   checkpoints under a key of the stage's run; see rmsweb.compile.identity).
3. An endpoint with `serve:` gets `vllm serve` started before the first stage that
   calls it and stopped before the first stage that does not (the GPUs go back to
   training), after a readiness wait; an exit trap stops whatever still runs.
4. With num_nodes > 1 the head (rank 0) runs the stages; the others run
   `rmsweb worker` and join the distributed ones (rmsweb.distributed).
Bucket names carry ${RMSWEB_BUCKET_PREFIX}, which SkyPilot fills in from `--env`
at launch, so two users never collide on a bucket name.
"""

from __future__ import annotations

import shlex
from typing import Any

import yaml

from rmsweb.spec import ExperimentSpec
from rmsweb.spec.serve import local_port
from rmsweb.stages import STAGES

from .dvcfile import DUMP_OPTIONS, SafeDumper
from .graph import Stage

# Names only: values are given at launch time (`--secret NAME`) and never written down.
# Only what the spec's stages read (required_secrets): the Hub token where a model comes
# from the Hub, and the key variable of each endpoint outside the node. No tracker.
HF_TOKEN = "HF_TOKEN"
WORKDIR = "~/sky_workdir"
BUCKET_MOUNT = "/rmsweb"  # the checkpoint bucket, on every node
BUCKET_PREFIX = "RMSWEB_BUCKET_PREFIX"
DEFAULT_BUCKET = "${RMSWEB_BUCKET_PREFIX}-rmsweb-ckpt"
PYTHON = "3.11"  # pyproject's requires-python floor
GPU_CONSTRAINTS = "constraints-gpu.txt"  # at the repo root, synced as the workdir

SETUP = """\
set -euo pipefail
# SkyPilot's default images ship Python 3.10 and rmsweb needs >= {python}: uv installs it.
command -v uv >/dev/null || curl -LsSf https://astral.sh/uv/install.sh | sh
export PATH="$HOME/.local/bin:$PATH"
uv venv --allow-existing --python {python} ~/rmsweb-venv
. ~/rmsweb-venv/bin/activate
uv pip install {constraints}-e '.[{extras}]'
python -m playwright install --with-deps chromium
dvc remote add --local --default --force cloud "{remote}"
"""

# Shell helpers of the run script. `stage` is the whole persistence story (see the
# module docstring); `serve`/`unserve` bracket the stages that call a local endpoint.
HELPERS = """\
# stage NAME: one DVC stage; --pull restores it if an earlier attempt finished it,
# the push saves its outputs and run record for the next attempt.
stage() {
  dvc repro --pull --single-item "$1"
  dvc push --run-cache "$1"
}
declare -A SERVERS=()
# serve PORT TIMEOUT_S MODEL ARGS...: start `vllm serve` on 127.0.0.1:PORT, wait until ready.
serve() {
  local port=$1 timeout=$2 waited=0
  shift 2
  vllm serve "$@" --host 127.0.0.1 --port "$port" >"$HOME/vllm-$port.log" 2>&1 &
  SERVERS[$port]=$!
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
    if ! kill -0 "${SERVERS[$port]}" 2>/dev/null; then
      echo "vllm serve on port $port exited; its log ends:" >&2
      tail -n 40 "$HOME/vllm-$port.log" >&2
      return 1
    fi
    if [ "$waited" -ge "$timeout" ]; then
      echo "vllm serve on port $port not ready after ${timeout}s; see ~/vllm-$port.log" >&2
      return 1
    fi
    sleep 5
    waited=$((waited + 5))
  done
}
# unserve PORT: stop that server and wait until its GPU memory is free.
unserve() {
  kill "${SERVERS[$1]}" 2>/dev/null || true
  wait "${SERVERS[$1]}" 2>/dev/null || true
  unset "SERVERS[$1]"
}
unserve_all() {
  for port in "${!SERVERS[@]}"; do unserve "$port"; done
}
trap unserve_all EXIT
"""

MULTI_NODE = """\
# Every node: torchrun's node arguments; distributed.py adds a master port per distributed stage.
MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)
export RMSWEB_TORCHRUN="--nnodes=$SKYPILOT_NUM_NODES --nproc_per_node=$SKYPILOT_NUM_GPUS_PER_NODE --node_rank=$SKYPILOT_NODE_RANK --master_addr=$MASTER_ADDR"
"""


class _LiteralDumper(SafeDumper):
    """Multi-line strings (setup, run) as `|` blocks, so the task file reads like a script."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_LiteralDumper.add_representer(str, _str)


def _endpoints(spec: ExperimentSpec) -> list[Any]:
    """Every OpenAI-compatible endpoint the spec's stages call."""
    found: list[Any] = []
    if spec.collect.teacher.kind == "openai":
        found.append(spec.collect.teacher)
    judge = getattr(spec.suite, "judge", None)
    if judge is not None:
        found.append(judge)
    if spec.mine.judge is not None:
        found.append(spec.mine.judge)
    found += [p for p in spec.eval.policies if p.kind == "openai"]
    return found


def _on_node(base_url: str) -> bool:
    try:
        local_port(base_url)
    except ValueError:
        return False
    return True


def required_secrets(spec: ExperimentSpec) -> list[str]:
    """The secrets a task needs at launch: HF_TOKEN where a model is downloaded from the
    Hub (a pretrained policy, or a `vllm serve` the task starts), and each endpoint's key
    variable where the endpoint is not on the node itself (a hosted API; a server on
    127.0.0.1 needs none). The CPU MiniWoB tasks need none."""
    needed: list[str] = []
    hub = spec.model.kind == "pretrained" or bool(spec.served_endpoints())
    if hub:
        needed.append(HF_TOKEN)
    for endpoint in _endpoints(spec):
        if not _on_node(endpoint.base_url) and endpoint.api_key_env not in needed:
            needed.append(endpoint.api_key_env)
    return needed


def _resources(spec: ExperimentSpec) -> dict[str, Any]:
    c = spec.compute
    res: dict[str, Any] = {}
    for key in ("cloud", "region", "accelerators", "cpus", "memory", "image_id"):
        value = getattr(c, key)
        if value is not None:
            res[key] = value
    res["disk_size"] = c.disk_size
    if c.max_restarts_on_errors:
        # Managed jobs only; preemptions are recovered regardless of this count.
        res["job_recovery"] = {"max_restarts_on_errors": c.max_restarts_on_errors}
    if c.use_spot:
        # Spot first; SkyPilot falls back to on-demand when no spot capacity is found.
        res["any_of"] = [{"use_spot": True}, {"use_spot": False}]
    return res


def pipeline_stages(report: Stage | list[Stage], stages: list[Stage]) -> list[Stage]:
    """The report (or several targets) and everything upstream, in pipeline order."""
    needed: set[str] = set()

    def visit(stage: Stage) -> None:
        if stage.identity not in needed:
            needed.add(stage.identity)
            for up in [*stage.upstream.values(), *stage.after]:
                visit(up)

    for target in report if isinstance(report, list) else [report]:
        visit(target)
    return [s for s in stages if s.identity in needed]


def stage_servers(stage: Stage, spec: ExperimentSpec) -> dict[int, list[str]]:
    """Port -> `vllm serve` arguments (model first) of the local endpoints `stage` calls."""
    return kind_servers(spec, stage.kind, stage.variant)


def kind_servers(spec: ExperimentSpec, kind: str, variant: str | None) -> dict[int, list[str]]:
    """Port -> `vllm serve` arguments (model first) of the local endpoints the `kind`
    stage of `spec` calls (eval: of policy `variant`).

    collect calls the teacher and (live suites) the judge; mine and eval roll out
    and judge episodes; an eval of an openai policy also calls that policy.
    The workers of a sharded stage start the same servers on their own nodes.
    """
    endpoints = dict(spec.served_endpoints())
    keys: list[str] = []
    if kind == "collect":
        keys = ["collect.teacher", "suite.judge"]
    elif kind == "mine":
        keys = ["suite.judge"]
    elif kind == "eval":
        keys = ["suite.judge"]
        keys += [
            f"eval.policies.{i}" for i, p in enumerate(spec.eval.policies) if p.name == variant
        ]
    servers: dict[int, list[str]] = {}
    for key in keys:
        endpoint = endpoints.get(key)
        if endpoint is None:
            continue
        s = endpoint.serve
        args = [
            endpoint.model,
            "--tensor-parallel-size",
            str(s.tensor_parallel_size),
            "--gpu-memory-utilization",
            str(s.gpu_memory_utilization),
        ]
        if s.max_model_len is not None:
            args += ["--max-model-len", str(s.max_model_len)]
        servers[local_port(endpoint.base_url)] = [*args, *s.extra_args]
    return servers


def served_by_stage(
    spec: ExperimentSpec, kind: str, variant: str | None
) -> list[tuple[int, int, list[str]]]:
    """(port, readiness timeout in s, `vllm serve` arguments) of what `kind_servers` names."""
    timeouts = _timeouts(spec)
    return [
        (port, timeouts[port], args) for port, args in kind_servers(spec, kind, variant).items()
    ]


def _timeouts(spec: ExperimentSpec) -> dict[int, int]:
    return {
        local_port(e.base_url): int(e.serve.ready_timeout_s) for _, e in spec.served_endpoints()
    }


def stage_lines(
    stages: list[Stage], specs: dict[str, ExperimentSpec], spec: ExperimentSpec
) -> list[str]:
    """`serve`/`unserve`/`stage` lines: each server runs exactly around the stages using it."""
    lines: list[str] = []
    running: dict[int, list[str]] = {}
    for stage in stages:
        stage_spec = specs.get(stage.experiment, spec)
        wanted = stage_servers(stage, stage_spec)
        timeouts = _timeouts(stage_spec)
        for port in sorted(running):
            if running[port] != wanted.get(port):
                lines.append(f"unserve {port}")
                del running[port]
        for port, args in sorted(wanted.items()):
            if port not in running:
                quoted = " ".join(shlex.quote(a) for a in args)
                lines.append(f"serve {port} {timeouts[port]} {quoted}")
                running[port] = args
        lines.append(f"stage {stage.name}")
    lines += [f"unserve {port}" for port in sorted(running)]
    return lines


def _remote(spec: ExperimentSpec, source: str) -> str:
    if spec.compute.dvc_remote:
        return spec.compute.dvc_remote  # bash fills in ${RMSWEB_BUCKET_PREFIX}
    return (
        "${RMSWEB_DVC_REMOTE:?no DVC remote: set compute.dvc_remote in "
        f"{source} or launch with --env RMSWEB_DVC_REMOTE=s3://...}}"
    )


def render_run(spec: ExperimentSpec, stages: list[Stage], specs: dict[str, ExperimentSpec]) -> str:
    c = spec.compute
    head = "\n".join(stage_lines(stages, specs, spec)) + "\n"
    script = "set -euo pipefail\n. ~/rmsweb-venv/bin/activate\n"
    if c.num_nodes == 1:
        if c.accelerators and ":" in c.accelerators and int(c.accelerators.split(":")[1]) > 1:
            script += 'export RMSWEB_TORCHRUN="--nproc_per_node=$SKYPILOT_NUM_GPUS_PER_NODE"\n'
        return script + HELPERS + head
    indented = "".join(f"  {line}\n" for line in (HELPERS + head).splitlines())
    return (
        script
        + MULTI_NODE
        + 'if [ "$SKYPILOT_NODE_RANK" = "0" ]; then\n'
        + indented
        + f"  rmsweb worker --exp {spec.name} --finish\n"
        + "else\n"
        + f"  rmsweb worker --exp {spec.name}\n"
        + "fi\n"
    )


def render_sky_yaml(
    spec: ExperimentSpec,
    stages: list[Stage],
    source: str,
    specs: dict[str, ExperimentSpec] | None = None,
    targets: list[Stage] | None = None,
    job: str | None = None,
    file: str | None = None,
) -> str:
    """The task file of `spec` (its report and upstream; or of `targets`, a sweep's stage or
    a point's, as task `job` in sky/<file>.yaml); `specs` (all experiments and points by name) give the servers
    of stages another experiment owns (a report's `compare`)."""
    name = job or spec.name
    specs = specs or {spec.name: spec}
    if targets is None:
        targets = [next(s for s in stages if s.kind == "report" and s.owner == spec.name)]
    report = targets[-1]
    run_stages = pipeline_stages(targets, stages)
    c = spec.compute
    distributed = sorted({s.kind for s in run_stages if STAGES[s.kind].distributed})
    extras = "gpu,cloud" if c.accelerators else "cloud"
    secrets = required_secrets(spec)
    task: dict[str, Any] = {
        "name": f"rmsweb-{name}",
        "resources": _resources(spec),
        "num_nodes": c.num_nodes,
        "workdir": ".",
        "file_mounts": {
            f"{WORKDIR}/.git": ".git",  # DVC experiments and `dvc repro` need the git repo
            BUCKET_MOUNT: {"name": c.checkpoint_bucket or DEFAULT_BUCKET, "mode": "MOUNT"},
        },
        "envs": {
            BUCKET_PREFIX: None,  # required: `--env RMSWEB_BUCKET_PREFIX=<you>-<project>`
            **({} if c.dvc_remote else {"RMSWEB_DVC_REMOTE": ""}),
            "RMSWEB_EXPERIMENT": name,
            "RMSWEB_CHECKPOINT_DIR": f"{BUCKET_MOUNT}/checkpoints",
            "RMSWEB_RENDEZVOUS_ROOT": f"{BUCKET_MOUNT}/rendezvous",
            "DVC_NO_ANALYTICS": "1",
            "SKYPILOT_DISABLE_USAGE_COLLECTION": "1",
            "HF_HUB_ENABLE_HF_TRANSFER": "1",
            **c.envs,
        },
        **({"secrets": {key: None for key in secrets}} if secrets else {}),
        "setup": SETUP.format(
            python=PYTHON,
            extras=extras,
            # GPU nodes install the pinned CUDA stack (vLLM fixes torch and transformers).
            constraints=f"-c {GPU_CONSTRAINTS} " if c.accelerators else "",
            remote=_remote(spec, source),
        ),
        "run": render_run(spec, run_stages, specs),
    }
    gpus = c.accelerators or "CPU only"
    file = file or spec.name
    launch_args = f" --env {BUCKET_PREFIX}=<you>-<project>" + "".join(
        f" --secret {s}" for s in secrets
    )
    header = (
        f"# Run (managed, recovers from preemption): sky jobs launch -n rmsweb-{name} "
        f"sky/{file}.yaml{launch_args}\n"
        f"# Interactive cluster: sky launch -c rmsweb-{name} sky/{file}.yaml{launch_args}\n"
        + f"# Generated by `rmsweb compile` from {source}: edit that and recompile.\n"
        + f"# {c.num_nodes} node(s) x {gpus}; spot: {c.use_spot}; {len(run_stages)} stages"
        + f" up to {report.name}"
        + (f" (distributed: {', '.join(distributed)})" if distributed else "")
        + ".\n"
    )
    return header + yaml.dump(task, Dumper=_LiteralDumper, **DUMP_OPTIONS)
