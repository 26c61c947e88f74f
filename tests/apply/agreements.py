"""Preview = action: the decisions ``diff`` shows are the decisions ``apply`` records, entry by entry.

A reviewer approves what ``fleetctl diff`` says; the controller and ``fleetctl apply`` then act.
Each decision (``decisions.Decision``: write, hold, refuse or leave, by which verb, as whom, forced
or not) must therefore be the same in both, on the same cluster state and under the same options.
These helpers run the preview, then the apply, and compare ``{(stage, Ref.key): decision.to_json()}``
whatever ``to_json`` holds, so the comparison grows with the decision and never needs changing.

An apply that stops (a refusal before any write, a failed stage) records fewer entries than the
preview, which goes through every stage: a scenario that expects it says so (``stops=True``), and
then the entries only the preview has are not differences, except its refusals: the apply must
record every refusal the preview shows (in these scenarios each is found before the apply stops).

The apply runs through the one driver (``engine.drive``) rather than ``engine.reconcile``: an error
that ends the run (an operator's refusal, a health timeout) then still leaves its ChangeSet to compare.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from fleet import engine, kube
from fleet.errors import FleetError
from fleetctl import cli
from tests.apply.conftest import Engine
from tests.apply.repos import Repo

Key = tuple[str, str]
"""``(stage, Ref.key)`` of an entry."""


@dataclass(frozen=True)
class Seen:
    """One entry as the comparison shows it: its decision and, for the reader, what became of it."""

    decision: Any
    action: str
    error: str

    def __str__(self) -> str:
        said = json.dumps(self.decision, sort_keys=True)
        error = self.error.splitlines()[0][:120] if self.error else ""
        return f"{said} ({self.action}{': ' + error if error else ''})"


def of_changes(changes: engine.ChangeSet) -> dict[Key, list[Seen]]:
    out: dict[Key, list[Seen]] = {}
    for e in changes.entries:
        decision = e.decision.to_json() if e.decision is not None else None
        out.setdefault((e.stage, e.ref.key), []).append(Seen(decision, str(e.action), e.error))
    return out


def of_document(document: Mapping[str, Any]) -> dict[Key, list[Seen]]:
    """The same, from ``fleetctl diff -o json`` or ``fleetctl apply -o json``."""
    out: dict[Key, list[Seen]] = {}
    for e in document["entries"]:
        o = e["object"]
        ref = kube.Ref(o["apiVersion"], o["kind"], o.get("namespace") or "", o["name"])
        seen = Seen(e.get("decision"), str(e.get("action", "")), str(e.get("error") or ""))
        out.setdefault((str(e["stage"]), ref.key), []).append(seen)
    return out


def differences(diff: dict[Key, list[Seen]], apply: dict[Key, list[Seen]], *, stops: bool = False) -> list[str]:
    """One line per entry whose decisions differ, or that only one side has (``stops``: the apply
    stopped, so entries only the preview has are not differences, unless the preview refuses them:
    every refusal the preview shows is one the apply records before it stops)."""
    lines: list[str] = []
    for key in sorted(set(diff) | set(apply)):
        stage, ref = key
        shown, done = diff.get(key, []), apply.get(key, [])
        if not done and stops and not any(_refused(s.decision) for s in shown):
            continue
        if [s.decision for s in shown] == [s.decision for s in done]:
            continue
        left = "; ".join(map(str, shown)) or "(no entry)"
        right = "; ".join(map(str, done)) or "(no entry)"
        lines.append(f"  [{stage}] {ref}\n      diff:  {left}\n      apply: {right}")
    return lines


def _refused(decision: Any) -> bool:
    return isinstance(decision, Mapping) and decision.get("verdict") == "refuse"


def assert_agree(
    diff: dict[Key, list[Seen]],
    apply: dict[Key, list[Seen]],
    *,
    stops: bool = False,
    what: str = "",
    note: str = "",
) -> None:
    """Fail listing every entry decided differently (``note``: what else the reader should know)."""
    __tracebackhide__ = True
    found = differences(diff, apply, stops=stops)
    if found:
        said = f"{what}: " if what else ""
        text = f"{said}diff and apply decide {len(found)} entries differently:\n" + "\n".join(found)
        pytest.fail(text + (f"\n{note}" if note else ""))


def stopped_by(changes: engine.ChangeSet, error: FleetError | None) -> str:
    """What ended the apply early, for the failure message: its failed entries and its error."""
    lines = [f"  [{e.stage}] {e.ref.key}: {e.error.splitlines()[0][:160]}" for e in changes.failed]
    if error is not None:
        lines.append(f"  {type(error).__name__}: {str(error).splitlines()[0][:160]}")
    return ("the apply failed or stopped on:\n" + "\n".join(lines)) if lines else ""


@dataclass(frozen=True)
class Compared:
    """The preview and the apply of one cluster state under the same options."""

    diff: engine.ChangeSet
    apply: engine.ChangeSet
    error: FleetError | None
    """What ended the apply, if anything did (the operator's refusal, a health timeout)."""

    def decision(self, side: str, *, kind: str, name: str, stage: str | None = None) -> dict[str, Any]:
        """The decision (as JSON) of the one entry of ``kind``/``name`` on ``side`` ("diff" or "apply")."""
        changes = self.diff if side == "diff" else self.apply
        found = [
            e
            for e in changes.entries
            if e.ref.kind == kind and e.ref.name == name and (stage is None or e.stage == stage)
        ]
        assert len(found) == 1, f"{side}: {len(found)} entries for {kind} {name}: {[str(e.ref) for e in found]}"
        decided = found[0].decision
        assert decided is not None, f"{side}: {kind} {name} has no decision"
        out: dict[str, Any] = decided.to_json()
        return out

    def both(self, *, kind: str, name: str, stage: str | None = None) -> dict[str, Any]:
        """The decision of ``kind``/``name``, asserted to be the same in the diff and the apply."""
        shown = self.decision("diff", kind=kind, name=name, stage=stage)
        done = self.decision("apply", kind=kind, name=name, stage=stage)
        assert shown == done, f"{kind} {name}: diff decides {shown}, apply {done}"
        return shown


def applied(fleet: Engine, **options: Any) -> engine.Outcome:
    """``fleet.apply(**options)`` through the driver: the ChangeSet stays, whatever ended the run."""
    plan = fleet.plan()
    options.setdefault("health_timeout", 30.0)
    return fleet.run(lambda c: engine.drive(engine.Sync(client=c, plan=plan, options=engine.Options(**options))))


def compare(
    fleet: Engine,
    *,
    stops: bool = False,
    ignore: Callable[[Key], bool] | None = None,
    what: str = "",
    **options: Any,
) -> Compared:
    """On the cluster as it is: ``fleet.diff(**options)``, then the apply under the same options; assert
    that every entry is decided alike (``ignore``: keys left out of the comparison, with a reason
    given where it is used)."""
    diff = fleet.diff(**options)
    outcome = applied(fleet, **options)
    if stops:
        refused = [
            e
            for e in outcome.changes.entries
            if e.decision is not None and e.decision.to_json().get("verdict") == "refuse"
        ]
        assert outcome.error is not None or outcome.changes.failed or refused, (
            "the scenario expects the apply to stop on a refusal or a failure, and it did not"
        )
    shown, done = of_changes(diff), of_changes(outcome.changes)
    if ignore is not None:
        shown = {k: v for k, v in shown.items() if not ignore(k)}
        done = {k: v for k, v in done.items() if not ignore(k)}
    assert_agree(shown, done, stops=stops, what=what, note=stopped_by(outcome.changes, outcome.error))
    return Compared(diff=diff, apply=outcome.changes, error=outcome.error)


@dataclass(frozen=True)
class Printed:
    """``fleetctl diff -o json`` then ``fleetctl apply -o json`` of one cluster state: exit codes and documents."""

    diff_code: int
    diff: dict[str, Any]
    apply_code: int
    apply: dict[str, Any]

    def entry(self, side: str, *, kind: str, name: str) -> dict[str, Any]:
        document = self.diff if side == "diff" else self.apply
        found = [e for e in document["entries"] if e["object"]["kind"] == kind and e["object"]["name"] == name]
        assert len(found) == 1, f"{side}: {len(found)} entries for {kind} {name}"
        out: dict[str, Any] = found[0]
        return out


def compare_cli(
    repo: Repo,
    capsys: pytest.CaptureFixture[str],
    *flags: str,
    apply_flags: Sequence[str] = (),
    stops: bool = False,
    what: str = "",
) -> Printed:
    """The real CLI in this process (as ``tests/apply/test_cli.py`` runs it; KUBECONFIG set by the test):
    ``fleetctl diff -o json`` and ``fleetctl apply -o json`` with the same ``flags`` (``apply_flags``:
    those only ``apply`` has, such as ``--prune``), their ``decision`` fields compared entry by entry."""
    path = str(repo.write())
    capsys.readouterr()
    diff_code, diff = _printed(["diff", path, "--cluster", repo.cluster, "-o", "json", *flags], capsys)
    apply_code, apply = _printed(["apply", path, "--cluster", repo.cluster, "-o", "json", *flags, *apply_flags], capsys)
    failed = [
        f"  [{e['stage']}] {e['object']['kind']} {e['object']['name']}: {e['error'].splitlines()[0][:160]}"
        for e in apply["entries"]
        if e.get("error")
    ]
    if apply.get("error"):
        failed.append(f"  {str(apply['error']).splitlines()[0][:160]}")
    note = ("fleetctl apply failed or stopped on:\n" + "\n".join(failed)) if failed else ""
    assert_agree(
        of_document(diff), of_document(apply), stops=stops, what=what or "fleetctl diff/apply -o json", note=note
    )
    return Printed(diff_code=diff_code, diff=diff, apply_code=apply_code, apply=apply)


def _printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    try:
        code = cli.run(argv)
    except SystemExit as err:  # argparse refused a flag
        code = err.code if isinstance(err.code, int) else 2
    __tracebackhide__ = True
    out = capsys.readouterr()
    try:
        document: dict[str, Any] | None = json.loads(out.out)
    except json.JSONDecodeError:
        document = None
    if document is None:
        pytest.fail(f"fleetctl {' '.join(argv[:1] + argv[2:])} printed no JSON (exit {code}):\n{out.err[-2000:]}")
    return code, document


__all__ = [
    "Compared",
    "Key",
    "Printed",
    "Seen",
    "applied",
    "assert_agree",
    "compare",
    "compare_cli",
    "differences",
    "stopped_by",
]
