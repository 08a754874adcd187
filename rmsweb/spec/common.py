"""Shared building blocks of the spec models.

Every spec model derives from :class:`SpecModel`: unknown keys are errors
(`extra="forbid"`), values are validated on assignment, and instances are
frozen so a resolved config cannot drift while a stage runs.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

# Experiment and policy names become DVC stage names, folder names and SQL
# values: keep them to lowercase letters, digits and dashes (DVC stage names
# may not contain punctuation other than "-" and "_"; "_" separates the parts
# of a compiled stage name).
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
Name = Annotated[str, Field(pattern=NAME_PATTERN, max_length=64)]


class SpecFieldError(ValueError):
    """A cross-field rule broke; `field` is the dotted key (relative to the
    model that raised it) that the error message is about, so the loader can
    point at that key's line instead of the enclosing section."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class SeedRange(SpecModel):
    """A contiguous range of episode seeds: `start, start+1, ..., start+count-1`."""

    start: int = Field(0, ge=0, description="First seed of the range.")
    count: int = Field(10, ge=1, description="Number of seeds in the range.")

    @property
    def stop(self) -> int:
        return self.start + self.count

    def seeds(self) -> list[int]:
        return list(range(self.start, self.stop))

    def overlaps(self, other: SeedRange) -> bool:
        return self.start < other.stop and other.start < self.stop


def default_kind(data: Any, section: str, kind: str) -> Any:
    """Give a discriminated section without `kind:` its default kind.

    Used in `mode="before"` validators, so `rl: {steps: 5}` means the default RL
    algorithm with 5 steps instead of an error about a missing tag.
    """
    section_data = data.get(section) if isinstance(data, dict) else None
    if isinstance(section_data, dict) and "kind" not in section_data:
        data = {**data, section: {"kind": kind, **section_data}}
    return data


def check_range(lo_name: str, lo: float, hi_name: str, hi: float, why: str) -> None:
    """Raise a SpecFieldError naming `lo_name` when lo > hi."""
    if lo > hi:
        raise SpecFieldError(
            lo_name,
            f"{lo_name} ({lo}) is greater than {hi_name} ({hi}); {why} "
            f"Fix: set {lo_name} <= {hi_name}.",
        )


__all__ = [
    "NAME_PATTERN",
    "Name",
    "SeedRange",
    "SpecFieldError",
    "SpecModel",
    "check_range",
]


def omit_null(data: Any, key: str) -> Any:
    """A dumped section without `key` while it is null: a field added later then leaves the
    specs that do not set it dumping (params.yaml) and hashing (stage identities) exactly
    as before it existed. For a `model_serializer(mode="wrap")`."""
    if isinstance(data, dict) and key in data and data[key] is None:
        data.pop(key)
    return data
