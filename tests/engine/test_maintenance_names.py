"""Which name a maintenance's rule is written under: the live rule that selects the devices already, or fleet's.

A rule the maintenance holds keeps its name whatever it is (a rule ``fleetctl import`` took over
keeps the name a person gave it); with ``fleet.gpufleet.dev/adopt`` a rule of no maintenance is taken
over under its name instead of getting a twin; another maintenance's or fleet's own rule never is.
"""

from __future__ import annotations

from typing import Any

from fleet.engine import maintenances, ownership
from fleet.engine.plans import MaintenanceRule, Targets

API = "resource.k8s.io/v1"
TARGET = maintenances.Target(driver="gpu.nvidia.com", pool="node-a", device="gpu-3", node="node-a", devices=("gpu-3",))


def _rule(name: str, *, device: str = "gpu-3", labels: dict[str, str] | None = None) -> dict[str, Any]:
    selector = {"driver": "gpu.nvidia.com", "pool": "node-a", "device": device}
    return {
        "apiVersion": API,
        "kind": "DeviceTaintRule",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"deviceSelector": selector, "taint": {"key": "example.com/repair", "effect": "NoSchedule"}},
    }


def _names(live: list[dict[str, Any]], *, adopt: bool = False) -> dict[str, str]:
    """What ``desired`` writes for one device target of maintenance ``psu``: name → taint effect."""
    rule = MaintenanceRule(
        name="psu", targets=Targets(nodes=("node-a",)), reason="PSU", effect="NoExecute", api_version=API, adopt=adopt
    )
    by_name = {r["metadata"]["name"]: r for r in live}
    found = maintenances.desired(rule, [TARGET], live_rules=by_name, cluster="east", revision="r")
    return {d.ref.name: d.body["spec"]["taint"]["effect"] for d in found}


def test_a_new_rule_gets_fleets_name() -> None:
    assert _names([]) == {"psu.node-a.gpu-3": "None"}


def test_a_rule_the_maintenance_holds_keeps_its_name_and_gets_no_twin() -> None:
    held = _rule("gpu3-psu", labels={maintenances.LABEL: "psu"})
    assert _names([held]) == {"gpu3-psu": "NoExecute"}


def test_a_rule_of_no_maintenance_is_taken_over_only_where_the_file_says_to_adopt() -> None:
    by_hand = _rule("gpu3-psu")
    assert _names([by_hand]) == {"psu.node-a.gpu-3": "None"}
    assert _names([by_hand], adopt=True) == {"gpu3-psu": "NoExecute"}
    assert _names([by_hand, _rule("a-gpu3-too")], adopt=True) == {"a-gpu3-too": "NoExecute"}, "first by name"
    assert _names([_rule("gpu2-psu", device="gpu-2")], adopt=True) == {"psu.node-a.gpu-3": "None"}, "other device"


def test_another_maintenances_rule_and_fleets_own_are_never_adopted() -> None:
    other = _rule("gpu3-fan", labels={maintenances.LABEL: "fan"})
    fleets = _rule("gpu3-kept", labels={ownership.MANAGED_BY: ownership.MANAGER})
    assert _names([other, fleets], adopt=True) == {"psu.node-a.gpu-3": "None"}


WHOLE = maintenances.Target(
    driver="gpu.nvidia.com", pool="node-a", device="", node="node-a", devices=("gpu-2", "gpu-3")
)


def _taken(found: list[maintenances.Target], live: list[dict[str, Any]]) -> dict[str, str]:
    """The rules ``desired`` writes for maintenance ``psu`` taking ``found``: name → what it selects."""
    rule = MaintenanceRule(name="psu", targets=Targets(nodes=("node-a",)), reason="PSU", api_version=API)
    by_name = {r["metadata"]["name"]: r for r in live}
    out = maintenances.desired(rule, found, live_rules=by_name, cluster="east", revision="r")
    return {d.ref.name: d.body["spec"]["deviceSelector"].get("device", "(pool)") for d in out}


def test_a_maintenance_never_writes_a_rule_over_the_devices_of_another_of_its_rules() -> None:
    """A health-taint maintenance takes gpu-3, then the whole pool once gpu-2 fails too: the pool stays
    held device by device. One that took the pool whole and then fewer devices keeps its pool rule alone."""
    by_device = _rule("psu.node-a.gpu-3", labels={maintenances.LABEL: "psu"})
    assert _taken([WHOLE], [by_device]) == {"psu.node-a.gpu-2": "gpu-2", "psu.node-a.gpu-3": "gpu-3"}
    assert _taken([WHOLE], []) == {"psu.node-a": "(pool)"}

    pool = _rule("psu.node-a", labels={maintenances.LABEL: "psu"})
    del pool["spec"]["deviceSelector"]["device"]
    assert _taken([TARGET], [pool]) == {"psu.node-a": "(pool)"}
    assert _taken([TARGET], []) == {"psu.node-a.gpu-3": "gpu-3"}
