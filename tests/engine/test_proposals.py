"""A step's proposal → one decision per change, and executors that obey only decisions (pure)."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import anyio
import pytest

from fleet.engine import decisions, drains, impersonations, plans, proposals, renders, waits, writes
from fleet.engine.changesets import Action, Change, FieldConflict
from fleet.engine.disruptions import Disruption
from fleet.kube import Client, Ref
from fleet.manifests.views import resolve
from tests.manifests.repos import example_files, load


def _plan() -> plans.Plan:
    return renders.plan(resolve(load(example_files()), cluster="gpu-east"), revision="abc123")


def _team_object(plan: plans.Plan) -> plans.Desired:
    return next(d for d in plan.objects if d.team)


def test_every_verb_is_named_from_what_the_step_found() -> None:
    def change(kind: str, action: Action, **more: Any) -> Change:
        return Change(ref=Ref("v1", kind, "", "x"), stage=more.pop("stage", "classes"), action=action, **more)

    assert proposals.verb_of(change("DeviceClass", Action.CONFIGURED)) == "apply"
    assert proposals.verb_of(change("ResourceClaimTemplate", Action.CONFIGURED, replace=True)) == "replace"
    assert proposals.verb_of(change("Node", Action.CONFIGURED, stage="pools")) == "node-write"
    assert proposals.verb_of(change("DeviceClass", Action.DELETED)) == "delete"
    assert proposals.verb_of(change("Namespace", Action.DELETED, release=True)) == "release"
    assert proposals.verb_of(change("HelmRelease", Action.CONFIGURED, stage="operator")) == "helm-upgrade"
    assert proposals.verb_of(change("HelmRelease", Action.DELETED, stage="operator")) == "helm-uninstall"
    held = change("HelmRelease", Action.DELETED, stage="operator", disruption=Disruption("x", claims=("a/b",)))
    held = held.held_for(waits.Wait(on="claims", reason="a/b to end"))
    assert held.action == Action.SKIPPED and proposals.verb_of(held) == "helm-uninstall", "what it will do"
    assert set(decisions.VERBS) == {
        "", "apply", "replace", "node-write", "delete", "release", "helm-upgrade", "helm-uninstall",
        "cordon", "evict", "uncordon",
    }  # fmt: skip


def test_a_conflict_without_force_is_refused_in_the_preview_as_the_apply_refuses_it() -> None:
    d = next(x for x in _plan().objects if not x.team)
    conflicts = (FieldConflict(manager="ops-script", field=".metadata.labels.a"),)
    previewed = Change(ref=d.ref, stage=d.stage.name, action=Action.CONFIGURED, conflicts=conflicts)
    applied = Change(ref=d.ref, stage=d.stage.name, action=Action.SKIPPED, conflicts=conflicts, error="Apply failed")
    none = impersonations.Identities()
    previewed, applied = (
        proposals.decide_write(c, d, identities=none, force_conflicts=False) for c in (previewed, applied)
    )
    assert previewed.decision == dataclasses.replace(applied.decision)  # type: ignore[arg-type]
    assert previewed.decision is not None and previewed.decision.to_json() == {
        "verdict": "refuse", "verb": "apply", "as": "fleet",
    }  # fmt: skip
    forced = Change(ref=d.ref, stage=d.stage.name, action=Action.CONFIGURED, conflicts=conflicts)
    forced = proposals.decide_write(forced, d, identities=none, force_conflicts=True)
    assert forced.decision is not None and forced.decision.to_json() == {
        "verdict": "write", "verb": "apply", "force": True, "as": "fleet",
    }  # fmt: skip
    repaired = Change(ref=d.ref, stage=d.stage.name, action=Action.CONFIGURED, conflicts=conflicts, forced=True)
    repaired = proposals.decide_write(repaired, d, identities=none, force_conflicts=False)
    assert repaired.decision is not None and repaired.decision.force, "drift repair under enforce takes them"


def test_a_team_object_is_decided_as_the_team_even_where_its_dry_run_went_as_fleet() -> None:
    plan = _plan()
    d = _team_object(plan)
    identities = impersonations.resolve(plan=plan, live={}, mode="required")  # accounts created by this run
    change = Change(ref=d.ref, stage=d.stage.name, action=Action.CREATED)
    change = proposals.decide_write(change, d, identities=identities, force_conflicts=False)
    assert change.decision is not None and change.decision.user == impersonations.user(plan.teams[d.team][0])
    assert impersonations.identity(identities, d.team, d.ref.namespace).dry_run == "", "the dry-run goes as fleet"


def test_a_deletion_goes_as_the_team_and_required_refuses_one_without_an_account() -> None:
    plan = dataclasses.replace(_plan(), objects=(), teams={})
    ref = Ref("resource.k8s.io/v1", "ResourceClaimTemplate", "ml", "gpu")
    live = {
        "metadata": {
            "labels": {"fleet.gpufleet.dev/team": "ml"},
            "annotations": {"fleet.gpufleet.dev/source": "teams/ml/gpu.yaml:1:1"},
        }
    }
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": impersonations.SERVICE_ACCOUNT,
            "namespace": "ml",
            "labels": {"fleet.gpufleet.dev/team": "ml", "app.kubernetes.io/managed-by": "fleet"},
        },
    }
    account["metadata"]["labels"]["fleet.gpufleet.dev/cluster"] = plan.cluster  # type: ignore[index]
    with_account = impersonations.resolve(plan=plan, live={"sa": account}, mode="required")
    deleted = Change(ref=ref, stage="claims", action=Action.DELETED)
    deleted = proposals.decide_deletion(deleted, live=live, identities=with_account)
    assert deleted.decision is not None and deleted.decision.to_json() == {
        "verdict": "write", "verb": "delete", "as": impersonations.user("ml"),
    }  # fmt: skip
    without = impersonations.resolve(plan=plan, live={}, mode="required")
    refused = Change(ref=ref, stage="claims", action=Action.DELETED)
    refused = proposals.decide_deletion(refused, live=live, identities=without)
    assert refused.decision is not None and refused.decision.verdict == "refuse" and refused.refused
    assert "deletes a team's objects only as the team" in refused.error


def test_a_blocked_deletion_is_decided_refuse_and_the_pruner_never_sends_it() -> None:
    ref = Ref("resource.k8s.io/v1", "ResourceClaim", "ml", "busy")
    change = Change(ref=ref, stage="claims", action=Action.DELETED)
    change = writes.refuse(change, "ResourceClaim ml/busy is in use by pod ml/trainer")
    change = proposals.decide_deletion(change, live={}, identities=impersonations.Identities())
    assert change.decision is not None and change.decision.verdict == "refuse"
    with pytest.raises(decisions.Undecided, match="'refuse' decision"):
        decisions.require(change.decision, what=ref)


class _Refusing:
    """A client that fails the test if anything is sent."""

    def impersonating(self, user: str) -> _Refusing:
        return self

    async def apply(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("an undecided change was sent")


def test_an_executor_given_no_decision_refuses_to_run() -> None:
    d = next(x for x in _plan().objects if not x.team)
    change = Change(ref=d.ref, stage=d.stage.name, action=Action.CONFIGURED)
    writer = writes.Writer(client=cast(Client, _Refusing()), live={})
    with pytest.raises(decisions.Undecided, match="no decision"):
        anyio.run(lambda: writer.write_all([(change, d)]))


def test_cordons_evictions_and_uncordons_are_decided_entries() -> None:
    planned = drains.Planned(
        key="resource.k8s.io/DeviceClass//gpu",
        stage="classes",
        cordon=("gpu-a",),
        evict=(("gpu-a", ("ml/trainer",)),),
        queued=("gpu-b",),
    )
    entries = drains.entries(planned)
    assert [(str(e.ref), e.stage, e.decision.to_json() if e.decision else None) for e in entries] == [
        ("Node gpu-a", "classes", {"verdict": "write", "verb": "cordon", "as": "fleet"}),
        ("Pod ml/trainer", "classes", {"verdict": "write", "verb": "evict", "as": "fleet"}),
    ]
    assert planned.text() == (
        "draining node gpu-a: pod ml/trainer to be evicted; node gpu-b wait for a drain slot (maxUnavailable 1)"
    )
    assert planned.text({"ml/trainer": "pod ml/trainer evicted, waiting for it to end"}).startswith(
        "draining node gpu-a: pod ml/trainer evicted"
    )
    back = drains.uncordons(drained={"gpu-a": planned.key, "gpu-c": "kept"}, keep={"kept"})
    assert [(str(e.ref), e.stage, e.decision.to_json() if e.decision else None) for e in back] == [
        ("Node gpu-a", "record", {"verdict": "write", "verb": "uncordon", "as": "fleet"}),
    ]
