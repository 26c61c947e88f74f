"""Ownership decisions as pure functions: who owns an object, what fleet may adopt, release, delete."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.engine import adoptions, blockers, deletions, ledgers, ownership, plans, previews, renders, stages
from fleet.errors import FleetError
from fleet.kube import errors
from fleet.manifests.views import resolve
from tests.manifests.repos import example_files, load


def _plan(files: dict[str, bytes] | None = None) -> plans.Plan:
    return renders.plan(resolve(load(files or example_files()), cluster="gpu-east"), revision="abc")


def _live(name: str, *, managers: tuple[str, ...] = (), labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": "u1",
            "resourceVersion": "7",
            "labels": labels or {},
            "managedFields": [{"manager": m, "operation": "Update"} for m in managers],
        },
    }


def test_owners_name_field_managers_other_tools_and_helm_but_not_fleet() -> None:
    live = _live("ml", managers=("kubectl-create", "fleet", "fleet-pools"), labels={ownership.MANAGED_BY: "Helm"})
    live["metadata"]["annotations"] = {ownership.HELM_RELEASE: "ml", ownership.HELM_RELEASE_NAMESPACE: "infra"}
    assert ownership.owners(live) == [
        'field manager "kubectl-create"',
        "app.kubernetes.io/managed-by=Helm",
        "Helm release infra/ml",
    ]
    assert ownership.owners(_live("x", managers=("fleet",), labels={ownership.MANAGED_BY: "fleet"})) == []


def test_an_existing_object_is_a_conflict_unless_fleets_or_adopted() -> None:
    plan = _plan()
    ns = next(d for d in plan.objects if d.ref.kind == "Namespace")
    live = {ns.ref.key: _live(ns.ref.name, managers=("kubectl-create",))}
    [conflict] = adoptions.conflicts(desired=[ns], live=live, ledger={}, cluster="gpu-east")
    assert conflict.failed and conflict.refused and conflict.ref == ns.ref
    assert 'field manager "kubectl-create"' in conflict.error and "spec.adoptNamespaces" in conflict.error
    assert ns.source.split(":")[0] in conflict.error

    in_ledger = {ns.ref.key: ledgers.Entry("v1", "created")}
    assert adoptions.conflicts(desired=[ns], live=live, ledger=in_ledger, cluster="gpu-east") == []
    fleets = {ownership.MANAGED_BY: "fleet", ownership.CLUSTER_LABEL: "gpu-east"}
    marked = {ns.ref.key: _live(ns.ref.name, labels=fleets)}
    assert adoptions.conflicts(desired=[ns], live=marked, ledger={}, cluster="gpu-east") == []
    assert adoptions.conflicts(desired=[ns], live=marked, ledger={}, cluster="gpu-west") != []
    assert adoptions.origin(ns.ref.key, ledger={}, live_before=live) == "adopted"
    assert adoptions.origin(ns.ref.key, ledger={}, live_before={}) == "created"
    assert adoptions.origin(ns.ref.key, ledger=in_ledger, live_before=live) == "created"


def test_what_fleetctl_import_hands_over_is_taken_without_a_conflict_with_the_origin_it_chose() -> None:
    plan = _plan()
    ns = next(d for d in plan.objects if d.ref.kind == "Namespace")
    live = {ns.ref.key: _live(ns.ref.name, managers=("kubectl-create",))}
    handover: dict[str, ledgers.Origin] = {ns.ref.key: "created"}
    assert adoptions.conflicts(desired=[ns], live=live, ledger={}, cluster="gpu-east", handover=handover) == []
    assert adoptions.origin(ns.ref.key, ledger={}, live_before=live, handover=handover) == "created"
    assert adoptions.origin(ns.ref.key, ledger={}, live_before=live, handover={ns.ref.key: "adopted"}) == "adopted"
    recorded = {ns.ref.key: ledgers.Entry("v1", "adopted")}
    assert adoptions.origin(ns.ref.key, ledger=recorded, live_before=live, handover=handover) == "adopted"
    assert adoptions.origin(ns.ref.key, ledger={}, live_before={}, handover=handover) == "created"


def test_adoption_is_declared_by_annotation_or_team_field_and_the_annotation_is_not_applied() -> None:
    plan = _plan()
    classes = [d for d in plan.objects if d.ref.kind == "DeviceClass"]
    assert classes and all(d.adopt for d in classes), "the example adopts the operator's DeviceClasses"
    assert all(ownership.ADOPT not in d.obj["metadata"]["annotations"] for d in classes)
    assert not any(d.adopt for d in plan.objects if d.ref.kind == "Namespace")

    files = example_files()
    team = files["teams/ml-research/team.yaml"]
    files["teams/ml-research/team.yaml"] = team + b"  adoptNamespaces: [ml-research]\n"
    adopted = {d.ref.name for d in _plan(files).objects if d.ref.kind == "Namespace" and d.adopt}
    assert adopted == {"ml-research"}
    assert not any(d.adopt for d in _plan(files).objects if d.ref.kind == "Role"), "only the namespace itself"


def test_plan_refuses_a_team_in_a_reserved_namespace() -> None:
    files = example_files()
    files["teams/ml-research/team.yaml"] = files["teams/ml-research/team.yaml"].replace(
        b"[ml-research]", b"[kube-system]"
    )
    with pytest.raises(FleetError) as err:
        _plan(files)
    assert "kube-system" in str(err.value) and "teams/ml-research/team.yaml" in str(err.value)


def test_release_patch_removes_fleets_marks_and_ownership_and_keeps_values() -> None:
    live = _live("ml", managers=("kubectl-create", "fleet"), labels={ownership.MANAGED_BY: "fleet", "team": "a"})
    live["metadata"]["labels"][ownership.TEAM_LABEL] = "ml"
    live["metadata"]["annotations"] = {ownership.SOURCE: "teams/ml/team.yaml:1:1", "note": "keep"}
    patch = ownership.release_patch(live)["metadata"]
    assert patch["resourceVersion"] == "7", "a stale read fails instead of writing"
    assert patch["labels"] == {ownership.MANAGED_BY: None, ownership.TEAM_LABEL: None}
    assert patch["annotations"] == {ownership.SOURCE: None}
    assert [e["manager"] for e in patch["managedFields"]] == ["kubectl-create"]
    only_fleet = ownership.release_patch(_live("x", managers=("fleet",)))["metadata"]
    assert only_fleet["managedFields"] == [{}], "an empty list would leave managedFields as they are"


def test_pruning_releases_adopted_entries_and_deletes_created_ones() -> None:
    live = {
        "/Namespace//a": _live("a", labels={ownership.MANAGED_BY: "fleet"}),
        "/Namespace//b": _live("b", labels={ownership.MANAGED_BY: "fleet"}),
    }
    ledger = {"/Namespace//a": ledgers.Entry("v1", "created"), "/Namespace//b": ledgers.Entry("v1", "adopted")}
    stage_of = {kind: s.name for s in stages.STAGES for kind in s.kinds}
    a, b = deletions.planned(ledger=ledger, desired_keys=set(), live=live, stage_of=stage_of)
    assert (str(a.action), a.release) == ("deleted", False)
    assert (str(b.action), b.release) == ("deleted", True) and "released" in b.reason
    assert b.after is not None and ownership.MANAGED_BY not in b.after["metadata"].get("labels", {})
    assert "+" in previews.unified(b) or "-" in previews.unified(b)


def test_live_overlap_names_the_node_and_both_pools() -> None:
    def rule(name: str, selector: dict[str, str]) -> plans.PoolRule:
        return plans.PoolRule(name, selector, {}, (), 1, "NVIDIA L4", 4, f"pools/{name}.yaml:1:1")

    node = {"metadata": {"name": "l4-01", "labels": {"pool": "l4", "kubernetes.io/hostname": "l4-01"}}}
    other = {"metadata": {"name": "l4-02", "labels": {"pool": "l4"}}}
    pools = (rule("l4", {"pool": "l4"}), rule("first", {"kubernetes.io/hostname": "l4-01"}))
    [overlap] = adoptions.overlaps(pools=pools, nodes=[node, other])
    assert str(overlap.ref) == "Node l4-01" and overlap.refused
    assert "'first' (pools/first.yaml:1:1) and 'l4' (pools/l4.yaml:1:1)" in overlap.error


def test_claim_users_are_the_reserving_pods_or_the_allocation() -> None:
    assert blockers.claim_users({"status": {}}) == []
    reserved = {"status": {"allocation": {}, "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "1"}]}}
    assert blockers.claim_users(reserved) == ["pod trainer"]
    assert blockers.claim_users({"status": {"allocation": {"devices": {}}}}) == ["allocated (to no pod yet)"]


def test_immutability_is_read_from_the_status_causes() -> None:
    def invalid(*causes: dict[str, str]) -> errors.KubeError:
        body = {"reason": "Invalid", "message": "x is invalid", "details": {"causes": list(causes)}}
        return errors.from_status(status=422, body=body, where="ResourceClaim a/b")

    immutable = {"reason": "FieldValueInvalid", "field": "spec", "message": "Invalid value: {}: field is immutable"}
    other = {"reason": "FieldValueRequired", "field": "spec.devices", "message": "Required value"}
    err = invalid(immutable)
    assert isinstance(err, errors.Invalid) and err.immutable
    mixed = invalid(immutable, other)
    assert isinstance(mixed, errors.Invalid) and not mixed.immutable, "other errors too: no replace would fix it"
    text_only = errors.from_status(
        status=422, body={"reason": "Invalid", "message": "spec: field is immutable"}, where="x"
    )
    assert isinstance(text_only, errors.Invalid) and not text_only.immutable


def test_a_maintenance_rule_is_its_own_whoever_made_it_first() -> None:
    key = "resource.k8s.io/DeviceTaintRule//repair.node-1"
    assert adoptions.origin(key, ledger={}, live_before={key: {}}) == "created"
    assert adoptions.origin("/Namespace//ml", ledger={}, live_before={"/Namespace//ml": {}}) == "adopted"
