"""Model errors → findings: pydantic's ``loc`` mapped to file lines, with "did you mean".

pydantic reports ``loc=('spec', 'devices', 'requests', 0, 'exactly',
'devicClassName')``; the document's :class:`Positions` turn that into the
line of the typo, and walking the model classes along the same ``loc`` gives
the fields that are allowed there, so difflib can suggest the right one.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError

from fleet.manifests.findings import Finding
from fleet.manifests.locations import Path, Positions


def findings_from(error: ValidationError, *, model: type[BaseModel], positions: Positions, obj: str) -> list[Finding]:
    """One finding per pydantic error, located and hinted."""
    found = []
    errors = error.errors(include_url=False)
    suggested = {
        (tuple(e["loc"][:-1]), s)
        for e in errors
        if e["type"] == "extra_forbidden"
        for s in _close(str(e["loc"][-1]), allowed_fields(model, tuple(e["loc"][:-1])))
    }
    for item in errors:
        loc: Path = tuple(item["loc"])
        where = positions.at(loc)
        dotted = _dotted(loc)
        kind = item["type"]
        if kind == "extra_forbidden":
            field = str(loc[-1])
            allowed = allowed_fields(model, loc[:-1])
            close = _close(field, allowed)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else (f"allowed here: {', '.join(allowed)}" if allowed else "remove it")
            )
            found.append(Finding(where, "schema", f"unknown field {dotted!r}", hint=hint, object=obj))
        elif kind == "missing" and (loc[:-1], loc[-1]) in suggested:
            continue  # the misspelt field's finding already says it
        elif kind == "missing":
            found.append(
                Finding(
                    where,
                    "schema",
                    f"missing required field {dotted!r}",
                    hint=f"add {str(loc[-1])!r}",
                    object=obj,
                )
            )
        else:
            message = item["msg"].removeprefix("Value error, ")
            found.append(
                Finding(
                    where,
                    "schema",
                    f"{dotted}: {message}" if dotted else message,
                    hint=_hint_for(kind, item.get("input"), item.get("ctx") or {}),
                    object=obj,
                )
            )
    return found


def _close(field: str, allowed: list[str]) -> list[str]:
    return difflib.get_close_matches(field, allowed, n=1, cutoff=0.6)


def _dotted(loc: Path) -> str:
    text = ""
    for part in loc:
        if part == "[key]":  # pydantic's marker for an invalid mapping key
            text += " (key)"
        else:
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _hint_for(kind: str, value: Any, ctx: dict[str, Any]) -> str:
    if ctx.get("hint"):
        return str(ctx["hint"])
    bounds = {
        "greater_than_equal": "use a value ≥ {ge}",
        "less_than_equal": "use a value ≤ {le}",
        "too_long": "at most {max_length} entries",
        "too_short": "at least {min_length} entries",
        "string_pattern_mismatch": "the value must match {pattern}",
        "string_too_short": "the value must not be empty",
    }
    if kind in bounds:
        try:
            return bounds[kind].format(**ctx)
        except KeyError:
            pass
    if kind in ("int_type", "bool_type", "float_type") and isinstance(value, str):
        return "write the value without quotes"
    if kind == "string_type" and value is not None:
        return "quote the value"
    if kind == "literal_error":
        return "use one of the listed values"
    return "see the schema in schemas/ or the Kubernetes API reference"


def allowed_fields(model: type[BaseModel], path: Path) -> list[str]:
    """The field names (by alias) of the model reached by ``path``."""
    for candidate in _models_at(model, path):
        return sorted(f.alias or name for name, f in candidate.model_fields.items())
    return []


def _models_at(model: type[BaseModel], path: Path) -> Iterator[type[BaseModel]]:
    if not path:
        yield model
        return
    head, rest = path[0], path[1:]
    for name, field in model.model_fields.items():
        if head in (name, field.alias):
            for inner, remaining in _descend(field.annotation, rest):
                yield from _models_at(inner, remaining)


def _descend(annotation: Any, path: Path) -> Iterator[tuple[type[BaseModel], Path]]:
    """Unwrap Optional/list/dict/union annotations down to model classes."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, path
    elif origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            yield from _descend(arg, path)
    elif origin in (list, dict) and path:
        yield from _descend(typing.get_args(annotation)[-1], path[1:])
    elif origin is typing.Annotated:
        yield from _descend(typing.get_args(annotation)[0], path)


__all__ = ["allowed_fields", "findings_from"]
