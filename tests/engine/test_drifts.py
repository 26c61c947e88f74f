"""Drift's bookkeeping as pure functions: what a repair put back, who froze what, and the views of them
(FleetSync ``drift[]``/``frozen[]``, Events, metrics, ``fleetctl status``). On the sandbox:
tests/controller/test_conflicts.py."""

from __future__ import annotations

import datetime
from typing import Any

from fleet.controller import events, sections, statuses
from fleet.controller.metrics import Metrics
from fleet.engine import deletions, drifts, ledgers, ownership, renders
from fleet.engine.changesets import Action, Change, ChangeSet, FieldConflict
from fleet.kube import Ref
from fleet.manifests.views import resolve
from fleetctl.commands import status as status_command
from tests.manifests.repos import example_files, load

DC = Ref(api_version="resource.k8s.io/v1", kind="DeviceClass", namespace="", name="gpu.nvidia.com")
GIT = "device.driver == 'gpu.nvidia.com'"


def _entry(manager: str, time: str, fields: dict[str, Any], operation: str = "Update") -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "time": time, "fieldsType": "FieldsV1", "fieldsV1": fields}


def _live(expression: str, *, extra: list[dict[str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {
            "name": "gpu.nvidia.com",
            "labels": {ownership.MANAGED_BY: "fleet", "owner": "alice"},
            "annotations": {ownership.APPLIED: "live-hash", ownership.REVISION: "old"},
            "managedFields": [
                _entry(
                    "fleet",
                    "2026-12-05T10:00:00Z",
                    {"f:metadata": {"f:labels": {f"f:{ownership.MANAGED_BY}": {}}}},
                    "Apply",
                ),
                _entry("kubectl-patch", "2026-12-05T11:00:00Z", {"f:spec": {"f:selectors": {}}}),
                _entry("kubectl-label", "2026-12-05T11:01:00Z", {"f:metadata": {"f:labels": {"f:owner": {}}}}),
                *extra,
            ],
        },
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _after() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {
            "name": "gpu.nvidia.com",
            "labels": {ownership.MANAGED_BY: "fleet", "owner": "alice"},
            "annotations": {ownership.APPLIED: "git-hash", ownership.REVISION: "new"},
        },
        "spec": {"selectors": [{"cel": {"expression": GIT}}]},
    }


LEAVES = {
    ("spec", "selectors"),
    ("metadata", "labels", ownership.MANAGED_BY),
    ("metadata", "annotations", ownership.APPLIED),
    ("metadata", "annotations", ownership.REVISION),
}


def test_a_repair_names_each_declared_field_its_changer_and_both_values() -> None:
    found = drifts.repairs(
        live=_live("true"),
        after=_after(),
        leaves=LEAVES,
        conflicts=[("kubectl-patch", ".spec.selectors")],
    )
    # fleet's bookkeeping annotations and the label fleet does not declare (owner) are not repairs.
    assert found == (
        drifts.FieldRepair(
            field=".spec.selectors",
            manager="kubectl-patch",
            before='[{"cel":{"expression":"true"}}]',
            after='[{"cel":{"expression":"device.driver == \'gpu.nvidia.com\'"}}]',
        ),
    )
    assert "changed by kubectl-patch" in str(found[0]) and "true" in str(found[0])


def test_the_changer_comes_from_managed_fields_without_a_conflict_and_is_unknown_for_a_removal() -> None:
    live = _live("true")
    assert drifts.repairs(live=live, after=_after(), leaves=LEAVES)[0].manager == "kubectl-patch"
    del live["spec"]["selectors"]
    live["metadata"]["managedFields"] = live["metadata"]["managedFields"][:1]
    [removed] = drifts.repairs(live=live, after=_after(), leaves=LEAVES)
    assert (removed.manager, removed.before) == ("", drifts.ABSENT)
    assert drifts.repairs(live=None, after=_after(), leaves=LEAVES) == ()  # a re-creation: no fields to name


def test_secret_values_are_never_shown_and_long_values_are_cut() -> None:
    live = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"token": "c2VjcmV0"}}
    after = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"token": "Z2l0"}}
    [repair] = drifts.repairs(live=live, after=after, leaves={("data", "token")})
    assert (repair.before, repair.after) == (drifts.REDACTED, drifts.REDACTED)
    assert "c2VjcmV0" not in str(repair)
    long = _live("x" * 1000)
    [cut] = drifts.repairs(live=long, after=_after(), leaves=LEAVES)
    assert len(cut.before) == drifts.MAX_VALUE and cut.before.endswith("...")


def test_a_live_freeze_says_who_set_it_and_when() -> None:
    live = _live(GIT)
    assert drifts.live_freeze(live) is None
    live["metadata"]["annotations"][ownership.DRIFT] = "report"
    live["metadata"]["managedFields"].append(
        _entry(
            "kubectl-annotate", "2026-12-05T12:00:00Z", {"f:metadata": {"f:annotations": {f"f:{ownership.DRIFT}": {}}}}
        )
    )
    freeze = drifts.live_freeze(live)
    assert freeze == drifts.Freeze(mode="report", by="kubectl-annotate", since="2026-12-05T12:00:00Z")
    assert freeze.live and "kubectl-annotate at 2026-12-05T12:00:00Z" in freeze.describe()
    live["metadata"]["annotations"][ownership.DRIFT] = "enforce"  # not a freeze: the default
    assert drifts.live_freeze(live) is None


def test_a_listing_s_freezes_are_its_frozen_objects_alone() -> None:
    frozen, enforced, plain, bare = _live(GIT), _live(GIT), _live(GIT), {"kind": "Node"}
    frozen["metadata"]["annotations"][ownership.DRIFT] = "ignore"
    enforced["metadata"]["annotations"][ownership.DRIFT] = "enforce"
    listing = {"a": frozen, "b": enforced, "c": plain, "d": bare}
    assert drifts.live_freezes(listing) == {"a": drifts.live_freeze(frozen)}
    assert drifts.live_freezes(listing)["a"].mode == "ignore"


def test_a_frozen_object_is_not_pruned_and_its_freeze_survives_a_release() -> None:
    live = _live(GIT)
    live["metadata"]["annotations"][ownership.DRIFT] = "ignore"
    [skipped] = deletions.planned(
        ledger={DC.key: ledgers.Entry(DC.api_version, "created")},
        desired_keys=set(),
        live={DC.key: live},
        stage_of={"DeviceClass": "classes"},
    )
    assert skipped.action == Action.SKIPPED and "not pruned" in skipped.reason and "ignore" in skipped.reason
    released = ownership.release_patch(live)["metadata"]["annotations"]
    assert ownership.DRIFT not in released and released[ownership.APPLIED] is None


def test_the_drift_annotation_in_git_is_the_object_s_policy_and_never_applied() -> None:
    files = example_files()
    path = "deviceclasses/gpu.nvidia.com.yaml"
    files[path] = files[path].replace(
        b'    fleet.gpufleet.dev/adopt: "true"\n',
        b'    fleet.gpufleet.dev/adopt: "true"\n    fleet.gpufleet.dev/drift: report\n',
    )
    plan = renders.plan(resolve(load(files), cluster="gpu-east"), revision="abc")
    [dc] = [d for d in plan.objects if d.ref == DC]
    assert (dc.drift, dc.freeze) == ("report", "report")
    assert ownership.DRIFT not in dc.obj["metadata"]["annotations"]
    others = [d for d in plan.objects if d.ref != DC]
    assert all(not d.freeze and d.drift == "enforce" for d in others)


def _repaired() -> Change:
    return Change(
        ref=DC,
        stage="classes",
        action=Action.CONFIGURED,
        drift=True,
        forced=True,
        conflicts=(FieldConflict(manager="kubectl-patch", field=".spec.selectors"),),
        repairs=(drifts.FieldRepair(".spec.selectors", "kubectl-patch", '[{"cel":{"expression":"true"}}]', "[...]"),),
    )


def test_status_keeps_repairs_with_their_facts_and_each_repair_is_an_event() -> None:
    changes = ChangeSet(cluster="c", revision="abc", entries=[_repaired()])
    rows = sections.drift_of(changes, at="2026-12-05T12:00:00Z")
    assert rows == [
        {
            "kind": "DeviceClass",
            "namespace": "",
            "name": "gpu.nvidia.com",
            "stage": "classes",
            "action": "repaired",
            "reason": "changed in the cluster",
            "manager": "kubectl-patch",
            "fields": [
                {
                    "field": ".spec.selectors",
                    "manager": "kubectl-patch",
                    "before": '[{"cel":{"expression":"true"}}]',
                    "after": "[...]",
                }
            ],
            "time": "2026-12-05T12:00:00Z",
        }
    ]
    document = _repaired().to_json()  # fleetctl apply/diff -o json
    assert document["forced"] and document["repairs"][0]["manager"] == "kubectl-patch"
    assert "frozen" not in document
    # The next reconcile (woken by the repair's own write) finds nothing: the repair stays listed.
    now = datetime.datetime(2026, 12, 5, 12, 30, tzinfo=datetime.UTC)
    report = statuses.Report(
        cluster="c", attempted="abc", applied="abc", drift=statuses.Drift(repairs=sections.keep_repairs(rows, now=now))
    )
    report.changes = ChangeSet(cluster="c", revision="abc")
    body = statuses.status(report, generation=1)
    assert [(d["name"], d["action"], d["manager"]) for d in body["drift"]] == [
        ("gpu.nvidia.com", "repaired", "kubectl-patch")
    ]
    assert sections.keep_repairs(rows, now=now + datetime.timedelta(hours=1)) == []
    assert len(sections.keep_repairs(rows * 50, now=now)) == sections.MAX_REPAIRS
    # Every repair is announced, even of an object announced before (repairs are not de-duplicated).
    already = {("DeviceClass", "", "gpu.nvidia.com", "repaired")}
    [(reason, message, warning)] = events.events_for(changes, already=already)
    assert reason == "DriftRepaired" and not warning
    assert "kubectl-patch" in message and '"expression":"true"' in message and ".spec.selectors" in message
    text = status_command.render({"metadata": {"name": "c"}, "status": body})
    assert "DeviceClass gpu.nvidia.com: repaired 2026-12-05T12:00:00Z, changed by kubectl-patch" in text
    assert '    .spec.selectors: [{"cel":{"expression":"true"}}] -> [...]' in text


def test_the_repair_counter_names_the_manager_and_the_frozen_gauge_is_set_by_the_controller() -> None:
    metrics = Metrics()
    recreated = Change(ref=DC, stage="classes", action=Action.CREATED, drift=True, reason="deleted in the cluster")
    reported = Change(ref=DC, stage="classes", action=Action.SKIPPED, drift=True)
    metrics.record_changeset(ChangeSet(cluster="c", revision="a", entries=[_repaired(), recreated, reported]))
    scraped = metrics.render()[0].decode()
    assert 'fleet_drift_repaired_total{manager="kubectl-patch",stage="classes"} 1.0' in scraped
    assert 'fleet_drift_repaired_total{manager="unknown",stage="classes"} 1.0' in scraped
    assert 'fleet_drift_detected_total{stage="classes"} 3.0' in scraped
    assert "fleet_objects_frozen 0.0" in scraped


def test_frozen_objects_are_listed_with_who_and_when_and_rendered() -> None:
    rb = Ref(api_version="rbac.authorization.k8s.io/v1", kind="RoleBinding", namespace="ml", name="fleet-team-claims")
    frozen = sections.frozen_of(
        [
            (DC, drifts.Freeze(mode="report", by="kubectl-annotate", since="2026-12-05T12:00:00Z")),
            (rb, drifts.Freeze(mode="ignore", by="git", source="teams/ml/team.yaml:1")),
        ]
    )
    report = statuses.Report(cluster="c", attempted="a", applied="a", drift=statuses.Drift(frozen=frozen))
    body = statuses.status(report, generation=1)
    assert body["frozenCount"] == 2 and body["frozen"][0]["by"] == "kubectl-annotate"
    ready = next(c for c in body["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and "2 object(s) frozen" in ready["message"]
    text = status_command.render({"metadata": {"name": "c"}, "status": body})
    assert "frozen (2), left alone until unfrozen:" in text
    assert "  DeviceClass gpu.nvidia.com: report, set by kubectl-annotate at 2026-12-05T12:00:00Z" in text
    assert "  RoleBinding ml/fleet-team-claims: ignore, set in git at teams/ml/team.yaml:1" in text


def test_the_pull_request_comment_says_enforce_takes_the_fields_back() -> None:
    from fleet.views import comments

    conflicted = Change(
        ref=DC,
        stage="classes",
        action=Action.SKIPPED,
        error="conflict",
        conflicts=(FieldConflict(manager="kubectl-patch", field=".spec.selectors"),),
    )
    for entry, said in ((_repaired(), "takes back (drift policy enforce)"), (conflicted, None)):
        text = comments.render(
            "<!-- m -->",
            "t",
            [comments.Section(heading="## c", parts=comments.objects_part(ChangeSet("c", "a", [entry])))],
        )
        if said:
            assert said in text and "kubectl-patch" in text and "⚠️ conflict" not in text
        else:
            assert "takes back" not in text
