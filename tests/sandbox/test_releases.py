"""What each Kubernetes release the sandbox runs serves of DRA: the DRA version tests of the control plane.

They run on the session's release and on each release ``FLEET_TEST_KUBERNETES_EXTRA`` names
(``release_sandbox``; ``./dev test`` adds the oldest, 1.34). The expectations are read from each
release's own source, independently of ``fleet.sandbox.releases``: DeviceTaintRule is
``resource.k8s.io/v1alpha3`` in 1.34 and 1.35 (``pkg/registry/resource/rest``; the scheduler and
kube-controller-manager's device-taint-eviction-controller read it there), ``v1beta2`` in 1.36
and ``v1`` in 1.37, where it is served by default.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from fleet.sandbox import Sandbox, clusters, versions
from tests.conftest import gpu_pod, kubectl_of
from tests.waits import wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.extras("kubernetes")]

TAINT_RULE_API = {
    34: "resource.k8s.io/v1alpha3",
    35: "resource.k8s.io/v1alpha3",
    36: "resource.k8s.io/v1beta2",
    37: "resource.k8s.io/v1",
}
NODE = "l4x4-01"


def test_the_control_plane_runs_the_release_and_says_so(release_sandbox: Sandbox) -> None:
    release = release_sandbox.release
    assert release.version in versions.KUBERNETES_RELEASES.values()
    out = json.loads(release_sandbox.kubectl("version", "-o", "json").stdout)
    assert out["serverVersion"]["gitVersion"] == release.version
    assert out["clientVersion"]["gitVersion"] == release.version
    assert clusters.status(directory=release_sandbox.directory)["kubernetes"] == release.version
    state = json.loads((release_sandbox.directory / "state.json").read_text())
    assert state["kubernetes"] == release.version


def test_device_taint_rules_are_served_in_the_release_s_api_version(release_sandbox: Sandbox) -> None:
    api = TAINT_RULE_API[release_sandbox.release.minor]
    listed = json.loads(release_sandbox.kubectl("get", "--raw", f"/apis/{api}").stdout)
    assert "devicetaintrules" in {r["name"] for r in listed["resources"]}
    release_sandbox.kubectl("get", f"devicetaintrules.{api.split('/')[1]}.resource.k8s.io")


def test_the_device_taint_eviction_controller_runs(release_sandbox: Sandbox) -> None:
    port = release_sandbox.ports["controller-manager"]
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz?verbose", context=context, timeout=30) as answer:
        checks = answer.read().decode()
    assert "[+]device-taint-eviction-controller ok" in checks, checks
    assert "[+]resourceclaim-controller ok" in checks, checks


@pytest.fixture()
def release_namespace(release_sandbox: Sandbox) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    release_sandbox.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        release_sandbox.kubectl("delete", "namespace", name, "--wait=true", "--timeout=120s", check=False)


def test_a_no_execute_device_taint_rule_evicts_the_pod_holding_the_device(
    release_sandbox: Sandbox, release_namespace: str
) -> None:
    kubectl, ns = kubectl_of(release_sandbox), release_namespace
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu", "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }
    gpu_pod(kubectl, ns, name="trainer", claim="gpu", also=(claim,), node=NODE)

    def running() -> dict[str, str] | None:
        pod = json.loads(kubectl("get", "pod", "trainer", "-n", ns, "-o", "json").stdout)
        got = json.loads(kubectl("get", "resourceclaim", "gpu", "-n", ns, "-o", "json").stdout)
        results = ((got.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        return results[0] if pod["status"].get("phase") == "Running" and results else None

    held = wait_for(running, what="trainer Running on an allocated GPU", within=90)
    api = TAINT_RULE_API[release_sandbox.release.minor]
    rule = {
        "apiVersion": api,
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"drain-{ns}"},
        "spec": {
            "deviceSelector": {k: held[k] for k in ("driver", "pool", "device")},
            "taint": {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"},
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(rule))
    try:

        def evicted() -> bool:
            got = kubectl("get", "pod", "trainer", "-n", ns, "-o", "json", check=False)
            return got.returncode != 0 or "deletionTimestamp" in json.loads(got.stdout)["metadata"]

        wait_for(evicted, what=f"trainer evicted from {held['pool']}/{held['device']} by a {api} rule", within=90)
    finally:
        kubectl("delete", "devicetaintrule", f"drain-{ns}", "--ignore-not-found", check=False)
