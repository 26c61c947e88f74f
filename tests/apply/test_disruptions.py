"""Disruptive or safe against a real cluster: a claim the real scheduler allocated on a KWOK GPU node.

A DeviceClass selector tightened so the allocated device no longer matches is shown by ``fleetctl
diff`` as disruptive, naming the claim, in text and JSON; a team template changed beside it is safe.
"""

from __future__ import annotations

import json

import pytest

from fleet.sandbox import Sandbox
from fleetctl import cli
from tests.apply.repos import Repo
from tests.changes.test_holds import device_of
from tests.conftest import Kubectl, gpu_pod

pytestmark = pytest.mark.sandbox


def test_diff_shows_a_tightened_class_as_disruptive_naming_the_claim_and_a_template_change_as_safe(
    sandbox: Sandbox,
    repo: Repo,
    kubectl: Kubectl,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim("ml", "held")
    repo.claim_template("ml", "one-gpu")
    ns = repo.ns("ml")
    assert cli.run(["apply", str(repo.write()), "--cluster", repo.cluster]) == 0
    gpu_pod(kubectl, ns, name="trainer", claim="held")
    try:
        kubectl("wait", "-n", ns, "pod/trainer", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")
        node, uuid = device_of(kubectl, ns, "held")
        capsys.readouterr()

        # Loosened-and-kept selectors first: still every allocated device, so the class change is safe.
        repo.device_class_expression = (
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName != ''"
        )
        repo.claim_template("ml", "one-gpu", count=2)
        assert cli.run(["diff", str(repo.write()), "--cluster", repo.cluster, "-o", "json"]) == 1
        entries = {e["object"]["kind"]: e for e in json.loads(capsys.readouterr().out)["entries"]}
        assert entries["DeviceClass"]["action"] == "configured" and entries["DeviceClass"]["disruption"] is None
        assert entries["ResourceClaimTemplate"]["action"] == "configured"
        assert entries["ResourceClaimTemplate"]["disruption"] is None

        # Tightened past the allocated device: every device but the one the claim holds.
        repo.device_class_expression = f"device.attributes['gpu.nvidia.com'].uuid != '{uuid}'"
        path = str(repo.write())
        assert cli.run(["diff", path, "--cluster", repo.cluster, "-o", "json"]) == 1
        entries = {e["object"]["kind"]: e for e in json.loads(capsys.readouterr().out)["entries"]}
        disruption = entries["DeviceClass"]["disruption"]
        assert disruption is not None
        assert disruption["claims"] == [f"{ns}/held"] and disruption["nodes"] == [node]
        assert entries["ResourceClaimTemplate"]["disruption"] is None, "a team template change is safe"

        assert cli.run(["diff", path, "--cluster", repo.cluster]) == 1
        out = capsys.readouterr().out
        [line] = [line for line in out.splitlines() if line.startswith("disruptive: ")]
        assert "tightens the selectors" in line and f"{ns}/held" in line and node in line
        device_class_diff = out.index(f"+++ merged resource.k8s.io/v1/DeviceClass {repo.device_class_name}")
        template_diff = out.index("ResourceClaimTemplate")
        assert device_class_diff < out.index(line) < template_diff, "the line is under its entry"
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)
