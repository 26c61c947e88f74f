"""Which nodes a drain may cordon, as pure functions: ``maxUnavailable`` bounds the nodes being drained
across the changes of a run and across runs; every held step's changes take the same drain step."""

from __future__ import annotations

from typing import Any

from fleet.engine import drains, proposals, waits
from fleet.engine.changesets import Action, Change
from fleet.engine.disruptions import Disruption
from fleet.kube import Ref

CLASS = "resource.k8s.io/DeviceClass//gpu"
OTHER = "resource.k8s.io/DeviceClass//mig"


def claim(name: str, *, node: str = "", pods: tuple[str, ...] = ()) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if node:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        status["allocation"] = {"nodeSelector": {"nodeSelectorTerms": [term]}, "devices": {"results": []}}
    if pods:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": p} for p in pods]
    return {"metadata": {"name": name, "namespace": "ml"}, "status": status}


def test_a_node_cordoned_in_an_earlier_run_takes_its_slot_while_pods_hold_claims_on_it() -> None:
    # Run 1 cordoned gpu-c for the class change; its pod is held there by a budget. Jobs that started
    # since on gpu-a and gpu-b are affected too: neither may be cordoned while gpu-c is being drained.
    busy = drains.being_drained(drained={"gpu-c": CLASS}, occupied={"gpu-a", "gpu-b", "gpu-c"}, looked={CLASS: set()})
    assert busy == set(), "looked at: only where its pods are"
    now, queued = drains.admit(["gpu-a", "gpu-b", "gpu-c"], cordoned={"gpu-c"}, busy=busy, max_unavailable=1)
    assert (now, queued) == (["gpu-c"], ["gpu-a", "gpu-b"]), "the cordoned node first, whatever its name"


def test_a_node_drained_for_a_change_not_looked_at_yet_counts_while_pods_are_on_it() -> None:
    # An earlier stage's change asks first: the prune's change that gpu-c was cordoned for comes later.
    busy = drains.being_drained(drained={"gpu-c": OTHER}, occupied={"gpu-a", "gpu-c"}, looked={CLASS: set()})
    assert busy == {"gpu-c"}
    assert drains.admit(["gpu-a"], cordoned=set(), busy=busy, max_unavailable=1) == ([], ["gpu-a"])
    assert drains.admit(["gpu-a"], cordoned=set(), busy=busy, max_unavailable=2) == (["gpu-a"], [])


def test_a_drained_node_frees_its_slot_once_its_changes_pods_are_gone_and_stays_cordoned() -> None:
    gone = drains.being_drained(drained={"gpu-a": CLASS}, occupied={"gpu-b"}, looked={})
    assert gone == set(), "no pod holds a claim there any more"
    # Its change looked at: another job's pod on gpu-a no longer keeps the slot.
    other = drains.being_drained(drained={"gpu-a": CLASS}, occupied={"gpu-a"}, looked={CLASS: set()})
    assert other == set()
    assert drains.admit(["gpu-b"], cordoned=set(), busy=other, max_unavailable=1) == (["gpu-b"], [])


def test_the_bound_holds_across_changes_of_one_run() -> None:
    looked = {CLASS: {"gpu-a"}}
    busy = drains.being_drained(drained={"gpu-a": CLASS}, occupied={"gpu-a", "gpu-b"}, looked=looked)
    assert busy == {"gpu-a"}
    assert drains.admit(["gpu-b"], cordoned=set(), busy=busy, max_unavailable=1) == ([], ["gpu-b"])
    # A node another change already drains is shared, not a second slot.
    assert drains.admit(["gpu-a", "gpu-b"], cordoned={"gpu-a"}, busy=busy, max_unavailable=2) == (
        ["gpu-a", "gpu-b"],
        [],
    )


def test_occupied_nodes_are_those_where_allocated_claims_are_reserved_for_pods() -> None:
    claims = [
        claim("running", node="gpu-a", pods=("trainer",)),
        claim("idle", node="gpu-b"),
        claim("pending", pods=("waiting",)),
    ]
    assert drains.occupied(claims) == {"gpu-a"}


def change(key: str, *, on: waits.On | None, claims: tuple[str, ...] = ("ml/held",)) -> Change:
    made = Change(ref=Ref.from_key(key, version="v1"), stage="classes", action=Action.CONFIGURED)
    made = made.replaced(
        disruption=Disruption(reason="tightens the selectors", nodes=frozenset({"gpu-a"}), claims=claims)
    )
    if on is not None:
        made = made.held_for(waits.Wait(on=on, reason="…"))
    return proposals.decide_entry(made)


def test_a_drain_step_advances_only_the_changes_held_for_their_claims() -> None:
    for_claims, for_window, going = change(CLASS, on="claims"), change(OTHER, on="window"), change(OTHER, on=None)
    release = change("helm.sh/HelmRelease/gpu-operator/gpu-operator", on="claims")
    assert drains.held([for_claims, for_window, going, release]) == [for_claims, release]
