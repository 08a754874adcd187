"""JSON Schema export of the spec models (for editors: yaml-language-server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .experiment import ExperimentSpec

SCHEMA_ID = "https://rmsweb.dev/schemas/experiment.schema.json"
SCHEMA_FILE = "experiment.schema.json"


def experiment_schema() -> dict[str, Any]:
    schema = ExperimentSpec.model_json_schema(mode="validation")
    # `extends` is consumed by the loader before validation; editors should accept it.
    schema["properties"] = {
        "extends": {
            "type": "string",
            "description": "Relative path of a parent spec; this file is deep-merged onto it "
            "(lists replace; a section whose kind changes is replaced).",
        },
        **schema["properties"],
    }
    # With `extends`, a child need not repeat required keys; name stays required.
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    return schema


def render_schema() -> str:
    return json.dumps(experiment_schema(), indent=2, sort_keys=True) + "\n"


def write_schema(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / SCHEMA_FILE
    path.write_text(render_schema(), encoding="utf-8")
    return path
