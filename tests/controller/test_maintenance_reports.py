"""What the controller tells of a GPUMaintenance, as views of the run's ChangeSet and the live rules (pure):
``status.maintenances`` (and that the CRD keeps every field of it), the Events of each step, the gauges,
and ``fleetctl status``'s lines."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from fleet.controller import events, sections, statuses
from fleet.controller.metrics import Metrics
from fleet.engine import disruptions, waits
from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.engine.decisions import Decision
from fleet.engine.disruptions import Disruption
from fleet.kube import Ref
from fleetctl.commands import status as status_command
from tests.console.snapshots import claim, namespace
from tests.controller.test_metrics import values
from tests.views.test_maintenances import PREVIEW, SLICES, rule

CRD = Path(__file__).resolve().parents[2] / "overlays" / "base" / "fleetsync-crd.yaml"
UNTIL = datetime.datetime(2026, 12, 12, 6, tzinfo=datetime.UTC)


def ref_of(body: Mapping[str, Any]) -> Ref:
    return Ref(api_version="resource.k8s.io/v1", kind="DeviceTaintRule", namespace="", name=body["metadata"]["name"])


def live(*rules: dict[str, Any]) -> sections.Live:
    """The watch cache holding ``rules``, the two nodes' slices, ml's trainer on node-1's gpu-3, team ml."""
    objects: dict[tuple[str, str], list[dict[str, Any]]] = {
        ("resource.k8s.io/v1", "DeviceTaintRule"): list(rules),
        disruptions.SLICE: SLICES,
        disruptions.CLAIM: [claim("ml", "trainer-gpu", device="gpu-3", pool="node-1", pod="trainer")],
        sections.NAMESPACES: [namespace("ml", "ml-research")],
    }

    def read(key: tuple[str, str]) -> Iterable[Mapping[str, Any]]:
        return objects.get(key, [])

    return read


def stepped(before: dict[str, Any] | None, after: dict[str, Any], *, claims: tuple[str, ...] = ()) -> Change:
    """The run's entry that wrote ``after`` over the live ``before`` (a creation keeps no ``after``: its
    decision's ``expected`` says what it sent)."""
    action = Action.CREATED if before is None else Action.CONFIGURED
    disruption = Disruption(reason="takes it out", nodes=frozenset({"node-1"}), claims=claims)
    kept = None if before is None else after
    change = Change(ref=ref_of(after), stage="maintenance", action=action, before=before, after=kept)
    return change.replaced(disruption=disruption).decided(Decision(verdict="write", verb="apply", expected=after))


def held(before: dict[str, Any], after: dict[str, Any], on: waits.On, reason: str) -> Change:
    """The run's entry whose step from ``before`` to ``after`` waits ``on`` something."""
    wait = waits.Wait(on=on, reason=reason, until=UNTIL if on != "preview" else None)
    change = Change(ref=ref_of(after), stage="maintenance", action=Action.CONFIGURED, before=before, after=after)
    decided = change.replaced(disruption=Disruption(reason="evicts", nodes=frozenset({"node-1"})))
    return decided.decided(Decision(verdict="hold", verb="apply", wait=wait)).held_for(wait)


def test_status_lists_each_maintenance_with_the_step_the_run_wrote_before_the_cache_sees_it() -> None:
    cached = rule("node-1", effect="None", preview=PREVIEW)
    written = rule("node-1", effect="NoSchedule")
    changes = ChangeSet("c", "abc", [stepped(cached, written)])
    report = statuses.Report(cluster="c", changes=changes)
    report.maintenances = sections.maintenances_of(changes, live=live(cached))
    body = statuses.status(report, generation=1)
    [item] = body["maintenances"]
    assert body["maintenanceCount"] == 1
    assert (item["name"], item["phase"], item["effect"]) == ("repair", "Out of scheduling", "NoSchedule")
    assert item["where"] == "every device of node node-1" and item["deviceCount"] == 8 and len(item["devices"]) == 8
    assert item["podsWaitedOn"] == [{"namespace": "ml", "name": "trainer", "team": "ml-research"}]
    assert item["preview"].startswith("8 published devices selected."), "the live rule's status is kept"
    removed = Change(ref=ref_of(cached), stage="maintenance", action=Action.DELETED, before=cached)
    assert sections.maintenances_of(ChangeSet("c", "abc", [removed]), live=live(cached)) == ()


def test_a_held_step_is_the_maintenances_wait_and_the_crd_keeps_every_field() -> None:
    cached = rule("node-1", effect="NoSchedule")
    changes = ChangeSet(
        "c", "abc", [held(cached, rule("node-1", effect="NoExecute"), "claims", "1 allocated claim on node-1")]
    )
    report = statuses.Report(cluster="c", changes=changes)
    report.maintenances = sections.maintenances_of(changes, live=live(cached))
    body = statuses.status(report, generation=1)
    [item] = body["maintenances"]
    assert item["waiting"] == {
        "on": "claims",
        "reason": "1 allocated claim on node-1",
        "until": "2026-12-12T06:00:00Z",
        "overdue": False,
    }
    preview = held(rule("node-1", effect="None"), cached, "preview", "the API server's eviction preview")
    body["waiting"] += statuses.status(statuses.Report("c", changes=ChangeSet("c", "abc", [preview])), generation=1)[
        "waiting"
    ]
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert undeclared(body, schema["properties"]["status"]) == []


def undeclared(value: Any, schema: Mapping[str, Any], where: str = "status") -> list[str]:
    """What ``value`` holds that ``schema`` does not declare (the API server would prune or refuse it)."""
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} not in {schema['enum']}"]
    if isinstance(value, dict) and "properties" in schema:
        found = []
        for key, item in value.items():
            if key not in schema["properties"]:
                found.append(f"{where}.{key}")
            else:
                found += undeclared(item, schema["properties"][key], f"{where}.{key}")
        return found
    if isinstance(value, list) and "items" in schema:
        return [f for i, item in enumerate(value) for f in undeclared(item, schema["items"], f"{where}[{i}]")]
    return []


def test_each_step_written_is_one_event_naming_the_devices_the_reason_and_the_pods() -> None:
    created = rule("node-1", "gpu-3", effect="None")
    first = ChangeSet("c", "abc", [stepped(None, created)])
    found = sections.maintenances_of(first, live=live())
    assert events.maintenance_events(first, found) == [
        (
            "MaintenancePreview",
            "GPUMaintenance repair: device gpu-3 of node node-1 marked for maintenance, still in scheduling "
            "(HBM errors, RMA 4711); 1 pod on them",
            False,
        )
    ]
    whole = rule("node-1", effect="NoSchedule")
    second = ChangeSet("c", "abc", [stepped(rule("node-1", effect="None"), whole)])
    [(reason, message, warning)] = events.maintenance_events(second, sections.maintenances_of(second, live=live()))
    assert (reason, warning) == ("MaintenanceNoSchedule", False)
    assert message == (
        "GPUMaintenance repair: every device of node node-1 out of scheduling (HBM errors, RMA 4711); 1 pod waited on"
    )


def test_a_reconcile_that_writes_no_new_effect_announces_nothing_and_removal_ends_it() -> None:
    same = rule("node-1", effect="NoSchedule")
    relabelled = Change(ref=ref_of(same), stage="maintenance", action=Action.CONFIGURED, before=same, after=same)
    unchanged = Change.unchanged(ref_of(same), "maintenance")
    quiet = ChangeSet("c", "abc", [relabelled, unchanged])
    assert events.maintenance_events(quiet, sections.maintenances_of(quiet, live=live(same))) == []
    held_back = ChangeSet("c", "abc", [held(same, rule("node-1", effect="NoExecute"), "claims", "1 claim")])
    assert events.maintenance_events(held_back, sections.maintenances_of(held_back, live=live(same))) == []
    gone = ChangeSet("c", "abc", [Change(ref=ref_of(same), stage="maintenance", action=Action.DELETED, before=same)])
    assert events.maintenance_events(gone, ()) == [
        ("MaintenanceEnded", "GPUMaintenance repair ended: every device of pool node-1 back in service", False)
    ]


def test_the_gauges_count_devices_per_effect_and_pods_and_go_with_the_maintenance() -> None:
    metrics = Metrics()
    report = statuses.Report(cluster="c")
    report.maintenances = sections.maintenances_of(None, live=live(rule("node-1", effect="NoSchedule")))
    metrics.record_maintenances(report)
    found = values(metrics)
    labels = (("cluster", "c"), ("maintenance", "repair"))
    assert found[("fleet_maintenance_devices", (*labels[:1], ("effect", "NoSchedule"), labels[1]))] == 8
    assert found[("fleet_maintenance_devices", (*labels[:1], ("effect", "NoExecute"), labels[1]))] == 0
    assert found[("fleet_maintenance_pods_waited", labels)] == 1
    report.maintenances = ()
    metrics.record_maintenances(report)
    assert not [k for k in values(metrics) if k[0].startswith("fleet_maintenance_")]


def test_fleetctl_status_prints_each_maintenance_from_the_fleetsync() -> None:
    cached = rule("node-1", effect="NoSchedule", preview=PREVIEW)
    changes = ChangeSet("c", "abc", [held(cached, rule("node-1", effect="NoExecute"), "claims", "1 allocated claim")])
    report = statuses.Report(cluster="c", attempted="abc", applied="abc", changes=changes)
    report.maintenances = sections.maintenances_of(changes, live=live(cached))
    obj = {"metadata": {"name": "c"}, "status": statuses.status(report, generation=1)}
    text = status_command.render(obj)
    assert "maintenances (1), GPU devices out of service:" in text
    assert "  repair  Out of scheduling (NoSchedule): every device of node node-1 (HBM errors, RMA 4711)" in text
    assert "    pods waited on (1): ml/trainer (team ml-research)" in text
    assert "    waits for claims: 1 allocated claim, until 2026-12-12T06:00:00Z" in text
    assert "    the API server: 8 published devices selected." in text
