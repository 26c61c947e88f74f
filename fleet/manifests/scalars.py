"""Plain YAML scalars: their YAML 1.2 value, and whether kubectl would read them differently.

fleet resolves plain scalars with the YAML 1.2 core schema; Kubernetes
(sigs.k8s.io/yaml) reads YAML 1.1, where ``yes``/``off``/``y`` are booleans,
``0644`` is octal, ``1:30`` is base 60 and ``2026-01-02`` a timestamp. Rather
than guess which reading the author meant, such scalars are flagged
(``yaml-ambiguous``) so that, once quoted or rewritten, both readings agree.
"""

from __future__ import annotations

import math
import re
from typing import Any

_AMBIGUOUS_WORDS = frozenset({"y", "n", "yes", "no", "on", "off"})
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]+$")
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$")
_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ]|$)")
_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"^[-+]?[0-9]+$")
_OCTAL = re.compile(r"^0o[0-7]+$")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(inf|Inf|INF)$")
_NAN = frozenset({".nan", ".NaN", ".NAN"})
_NUMBER_START = frozenset("0123456789+-.")
"""First characters of every int, float, inf and nan the patterns above match."""
SUSPECT_START = frozenset("yYnNoO0123456789+-")
"""First characters of every scalar :func:`ambiguity` can flag (a cheap pre-check for callers)."""


def ambiguity(text: str) -> tuple[str, str] | None:
    """(message, hint) when a plain scalar means something else in YAML 1.1."""
    if not text or text[0] not in SUSPECT_START:
        return None
    if text.lower() in _AMBIGUOUS_WORDS:
        return (
            f"{text!r} is a string in YAML 1.2 but a boolean for kubectl (YAML 1.1)",
            f'write true/false, or quote it: "{text}"',
        )
    if _LEADING_ZERO.match(text) or _SEXAGESIMAL.match(text):
        return (
            f"{text!r} is read as a different number by kubectl (YAML 1.1 octal/base 60)",
            f'quote it ("{text}") or write the number without a leading zero',
        )
    if _TIMESTAMP.match(text):
        return f"{text!r} is read as a timestamp by kubectl, not a string", f'quote it: "{text}"'
    return None


def resolve_scalar(text: str) -> Any:
    """A plain scalar's value by the YAML 1.2 core schema (dates stay strings)."""
    if text in _NULL:
        return None
    if text in _BOOL:
        return _BOOL[text]
    if text[0] not in _NUMBER_START:
        return text  # most scalars (names, kinds): no number pattern can match, so none is tried
    if _INT.match(text):
        return int(text)
    if _OCTAL.match(text):
        return int(text[2:], 8)
    if _HEX.match(text):
        return int(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return -math.inf if text.startswith("-") else math.inf
    if text in _NAN:
        return math.nan
    return text


__all__ = ["SUSPECT_START", "ambiguity", "resolve_scalar"]
