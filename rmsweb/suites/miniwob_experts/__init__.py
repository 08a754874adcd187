"""Scripted MiniWoB experts, one function per task: (instruction, observation, history)
-> acceptable actions, best first. `EXPERTS` maps task names to Expert objects."""

from __future__ import annotations

from .clicks import EXPERT_FUNCTIONS as _CLICKS
from .common import ScriptedExpert
from .email import EXPERT_FUNCTIONS as _EMAIL
from .forms import EXPERT_FUNCTIONS as _FORMS

EXPERTS: dict[str, ScriptedExpert] = {
    name: ScriptedExpert(name, fn) for name, fn in sorted({**_CLICKS, **_FORMS, **_EMAIL}.items())
}

__all__ = ["EXPERTS", "ScriptedExpert"]
