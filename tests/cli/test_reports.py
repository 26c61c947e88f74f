"""What people read: diffs, conflicts, the summary table and progress, on a terminal and off it."""

from __future__ import annotations

import io

import pytest
from rich.text import Text

from fleet.engine import Action, Change, ChangeSet, FieldConflict
from fleet.engine.previews import unified
from fleet.kube import Ref
from fleetctl import reports


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def changes() -> ChangeSet:
    quota = Ref(api_version="v1", kind="ResourceQuota", namespace="ml", name="fleet-devices")
    before = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "fleet-devices", "namespace": "ml"},
        "spec": {"hard": {"gpu.deviceclass.resource.k8s.io/devices": "8"}},
    }
    after = {**before, "spec": {"hard": {"gpu.deviceclass.resource.k8s.io/devices": "4"}}}
    ns = Ref(api_version="v1", kind="Namespace", namespace="", name="ml")
    return ChangeSet(
        cluster="c",
        revision="r",
        entries=[
            Change(ref=ns, stage="namespaces", action=Action.UNCHANGED),
            Change(
                ref=quota,
                stage="tenancy",
                action=Action.CONFIGURED,
                before=before,
                after=after,
                conflicts=(
                    FieldConflict(manager="kubectl-patch", field=".spec.hard.gpu.deviceclass.resource.k8s.io/devices"),
                ),
            ),
        ],
    )


def render(stream: io.StringIO, what: str) -> str:
    out = reports.console(stream)
    getattr(reports, what)(out, changes())
    return stream.getvalue()


def test_plain_text_off_a_terminal_is_the_unified_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    text = render(io.StringIO(), "print_diff")
    assert text == unified(changes().entries[1])
    assert "-    gpu.deviceclass.resource.k8s.io/devices: '8'" in text


def test_colour_on_a_terminal_and_none_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    coloured = render(Terminal(), "print_diff")
    assert "\x1b[31m-" in coloured and "\x1b[32m+" in coloured
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in render(Terminal(), "print_diff")


def test_the_diff_is_printed_at_once_as_it_was_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """``print_diff`` hands rich one text of every line (one render, not one per line: issue 38); on a
    terminal, colours and all, it is byte for byte what a print of each line with its style gives."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    found = changes()
    found.entries.append(found.entries[1])  # two diffs: the lines of both, in order
    each = reports.console(Terminal())
    for entry in found.entries[1:]:
        for line in unified(entry).splitlines():
            style = next((s for prefix, s in reports._DIFF_STYLES if line.startswith(prefix)), "")
            each.print(Text(line, style=style))
    once = reports.console(Terminal())
    reports.print_diff(once, found)
    assert isinstance(once.file, Terminal) and isinstance(each.file, Terminal)
    assert once.file.getvalue() == each.file.getvalue() and "\x1b[32m+" in once.file.getvalue()


def test_conflicts_name_owner_and_field_and_say_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    text = render(io.StringIO(), "print_problems")
    assert text.splitlines()[0] == (
        "conflict: ResourceQuota ml/fleet-devices: "
        ".spec.hard.gpu.deviceclass.resource.k8s.io/devices (owned by kubectl-patch)"
    )
    assert "--force-conflicts" in text and "kubectl-patch" in text.splitlines()[1]


def test_summary_table_counts_per_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    lines = render(io.StringIO(), "print_summary").splitlines()
    assert lines[0].split() == ["stage", "created", "configured", "unchanged", "deleted", "skipped"]
    assert lines[1].split() == ["namespaces", "0", "0", "1", "0", "0"]
    assert lines[2].split() == ["tenancy", "0", "1", "0", "0", "0"]
    assert "\x1b[" not in "".join(lines)


def test_progress_draws_nothing_in_a_pipe() -> None:
    stream = io.StringIO()
    with reports.progress_bar(reports.console(stream)) as bar:
        task = bar.add_task("claims: writing", total=3)
        bar.update(task, completed=3)
    assert stream.getvalue() == ""


def test_a_disruptive_entry_has_its_line_under_its_diff_and_the_summary_counts_it() -> None:
    from fleet.engine.disruptions import Disruption

    found = changes()
    [quota] = [e for e in found.entries if e.ref.kind == "ResourceQuota"]
    disruptive = quota.replaced(disruption=Disruption(reason="tightens the selectors: ml/a", claims=("ml/a", "ml/b")))
    found.settle([(quota, disruptive)])
    out = io.StringIO()
    reports.print_diff(reports.console(out), found)
    lines = out.getvalue().splitlines()
    assert lines[-1] == "disruptive: tightens the selectors: ml/a (claims: ml/a, ml/b)"
    assert lines[-2].startswith("+") or lines[-2].startswith(" "), "right under the entry's diff"
    summary = io.StringIO()
    reports.print_summary(reports.console(summary), found)
    assert summary.getvalue().splitlines()[-1] == "1 disruptive: ResourceQuota ml/fleet-devices"
    safe = io.StringIO()
    reports.print_diff(reports.console(safe), changes())
    assert "disruptive" not in safe.getvalue()
