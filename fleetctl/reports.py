"""Terminal output of the commands, through rich: diffs, tables, problems, progress bars.

The library (``fleet``) knows nothing of terminals; everything people read on one is
drawn here. rich decides what the terminal can take: colour and progress bars only
on a terminal, and no colour with ``NO_COLOR`` (https://no-color.org). Piped output
is plain text, byte for byte what tests and CI logs compare, so it can be read in a
log or fed to other tools; ``-o json`` never passes through here.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleet.engine import STAGES, Action, Change, ChangeSet, impersonations
from fleet.engine.previews import unified

if TYPE_CHECKING:
    from rich.progress import Progress

COLUMNS = (Action.CREATED, Action.CONFIGURED, Action.UNCHANGED, Action.DELETED, Action.SKIPPED)
SHOWN = (Action.CREATED, Action.CONFIGURED, Action.DELETED)
PLAIN_WIDTH = 1000
_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("+", "green"), ("-", "red"), ("@@", "cyan"))


def console(stream: TextIO) -> Console:
    """A Console writing to ``stream``: styled on a terminal, plain text anywhere else.

    Lines are never wrapped (a diff line stays one line) and nothing in the text is
    read as markup or highlighted: object names and YAML are printed as they are.
    """
    out = Console(
        file=stream,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=True,
        color_system=None if "NO_COLOR" in os.environ else "auto",  # plain text, not even bold
    )
    if not out.is_terminal:
        out.width = PLAIN_WIDTH  # a log or a pipe has no width: never squeeze or cut a table for it
    return out


def shown(entry: Change) -> bool:
    """Whether ``entry`` has a diff to show: a change (one held back too), or drift a ``warn`` policy only reports."""
    if entry.failed:
        return False
    if entry.held is not None:  # held back for a window or running jobs: still what will change
        return True
    return entry.action in SHOWN or (entry.action == Action.SKIPPED and entry.drift and entry.after is not None)


def print_diff(out: Console, changes: ChangeSet) -> None:
    """Every shown entry's unified diff, ``+`` green, ``-`` red, headers bold; under a disruptive
    entry, ``disruptive: <reason>`` (``fleet.engine.disruptions``).

    One ``print`` of every line (each its own style), not one per line: the same text, and
    rich's render pipeline once instead of once per line."""
    text = Text()
    lines = 0

    def add(line: str | Text, style: str = "") -> None:
        nonlocal lines
        if lines:
            text.append("\n")
        text.append(line, style=style or None)
        lines += 1

    for entry in changes.entries:
        if shown(entry):
            for line in unified(entry).splitlines():
                add(line, next((s for prefix, s in _DIFF_STYLES if line.startswith(prefix)), ""))
        if entry.disruption is not None and not entry.failed:
            add(Text.assemble(("disruptive", "bold magenta"), f": {disruption_text(entry)}"))
    if lines:
        out.print(text)


def disruption_text(entry: Change) -> str:
    """``<reason>``, then the claims it affects when the reason does not name them all."""
    found = entry.disruption
    if found is None:
        return ""
    missing = [c for c in found.claims if c not in found.reason]
    if not missing:
        return found.reason
    return f"{found.reason} (claims: {', '.join(found.claims[:10])}{' ...' if len(found.claims) > 10 else ''})"


def print_summary(out: Console, changes: ChangeSet) -> None:
    """Per stage, how many objects of each action (``no objects`` for an empty run)."""
    counts = changes.summary()
    rows = [(stage.name, counts[stage.name]) for stage in STAGES if counts.get(stage.name)]
    if not rows:
        out.print("no objects")
        return
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 2, 0, 0))
    table.add_column("stage")
    for column in COLUMNS:
        table.add_column(str(column), justify="right")
    for name, count in rows:
        table.add_row(name, *(_count(count.get(str(c), 0), c) for c in COLUMNS))
    out.print(table)
    disruptive = changes.disruptive
    if disruptive:
        out.print(
            f"{len(disruptive)} disruptive: {', '.join(str(e.ref) for e in disruptive[:5])}"
            + (" ..." if len(disruptive) > 5 else "")
        )


def _count(n: int, action: Action) -> Text:
    style = {Action.CREATED: "green", Action.CONFIGURED: "yellow", Action.DELETED: "red"}.get(action, "")
    return Text(str(n), style=style if n else "dim")


def print_problems(out: Console, changes: ChangeSet, *, omit: Change | None = None) -> None:
    """Failed entries (``error:``), field conflicts (``conflict:``) and skipped entries with a reason;
    ``omit``: an entry the caller prints itself (the refused release, with where it is declared)."""
    for entry in changes.entries:
        if entry is omit:
            continue
        if entry.failed:
            text = entry.error if entry.error.startswith(str(entry.ref)) else f"{entry.ref}: {entry.error}"
            out.print(Text.assemble(("error", "bold red"), f": {text}"))
        elif entry.held is not None:
            out.print(Text.assemble(("waits", "magenta"), f": {entry.ref} ({entry.intended}): {entry.reason}"))
        elif entry.action == Action.SKIPPED and entry.reason:
            out.print(Text.assemble(("skipped", "yellow"), f": {entry.ref}: {entry.reason}"))
        elif entry.reason and entry.ref.kind == "HelmRelease":  # the operator's driver-upgrade states
            out.print(f"note: {entry.ref}: {entry.reason}")
        if entry.conflicts and not entry.failed:
            fields = ", ".join(str(c) for c in entry.conflicts)
            if entry.forced:  # drift policy enforce: git wins on the fields fleet declares
                out.print(
                    Text.assemble(("takes back", "bold yellow"), f": {entry.ref}: {fields} (drift policy enforce)")
                )
            else:
                out.print(Text.assemble(("conflict", "bold yellow"), f": {entry.ref}: {fields}"))
    # Why some of a team's objects go as fleet (no ServiceAccount: the decision says so), or were dry-run
    # as fleet (its rights are set up or restored by this run; written as the team): once per reason.
    as_fleet = Counter(e.decision.as_fleet for e in changes.entries if e.decision is not None and e.decision.as_fleet)
    as_fleet += Counter(
        part
        for e in changes.entries
        if impersonations.DRY_RUN_AS_FLEET in e.reason
        for part in e.reason.split("; ")
        if part.startswith(impersonations.DRY_RUN_AS_FLEET)
    )
    for why, n in as_fleet.items():
        out.print(f"note: {why} ({n} object{'s' if n != 1 else ''})")
    if changes.conflicted:
        owners = sorted({c.manager for e in changes.conflicted for c in e.conflicts if c.manager})
        out.print(
            f"  hint: other field managers ({', '.join(owners)}) own these fields; fleetctl apply fails on them "
            "unless you change them through that owner, or take ownership with --force-conflicts "
            "(fleetctl diff --force-conflicts previews that)"
        )


@contextmanager
def progress_bar(out: Console, *, transient: bool = True) -> Iterator[Progress]:
    """A progress display on ``out``, drawn only on a terminal (nothing at all in a log or a pipe).

    rich's progress module is imported here, by the two commands that draw one (start-up that
    ``diff`` and ``validate`` would pay for nothing)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=transient,
        disable=not out.is_terminal,
    )
    with bar:
        yield bar


__all__ = ["console", "disruption_text", "print_diff", "print_problems", "print_summary", "progress_bar", "shown"]
