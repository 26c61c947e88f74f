"""Device taints on the sandbox: ``fleetctl sandbox taint-device`` plays an XID error.

The command republishes the node's ResourceSlice with the taint, as the NVIDIA driver's
health checks do. Then the real scheduler no longer gives the tainted GPU to a request
without a toleration, fleet's prediction drops by the same device, ``explain`` names the
taint, ``inventory`` lists the device, and the classes gate of a pool expecting 8 healthy
GPUs counts it as unavailable (a ``None`` taint only informs).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fleet.engine import healths
from fleet.engine.plans import Plan, PoolRule
from fleet.inventory import Checker, Inventory
from fleet.sandbox import Sandbox, credentials
from fleetctl import cli
from tests.conftest import Kubectl
from tests.explain.test_causes import _create, _explain, _pod, _template, _wait_unschedulable
from tests.sandbox import guide

pytestmark = pytest.mark.sandbox

NODE, DEVICE = "h200x8-01", "gpu-3"
H200 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"
POOL = PoolRule(
    name="h200",
    selector={"sandbox.fleet.gpufleet.dev/pool": "h200x8"},
    labels={},
    taints=(),
    nodes=1,
    gpu_product="NVIDIA H200",
    gpus_per_node=8,
    source="pools/h200.yaml",
)


def taint(sandbox: Sandbox, *args: str) -> int:
    return cli.run(["sandbox", "--dir", str(sandbox.directory), "taint-device", *args])


@pytest.fixture()
def xid(sandbox: Sandbox) -> Iterator[None]:
    assert taint(sandbox, NODE, DEVICE, "gpu.nvidia.com/xid=79:NoSchedule") == 0
    try:
        yield
    finally:
        taint(sandbox, NODE, DEVICE, "gpu.nvidia.com/xid-")


def gate(kubectl: Kubectl) -> list[str]:
    nodes = {n["metadata"]["name"]: n for n in guide.get_json(kubectl, "nodes")["items"]}
    slices = {s["metadata"]["name"]: s for s in guide.get_json(kubectl, "resourceslices")["items"]}
    return healths.slice_problems(
        Plan(cluster="c", revision="r", objects=(), pools=(POOL,)), nodes=nodes, slices=slices
    )


def published(kubectl: Kubectl) -> dict[str, Any]:
    return guide.published_devices(kubectl)[(NODE, DEVICE)]


def test_taint_device_republishes_the_slice(
    sandbox: Sandbox, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gate(kubectl) == []
    assert taint(sandbox, NODE, DEVICE, "gpu.nvidia.com/xid=79:NoSchedule") == 0
    try:
        assert f"{NODE}/{DEVICE}: gpu.nvidia.com/xid=79:NoSchedule" in capsys.readouterr().out
        [only] = published(kubectl)["taints"]
        assert (only["key"], only["value"], only["effect"]) == ("gpu.nvidia.com/xid", "79", "NoSchedule")
        assert only.get("timeAdded")  # set by the API server, as for the driver's taints
        [problem] = gate(kubectl)
        assert problem == (
            f"Node {NODE}: driver gpu.nvidia.com publishes 7 healthy GPUs (1 tainted NoSchedule, unavailable to "
            f"new claims: {DEVICE} gpu.nvidia.com/xid=79:NoSchedule), pool h200 expects 8"
        )
        # a newer XID replaces the older one's value (one taint per key), an informing taint is no problem
        assert taint(sandbox, NODE, DEVICE, "gpu.nvidia.com/xid=48:None") == 0
        assert [(t["value"], t["effect"]) for t in published(kubectl)["taints"]] == [("48", "None")]
        assert gate(kubectl) == []
    finally:
        assert taint(sandbox, NODE, DEVICE, "gpu.nvidia.com/xid-") == 0
    assert "taints" not in published(kubectl)
    assert taint(sandbox, NODE, "gpu-99", "gpu.nvidia.com/xid=79:NoSchedule") == 2
    assert taint(sandbox, NODE, DEVICE, "gpu.nvidia.com/xid=79:Sometimes") == 2


def test_the_scheduler_and_fleet_skip_the_tainted_gpu(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str, xid: None, capsys: pytest.CaptureFixture[str]
) -> None:
    classes = {c["metadata"]["name"]: c for c in guide.get_json(kubectl, "deviceclasses")["items"]}
    inventory = Inventory.from_slices(guide.get_json(kubectl, "resourceslices")["items"])
    eight = {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu.nvidia.com",
                        "count": 8,
                        "selectors": [{"cel": {"expression": H200}}],
                    },
                }
            ]
        }
    }
    assert Checker(inventory=inventory, classes=classes).check_claim(eight).capacity == 0
    tolerant = json.loads(json.dumps(eight))
    tolerant["devices"]["requests"][0]["exactly"]["tolerations"] = [{"key": "gpu.nvidia.com/xid", "operator": "Exists"}]
    assert Checker(inventory=inventory, classes=classes).check_claim(tolerant).capacity == 1

    _create(kubectl, namespace, _template("t", count=8, expression=H200), _pod("p", "t"))
    _wait_unschedulable(kubectl, namespace, "p")
    code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    assert (code, out["cause"]) == (1, "device-tainted")
    assert f"{NODE}/{DEVICE} (gpu.nvidia.com/xid=79:NoSchedule)" in "\n".join(out["evidence"])

    template = _template("tolerant", count=8, expression=H200)
    template["spec"]["spec"] = tolerant
    _create(kubectl, namespace, template, _pod("q", "tolerant"))
    kubectl("wait", "-n", namespace, "pod/q", "--for=condition=PodScheduled", "--timeout=60s")
    assert {d for _, pool, d in guide.allocated(kubectl, namespace) if pool == NODE} >= {DEVICE}

    code = cli.run(["inventory", "--kubeconfig", str(sandbox.kubeconfig), "--context", credentials.CLUSTER])
    text = capsys.readouterr().out
    assert [NODE, DEVICE, "gpu.nvidia.com/xid=79:NoSchedule"] in [line.split() for line in text.splitlines()]
    assert code == 0


def test_a_device_taint_rule_is_seen_as_the_scheduler_sees_it(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DeviceTaintRule's taint counts as the slice's own: explain names it, inventory lists it."""
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"{namespace}-repair"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": NODE, "device": DEVICE},
            "taint": {"key": "example.com/repair", "value": "rma-1", "effect": "NoSchedule"},
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(rule))
    try:
        _create(kubectl, namespace, _template("t", count=8, expression=H200), _pod("p", "t"))
        _wait_unschedulable(kubectl, namespace, "p")
        code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
        assert (code, out["cause"]) == (1, "device-tainted")
        assert f"{NODE}/{DEVICE} (example.com/repair=rma-1:NoSchedule)" in "\n".join(out["evidence"])
        code = cli.run(["inventory", "--kubeconfig", str(sandbox.kubeconfig), "--context", credentials.CLUSTER])
        text = capsys.readouterr().out
        assert [NODE, DEVICE, "example.com/repair=rma-1:NoSchedule"] in [line.split() for line in text.splitlines()]
    finally:
        kubectl("delete", "devicetaintrule", f"{namespace}-repair")


def health(sandbox: Sandbox, *args: str) -> int:
    return cli.run(["sandbox", "--dir", str(sandbox.directory), "gpu-health", *args])


def test_gpu_health_publishes_the_drivers_health_taints(
    sandbox: Sandbox, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fleetctl sandbox gpu-health``: the NVIDIA driver's taint for each NVML health event, and its clearing."""
    devices = sorted(d for n, d in guide.published_devices(kubectl) if n == NODE)
    try:
        assert health(sandbox, NODE, DEVICE, "--xid", "13") == 0  # an application error: informs only
        assert [(t["key"], t["value"], t["effect"]) for t in published(kubectl)["taints"]] == [
            ("gpu.nvidia.com/xid", "13", "None")
        ]
        assert gate(kubectl) == []
        assert health(sandbox, NODE, "--gpu-lost") == 0
        lines = capsys.readouterr().out.splitlines()
        assert f"{NODE}/{DEVICE}: gpu.nvidia.com/xid=13:None, gpu.nvidia.com/gpu-lost:NoSchedule" in lines
        assert len([line for line in lines if "gpu-lost:NoSchedule" in line]) == len(devices)
        [problem] = gate(kubectl)
        assert "driver gpu.nvidia.com publishes 0 healthy GPUs (8 tainted NoSchedule" in problem
        assert health(sandbox, NODE, "--gpu-lost", "--clear") == 0
        assert health(sandbox, NODE, "gpu-1", "--unmonitored") == 0
        assert [t["effect"] for t in guide.published_devices(kubectl)[(NODE, "gpu-1")]["taints"]] == ["None"]
    finally:
        for event in (["--xid", "0"], ["--unmonitored"]):
            health(sandbox, NODE, "gpu-1" if event == ["--unmonitored"] else DEVICE, *event, "--clear")
    assert not any(guide.published_devices(kubectl)[(NODE, d)].get("taints") for d in devices)
    assert health(sandbox, NODE, "--xid", "79") == 2  # which device?
    assert health(sandbox, NODE, "gpu-99", "--xid", "79") == 2
