"""Build policies from spec sections: the one place where configs become plain arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmsweb.agents.prompt import PromptConfig


def prompt_config(model_spec: Any) -> PromptConfig:
    p = model_spec.prompt
    return PromptConfig(
        history_steps=p.history_steps,
        max_prompt_tokens=p.max_prompt_tokens,
        thoughts=p.thoughts,
        screenshot=p.screenshot,
        system=p.system,
    )


def expert_policy(suite: Any, tasks: list[str], name: str = "expert") -> Any:
    from rmsweb.agents.expert import ExpertPolicy
    from rmsweb.errors import UserError

    experts = {t: suite.expert(t) for t in tasks}
    missing = sorted(t for t, e in experts.items() if e is None)
    if missing:
        raise UserError(
            f"no scripted expert for {', '.join(missing)}; `rmsweb suite list miniwob` marks the "
            "tasks that have one. Drop these tasks or use an openai teacher."
        )
    return ExpertPolicy(experts, name=name)


def mistaken_expert(teacher_spec: Any, suite: Any, tasks: list[str], seed: int, name: str) -> Any:
    """The scripted expert with the mistake model of an `ExpertTeacher` spec section."""
    from rmsweb.agents.mistaken_expert import Habits, MistakenExpert

    gold = expert_policy(suite, tasks)  # a clear error when a task has no expert
    return MistakenExpert(
        gold.experts,
        teacher_spec.error_rate,
        teacher_spec.detour_rate,
        teacher_spec.error_kinds,
        teacher_spec.detour_kinds,
        persistence=teacher_spec.persistence,
        adherence=teacher_spec.adherence,
        seed=seed,
        name=name,
        habits=Habits.of(getattr(teacher_spec, "habits", None)),
    )


def teacher_policy(spec: Any, suite: Any, name: str = "teacher") -> Any:
    """The policy of `collect.teacher`, mistakes included: what collects the data, and
    what an eval policy of kind `teacher` runs."""
    teacher = spec.collect.teacher
    if teacher.kind == "expert":
        return mistaken_expert(teacher, suite, list(suite.task_ids()), spec.seed, name)
    from rmsweb.agents.openai_policy import from_spec

    return from_spec(teacher, prompt_config(spec.model), name)


def checkpoint_policy(
    model_dir: Path,
    model_spec: Any,
    name: str,
    temperature: float = 0.0,
    seed: int = 0,
) -> Any:
    """An `hf` or `vllm` policy (model.backend.kind) over a trained checkpoint folder."""
    backend = model_spec.backend
    dtype = "float32" if model_spec.kind == "tiny" else model_spec.dtype
    options = {
        "name": name,
        "max_new_tokens": model_spec.prompt.max_new_tokens,
        "temperature": temperature,
        "seed": seed,
    }
    if backend.kind == "vllm":
        from rmsweb.agents.vllm_policy import VLLMPolicy, load_vllm

        engine = load_vllm(
            model_dir,
            dtype=dtype,
            gpu_memory_utilization=backend.gpu_memory_utilization,
            tensor_parallel_size=backend.tensor_parallel_size,
            max_model_len=backend.max_model_len,
            seed=seed,
        )
        # vLLM batches continuously: hand it every request that is waiting.
        return VLLMPolicy(engine, prompt_config(model_spec), batch_size=1024, **options)
    from rmsweb.agents.hf_policy import HFPolicy
    from rmsweb.models.load import load_model

    loaded = load_model(model_dir, dtype=dtype, device=backend.device)
    return HFPolicy(loaded, prompt_config(model_spec), batch_size=backend.batch_size, **options)


def eval_policy(
    policy_spec: Any, spec: Any, suite: Any, inputs: dict[str, Path], seed: int = 0
) -> Any:
    """The policy an eval stage runs, from its entry in `eval.policies`.

    `seed` is the training seed of a checkpoint's eval (its sampling seed); the random
    policy draws from the data seed, so it is the same in every arm.
    """
    kind = policy_spec.kind
    if kind == "expert":
        tasks = list(suite.task_ids())
        m = policy_spec.mistakes
        if m.error_rate or m.detour_rate:
            return mistaken_expert(m, suite, tasks, spec.seed, policy_spec.name)
        return expert_policy(suite, tasks, name=policy_spec.name)
    if kind == "teacher":
        return teacher_policy(spec, suite, name=policy_spec.name)
    if kind == "random":
        from rmsweb.agents.random_policy import RandomPolicy

        return RandomPolicy(name=policy_spec.name, seed=spec.seed)
    if kind == "checkpoint":
        return checkpoint_policy(
            inputs["policy"] / "model",
            spec.model,
            policy_spec.name,
            temperature=spec.eval.temperature,
            seed=seed,
        )
    if kind == "openai":
        from rmsweb.agents.openai_policy import from_spec

        return from_spec(policy_spec, prompt_config(spec.model), policy_spec.name)
    raise ValueError(f"unknown policy kind {kind!r}")
