"""DeviceTaintRules merged into the slices they select, as the scheduler merges them: pure."""

from __future__ import annotations

from fleet.inventory import taintrules
from tests.engine.test_maintenances import slice_of


def rule(taint: str, **selector: str) -> dict[str, object]:
    key, _, effect = taint.partition(":")
    return {
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", **selector}, "taint": {"key": key, "effect": effect}}
    }


def taints(slices: list[dict[str, object]]) -> dict[tuple[str, str], list[str]]:
    return {
        (s["spec"]["pool"]["name"], d["name"]): [f"{t['key']}:{t['effect']}" for t in d["taints"]]  # type: ignore[index]
        for s in slices
        for d in s["spec"]["devices"]  # type: ignore[index]
        if d.get("taints")
    }


def test_a_rule_taints_the_devices_its_selector_names_and_copies_only_what_it_changes() -> None:
    slices = [slice_of("node-1", 2), slice_of("node-2", 2)]
    merged = taintrules.tainted(
        slices, [rule("a:NoSchedule", pool="node-1", device="gpu-1"), rule("b:None", pool="node-2")]
    )
    assert taints(merged) == {
        ("node-1", "gpu-1"): ["a:NoSchedule"],
        ("node-2", "gpu-0"): ["b:None"],
        ("node-2", "gpu-1"): ["b:None"],
    }
    assert taints(slices) == {}, "the listed slices are not changed"
    other = taintrules.tainted(slices, [rule("c:NoExecute", pool="node-1", driver="other.example.com")])
    assert taints(other) == {}
    assert taints(taintrules.tainted(slices, [{"spec": {"taint": {"key": "d", "effect": "NoSchedule"}}}])) == {}, (
        "a rule without a selector selects nothing"
    )
