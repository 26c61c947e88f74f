"""JSON Schemas of every kind, generated from the models (the single source of truth).

Editors validate repository files as users type through the
``# yaml-language-server: $schema=...`` modeline; ``tools/gen_schemas.py``
writes these to ``schemas/`` and a test fails when the checked-in files are
stale, so the schemas can never drift from what ``fleetctl validate`` accepts.

A field's description is the docstring under it in the model's class. The models themselves do
not read those docstrings (pydantic's ``use_attribute_docstrings`` walks the stack and parses
source for every class, at the start of every command that loads a repository, for text only
the schemas show): ``attribute_docstrings`` reads them here, where the schemas are made.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import json
import textwrap
from typing import Any, cast

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from fleet.manifests.registry import MODELS


class _WithDialect(GenerateJsonSchema):
    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        result: dict[str, Any] = super().generate(schema, mode=mode)
        result["$schema"] = self.schema_dialect
        return result

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        result: dict[str, Any] = super().model_schema(schema)
        cls = cast("type[BaseModel]", schema["cls"])
        properties = result.get("properties", {})
        for name, info in cls.model_fields.items():
            owner = next((c for c in cls.__mro__ if name in vars(c).get("__annotations__", {})), None)
            doc = attribute_docstrings(owner).get(name) if owner is not None else None
            prop = properties.get(info.alias or name, properties.get(name))
            if doc and isinstance(prop, dict):
                prop.setdefault("description", doc)
        return result


@functools.cache
def attribute_docstrings(cls: type) -> dict[str, str]:
    """Field name → the string literal right under its annotation in ``cls``'s own body."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = next((n.body for n in ast.parse(source).body if isinstance(n, ast.ClassDef)), [])
    docs: dict[str, str] = {}
    for field, after in itertools.pairwise(body):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field.target.id] = inspect.cleandoc(after.value.value)
    return docs


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


__all__ = ["attribute_docstrings", "file_name", "generate"]
