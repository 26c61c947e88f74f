"""One decision per change, and the identities and gates that read it (pure)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fleet.engine import decisions, impersonations, ownership, plans, renders, stages
from fleet.engine.changesets import Action, Change
from fleet.engine.disruptions import Disruption
from fleet.engine.healths import pool_problems
from fleet.engine.waits import Wait
from fleet.kube import Ref
from fleet.manifests.views import resolve
from tests.manifests.repos import example_files, load


def _plan() -> plans.Plan:
    return renders.plan(resolve(load(example_files()), cluster="gpu-east"), revision="abc123")


def test_each_change_gets_one_verdict_and_only_a_write_is_expected_of_the_cluster() -> None:
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a", "labels": {"x": "1"}}}
    held = Wait(on="window", reason="the maintenance window")
    cases = {
        "write": decisions.decide(action="configured", obj=obj),
        "hold": decisions.decide(action="configured", wait=held, disruption=Disruption("x"), obj=obj),
        "refuse": decisions.decide(action="created", error="refused", obj=obj),
        "leave": decisions.decide(action="unchanged", obj=obj),
    }
    assert {verdict: d.verdict for verdict, d in cases.items()} == {v: v for v in cases}
    assert [v for v, d in cases.items() if d.expected is not None] == ["write"]
    assert decisions.expected(cases.values()) == {"/Node//a": obj}
    assert cases["hold"].wait == held and cases["hold"].to_json() == {"verdict": "hold", "as": "fleet"}
    assert cases["leave"] is decisions.LEAVE and decisions.LEAVE.to_json() == {"verdict": "leave"}, "nothing is sent"


def _node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def test_the_pools_gate_verifies_what_the_run_wrote_not_a_held_label() -> None:
    rule = plans.PoolRule(
        name="p", selector={"role": "gpu"}, labels={"tier": "new"}, taints=(), nodes=2,
        gpu_product="H100", gpus_per_node=8, source="pools/p.yaml:1:1",
    )  # fmt: skip
    plan = plans.Plan(cluster="c", revision="r", objects=(), pools=(rule,))
    held, written = _node("held", {"role": "gpu", "tier": "old"}), _node("written", {"role": "gpu", "tier": "new"})
    nodes = {"/Node//held": held, "/Node//written": written}
    assert pool_problems(plan, nodes=nodes) == ["Node held: pool p labels missing: tier"], "the plan's view"
    expected = {"/Node//written": _node("written", {"role": "gpu", "tier": "new", ownership.POOL_LABEL: "p"})}
    assert pool_problems(plan, nodes=nodes, expected=expected) == []
    stale = {"/Node//written": _node("written", {"tier": "newer"})}
    assert pool_problems(plan, nodes=nodes, expected=stale) == ["Node written: pool p labels missing: tier"]


def test_the_identity_follows_the_files_origin() -> None:
    files = example_files()
    files["teams/ml-research/every-gpu.yaml"] = (
        b"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: every.example.com\n"
        b"spec:\n  selectors:\n  - cel:\n      expression: \"device.driver == 'gpu.nvidia.com'\"\n"
    )
    plan = renders.plan(resolve(load(files), cluster="gpu-east"), revision="abc")
    [hostile] = [d for d in plan.objects if d.ref.name == "every.example.com"]
    assert hostile.team == "ml-research"
    assert all(not d.team for d in plan.objects if d.ref.kind == "DeviceClass" and d is not hostile)
    pool = plans.PoolRule(
        name="p", selector={}, labels={}, taints=(), nodes=1, gpu_product="", gpus_per_node=1,
        source="teams/ml-research/pool.yaml:1:1", team="ml-research",
    )  # fmt: skip
    [node] = plans.pool_objects((pool,), nodes=[_node("n", {})])
    assert node.team == "ml-research"

    def stamped(source: str, team: str) -> dict[str, Any]:
        obj: dict[str, Any] = {"apiVersion": "v1", "kind": "X", "metadata": {"name": "x", "labels": {}}}
        ownership.stamp(obj, cluster="c", revision="", source=source)
        obj["metadata"]["labels"][ownership.TEAM_LABEL] = team
        return obj

    assert impersonations.origin(stamped("teams/ml/every-gpu.yaml:1:1", "ml")) == "ml"
    assert impersonations.origin(stamped("teams/ml/team.yaml:4:1", "ml")) == "", "tenancy is the platform's"
    assert impersonations.origin(stamped("deviceclasses/a.yaml:1:1", "")) == ""


def test_a_team_whose_rights_this_run_restores_is_dry_run_as_fleet_there_and_written_as_the_team() -> None:
    plan = _plan()
    live = {d.ref.key: d.obj for d in plan.objects}
    team, namespaces = next((t, ns) for t, ns in plan.teams.items() if len(ns) > 1)
    assert not impersonations.resolve(plan=plan, live=live, mode="required").restoring
    gone = f"rbac.authorization.k8s.io/RoleBinding/{namespaces[1]}/{impersonations.TEAM_ROLE}"
    assert gone in live
    del live[gone]
    identities = impersonations.resolve(plan=plan, live=live, mode="required")
    assert identities.restoring == {(team, namespaces[1])}
    here = impersonations.identity(identities, team, namespaces[1])
    assert here.dry_run == "" and f"rights in {namespaces[1]} are restored" in here.note
    assert here.user == impersonations.user(namespaces[0]), "the decision (the apply) writes it as the team"
    there = impersonations.identity(identities, team, namespaces[0])
    assert there.dry_run == there.user == here.user, "other namespaces are dry-run and written as the team"
    names = [s.name for s in stages.STAGES]
    assert names.index("tenancy") < names.index("claims"), "the rights exist again before the claims stage"


def test_a_change_is_decided_once() -> None:
    change = Change(ref=Ref("v1", "Node", "", "a"), stage="pools", action=Action.CONFIGURED)
    decided = change.decided(decisions.decide(action=change.action))
    assert change.decision is None and decided.verdict == "write", "a new value: the proposal stays as it was"
    with pytest.raises(AttributeError, match=r"decided once already \(write\)"):
        decided.decided(decisions.decide(action=change.action, error="later"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        decided.error = "set in place"  # type: ignore[misc]
