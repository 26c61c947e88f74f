"""FleetSync status as a pure view of what the controller knows: kstatus conditions, counts, findings, drift."""

from __future__ import annotations

from fleet.controller import events, sections, statuses
from fleet.engine.changesets import Action, Change, ChangeSet, FieldConflict
from fleet.kube import Ref
from fleet.manifests.findings import Finding
from fleet.manifests.locations import Location
from fleetctl.commands import status as status_command

DC = Ref(api_version="resource.k8s.io/v1", kind="DeviceClass", namespace="", name="gpu")
RB = Ref(api_version="rbac.authorization.k8s.io/v1", kind="RoleBinding", namespace="ml", name="fleet-team-claims")


def conditions(body: dict[str, object]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in body["conditions"]}  # type: ignore[attr-defined, index]


def test_applied_revision_is_ready_and_counts_come_from_the_changeset() -> None:
    changes = ChangeSet(cluster="c", revision="abc", entries=[Change(ref=DC, stage="classes", action=Action.CREATED)])
    report = statuses.Report(cluster="c", attempted="abc", applied="abc", enforced="abc", changes=changes)
    body = statuses.status(report, generation=3)
    assert conditions(body) == {
        "Ready": ("True", "Applied"),
        "Reconciling": ("False", "Idle"),
        "Stalled": ("False", "Healthy"),
    }
    assert all(c["observedGeneration"] == 3 for c in body["conditions"])
    assert body["stages"] == [
        {"name": "classes", "created": 1, "configured": 0, "unchanged": 0, "deleted": 0, "skipped": 0, "failed": 0}
    ]


def test_an_invalid_revision_is_stalled_names_its_findings_and_keeps_the_last_good_one() -> None:
    finding = Finding(location=Location("teams/ml/team.yaml", 6, 3), rule="schema", message="unknown field")
    report = statuses.Report(cluster="c", attempted="bad", applied="good", enforced="good", findings=(finding,))
    body = statuses.status(report, generation=1)
    assert conditions(body)["Ready"] == ("False", "ValidationFailed")
    assert conditions(body)["Stalled"] == ("True", "ValidationFailed")
    assert conditions(body)["Reconciling"][0] == "False"
    assert body["findings"] == [{"location": "teams/ml/team.yaml:6:3", "rule": "schema", "message": "unknown field"}]
    assert body["lastAppliedRevision"] == "good" and body["enforcedRevision"] == "good"


def test_drift_is_listed_with_what_was_done_and_an_event_each() -> None:
    changes = ChangeSet(
        cluster="c",
        revision="abc",
        entries=[
            Change(ref=DC, stage="classes", action=Action.CONFIGURED, drift=True),
            Change(ref=RB, stage="tenancy", action=Action.SKIPPED, drift=True, reason="deleted in the cluster; report"),
        ],
    )
    repairs = [d for d in sections.drift_of(changes, at="2026-12-05T12:00:00Z") if d["action"] == "repaired"]
    report = statuses.Report(
        cluster="c", attempted="abc", applied="abc", changes=changes, drift=statuses.Drift(repairs)
    )
    body = statuses.status(report, generation=1)
    assert [(d["kind"], d["action"]) for d in body["drift"]] == [
        ("RoleBinding", "reported"),
        ("DeviceClass", "repaired"),
    ]
    assert body["driftCount"] == 2
    reasons = [(reason, warning) for reason, _, warning in events.events_for(changes)]
    assert reasons == [("DriftRepaired", False), ("Drift", True)]
    announced = {("RoleBinding", "ml", "fleet-team-claims", "reported")}
    assert [m for _, m, _ in events.events_for(changes, already=announced)] == [
        "DeviceClass gpu: put back to git's content (changed in the cluster)"
    ]


def test_ignored_drift_is_listed_and_announces_nothing() -> None:
    reason = "changed in the cluster; drift policy ignore"
    changes = ChangeSet(
        cluster="c",
        revision="abc",
        entries=[Change(ref=DC, stage="classes", action=Action.UNCHANGED, drift=True, reason=reason)],
    )
    body = statuses.status(statuses.Report(cluster="c", attempted="abc", applied="abc", changes=changes), generation=1)
    assert [(d["kind"], d["action"]) for d in body["drift"]] == [("DeviceClass", "ignored")]
    assert events.events_for(changes) == []


def test_transition_times_change_only_with_the_status() -> None:
    report = statuses.Report(cluster="c", attempted="a", applied="a")
    first = statuses.status(report, generation=1)
    first["conditions"][0]["lastTransitionTime"] = "2020-01-01T00:00:00Z"
    again = statuses.status(report, generation=1, previous=first)
    assert again["conditions"][0]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    report.source.reachable, report.source.error = False, "cannot reach the remote"
    moved = statuses.status(report, generation=1, previous=first)
    assert moved["conditions"][0]["status"] == "False"
    assert moved["conditions"][0]["lastTransitionTime"] != "2020-01-01T00:00:00Z"


def test_fleetctl_status_renders_findings_and_drift() -> None:
    finding = Finding(location=Location("teams/ml/team.yaml", 6, 3), rule="schema", message="unknown field")
    report = statuses.Report(cluster="c", attempted="bad", applied="good", enforced="good", findings=(finding,))
    obj = {
        "metadata": {"name": "c"},
        "spec": {"repository": "file:///r"},
        "status": statuses.status(report, generation=1),
    }
    text = status_command.render(obj)
    assert "teams/ml/team.yaml:6:3 schema unknown field" in text
    assert "Stalled     True  ValidationFailed" in text
    assert "enforced   good (the newest revision is not applied)" in text


def test_a_field_another_manager_owns_is_a_conflict_naming_the_manager_and_one_event_per_object() -> None:
    error = 'Apply failed with 1 conflict: conflict with "kubectl-patch": .spec.selectors'
    conflicted = Change(
        ref=DC,
        stage="classes",
        action=Action.SKIPPED,
        error=error,
        drift=True,
        conflicts=(FieldConflict(manager="kubectl-patch", field=".spec.selectors"),),
    )
    changes = ChangeSet(cluster="c", revision="abc", entries=[conflicted])
    report = statuses.Report(cluster="c", attempted="abc", applied="", enforced="abc", changes=changes)
    body = statuses.status(report, generation=1)
    ready = next(c for c in body["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Conflict")
    assert "DeviceClass gpu .spec.selectors (owned by kubectl-patch)" in ready["message"]
    assert "take-ownership" in ready["message"] and "--force-conflicts" in ready["message"]
    assert body["conflicts"] == [
        {"kind": "DeviceClass", "namespace": "", "name": "gpu", "field": ".spec.selectors", "manager": "kubectl-patch"}
    ]
    assert body["conflictCount"] == 1
    recorded = events.events_for(changes)
    assert [(r, w) for r, _, w in recorded if r == "Conflict"] == [("Conflict", True)]
    assert "kubectl-patch" in next(m for r, m, _ in recorded if r == "Conflict")
    assert not [e for e in recorded if e[0] == "Failed"]
    shown = status_command.render({"metadata": {"name": "c"}, "status": body})
    assert "conflicts (1), not overwritten:\n  DeviceClass gpu .spec.selectors: owned by kubectl-patch" in shown
    announced = {("DeviceClass", "", "gpu", "conflict")}
    assert not [e for e in events.events_for(changes, already=announced) if e[0] == "Conflict"]


def test_a_source_over_its_size_limit_says_so_and_names_the_revision_still_enforced() -> None:
    report = statuses.Report(
        cluster="c",
        attempted="good",
        applied="good",
        enforced="good",
        source=statuses.SourceState(
            reachable=False, error="the fetch brought more than the limit of 1000 bytes", reason="too-large"
        ),
    )
    body = statuses.status(report, generation=1)
    ready = next(c for c in body["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "SourceTooLarge")
    assert ready["message"].endswith("(revision good stays enforced)")
    assert body["sourceReason"] == "too-large"
    report.source.reason = "unreachable"
    assert conditions(statuses.status(report, generation=1))["Ready"] == ("False", "SourceUnreachable")


def test_disruptive_entries_are_counted_and_listed_with_reason_nodes_and_claims() -> None:
    from fleet.engine.disruptions import Disruption

    tightened = Change(
        ref=DC,
        stage="classes",
        action=Action.CONFIGURED,
        disruption=Disruption(reason="tightens the selectors", nodes=frozenset({"n2", "n1"}), claims=("ml/a",)),
    )
    safe = Change(ref=RB, stage="tenancy", action=Action.CONFIGURED)
    changes = ChangeSet(cluster="c", revision="abc", entries=[tightened, safe])
    body = statuses.status(statuses.Report(cluster="c", attempted="abc", changes=changes), generation=1)
    assert body["disruptiveCount"] == 1
    assert body["disruptive"] == [
        {
            "kind": "DeviceClass",
            "namespace": "",
            "name": "gpu",
            "stage": "classes",
            "action": "configured",
            "reason": "tightens the selectors",
            "nodes": ["n1", "n2"],
            "nodeCount": 2,
            "claims": ["ml/a"],
            "claimCount": 1,
        }
    ]
    quiet = statuses.status(statuses.Report(cluster="c", changes=ChangeSet("c", "abc", [safe])), generation=1)
    assert (quiet["disruptive"], quiet["disruptiveCount"]) == ([], 0)


def test_each_stage_says_how_long_it_took_and_how_its_gate_went() -> None:
    changes = ChangeSet(cluster="c", revision="abc", entries=[Change(ref=DC, stage="classes", action=Action.CREATED)])
    run = changes.run_of("classes")
    run.seconds, run.gate, run.gate_seconds, run.healthy = 1.23456, "classes-published", 0.5, True
    body = statuses.status(statuses.Report(cluster="c", attempted="abc", applied="abc", changes=changes), generation=1)
    (stage,) = body["stages"]
    assert (stage["seconds"], stage["gate"], stage["gateSeconds"], stage["healthy"]) == (
        1.235,
        "classes-published",
        0.5,
        True,
    )


def test_the_changes_carry_their_decision_and_leave_out_the_unchanged() -> None:
    from fleet.engine.decisions import Decision

    written = Change(ref=DC, stage="classes", action=Action.CONFIGURED, reason="spec changed").decided(
        Decision(verdict="write", verb="apply")
    )
    unchanged = Change.unchanged(RB, "tenancy")
    body = statuses.status(
        statuses.Report(cluster="c", changes=ChangeSet("c", "abc", [written, unchanged])), generation=1
    )
    assert body["changeCount"] == 1
    (row,) = body["changes"]
    assert (row["name"], row["action"], row["reason"]) == ("gpu", "configured", "spec changed")
    assert row["decision"] == {"verdict": "write", "verb": "apply", "as": "fleet"}
