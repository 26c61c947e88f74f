"""``-o markdown`` of ``diff`` and ``validate``: one pull-request comment, within GitHub's size limit.

CI posts the output as a comment and edits that one comment on every push, finding it by the
hidden marker the text starts with (``<!-- fleet:diff -->``, ``<!-- fleet:validate -->``;
docs/validate.md has the workflows). A comment over 65,536 characters is refused by GitHub,
so the text is laid out in pieces and cut only *between* pieces, never inside a table, a
``<details>`` block or a fenced diff: the markdown stays valid however much is left out.

A comment is a list of clusters, each a heading and its parts: fixed text (a line, a table,
whatever must be shown) and groups of blocks (one changed object's collapsed diff, one finding,
one claim's row). Space is given out by importance, not by position: first every fixed part and
a reserved line per group, then the findings of every cluster, then claims and quotas, then the
diffs. A group shows its blocks in order until the next one does not fit, and ends with a line
that counts what it left out ("… 37 more objects changed (12 configured, 25 created) not
shown"). Text from the repository (names, messages, YAML) is escaped for where it goes.
"""

from __future__ import annotations

import functools
import html
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fleet.engine import STAGES, Change, ChangeSet
from fleet.engine.previews import unified
from fleet.manifests import Finding, Limits, Revision, load_revision
from fleet.manifests.trees import loadable
from fleet.policy.reviews import ClaimFit, ClusterReview, QuotaChange
from fleet.policy.tenancy import QuotaUse
from fleet.source import checkouts
from fleet.views import entries

LIMIT = 65_536
"""GitHub's limit on a comment's body, in characters."""
DIFF_MARKER = "<!-- fleet:diff -->"
VALIDATE_MARKER = "<!-- fleet:validate -->"
SUMMARY_RESERVE = 300
"""Characters kept for each group's closing count line."""

FINDINGS, QUOTAS, CLAIMS, OBJECTS = 0, 1, 2, 3
"""Priorities: findings and problems get space first, then quotas, then claims, then the diffs."""


@dataclass
class Block:
    """One piece that is shown whole or not at all; ``tag`` is what the closing count counts."""

    text: str
    tag: str = ""


@dataclass
class Group:
    """Blocks shown in order until one does not fit; ``left_out(tags)`` says what was not shown."""

    priority: int
    blocks: list[Block]
    left_out: Callable[[list[str]], str]
    head: str = ""
    """Text before the blocks (a table's header), shown with the first block."""


Part = str | Group


@dataclass
class Section:
    """One cluster: its heading and parts, in the order they are printed."""

    heading: str
    parts: list[Part] = field(default_factory=list)


def render(marker: str, title: str, sections: Sequence[Section], *, limit: int = LIMIT) -> str:
    """The comment: ``marker``, ``title``, then each section, at most ``limit`` characters (``size``)."""
    top = f"{marker}\n{title}\n\n"
    kept = list(sections)
    dropped = 0
    while kept and size(top) + sum(_fixed(s) for s in kept) + _dropped_line_size(dropped) > limit:
        kept.pop()  # not even headings and tables fit: leave whole clusters out, from the last
        dropped += 1
    budget = limit - size(top) - sum(_fixed(s) for s in kept) - _dropped_line_size(dropped)
    groups = [g for s in kept for g in s.parts if isinstance(g, Group)]
    shown = {id(g): 0 for g in groups}
    for priority in sorted({g.priority for g in groups}):
        # Round by round, one block of each group in turn: every cluster gets its share.
        open_groups = [g for g in groups if g.priority == priority and g.blocks]
        while open_groups:
            for group in list(open_groups):
                count = shown[id(group)]
                needed = size(group.blocks[count].text) + (size(group.head) + 1 if count == 0 else 0)
                if needed > budget:
                    open_groups.remove(group)  # a group stops at its first block that does not fit
                    continue
                budget -= needed
                shown[id(group)] = count + 1
                if count + 1 == len(group.blocks):
                    open_groups.remove(group)
    out = [top]
    for section in kept:
        out.append(section.heading)
        for part in section.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            count = shown[id(part)]
            if count:
                out.append(part.head)
                out.extend(b.text for b in part.blocks[:count])
                out.append("\n")  # a table or a list ends at a blank line, before the count line
            rest = [b.tag for b in part.blocks[count:]]
            if rest:
                out.append(part.left_out(rest)[: SUMMARY_RESERVE // 2 - 2] + "\n\n")
    if dropped:
        out.append(_dropped_line(dropped))
    return "".join(out)


def size(text: str) -> int:
    """``text``'s length as a browser counts it (UTF-16 code units): never less than Python's ``len``,
    so a comment within ``LIMIT`` by this count is within it by either."""
    return len(text.encode("utf-16-le")) // 2


def _fixed(section: Section) -> int:
    parts = sum(size(p) if isinstance(p, str) else SUMMARY_RESERVE for p in section.parts)
    return size(section.heading) + parts


def _dropped_line(count: int) -> str:
    return f"… {count} more cluster(s) not shown: the comment is limited to {LIMIT:,} characters\n" if count else ""


def _dropped_line_size(count: int) -> int:
    return size(_dropped_line(count)) + 10 if count else 0


def load_base(repo: Path, *, ref: str | None) -> tuple[Revision | None, str | None]:
    """The base revision of ``repo`` and its commit: ``ref``, else the default merge-base; (None, None) for none."""
    if ref is None:
        ref = checkouts.default_base(repo)
    if not ref:
        return None, None
    limits = Limits()
    files = checkouts.files_at(repo, ref=ref, loadable=loadable, max_bytes=limits.max_file_bytes)
    return load_revision(files, limits=limits), ref


# --- escaping


def inline(text: str) -> str:
    """``text`` as literal markdown on one line: punctuation markdown reads is backslash-escaped."""
    return re.sub(r"([\\`*_\[\]<>|~&#!])", r"\\\1", " ".join(text.split()))


def code(text: str) -> str:
    """``text`` as an inline code span (a longer fence when it holds backticks)."""
    text = " ".join(text.split())
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fenced(text: str, *, info: str) -> str:
    """``text`` in a fenced block that no line of it can close."""
    fence = "`" * max(3, max((len(m) for m in re.findall(r"^`+", text, re.MULTILINE)), default=0) + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{fence}{info}\n{body}{fence}\n"


def cell(text: str) -> str:
    """``text`` as an inline code span inside a table cell: a table splits even a code span at ``|``."""
    return code(text).replace("|", "\\|")


def collapsed(summary: str, body: str) -> str:
    """A ``<details>`` block (``summary`` is HTML): blank lines around the markdown inside it."""
    return f"<details><summary>{summary}</summary>\n\n{body}\n</details>\n\n"


def table(header: Sequence[str], *, right: int = 0) -> str:
    """A table's header rows; the last ``right`` columns are right-aligned."""
    left = len(header) - right
    return f"| {' | '.join(header)} |\n|{'---|' * left}{'--:|' * right}\n"


def row(cells: Iterable[str]) -> str:
    return f"| {' | '.join(cells)} |\n"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _counted(tags: list[str]) -> str:
    counts = Counter(tags)
    return ", ".join(f"{n} {tag}" for tag, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))


# --- findings


def where(finding: Finding, *, repo: Path) -> str:
    """``file:line:col`` of a finding, its file named from the repository's root (as the diff blocks are)."""
    loc = finding.location
    return _path(repo, loc.file) + (f":{loc.line}:{loc.col}" if loc.line else "")


def findings_part(findings: Sequence[Finding], *, repo: Path) -> list[Part]:
    """``### Findings`` and one list item per finding (errors first): location, rule, message, hint."""
    if not findings:
        return ["### Findings\n\nNo findings.\n\n"]
    ordered = sorted(findings, key=lambda f: f.severity != "error")
    errors = sum(f.severity == "error" for f in findings)
    head = f"### Findings\n\n{_plural(errors, 'error')}, {_plural(len(findings) - errors, 'warning')}.\n\n"
    blocks = []
    for f in ordered:
        level = "❌" if f.severity == "error" else "⚠️"
        hint = f"<br>hint: {inline(f.hint)}" if f.hint else ""
        blocks.append(
            Block(f"- {level} {code(where(f, repo=repo))} **{inline(f.rule)}** {inline(f.message)}{hint}\n", f.severity)
        )
    return [
        head,
        Group(FINDINGS, blocks, lambda tags: f"… {_plural(len(tags), 'more finding')} ({_counted(tags)}) not shown"),
    ]


# --- claims and quotas


def claims_part(claims: Sequence[ClaimFit], *, repo: Path, base: str | None) -> list[Part]:
    """``### Claims`` with one row per claim the change adds or changes: pools, devices, copies that fit."""
    against = f"compared with {code(base[:12])}" if base else "no base to compare with: every claim is listed"
    head = f"### Claims this change adds or changes\n\n<sub>{against}</sub>\n\n"
    if not claims:
        return [head + "None.\n\n"]
    measured = any(c.measured is not None for c in claims)
    header = ["claim", "change", "file", "declared pools it can use", "copies that fit"]
    if measured:
        header.append(next(c.measured.source for c in claims if c.measured is not None))
    blocks = []
    for claim in claims:
        cells = [
            cell(claim.object),
            claim.change,
            cell(f"{_path(repo, claim.location.file)}:{claim.location.line}"),
            _pools(claim),
            str(claim.copies) if claim.declared else "unknown",
        ]
        if measured:
            cells.append(_measured(claim))
        blocks.append(Block(row(cells), claim.change))
    return [
        Group(
            CLAIMS,
            blocks,
            lambda tags: f"… {_plural(len(tags), 'more claim')} ({_counted(tags)}) not shown",
            head=head + table(header),
        )
    ]


def _path(repo: Path, file: str) -> str:
    """``file`` (relative to the fleet's folder ``repo``) as the forge links it: from the git root."""
    top = _prefix(repo)
    return posixpath.normpath(top + file) if file else top.rstrip("/") or "."


@functools.lru_cache(maxsize=16)
def _prefix(repo: Path) -> str:
    return checkouts.prefix(repo)  # one git call per comment, not one per finding


def _pools(claim: ClaimFit) -> str:
    if not claim.declared:
        return "not judged (no pools, or a GPU model fleet does not know)"
    usable = [p for p in claim.pools if p.nodes]
    if not usable:
        return "**none**: no declared pool can satisfy it"
    return "<br>".join(
        f"{inline(p.pool)}: {_plural(p.nodes, 'node')}, {_plural(p.devices, 'device')}, {p.copies} at once"
        for p in usable
    )


def _measured(claim: ClaimFit) -> str:
    s = claim.measured
    if s is None:
        return ""
    if s.nodes == 0:
        return "**unsatisfiable**"
    text = f"{_plural(s.nodes, 'node')}, {_plural(s.devices, 'device')}, {s.capacity} at once"
    return text + (f", **{s.now} now**" if s.now is not None else "")


def quotas_part(quotas: Sequence[QuotaChange], *, based: bool = True) -> list[Part]:
    """``### Team device quota``: per team and class, the quota and what is requested, before → after
    (``based``; without a base, as they are)."""
    head = "### Team device quota\n\n"
    if not quotas:
        return [head + "No teams on this cluster.\n\n"]
    blocks = [
        Block(
            row(
                [
                    inline(q.team),
                    cell(q.device_class),
                    _before_after(q.before if based else q.after, q.after, _quota),
                    _before_after(q.before if based else q.after, q.after, _requested),
                    _state(q.after),
                ]
            ),
            "changed" if based and q.changed else "unchanged",
        )
        for q in sorted(quotas, key=lambda q: not q.changed)  # the changed rows first: they matter most
    ]
    return [
        Group(
            QUOTAS,
            blocks,
            lambda tags: f"… {_plural(len(tags), 'more quota row')} ({_counted(tags)}) not shown",
            head=head + table(["team", "device class", "quota", "requested", ""]),
        )
    ]


def _quota(use: QuotaUse) -> str:
    return "none" if use.quota is None else str(use.quota)


def _requested(use: QuotaUse) -> str:
    return f"{use.requested}" + (" + All" if use.unbounded else "")


def _before_after(before: QuotaUse | None, after: QuotaUse | None, show: Callable[[QuotaUse], str]) -> str:
    old = show(before) if before is not None else "—"
    new = show(after) if after is not None else "—"
    return new if old == new else f"{old} → **{new}**"


def _state(use: QuotaUse | None) -> str:
    if use is None or use.quota is None:
        return ""
    if use.unbounded or use.requested > use.quota:
        return "❌ over quota"
    return "✅"


def review_parts(review: ClusterReview | None, *, repo: Path, base: str | None) -> list[Part]:
    if review is None:
        return []
    return [*claims_part(review.claims, repo=repo, base=base), *quotas_part(review.quotas, based=base is not None)]


# --- diff


def counts_part(changes: ChangeSet) -> str:
    """The stage table of ``fleetctl diff`` (stderr there), as a markdown table."""
    counts = changes.summary()
    rows = [(stage.name, counts[stage.name]) for stage in STAGES if counts.get(stage.name)]
    if not rows:
        return "No objects.\n\n"
    columns = entries.COLUMNS
    text = table(["stage", *(str(c) for c in columns)], right=len(columns))
    text += "".join(row([name, *(str(count.get(str(c), 0)) for c in columns)]) for name, count in rows)
    return text + "\n"


def objects_part(changes: ChangeSet) -> list[Part]:
    """One collapsed diff per changed object, then the errors, conflicts and skipped objects."""
    shown = [e for e in changes.entries if entries.shown(e)]
    head = f"### {_plural(len(shown), 'object')} would change\n\n" if shown else "### No object would change\n\n"
    blocks = [Block(_object(entry), str(entry.action)) for entry in shown]
    parts: list[Part] = [
        head,
        Group(
            OBJECTS, blocks, lambda tags: f"… {_plural(len(tags), 'more object')} changed ({_counted(tags)}) not shown"
        ),
    ]
    disruptive = [Block(_disruptive(entry), "disruptive") for entry in changes.disruptive if not entry.failed]
    if disruptive:
        parts += [
            "### Disruptive\n\n"
            "These changes disrupt GPU work on the cluster (fleet classes every change as disruptive or safe; "
            "the rest are safe). Where the cluster's maintenance window or running jobs hold one back, it says "
            "what it waits for; the rest of the revision is applied at once:\n\n",
            Group(
                FINDINGS,
                disruptive,
                lambda tags: f"… {_plural(len(tags), 'more disruptive change')} not shown",
            ),
        ]
    problems = [Block(line, tag) for line, tag in _problems(changes)]
    if problems:
        parts += [
            "### Problems\n\n",
            Group(
                FINDINGS, problems, lambda tags: f"… {_plural(len(tags), 'more problem')} ({_counted(tags)}) not shown"
            ),
        ]
    return parts


def _object(entry: Change) -> str:
    ref = entry.ref
    name = f"{ref.api_version}/{ref.kind} {ref.namespace + '/' if ref.namespace else ''}{ref.name}"
    extra = " (replace)" if entry.replace else (" (drift)" if entry.drift else "")
    extra += " ⚠️ disruptive" if entry.disruption is not None else ""
    extra += " ⏸️ waits" if entry.held is not None else ""
    action = entry.intended if entry.held is not None and entry.intended else entry.action
    summary = f"<b>{html.escape(str(action))}</b>{extra} <code>{html.escape(name)}</code>"
    return collapsed(summary, fenced(unified(entry), info="diff"))


def _disruptive(entry: Change) -> str:
    found = entry.disruption
    assert found is not None
    line = f"- ⚠️ {code(str(entry.ref))} {inline(found.reason)}"
    if found.nodes:
        nodes = sorted(found.nodes)
        line += f"; nodes: {inline(', '.join(nodes[:10]))}" + (
            f" and {len(nodes) - 10} more" if len(nodes) > 10 else ""
        )
    if found.claims:
        claims = found.claims
        line += f"; claims: {inline(', '.join(claims[:10]))}" + (
            f" and {len(claims) - 10} more" if len(claims) > 10 else ""
        )
    if entry.held is not None:
        line += f"; **{inline(str(entry.held))}**"
    return line + "\n"


def _problems(changes: ChangeSet) -> list[tuple[str, str]]:
    lines = []
    for entry in changes.entries:
        if entry.failed:
            text = entry.error if entry.error.startswith(str(entry.ref)) else f"{entry.ref}: {entry.error}"
            tag = "refused" if entry.refused else "error"
            lines.append((f"- ❌ {tag}: {inline(text)}\n", tag))
        elif entry.reason and str(entry.action) == "skipped":
            lines.append((f"- skipped: {inline(f'{entry.ref}: {entry.reason}')}\n", "skipped"))
        if entry.conflicts and not entry.failed:
            fields = ", ".join(str(c) for c in entry.conflicts)
            said = "takes back (drift policy enforce)" if entry.forced else "⚠️ conflict"
            lines.append((f"- {said}: {inline(f'{entry.ref}: {fields}')}\n", "conflict"))
    return lines


__all__ = [
    "DIFF_MARKER",
    "LIMIT",
    "VALIDATE_MARKER",
    "Block",
    "Group",
    "Section",
    "cell",
    "claims_part",
    "code",
    "collapsed",
    "counts_part",
    "fenced",
    "findings_part",
    "inline",
    "load_base",
    "objects_part",
    "quotas_part",
    "render",
    "review_parts",
    "size",
]
