"""As whom each team's objects are written: decided from the plan and the live ServiceAccounts (pure)."""

from __future__ import annotations

import dataclasses
from typing import Any

from fleet import kube
from fleet.engine import impersonations, ownership, plans, renders
from fleet.manifests.views import resolve
from tests.manifests.repos import example_files, load


def _plan() -> plans.Plan:
    return renders.plan(resolve(load(example_files()), cluster="gpu-east"), revision="abc123")


def _account(namespace: str, *, team: str, cluster: str = "gpu-east") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": impersonations.SERVICE_ACCOUNT, "namespace": namespace, "labels": {}},
    }
    ownership.stamp(obj, cluster=cluster, revision="", source="teams/x/team.yaml:1:1")
    obj["metadata"]["labels"][ownership.TEAM_LABEL] = team
    return obj


def test_every_team_object_names_its_team_and_the_plan_renders_each_team_an_account() -> None:
    plan = _plan()
    teams = {d.team for d in plan.objects if d.team}
    assert teams == set(plan.teams)
    assert all(d.team == "" for d in plan.objects if d.ref.kind not in ("ResourceClaimTemplate", "ResourceClaim"))
    identities = impersonations.resolve(plan=plan, live={}, mode="required")
    assert identities.pending == teams and not identities.missing
    first = plan.teams["inference"][0]
    who = impersonations.identity(identities, "inference", first)
    assert who.user == f"system:serviceaccount:{first}:fleet-team", "the decision: written as the team"
    assert who.dry_run == "" and "created by this apply's tenancy stage" in who.note, (
        "a diff cannot act as an account not made yet: its dry-run goes as fleet"
    )
    off = impersonations.resolve(plan=plan, live={}, mode="off")
    assert impersonations.identity(off, "inference", first) == impersonations.FLEET


def test_a_live_account_is_used_and_a_team_without_one_is_refused_only_when_required() -> None:
    plan = _plan()
    live = {impersonations.account(ns[0]).key: _account(ns[0], team=t) for t, ns in plan.teams.items()}
    identities = impersonations.resolve(plan=plan, live=live, mode="required")
    assert not identities.pending and impersonations.identity(identities, "ml-research").dry_run

    without = dataclasses.replace(plan, objects=tuple(d for d in plan.objects if d.ref.kind != "ServiceAccount"))
    required = impersonations.resolve(plan=without, live={}, mode="required")
    refused = impersonations.unaccounted(required, desired=without.objects)
    assert refused and {c.ref.kind for c in refused} <= {"ResourceClaimTemplate", "ResourceClaim"}
    assert all(c.refused and "has no ServiceAccount" in c.error and "declared at teams/" in c.error for c in refused)
    optional = impersonations.resolve(plan=without, live={}, mode="optional")
    assert impersonations.unaccounted(optional, desired=without.objects) == []
    who = impersonations.identity(optional, "inference", plan.teams["inference"][0])
    assert who.user == "" and "has no ServiceAccount (--team-impersonation=optional)" in who.as_fleet
    assert impersonations.identity(required, "inference").refusal, "required: refused, whatever the verb"


def test_a_removed_team_is_pruned_as_its_own_account_and_never_as_a_look_alike() -> None:
    plan = dataclasses.replace(_plan(), objects=(), teams={})
    live = {
        "a": _account("gone", team="gone"),
        "b": _account("elsewhere", team="other", cluster="another-cluster"),
    }
    identities = impersonations.resolve(plan=plan, live=live, mode="required")
    assert impersonations.identity(identities, "gone").user == "system:serviceaccount:gone:fleet-team"
    assert impersonations.identity(identities, "other").user == ""
    assert "has no ServiceAccount" in impersonations.identity(identities, "other").refusal


def test_a_refusal_says_whose_rights_are_missing() -> None:
    template = next(d for d in _plan().objects if d.team)
    user = impersonations.user("ml-research")
    team = impersonations.refused(
        template, user=user, err=kube.Forbidden(f'User "{user}" cannot patch resource "resourceclaimtemplates"')
    )
    assert team.refused and team.error.startswith(f"declared at {template.source}: the API server refuses it")
    applier = impersonations.refused(
        template, user=user, err=kube.Forbidden('User "ci" cannot impersonate resource "serviceaccounts"')
    )
    assert f"fleet may not act as team {template.team!r}" in applier.error
    assert "impersonate on serviceaccounts named fleet-team" in applier.error
