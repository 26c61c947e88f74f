"""JSON Schemas of every kind, generated from the models (the single source of truth).

Editors validate repository files as users type through the
``# yaml-language-server: $schema=...`` modeline; ``tools/gen_schemas.py``
writes these to ``schemas/`` and a test fails when the checked-in files are
stale, so the schemas can never drift from what ``fleetctl validate`` accepts.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import CoreSchema

from fleet.manifests.registry import MODELS


class _WithDialect(GenerateJsonSchema):
    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        result: dict[str, Any] = super().generate(schema, mode=mode)
        result["$schema"] = self.schema_dialect
        return result


def file_name(kind: str) -> str:
    """``ResourceClaimTemplate`` → ``resourceclaimtemplate.schema.json``."""
    return f"{kind.lower()}.schema.json"


def generate() -> dict[str, str]:
    """File name → JSON text (sorted keys, trailing newline) for every kind."""
    files = {}
    for (_, kind), model in sorted(MODELS.items(), key=lambda item: item[0][1]):
        schema = model.model_json_schema(by_alias=True, mode="validation", schema_generator=_WithDialect)
        files[file_name(kind)] = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return files


__all__ = ["file_name", "generate"]
