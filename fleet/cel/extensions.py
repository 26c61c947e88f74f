"""Kubernetes CEL libraries that cel-expr-python does not ship: regex ``find``/``findAll`` and ``sets``.

Kubernetes' base environment (k8s.io/apiserver v0.37.2 ``pkg/cel/library/regex.go``
and cel-go ``ext.Sets``) offers ``s.find(re)``, ``s.findAll(re[, n])`` and
``sets.contains/equivalent/intersects``; selectors copied from Kubernetes docs
use them, so they are here with Go's semantics: ``find`` returns ``''`` when
nothing matches, ``findAll`` skips empty matches that abut the previous match
(``regexp.FindAllString``) and ``n = 0`` gives an empty list.

The patterns run on Python's ``re``, not RE2; the syntax both accept (classes,
anchors, groups, repetition) behaves the same, and a pattern literal is
validated with cel-cpp's RE2 at compile time (see :mod:`fleet.cel.selectors`),
as Kubernetes validates literal patterns when it builds the program.
``matches`` itself is cel-cpp's, i.e. RE2.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from cel_expr_python import cel


class RegexError(ValueError):
    pass


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as err:
        raise RegexError(f"Illegal regex: {err}") from err


def find(text: str, pattern: str) -> str:
    match = _compile(pattern).search(text)
    return match.group(0) if match else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found: list[str] = []
    previous_end = -1
    for match in _compile(pattern).finditer(text):
        if limit >= 0 and len(found) >= limit:
            break
        if match.start() == match.end() and match.start() == previous_end:
            continue
        found.append(match.group(0))
        previous_end = match.end()
    return found


def _python_contains(items: list[Any], value: Any) -> bool:
    return value in items


def functions(contains: Callable[[list[Any], Any], bool] = _python_contains) -> list[Any]:
    """The declarations; ``contains(items, value)`` is list membership with CEL's equality."""
    T = cel.Type
    dyn_list = T.List(T.DYN)
    return [
        cel.FunctionDecl(
            "find",
            [
                cel.Overload("string_find_string", T.STRING, [T.STRING, T.STRING], is_member=True, impl=find),
            ],
        ),
        cel.FunctionDecl(
            "findAll",
            [
                cel.Overload(
                    "string_find_all_string", T.List(T.STRING), [T.STRING, T.STRING], is_member=True, impl=find_all
                ),
                cel.Overload(
                    "string_find_all_string_int",
                    T.List(T.STRING),
                    [T.STRING, T.STRING, T.INT],
                    is_member=True,
                    impl=find_all,
                ),
            ],
        ),
        cel.FunctionDecl(
            "sets.contains",
            [
                cel.Overload(
                    "list_sets_contains_list",
                    T.BOOL,
                    [dyn_list, dyn_list],
                    impl=lambda a, b: all(contains(a, item) for item in b),
                ),
            ],
        ),
        cel.FunctionDecl(
            "sets.equivalent",
            [
                cel.Overload(
                    "list_sets_equivalent_list",
                    T.BOOL,
                    [dyn_list, dyn_list],
                    impl=lambda a, b: all(contains(a, item) for item in b) and all(contains(b, item) for item in a),
                ),
            ],
        ),
        cel.FunctionDecl(
            "sets.intersects",
            [
                cel.Overload(
                    "list_sets_intersects_list",
                    T.BOOL,
                    [dyn_list, dyn_list],
                    impl=lambda a, b: any(contains(a, item) for item in b),
                ),
            ],
        ),
    ]


__all__ = ["RegexError", "find", "find_all", "functions"]
