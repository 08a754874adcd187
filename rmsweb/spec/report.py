"""Report config: the markdown/HTML report and the trajectory viewer."""

from __future__ import annotations

from pydantic import Field

from .common import SpecModel


class ReportSpec(SpecModel):
    title: str | None = Field(None, description="Report title (null: the experiment name).")
    viewer: bool = Field(True, description="Also write the static trajectory viewer.")
    viewer_max_episodes: int = Field(
        200, ge=1, description="Episodes per run shown in the viewer (keeps the page small)."
    )
