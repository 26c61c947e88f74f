"""GPU device maintenance on the real 1.37 control plane: None with the API server's preview, the
window, a drain a PodDisruptionBudget holds up, NoExecute with its gate, removal.

A pod holds a claim the real scheduler allocated; a GPUMaintenance names that device by uuid. At
every phase ``fleetctl diff`` and ``fleetctl apply`` decide each change alike (``compare_cli``), and
the rule the cluster shows is what the decision said. The eviction preview is the one
kube-controller-manager's device-taint-eviction controller writes into the rule's status.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from fleet.engine import maintenances, waits
from fleet.sandbox import Sandbox
from fleetctl import cli
from tests.apply.agreements import compare, compare_cli
from tests.apply.conftest import Engine
from tests.apply.repos import Repo
from tests.changes.test_holds import budget, closed_window, gone, trainer
from tests.changes.test_preview_is_action import in_two_waves
from tests.conftest import Kubectl
from tests.engine.test_maintenances import nic_slice
from tests.waits import wait_for as waits_for

pytestmark = pytest.mark.sandbox


def maintenance(
    repo: Repo, name: str, devices: str, *, reason: str = "HBM errors, RMA 4711", clusters: str = ""
) -> str:
    """Add GPUMaintenance ``name`` taking ``devices`` (flow YAML): in the cluster's folder, or with
    ``clusters`` (flow YAML of ``spec.clusters``) in the fleet's ``maintenance/``. Its path."""
    path = f"maintenance/{name}.yaml" if clusters else f"clusters/{repo.cluster}/maintenance/{name}.yaml"
    selected = f"\n  clusters: {clusters}" if clusters else ""
    repo.files[path] = (
        f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: GPUMaintenance\nmetadata:\n  name: {name}\n"
        f"spec:{selected}\n  devices: {devices}\n  reason: {reason}\n"
    )
    return path


def rules_of(kubectl: Kubectl, name: str) -> dict[str, dict[str, Any]]:
    items = json.loads(kubectl("get", "devicetaintrules", "-o", "json").stdout)["items"]
    return {r["metadata"]["name"]: r for r in maintenances.held(items, name)}


def effect(kubectl: Kubectl, name: str) -> str:
    [rule] = rules_of(kubectl, name).values()
    return str(rule["spec"]["taint"]["effect"])


def previewed(kubectl: Kubectl, name: str) -> bool:
    [rule] = rules_of(kubectl, name).values()
    conditions = (rule.get("status") or {}).get("conditions") or ()
    return any(c.get("observedGeneration") == rule["metadata"]["generation"] for c in conditions)


def rule_entry(document: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [
        e for e in document["entries"] if e["object"]["kind"] == "DeviceTaintRule" and name in e["object"]["name"]
    ]
    return found


def test_a_maintenance_walks_none_no_schedule_no_execute_under_window_and_drain_then_goes(
    team: Repo, sandbox: Sandbox, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, ns = team, team.ns("ml")
    repo.kubernetes = "1.37"
    repo.cluster_spec = {"maintenance": closed_window(), "disruption": {"policy": "drain", "maxUnavailable": 1}}
    name = f"repair-{repo.id}"
    assert cli.run(["apply", str(repo.write()), "--cluster", repo.cluster]) == 0
    _, uuid = trainer(kubectl, ns, labels={"app": "trainer"})
    try:
        path = maintenance(repo, name, f"{{uuids: [{uuid}]}}")

        # On merge: the rule at None, written in both; the API server then previews the eviction.
        created = compare_cli(repo, capsys, what="merge")
        assert rule_entry(created.apply, name)["decision"]["verdict"] == "write"
        assert effect(kubectl, name) == "None"
        waits_for(lambda: previewed(kubectl, name), within=30, what="the eviction preview in the rule's status")

        # The window is closed: the step to NoSchedule is held for it, and says what NoExecute would evict.
        # The same commit's team template is safe: it goes at once, the held maintenance blocks nothing.
        repo.claim_template("ml", "one-gpu", count=2)
        window = compare_cli(repo, capsys, what="closed window")
        template = [e for e in window.apply["entries"] if e["object"]["kind"] == "ResourceClaimTemplate"]
        assert [e["decision"]["verdict"] for e in template] == ["write"], template
        held = rule_entry(window.diff, name)
        assert held["decision"]["verdict"] == "hold" and held["waiting"]["on"] == "window", held
        reason = held["disruption"]["reason"]
        assert "1 pod would be evicted in 1 namespace if the effect was NoExecute." in reason, reason
        assert f"team ml: pod {ns}/trainer" in reason, reason
        assert effect(kubectl, name) == "None"
        assert cli.run(["diff", str(repo.write()), "--cluster", repo.cluster, "-o", "markdown"]) == 1
        assert "1 pod would be evicted" in capsys.readouterr().out

        # The window opens: NoSchedule. The running job stays.
        repo.cluster_spec = {"disruption": {"policy": "drain", "maxUnavailable": 1}}
        opened = compare_cli(repo, capsys, what="open window")
        assert rule_entry(opened.apply, name)["decision"]["verdict"] == "write"
        assert effect(kubectl, name) == "NoSchedule"
        assert kubectl("get", "-n", ns, "pod/trainer", check=False).returncode == 0

        # Drain: a budget refuses the eviction; NoExecute stays held, the node is not cordoned.
        budget(kubectl, ns, "trainer")
        refused = compare_cli(repo, capsys, what="drain under a budget")
        step = rule_entry(refused.apply, name)
        assert step["decision"]["verdict"] == "hold" and step["waiting"]["on"] == "claims", step
        evictions = [e for e in refused.apply["entries"] if e["object"]["kind"] == "Pod"]
        assert [e["decision"]["verb"] for e in evictions] == ["evict"], evictions
        assert "not evicted" in evictions[0]["reason"], evictions[0]
        assert not [e for e in refused.apply["entries"] if (e.get("decision") or {}).get("verb") == "cordon"]
        assert effect(kubectl, name) == "NoSchedule"

        # The budget goes: the pod is evicted, its claim freed; then NoExecute, and the gate finds no claim.
        kubectl("delete", "pdb", "-n", ns, "trainer")
        compare_cli(repo, capsys, what="drain")
        gone(kubectl, ns, "trainer", "held")
        emptied = compare_cli(repo, capsys, what="no execute")
        assert rule_entry(emptied.apply, name)["decision"]["verdict"] == "write"
        assert effect(kubectl, name) == "NoExecute"
        done = compare_cli(repo, capsys, what="done")
        assert rule_entry(done.diff, name)["action"] == "unchanged"

        # The file goes: the rule goes, the devices return.
        del repo.files[path]
        removed = compare_cli(repo, capsys, apply_flags=["--prune"], what="removal")
        assert rule_entry(removed.apply, name)["action"] == "deleted"
        assert rules_of(kubectl, name) == {}
    finally:
        for rule in rules_of(kubectl, name):
            kubectl("delete", "devicetaintrule", rule, check=False)


def test_a_fleet_wide_maintenance_waits_for_the_earlier_wave_before_leaving_scheduling(
    team: Repo, sandbox: Sandbox, kubectl: Kubectl
) -> None:
    """``maintenance/`` names two clusters in two waves: on the second, the rule is written at None at
    once (safe), and its step to NoSchedule waits until the first wave's success has baked."""
    repo, ns = team, team.ns("ml")
    repo.kubernetes = "1.37"
    name = f"fleetwide-{repo.id}"
    in_two_waves(repo)
    repo.files[f"clusters/{repo.cluster}-west.yaml"] = repo.files[f"clusters/{repo.cluster}-west.yaml"].replace(
        '"1.36"', '"1.37"'
    )
    fleet = Engine(sandbox, repo)
    assert cli.run(["apply", str(repo.write()), "--cluster", repo.cluster]) == 0
    node, _ = trainer(kubectl, ns)
    maintenance(
        repo,
        name,
        f"{{nodes: [{node}]}}",
        reason="firmware update across the fleet",
        clusters=f"{{names: [{repo.cluster}-west, {repo.cluster}]}}",
    )
    try:
        revision = fleet.plan().revision
        silent = waits.Reported(revision=revision)
        first = compare(fleet, reported=silent, what="wave 2, wave 1 silent")
        assert first.both(kind="DeviceTaintRule", name=f"{name}.{node}")["verdict"] == "write"
        waits_for(lambda: previewed(kubectl, name), within=30, what="the eviction preview")
        held = compare(fleet, reported=silent, what="wave 2 held")
        assert held.both(kind="DeviceTaintRule", name=f"{name}.{node}")["verdict"] == "hold"
        [entry] = [e for e in held.apply.entries if e.ref.kind == "DeviceTaintRule"]
        assert entry.waiting is not None and entry.waiting.on == "wave"
        assert effect(kubectl, name) == "None"
        baked = waits.Report(
            state="success", sha=revision, since=datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
        )
        done = waits.Reported(revision=revision, clusters={f"{repo.cluster}-west": baked})
        went = compare(fleet, reported=done, what="wave 1 baked")
        assert went.both(kind="DeviceTaintRule", name=f"{name}.{node}")["verdict"] == "write"
        assert effect(kubectl, name) == "NoSchedule"
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--ignore-not-found", "--wait=false")
        for rule in rules_of(kubectl, name):
            kubectl("delete", "devicetaintrule", rule, check=False)


def test_a_maintenance_takes_the_devices_the_driver_marked_unhealthy(
    team: Repo, sandbox: Sandbox, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sandbox taint-device`` publishes an XID as NVIDIA's driver does; ``healthTaints`` takes that GPU and
    no other, and the pool's classes gate (8 healthy GPUs expected) does not stop the revision on it."""
    repo = team
    repo.kubernetes = "1.37"
    name = f"xid-{repo.id}"
    repo.pool(
        "h200", selector={"sandbox.fleet.gpufleet.dev/pool": "h200x8"}, labels={"test": repo.id}, product="NVIDIA H200"
    )
    maintenance(
        repo, name, "{pools: [h200], healthTaints: [gpu.nvidia.com/xid]}", reason="XID 79, GPU fell off the bus"
    )

    def xid(device: str) -> list[str]:
        return ["sandbox", "--dir", str(sandbox.directory), "taint-device", "h200x8-01", device]

    assert cli.run([*xid("gpu-3"), "gpu.nvidia.com/xid=79:NoSchedule"]) == 0
    rest = [f"gpu-{i}" for i in range(8) if i != 3]
    try:
        printed = compare_cli(repo, capsys, apply_flags=["--health-timeout", "20"], what="an XID on h200x8-01/gpu-3")
        assert printed.apply_code == 0, printed.apply.get("error")
        assert list(rules_of(kubectl, name)) == [f"{name}.h200x8-01.gpu-3"]
        assert effect(kubectl, name) == "None"
        # Then every GPU of the node fails: the pool is held device by device, no pool rule over gpu-3's.
        for device in rest:
            assert cli.run([*xid(device), "gpu.nvidia.com/xid=79:NoSchedule"]) == 0
        printed = compare_cli(repo, capsys, apply_flags=["--health-timeout", "20"], what="XIDs on every GPU")
        assert printed.apply_code == 0, printed.apply.get("error")
        assert sorted(rules_of(kubectl, name)) == sorted(f"{name}.h200x8-01.gpu-{i}" for i in range(8))
    finally:
        for device in ["gpu-3", *rest]:
            cli.run([*xid(device), "gpu.nvidia.com/xid-"])
        for rule in rules_of(kubectl, name):
            kubectl("delete", "devicetaintrule", rule, check=False)


def test_a_node_maintenance_takes_another_drivers_devices_only_where_it_names_the_driver(
    team: Repo, sandbox: Sandbox, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NIC driver publishes a pool named after the node, as NVIDIA's driver does. A maintenance of the
    node takes its GPUs alone; with ``drivers`` naming both, a rule of each, under names that differ."""
    repo, node = team, "h200x8-01"
    repo.kubernetes = "1.37"
    name = f"nic-{repo.id}"
    nic = nic_slice(node, 2, name=f"{node}-nic-{repo.id}")
    kubectl("apply", "-f", "-", stdin=json.dumps(nic))
    try:
        path = maintenance(repo, name, f"{{nodes: [{node}]}}")
        repo.files[path] += "  effect: None\n"
        printed = compare_cli(repo, capsys, what="a node's maintenance")
        assert printed.apply_code == 0, printed.apply.get("error")
        rules = rules_of(kubectl, name)
        assert {n: r["spec"]["deviceSelector"] for n, r in rules.items()} == {
            f"{name}.{node}": {"driver": "gpu.nvidia.com", "pool": node}
        }

        repo.files[path] = repo.files[path].replace(
            f"nodes: [{node}]", f"nodes: [{node}], drivers: [gpu.nvidia.com, dra.net]"
        )
        printed = compare_cli(repo, capsys, what="a node's maintenance of two drivers")
        assert printed.apply_code == 0, printed.apply.get("error")
        rules = rules_of(kubectl, name)
        assert {n: r["spec"]["deviceSelector"] for n, r in rules.items()} == {
            f"{name}.{node}": {"driver": "gpu.nvidia.com", "pool": node},
            f"{name}.dra.net.{node}": {"driver": "dra.net", "pool": node},
        }
        assert {r["spec"]["taint"]["effect"] for r in rules.values()} == {"None"}
    finally:
        for rule in rules_of(kubectl, name):
            kubectl("delete", "devicetaintrule", rule, check=False)
        kubectl("delete", "resourceslice", nic["metadata"]["name"], check=False)
