"""``fleetctl explain``: one test per cause of a Pending GPU pod the sandbox can produce (the guide's list).

Each test makes a pod pend for one reason with the real scheduler and the real resourceclaim
controller, then checks that explain names that reason, with evidence.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from fleet.sandbox import Sandbox, clusters, credentials, profiles
from fleetctl import cli
from tests.conftest import Kubectl

pytestmark = pytest.mark.sandbox

TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _template(
    name: str, *, cls: str = "gpu.nvidia.com", count: int = 1, expression: str | None = None
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if expression:
        exactly["selectors"] = [{"cel": {"expression": expression}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def _pod(name: str, template: str, *, tolerate: bool = True, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}}
    if "cpu" in spec:
        container["resources"]["requests"] = {"cpu": spec.pop("cpu")}
    body = {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        "containers": [container],
        **({"tolerations": TOLERATE} if tolerate else {}),
        **spec,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": body}


def _create(kubectl: Kubectl, namespace: str, *objs: dict[str, Any]) -> None:
    kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objs)})
    )


def _wait_unschedulable(kubectl: Kubectl, namespace: str, pod: str, *, event: str = "") -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = json.loads(kubectl("get", "pod", "-n", namespace, pod, "-o", "json").stdout)
        conds = got.get("status", {}).get("conditions", [])
        tried = any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conds)
        if tried and (not event or event in kubectl("get", "events", "-n", namespace).stdout):
            return
        time.sleep(0.5)
    pytest.fail(f"pod {pod} was not marked unschedulable")


def _explain(sandbox: Sandbox, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = cli.run(
        ["explain", *args, "--kubeconfig", str(sandbox.kubeconfig), "--context", credentials.CLUSTER, "-o", "json"]
    )
    return code, json.loads(capsys.readouterr().out)


def test_missing_device_class(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _create(kubectl, namespace, _template("t", cls="nope.nvidia.com"), _pod("p", "t"))
    _wait_unschedulable(kubectl, namespace, "p")
    code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    assert (code, out["cause"]) == (1, "deviceclass-missing")
    assert "'nope.nvidia.com', which does not exist" in out["summary"]
    assert "gpu.nvidia.com" in out["evidence"][0]


def test_no_matching_device(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expr = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"
    _create(kubectl, namespace, _template("t", expression=expr), _pod("p", "t"))
    _wait_unschedulable(kubectl, namespace, "p")
    code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    assert (code, out["cause"]) == (1, "no-matching-device")
    text = "\n".join(out["evidence"])
    assert "excludes every device of class 'gpu.nvidia.com'" in text
    assert "NVIDIA H100 80GB HBM3" in text  # the closest values the driver publishes
    assert "request gpu: 0 devices match" in text


def test_every_matching_device_is_allocated(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expr = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"
    _create(kubectl, namespace, _template("all", expression=expr, count=8), _pod("holder", "all"))
    kubectl("wait", "-n", namespace, "pod/holder", "--for=condition=PodScheduled", "--timeout=60s")
    _create(kubectl, namespace, _template("one", expression=expr), _pod("waiter", "one"))
    _wait_unschedulable(kubectl, namespace, "waiter")
    holder = json.loads(kubectl("get", "pod", "-n", namespace, "holder", "-o", "json").stdout)
    held = holder["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    waiter = json.loads(kubectl("get", "pod", "-n", namespace, "waiter", "-o", "json").stdout)
    generated = waiter["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    code, out = _explain(sandbox, capsys, "claim", generated, "-n", namespace)  # a generated claim name
    assert (code, out["cause"]) == (1, "all-allocated")
    assert out["evidence"] == [f"{namespace}/{held} holds devices (pods holder)"]


def test_taints_exclude_the_gpu_nodes(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _create(kubectl, namespace, _template("t"), _pod("p", "t", tolerate=False))
    _wait_unschedulable(kubectl, namespace, "p")
    code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    assert (code, out["cause"]) == (1, "node-constraints")
    assert "Node h100x8-01: taint nvidia.com/gpu=present:NoSchedule not tolerated" in out["evidence"]


def test_gpu_node_without_resourceslices(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl("delete", "resourceslices", "--field-selector", "spec.nodeName=h100x8-02")
    try:
        _create(
            kubectl, namespace, _template("t"), _pod("p", "t", nodeSelector={"kubernetes.io/hostname": "h100x8-02"})
        )
        _wait_unschedulable(kubectl, namespace, "p")
        code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    finally:
        clusters.publish_gpus(sandbox, profiles.Profile(pools=dict(sandbox.pools)))
    assert (code, out["cause"]) == (1, "no-resourceslices")
    assert out["evidence"] == ["Node h100x8-02: no ResourceSlice (the DRA kubelet plugin is absent or unhealthy)"]
    assert "nvidia-dra-driver-kubelet-plugin" in out["hint"]


def test_the_scheduler_events_when_devices_are_not_the_problem(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _create(kubectl, namespace, _template("t"), _pod("p", "t", cpu="1000"))
    _wait_unschedulable(kubectl, namespace, "p", event="Insufficient cpu")
    code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    assert (code, out["cause"]) == (1, "scheduler")
    assert any("FailedScheduling" in e and "Insufficient cpu" in e for e in out["evidence"])


def test_a_running_pod_is_not_pending(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _create(kubectl, namespace, _template("t"), _pod("p", "t"))
    kubectl("wait", "-n", namespace, "pod/p", "--for=condition=PodScheduled", "--timeout=60s")
    code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    assert (code, out["cause"]) == (0, "scheduled")


def test_a_selector_on_an_attribute_the_driver_no_longer_publishes(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guide's "a CEL selector uses an attribute the installed driver does not publish" (``index`` was removed)."""
    _create(
        kubectl, namespace, _template("t", expression="device.attributes['gpu.nvidia.com'].index == 0"), _pod("p", "t")
    )
    _wait_unschedulable(kubectl, namespace, "p")
    code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    assert (code, out["cause"]) == (1, "no-matching-device")
    text = "\n".join(out["evidence"])
    assert "index" in text and "pciBusID" in text  # the removed attribute and what to select by instead
