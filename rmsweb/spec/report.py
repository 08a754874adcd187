"""Report config: the markdown/HTML report and the trajectory viewer."""

from __future__ import annotations

from pydantic import Field

from .common import Name, SpecModel


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
