"""FleetSync ``status.operator`` as a pure view of the operator release's Change: release, version,
what the run did, each GPU node's driver-upgrade state, stuck nodes, their Events, and the render."""

from __future__ import annotations

import datetime

from fleet.controller import events, sections, statuses
from fleet.engine import operators
from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.engine.drivers import DriverState, ReleaseStatus
from fleetctl.commands import status as status_command

T0 = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
REF = operators.release_ref(release="gpu-operator", namespace="gpu-operator")


def _seen(*drivers: DriverState, checked: datetime.datetime = T0, version: str = "v26.7.0") -> ReleaseStatus:
    return ReleaseStatus(version=version, limit=1800, checked=checked, drivers=drivers)


def _minutes_ago(minutes: int) -> datetime.datetime:
    return T0 - datetime.timedelta(minutes=minutes)


STUCK = DriverState(
    node="gpu-2", state="pod-restart-required", since=_minutes_ago(45), events=("Evict: pod ml/train-0 has a PDB",)
)
MOVING = DriverState(node="gpu-1", state="upgrade-required", since=_minutes_ago(5))
DONE = DriverState(node="gpu-3", state="upgrade-done", since=_minutes_ago(600))


def _report(change: Change | None) -> statuses.Report:
    changes = ChangeSet(cluster="c", revision="abc", entries=[change] if change else [])
    return statuses.Report(cluster="c", attempted="abc", applied="abc", changes=changes, operator=change)


def test_operator_status_lists_every_node_and_marks_the_stuck_one_with_its_events() -> None:
    change = Change(ref=REF, stage="operator", action=Action.UNCHANGED, operator=_seen(DONE, MOVING, STUCK))
    body = statuses.status(_report(change), generation=1)
    assert body["operator"] == {
        "release": "gpu-operator/gpu-operator",
        "version": "v26.7.0",
        "action": "unchanged",
        "error": "",
        "driverStateTimeout": 1800,
        "driverUpgrade": [
            {"node": "gpu-3", "state": "upgrade-done", "since": "2026-01-01T02:00:00Z", "stuck": False},
            {"node": "gpu-1", "state": "upgrade-required", "since": "2026-01-01T11:55:00Z", "stuck": False},
            {
                "node": "gpu-2",
                "state": "pod-restart-required",
                "since": "2026-01-01T11:15:00Z",
                "stuck": True,
                "events": ["Evict: pod ml/train-0 has a PDB"],
            },
        ],
        "stuckCount": 1,
    }
    # A stuck driver upgrade is the operator's rollout, not fleet's revision: Ready stays True.
    ready = next(c for c in body["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Applied")


def test_refused_and_failed_runs_show_the_running_version_and_the_error() -> None:
    refused = Change(
        ref=REF,
        stage="operator",
        action=Action.SKIPPED,
        refused=True,
        error="v25.3.0 is older than the running v26.7.0: a downgrade\n  hint: set spec.upgrade.allowDowngrade",
        operator=_seen(),
    )
    op = sections.operator_of(refused)
    assert op is not None
    assert (op["action"], op["version"], op["error"].splitlines()[0]) == (
        "refused",
        "v26.7.0",
        "v25.3.0 is older than the running v26.7.0: a downgrade",
    )
    failed = Change(ref=REF, stage="operator", action=Action.CONFIGURED, error="helm upgrade failed", operator=_seen())
    assert sections.operator_of(failed)["action"] == "failed"  # type: ignore[index]
    skipped = Change(ref=REF, stage="operator", action=Action.SKIPPED, reason="no helm binary configured")
    assert sections.operator_of(skipped) == {
        "release": "gpu-operator/gpu-operator",
        "version": "",
        "action": "skipped",
        "error": "",
        "driverStateTimeout": 0,
        "driverUpgrade": [],
        "stuckCount": 0,
    }
    assert "operator" not in statuses.status(_report(None), generation=1)


def test_the_status_does_not_change_while_nothing_but_time_passes() -> None:
    """No write per reconcile: the body holds no read time or minutes, only states, since and stuck."""
    early = Change(ref=REF, stage="operator", action=Action.UNCHANGED, operator=_seen(MOVING, STUCK))
    later_seen = _seen(MOVING, STUCK, checked=T0 + datetime.timedelta(minutes=3))
    later = Change(ref=REF, stage="operator", action=Action.UNCHANGED, operator=later_seen)
    assert sections.operator_of(early) == sections.operator_of(later)
    # ... until a node crosses driverStateTimeout: then it is a real change.
    crossed = _seen(MOVING, STUCK, checked=T0 + datetime.timedelta(minutes=26))
    assert sections.operator_of(Change(ref=REF, stage="operator", action=Action.UNCHANGED, operator=crossed)) != (
        sections.operator_of(early)
    )
    assert _seen(MOVING, STUCK).next_deadline() == MOVING.since + datetime.timedelta(seconds=1800)  # type: ignore[operator]


def test_a_stuck_node_gets_one_warning_event_per_state() -> None:
    change = Change(ref=REF, stage="operator", action=Action.UNCHANGED, operator=_seen(MOVING, STUCK))
    found, announced = events.stuck_events(change, already=set())
    assert announced == {("gpu-2", "pod-restart-required")}
    assert [(reason, warning) for reason, _, warning in found] == [("DriverUpgradeStuck", True)]
    message = found[0][1]
    assert "Node gpu-2 has been in driver-upgrade state pod-restart-required for 45 min" in message
    assert "Evict: pod ml/train-0 has a PDB" in message and "kubectl describe node gpu-2" in message
    assert events.stuck_events(change, already=announced) == ([], announced)
    # Once it moves on, the pair is forgotten: stuck again later, it is announced again.
    moved = Change(ref=REF, stage="operator", action=Action.UNCHANGED, operator=_seen(MOVING))
    assert events.stuck_events(moved, already=announced) == ([], set())


def test_fleetctl_status_renders_the_release_and_each_node() -> None:
    change = Change(ref=REF, stage="operator", action=Action.UNCHANGED, operator=_seen(MOVING, STUCK))
    obj = {"metadata": {"name": "c"}, "status": statuses.status(_report(change), generation=1)}
    text = status_command.render(obj, now=T0 + datetime.timedelta(minutes=10))
    lines = text.splitlines()
    at = lines.index("operator   gpu-operator/gpu-operator v26.7.0  unchanged")
    assert lines[at + 1 : at + 3] == [
        "  gpu-1  upgrade-required",
        "  gpu-2  pod-restart-required  STUCK for 55 min (driverStateTimeout 30 min); "
        "events: Evict: pod ml/train-0 has a PDB",
    ]
    refused = Change(ref=REF, stage="operator", action=Action.SKIPPED, refused=True, error="why\n  hint: fix")
    obj = {"metadata": {"name": "c"}, "status": statuses.status(_report(refused), generation=1)}
    assert "operator   gpu-operator/gpu-operator (not deployed)  refused\n  why\n    hint: fix\n" in (
        status_command.render(obj)
    )
