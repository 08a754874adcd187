"""Stage `rl` (recipe part S): not yet implemented in this build."""

from __future__ import annotations

from rmsweb.errors import UserError
from rmsweb.stage_io import StageIO


def main(io: StageIO) -> None:
    raise UserError("the rl stage has no body in this build yet (issue: Salvage-DS trainer).")
