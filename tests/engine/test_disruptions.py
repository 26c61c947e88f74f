"""Disruptive or safe: each class of ``fleet.engine.disruptions`` as pure functions, on NVIDIA's slices."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import yaml

from fleet.engine import disruptions
from fleet.engine.changesets import Action, Change
from fleet.kube import Ref
from tests.paths import FIXTURES

H100 = yaml.safe_load((FIXTURES / "resourceslices" / "h100-node.yaml").read_text())
A100 = yaml.safe_load((FIXTURES / "resourceslices" / "a100-node.yaml").read_text())
NODE = H100["spec"]["nodeName"]
CLASS = "gpu.example.com"
PRODUCT = "device.attributes['gpu.nvidia.com'].productName"


def device_class(*expressions: str, config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if config is not None:
        spec["config"] = config
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS}, "spec": spec}


def claim(
    name: str, *, node: str = NODE, devices: tuple[str, ...] = ("gpu-0",), pod: str = "", klass: str = CLASS
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": klass}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": d} for d in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": "u"}] if pod else [],
        },
    }


def pod(name: str, *, node: str = NODE, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"nodeName": node, **spec},
        "status": {"phase": "Running"},
    }


def node(*, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "labels": labels or {}},
        "spec": {"taints": taints or []},
    }


# -- DeviceClasses ----------------------------------------------------------------------------------


def test_a_tightened_selector_that_allocated_claims_no_longer_meet_is_disruptive_and_names_them() -> None:
    before = device_class("device.driver == 'gpu.nvidia.com'")
    after = device_class(f"{PRODUCT} == 'NVIDIA A100-SXM4-80GB'")
    found = disruptions.class_disruption(
        before=before,
        after=after,
        claims=[claim("train", devices=("gpu-0", "gpu-1"), pod="trainer"), claim("other", klass="another.example.com")],
        slices=[H100, A100],
    )
    assert found is not None
    assert found.claims == ("ml/train",) and found.nodes == {NODE}
    assert "tightens the selectors" in found.reason and "ml/train" in found.reason and "gpu-0" in found.reason


def test_a_selector_change_that_allocated_devices_still_meet_is_safe() -> None:
    before = device_class("device.driver == 'gpu.nvidia.com'")
    after = device_class(f"{PRODUCT} == 'NVIDIA H100 80GB HBM3'")
    assert disruptions.class_disruption(before=before, after=after, claims=[claim("train")], slices=[H100]) is None


def test_a_selector_change_of_a_class_without_allocated_claims_is_safe() -> None:
    before = device_class("device.driver == 'gpu.nvidia.com'")
    after = device_class("false")
    unallocated = claim("pending")
    del unallocated["status"]["allocation"]
    assert disruptions.class_disruption(before=before, after=after, claims=[unallocated], slices=[H100]) is None


def test_a_selector_that_errors_on_the_held_device_is_disruptive() -> None:
    before = device_class("device.driver == 'gpu.nvidia.com'")
    after = device_class("device.attributes['gpu.nvidia.com'].noSuchAttribute == 'x'")
    found = disruptions.class_disruption(before=before, after=after, claims=[claim("train")], slices=[H100])
    assert found is not None and found.claims == ("ml/train",)


def test_a_config_change_of_a_class_with_allocated_claims_is_disruptive() -> None:
    before = device_class("true")
    config = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": {"strategy": "TimeSlicing"}}}}]
    after = device_class("true", config=config)
    found = disruptions.class_disruption(before=before, after=after, claims=[claim("train")], slices=[H100])
    assert found is not None and "config" in found.reason and found.claims == ("ml/train",)


def test_a_first_available_subrequest_counts_under_its_own_class() -> None:
    held = claim("train")
    held["spec"]["devices"]["requests"] = [
        {
            "name": "gpu",
            "firstAvailable": [{"name": "big", "deviceClassName": "other"}, {"name": "any", "deviceClassName": CLASS}],
        }
    ]
    held["status"]["allocation"]["devices"]["results"][0]["request"] = "gpu/any"
    assert disruptions.held_from(held, CLASS) == [("gpu.nvidia.com", NODE, "gpu-0")]
    assert disruptions.held_from(held, "other") == []


def test_removing_a_class_is_disruptive_only_with_allocated_claims_from_it() -> None:
    found = disruptions.class_removal(CLASS, claims=[claim("train"), claim("b", klass="x")])
    assert found is not None and found.claims == ("ml/train",) and found.nodes == {NODE}
    assert disruptions.class_removal("unused.example.com", claims=[claim("train")]) is None


# -- ResourceClaimTemplates -------------------------------------------------------------------------


def test_removing_a_template_running_pods_use_is_disruptive() -> None:
    user = pod("trainer", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}])
    user["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "trainer-gpu-x7"}]
    ended = pod("old", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}])
    ended["status"]["phase"] = "Succeeded"
    found = disruptions.template_removal("ml", "two-gpus", pods=[user, ended])
    assert found is not None
    assert found.claims == ("ml/trainer-gpu-x7",) and "ml/trainer" in found.reason and "ml/old" not in found.reason
    assert disruptions.template_removal("ml", "two-gpus", pods=[ended]) is None
    assert disruptions.template_removal("other", "two-gpus", pods=[user]) is None


# -- pool Nodes -------------------------------------------------------------------------------------

NO_EXECUTE = {"key": "maintenance", "value": "now", "effect": "NoExecute"}


def test_a_noexecute_taint_the_claim_holding_pod_does_not_tolerate_evicts_it() -> None:
    found = disruptions.node_disruption(
        before=node(),
        after=node(taints=[NO_EXECUTE]),
        pods=[pod("trainer")],
        claims=[claim("train", pod="trainer")],
    )
    assert found is not None
    assert found.nodes == {NODE} and found.claims == ("ml/train",)
    assert "maintenance=now:NoExecute" in found.reason and "evicts" in found.reason and "ml/trainer" in found.reason


def test_a_tolerated_noexecute_taint_a_noschedule_taint_or_a_pod_without_claims_is_safe() -> None:
    tolerant = pod("trainer", tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}])
    holds = [claim("train", pod="trainer")]
    tainted = node(taints=[NO_EXECUTE])
    assert disruptions.node_disruption(before=node(), after=tainted, pods=[tolerant], claims=holds) is None
    no_schedule = node(taints=[{**NO_EXECUTE, "effect": "NoSchedule"}])
    assert not disruptions.node_effects(node(), no_schedule)
    assert disruptions.node_disruption(before=node(), after=tainted, pods=[pod("trainer")], claims=[]) is None


def test_a_label_the_pods_nodeselector_reads_changing_strands_their_claims() -> None:
    selecting = pod("trainer", nodeSelector={"gpu.example.com/pool": "h100"})
    found = disruptions.node_disruption(
        before=node(labels={"gpu.example.com/pool": "h100", "team": "a"}),
        after=node(labels={"gpu.example.com/pool": "h100-new", "team": "a"}),
        pods=[selecting],
        claims=[claim("train", pod="trainer")],
    )
    assert found is not None and found.claims == ("ml/train",) and "strands" in found.reason


def test_a_label_removed_that_required_affinity_reads_strands_claims_one_no_pod_reads_is_safe() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]
            }
        }
    }
    before = node(labels={"zone": "a", "unused": "x"})
    holds = [claim("train", pod="trainer")]
    found = disruptions.node_disruption(
        before=before, after=node(labels={"unused": "x"}), pods=[pod("trainer", affinity=affinity)], claims=holds
    )
    assert found is not None and "zone" in found.reason
    assert (
        disruptions.node_disruption(
            before=before, after=node(labels={"zone": "a"}), pods=[pod("trainer", affinity=affinity)], claims=holds
        )
        is None
    )


# -- classify: the dispatch over a ChangeSet, and what it reads -------------------------------------


class Counting(disruptions.Reads):
    """Preloaded reads that count what was asked for."""

    asked: list[str]

    async def objects(self, key: tuple[str, str]) -> list[dict[str, Any]]:
        self.asked.append(key[1])
        return await super().objects(key)

    async def pods(self, **where: Any) -> list[dict[str, Any]]:
        self.asked.append("Pod")
        return await super().pods(**where)


def reads(**preloaded: list[dict[str, Any]]) -> Counting:
    keys = {"claims": disruptions.CLAIM, "slices": disruptions.SLICE, "pods": disruptions.POD}
    found = Counting(preloaded={keys[k]: v for k, v in preloaded.items()})
    found.asked = []
    return found


def change(kind: str, action: Action, *, before: Any = None, after: Any = None, namespace: str = "") -> Change:
    api = {"Node": "v1", "Role": "rbac.authorization.k8s.io/v1"}.get(kind, "resource.k8s.io/v1")
    return Change(
        ref=Ref(api, kind, namespace, {"DeviceClass": CLASS, "Node": NODE}.get(kind, "x")),
        stage="s",
        action=action,
        before=before,
        after=after,
    )


def test_safe_changes_read_nothing_and_stay_safe() -> None:
    template = {"spec": {"spec": {"devices": {"requests": [{"name": "gpu"}]}}}}
    entries = [
        change("ResourceClaimTemplate", Action.CREATED, after=template, namespace="ml"),
        change(
            "ResourceClaimTemplate", Action.CONFIGURED, before=template, after=copy.deepcopy(template), namespace="ml"
        ),
        change("Role", Action.CONFIGURED, before={}, after={}, namespace="ml"),
        change("DeviceClass", Action.CONFIGURED, before=device_class("true"), after=device_class("true")),
        change("Node", Action.CONFIGURED, before=node(labels={"a": "1"}), after=node(labels={"a": "1", "b": "2"})),
        change("DeviceClass", Action.CREATED, after=device_class("true")),
    ]
    counted = reads(claims=[claim("train", pod="trainer")], slices=[H100])
    classed = anyio.run(lambda: disruptions.classify(entries, reads=counted))
    assert [e.disruption for e in classed] == [None] * len(entries)
    assert all(new is old for new, old in zip(classed, entries, strict=True)), "a safe entry stays as it was"
    assert counted.asked == []


def test_classify_marks_a_tightened_class_and_reads_claims_and_slices_once() -> None:
    tightened = change("DeviceClass", Action.CONFIGURED, before=device_class("true"), after=device_class("false"))
    removed = change("DeviceClass", Action.DELETED, before=device_class("true"))
    skipped = change("DeviceClass", Action.SKIPPED, before=device_class("true"), after=device_class("false"))
    counted = reads(claims=[claim("train", pod="trainer")], slices=[H100])
    tightened, removed, skipped = anyio.run(lambda: disruptions.classify([tightened, removed, skipped], reads=counted))
    assert tightened.disruption is not None and tightened.disruption.claims == ("ml/train",)
    assert removed.disruption is not None and skipped.disruption is None
    assert sorted(counted.asked) == ["ResourceClaim", "ResourceClaim", "ResourceSlice"]


def test_classify_reads_pods_only_on_nodes_holding_claims() -> None:
    tainting = change("Node", Action.CONFIGURED, before=node(), after=node(taints=[NO_EXECUTE]))
    counted = reads(claims=[claim("train", node="elsewhere", pod="trainer")], pods=[pod("trainer", node="elsewhere")])
    [classed] = anyio.run(lambda: disruptions.classify([tainting], reads=counted))
    assert classed.disruption is None and counted.asked == ["ResourceClaim"]
    counted = reads(claims=[claim("train", pod="trainer")], pods=[pod("trainer")])
    [classed] = anyio.run(lambda: disruptions.classify([tainting], reads=counted))
    assert classed.disruption is not None and counted.asked == ["ResourceClaim", "Pod"]


def test_the_json_of_an_entry_carries_its_disruption_or_null() -> None:
    entry = change("DeviceClass", Action.CONFIGURED)
    assert entry.to_json()["disruption"] is None
    entry = entry.replaced(
        disruption=disruptions.Disruption(reason="why", nodes=frozenset({"b", "a"}), claims=("ml/x",))
    )
    assert entry.to_json()["disruption"] == {"reason": "why", "nodes": ["a", "b"], "claims": ["ml/x"]}
