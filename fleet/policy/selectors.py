"""Rules for CEL selectors: length limit, compile errors and removed attributes, at their line.

The API server refuses a selector over 10 KiB (``CELSelectorExpressionMaxLength``)
before compiling it, so that is checked first and the expression is not
compiled. Compile errors come from :func:`fleet.cel.compile_selector` (the
API server's type check in the DRA environment) with a line and column
inside the expression; :meth:`fleet.manifests.Scalar.locate` turns them into
the file's line and column (block scalars ``|`` start on the next line, at
their indentation; quoted scalars after the quote).

Attributes the NVIDIA driver no longer publishes (``index``, ``minor``,
``pcieBusID``) compile fine but fail at scheduling time with "no such key",
leaving pods Pending — the top upgrade issue of the driver — so they are an
error here (``cel-removed-attribute``) with the current name in the hint.

Kubernetes' standard attributes (``resource.kubernetes.io/numaNode``, ``pciBusID``,
``pcieRoot``) have fixed types, though the API server types every attribute ``dyn``: a
selector that compares ``numaNode`` with a string compiles there and never matches a device.
Such a use is an error here (``cel-attribute-type``, :mod:`fleet.cel.standards`), except
numaNode's on a cluster with DRAListTypeAttributes, where it may be a list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from fleet import cel
from fleet.cel import standards
from fleet.manifests import Finding, Location, Manifest
from fleet.policy import walks

_REMOVED = {
    ("gpu.nvidia.com", "index"): "removed in driver v25.8; the driver publishes gpu.nvidia.com/uuid and "
    "resource.kubernetes.io/pciBusID instead: select by device.attributes['gpu.nvidia.com'].uuid or "
    "device.attributes['resource.kubernetes.io'].pciBusID (or by productName)",
    ("gpu.nvidia.com", "minor"): "removed in driver v25.8; the device name gpu-<minor> is not an attribute; the "
    "driver publishes gpu.nvidia.com/uuid and resource.kubernetes.io/pciBusID instead: select by "
    "device.attributes['gpu.nvidia.com'].uuid or device.attributes['resource.kubernetes.io'].pciBusID",
    ("gpu.nvidia.com", "pcieBusID"): "renamed in driver v25.12: use "
    "device.attributes['resource.kubernetes.io'].pciBusID",
    ("gpu.nvidia.com", "parentIndex"): "removed; use parentUUID",
}

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


def check(manifest: Manifest, *, compiler: Compiler | None, lists: bool = False) -> Iterator[Finding]:
    """The rules above for every selector of ``manifest`` (``lists``: the cluster has DRAListTypeAttributes)."""
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
        problems = compiler(selector.expression)
        if not any(p.rule == "cel" for p in problems):
            problems = [*problems, *standard_types(selector.expression, lists=lists)]
        for problem in problems:
            yield Finding(
                locate(manifest, selector.path, line=problem.line, col=problem.col),
                problem.rule,
                problem.message,
                hint=problem.hint,
                object=manifest.ref,
            )


def standard_types(expression: str, *, lists: bool = False) -> list[Problem]:
    """``cel-attribute-type``: a standard attribute used as a value of another type."""
    issues, names = cel.standard_misuses(expression, lists=lists)
    return [
        Problem(
            issue.line,
            issue.column,
            f"{standards.describe(set(names))}, but the selector uses it as another type ({issue.message}): "
            "the API server accepts it (attributes are dyn there), and on every device that publishes it the "
            "scheduler gets false or an error, so pods stay Pending",
            hint=f"use the standard attribute's type, e.g. {standards.example(set(names))}",
            rule="cel-attribute-type",
        )
        for issue in issues
    ]


def dra_compiler(expression: str) -> list[Problem]:
    """Compile in Kubernetes' DRA CEL environment; problems with their positions."""
    problems = []
    try:
        selector = cel.compile_selector(expression)
    except cel.SelectorCompileError as err:
        return [
            Problem(i.line, i.column, f"CEL selector does not compile: {i.message}", hint=err.hint) for i in err.issues
        ]
    for use in selector.references.names:
        why = _REMOVED.get((use.domain, use.name))
        if why is not None and use.kind == "attributes":
            line, col = cel.position(expression, use.offset)
            problems.append(
                Problem(
                    line,
                    col,
                    f"attribute {use.domain}/{use.name} is no longer published by "
                    "the NVIDIA DRA driver: the selector fails with 'no such key' and pods "
                    "stay Pending",
                    hint=why,
                    rule="cel-removed-attribute",
                )
            )
    return problems


def locate(manifest: Manifest, path: tuple[str | int, ...], *, line: int, col: int) -> Location:
    """The file location of ``line``/``col`` inside the string at ``path``."""
    scalar = manifest.positions.scalars.get(path)
    if scalar is None:
        return manifest.positions.at(path)
    return scalar.locate(line=line, col=col)


__all__ = ["MAX_EXPRESSION_BYTES", "Compiler", "Problem", "check", "dra_compiler", "locate", "standard_types"]
