"""Rules for CEL selectors: the API server's length limit, and compile errors at their line.

The API server refuses a selector over 10 KiB (``CELSelectorExpressionMaxLength``)
before compiling it, so that is checked first and the expression is not
compiled. Compile errors come from ``fleet.cel`` with a line and column
inside the expression; :meth:`fleet.manifests.Scalar.locate` turns them into
the file's line and column (block scalars ``|`` start on the next line, at
their indentation; quoted scalars after the quote).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from fleet.manifests import Finding, Location, Manifest
from fleet.policy import walks

MAX_EXPRESSION_BYTES = 10 * 1024


@dataclass(frozen=True)
class Problem:
    """A CEL diagnostic: 1-based line and column inside the expression."""

    line: int
    col: int
    message: str
    hint: str = ""
    rule: str = "cel"


Compiler = Callable[[str], Sequence[Problem]]
"""Compiles one expression in the DRA environment and returns its problems."""


def check(manifest: Manifest, *, compiler: Compiler | None) -> Iterator[Finding]:
    for selector in walks.selectors(manifest):
        size = len(selector.expression.encode())
        if size > MAX_EXPRESSION_BYTES:
            yield Finding(
                manifest.positions.at(selector.path),
                "cel-too-long",
                f"CEL expression is {size} bytes, over the API limit of {MAX_EXPRESSION_BYTES}",
                hint="split the condition or select with a DeviceClass",
                object=manifest.ref,
            )
            continue
        if compiler is None:
            continue
        for problem in compiler(selector.expression):
            yield Finding(
                locate(manifest, selector.path, line=problem.line, col=problem.col),
                problem.rule,
                problem.message,
                hint=problem.hint,
                object=manifest.ref,
            )


def locate(manifest: Manifest, path: tuple[str | int, ...], *, line: int, col: int) -> Location:
    """The file location of ``line``/``col`` inside the string at ``path``."""
    scalar = manifest.positions.scalars.get(path)
    if scalar is None:
        return manifest.positions.at(path)
    return scalar.locate(line=line, col=col)


__all__ = ["MAX_EXPRESSION_BYTES", "Compiler", "Problem", "check", "locate"]
