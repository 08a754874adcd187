"""Report config: the markdown/HTML report and the trajectory viewer."""

from __future__ import annotations

from pydantic import Field, model_validator

from .common import Name, SpecFieldError, SpecModel

ARM_PATTERN = r"^[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9-]*$"


class ArmRow(SpecModel):
    """One row of the arms table: an evaluated policy of this or a compared experiment."""

    label: str = Field(..., min_length=1, description="Row label, e.g. 'SFT, reflection data'.")
    arm: str = Field(
        ...,
        pattern=ARM_PATTERN,
        description="<experiment>/<policy>: the experiment (this one or one in `compare`) and "
        "its eval policy name.",
    )


class Comparison(SpecModel):
    """A paired difference A - B on the test split (same tasks and test seeds)."""

    a: str = Field(..., min_length=1, description="Label (or <experiment>/<policy>) of arm A.")
    b: str = Field(..., min_length=1, description="Label (or <experiment>/<policy>) of arm B.")


class ReportSpec(SpecModel):
    title: str | None = Field(None, description="Report title (null: the experiment name).")
    viewer: bool = Field(True, description="Also write the static trajectory viewer.")
    compare: list[Name] = Field(
        default_factory=list,
        description="Other experiments whose collection and eval results this report shows "
        "side by side (e.g. the retry ablations); their stages become this report's inputs.",
    )
    viewer_max_episodes: int = Field(
        200, ge=1, description="Episodes per run shown in the viewer (keeps the page small)."
    )
    arms: list[ArmRow] = Field(
        default_factory=list,
        description="Rows of the arms table (mean over training seeds with intervals), in "
        "order; empty: every evaluated policy.",
    )
    comparisons: list[Comparison] = Field(
        default_factory=list,
        description="Paired differences to report (A - B with a bootstrap interval); empty: "
        "rl - sft when both are evaluated.",
    )

    @model_validator(mode="after")
    def _comparisons_name_arms(self) -> ReportSpec:
        if not self.arms:
            return self
        known = {r.label for r in self.arms} | {r.arm for r in self.arms}
        for i, c in enumerate(self.comparisons):
            for side in ("a", "b"):
                if getattr(c, side) not in known:
                    raise SpecFieldError(
                        f"comparisons.{i}.{side}",
                        f"{getattr(c, side)!r} is not an arm of this report; name one of the "
                        "`arms` by its label or its <experiment>/<policy>.",
                    )
        labels = [r.label for r in self.arms]
        if len(set(labels)) != len(labels):
            raise SpecFieldError("arms", "two arms have the same label; labels name table rows.")
        return self
