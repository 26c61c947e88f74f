"""Printing a ChangeSet: a unified diff per changed object and a summary table per stage.

Colour only on a terminal and only without ``NO_COLOR`` (https://no-color.org);
piped output is plain so it can be read in CI logs or fed to other tools.
"""

from __future__ import annotations

import os
from typing import TextIO

from fleet.engine import STAGES, Action, ChangeSet
from fleet.engine.diffs import unified

_GREEN, _RED, _CYAN, _YELLOW, _BOLD, _RESET = "\033[32m", "\033[31m", "\033[36m", "\033[33m", "\033[1m", "\033[0m"
COLUMNS = (Action.CREATED, Action.CONFIGURED, Action.UNCHANGED, Action.DELETED, Action.SKIPPED)


def colour(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ


def diff_text(changes: ChangeSet, *, use_colour: bool) -> str:
    parts: list[str] = []
    for entry in changes.entries:
        shown = entry.action in (Action.CREATED, Action.CONFIGURED, Action.DELETED) or (
            entry.action == Action.SKIPPED and entry.drift and entry.after is not None
        )
        if shown and not entry.failed:
            text = unified(entry)
            parts.append(_paint(text) if use_colour else text)
    return "".join(parts)


def _paint(text: str) -> str:
    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            lines.append(f"{_BOLD}{line.rstrip()}{_RESET}\n")
        elif line.startswith("+"):
            lines.append(f"{_GREEN}{line.rstrip()}{_RESET}\n")
        elif line.startswith("-"):
            lines.append(f"{_RED}{line.rstrip()}{_RESET}\n")
        elif line.startswith("@@"):
            lines.append(f"{_CYAN}{line.rstrip()}{_RESET}\n")
        else:
            lines.append(line)
    return "".join(lines)


def summary_table(changes: ChangeSet) -> str:
    table = changes.summary()
    rows = [("stage", *(str(c) for c in COLUMNS))]
    for stage in STAGES:
        counts = table.get(stage.name)
        if counts:
            rows.append((stage.name, *(str(counts.get(str(c), 0)) for c in COLUMNS)))
    if len(rows) == 1:
        return "no objects\n"
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in rows
    )


def problems(changes: ChangeSet, *, use_colour: bool) -> str:
    lines = []
    for entry in changes.entries:
        if entry.failed:
            head = f"{_RED}error{_RESET}" if use_colour else "error"
            text = entry.error if entry.error.startswith(str(entry.ref)) else f"{entry.ref}: {entry.error}"
            lines.append(f"{head}: {text}\n")
        elif entry.action == Action.SKIPPED and entry.reason:
            head = f"{_YELLOW}skipped{_RESET}" if use_colour else "skipped"
            lines.append(f"{head}: {entry.ref}: {entry.reason}\n")
        elif entry.reason and entry.ref.kind == "HelmRelease":  # the operator's driver-upgrade states
            lines.append(f"note: {entry.ref}: {entry.reason}\n")
    return "".join(lines)


__all__ = ["colour", "diff_text", "problems", "summary_table"]
