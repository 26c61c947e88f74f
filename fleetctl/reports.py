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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleet.engine import STAGES, Action, Change, ChangeSet, impersonations
from fleet.engine.previews import field_diff, unified
from fleet.views.entries import COLUMNS, shown

if TYPE_CHECKING:
    from rich.progress import Progress

PLAIN_WIDTH = 1000
_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("+", "green"), ("-", "red"), ("@@", "cyan"))
HANDFUL = 5
"""At most this many changed objects: the text diff shows their whole bodies, as ``--full`` does."""
PRUNE = "prune"
"""The last group of the text diff: what pruning deletes or releases, after every stage."""
_LABEL_WIDTH = 60
_SIGNS = {Action.CREATED: "+", Action.CONFIGURED: "~", Action.DELETED: "-"}
_SIGN_STYLES = {"+": "green", "~": "yellow", "-": "red", "!": "bold red"}
_FIELD_STYLES = {"+": "green", "-": "red"}


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


def print_diff(out: Console, changes: ChangeSet, *, full: bool = False) -> None:
    """What ``fleetctl diff`` shows of each change: with ``full``, or when at most ``HANDFUL``
    objects change, every shown entry's unified diff (``print_bodies``); otherwise one short
    block per stage (``print_changes``)."""
    if full or sum(shown(e) for e in changes.entries) <= HANDFUL:
        print_bodies(out, changes)
    else:
        print_changes(out, changes)


def print_bodies(out: Console, changes: ChangeSet) -> None:
    """Every shown entry's unified diff, ``+`` green, ``-`` red, headers bold; under a disruptive
    entry, ``disruptive: <reason>`` (``fleet.engine.disruptions``).

    One ``print`` of every line (each its own style), not one per line: the same text, and
    rich's render pipeline once instead of once per line."""
    lines = _Lines()
    for entry in changes.entries:
        if shown(entry):
            for line in unified(entry).splitlines():
                lines.add(line, next((s for prefix, s in _DIFF_STYLES if line.startswith(prefix)), ""))
        if entry.disruption is not None and not entry.failed:
            lines.add(Text.assemble(("disruptive", "bold magenta"), f": {disruption_text(entry)}"))
    lines.print(out)


def print_changes(out: Console, changes: ChangeSet) -> None:
    """The changes by stage, in the order apply makes them (``STAGES``, then ``prune``): a stage's
    name, then a line per object — ``+`` created, ``~`` configured, ``-`` deleted, ``!`` failed or
    refused — with what fleet decides for it and as whom, and its reason or the first line of its
    error (``print_problems`` has the rest). Under a configured object, its changed fields
    (``previews.field_diff``); objects of one kind whose fields change alike share one block.
    Under a disruptive one, ``disruptive: <reason>``."""
    lines = _Lines()
    for stage, entries in _by_stage(changes):
        rows = _rows(entries)
        if not rows:
            continue
        lines.add(stage, "bold")
        width = min(max(len(r.label) for r in rows), _LABEL_WIDTH)
        for row in rows:
            head = Text(f"  {row.sign} ", style=_SIGN_STYLES.get(row.sign, ""))
            head.append(f"{row.label:<{width}}  {row.verdict}".rstrip())
            lines.add(head)
            for line in row.fields:
                lines.add(f"      {line}", _FIELD_STYLES.get(line[:1], "dim"))
            for extra in row.extras:
                lines.add(Text.assemble("      ", extra))
    lines.print(out)


class _Lines:
    """Lines of text, each its own style, printed at once."""

    def __init__(self) -> None:
        self.text = Text()
        self.count = 0

    def add(self, line: str | Text, style: str = "") -> None:
        if self.count:
            self.text.append("\n")
        self.text.append(line, style=style or None)
        self.count += 1

    def print(self, out: Console) -> None:
        if self.count:
            out.print(self.text)


@dataclass
class _Row:
    sign: str
    label: str
    verdict: str
    fields: list[str] = field(default_factory=list)
    extras: list[Text] = field(default_factory=list)


def _by_stage(changes: ChangeSet) -> list[tuple[str, list[Change]]]:
    """The entries by the step of apply that makes them: each stage, then pruning (a deletion
    outside the operator stage, which uninstalls its own release, and what the ledger holds of a
    kind no stage orders); a stage ``STAGES`` does not name before pruning."""
    groups: dict[str, list[Change]] = {stage.name: [] for stage in STAGES}
    pruned: list[Change] = []
    recorded: list[Change] = []
    for entry in changes.entries:
        deletes = (entry.intended if entry.held is not None else entry.action) == Action.DELETED
        evicts = entry.decision is not None and entry.decision.verb == "evict"  # a drain's, in its change's stage
        if entry.stage == "record":  # the nodes a drain gives back, once the run is done
            recorded.append(entry)
        elif (deletes and not evicts and entry.stage != "operator") or not entry.stage:
            pruned.append(entry)
        else:
            groups.setdefault(entry.stage, []).append(entry)
    return [*groups.items(), (PRUNE, pruned), *((("record", recorded),) if recorded else ())]


def _rows(entries: list[Change]) -> list[_Row]:
    """A row per entry to show (a change, a failure, a disruption); configured objects of one kind
    with the same decision and the same changed fields, and nothing else to say, in one row."""
    rows: list[_Row] = []
    alike: dict[tuple[str, str, tuple[str, ...]], _Row] = {}
    for entry in entries:
        if not (shown(entry) or entry.failed or entry.disruption is not None):
            continue
        action = entry.intended if entry.held is not None and entry.intended else entry.action
        row = _Row(
            sign="!" if entry.failed else _SIGNS.get(action, "~"),
            label=str(entry.ref),
            verdict=_verdict(entry),
        )
        if shown(entry) and action not in (Action.CREATED, Action.DELETED):
            row.fields = field_diff(entry) or ["(only fleet's bookkeeping annotations)"]
        if entry.disruption is not None and not entry.failed:
            row.extras.append(Text.assemble(("disruptive", "bold magenta"), f": {disruption_text(entry)}"))
        plain = (
            action == Action.CONFIGURED
            and entry.held is None
            and not (entry.failed or entry.reason or entry.conflicts or entry.replace or row.extras)
        )
        key = (entry.ref.kind, row.verdict, tuple(row.fields))
        if plain and key in alike:
            alike[key].label += f", {str(entry.ref).removeprefix(f'{entry.ref.kind} ')}"
            continue
        if plain:
            alike[key] = row
        rows.append(row)
    return rows


def _verdict(entry: Change) -> str:
    """``<verdict> as <whom>`` (``Decision.to_json``), ``(replace)`` for a delete-and-create, then the
    reason, or the first line of the error."""
    decided = entry.decision.to_json() if entry.decision is not None else {}
    text = " as ".join(str(decided[k]) for k in ("verdict", "as") if decided.get(k))
    if entry.replace:
        text = f"{text} (replace)".lstrip()
    why = entry.error.splitlines()[0] if entry.error else entry.reason
    if why.startswith(f"{entry.ref}: "):
        why = why[len(f"{entry.ref}: ") :]
    return f"{text}: {why}" if text and why else text or why


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


__all__ = [
    "HANDFUL",
    "PRUNE",
    "console",
    "disruption_text",
    "print_bodies",
    "print_changes",
    "print_diff",
    "print_problems",
    "print_summary",
    "progress_bar",
    "shown",
]
