"""The teacher as an eval policy: the one that collected the data, mistakes included."""

from __future__ import annotations

import asyncio

from rmsweb.agents.build import eval_policy
from rmsweb.agents.expert import ExpertPolicy
from rmsweb.agents.mistaken_expert import MistakenExpert
from rmsweb.env.types import ActRequest, Element, Observation
from rmsweb.spec import ExperimentSpec
from rmsweb.suites.miniwob_experts import EXPERTS

TASKS = ["click-button"]


class Suite:
    def task_ids(self, split: str | None = None) -> list[str]:
        return TASKS

    def expert(self, task: str):
        return EXPERTS[task]


def spec(**mistakes) -> ExperimentSpec:
    teacher = {"kind": "expert", "error_rate": 0.4, "detour_rate": 0.3, "adherence": 0.5}
    return ExperimentSpec.model_validate(
        {
            "name": "t",
            "suite": {"tasks": TASKS},
            "collect": {"teacher": teacher},
            "eval": {
                "policies": [
                    {"kind": "teacher", "name": "teacher"},
                    {"kind": "expert", "name": "expert"},
                    {"kind": "expert", "name": "sloppy", "mistakes": mistakes or {}},
                ]
            },
        }
    )


def test_eval_of_the_teacher_uses_its_mistake_model() -> None:
    s = spec(error_rate=1.0)
    teacher, gold, sloppy = (eval_policy(p, s, Suite(), {}) for p in s.eval.policies)
    assert isinstance(teacher, MistakenExpert) and teacher.name == "teacher"
    assert (teacher.error_rate, teacher.detour_rate, teacher.adherence) == (0.4, 0.3, 0.5)
    assert isinstance(gold, ExpertPolicy)  # rates 0: the gold expert
    assert isinstance(sloppy, MistakenExpert) and sloppy.error_rate == 1.0
    # and it acts with them: the always-wrong expert clicks the distractor
    els = {"1": Element("1", "button", "Ok"), "2": Element("2", "button", "Cancel")}
    obs = Observation("u", "t", "", els)
    request = ActRequest("click-button", 'Click on the "Ok" button.', obs, seed=1)
    sloppy.max_mistake_step = 1
    assert asyncio.run(sloppy.act(request)).text in ("click(2)", "stop()")
    assert asyncio.run(gold.act(request)).text == "click(1)"
