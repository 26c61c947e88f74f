"""``fleetctl validate --context``: satisfiability on the live ResourceSlices of the sandbox control plane."""

from __future__ import annotations

import pytest

from fleet.sandbox import Sandbox, credentials
from tests.manifests.repos import EXAMPLE
from tests.validate.test_cli import fleetctl

pytestmark = pytest.mark.sandbox


def test_templates_against_the_sandbox_devices(sandbox: Sandbox) -> None:
    result = fleetctl(
        "validate",
        str(EXAMPLE),
        "--kubeconfig",
        str(sandbox.kubeconfig),
        "--context",
        credentials.CLUSTER,
        "--cluster",
        "gpu-east",
        env={"NO_COLOR": "1"},
    )
    lines = result.stdout.splitlines()
    rows = {line.split(" (")[0].strip(): line.rsplit("): ", 1)[1] for line in lines if line.startswith("  gpu-east:")}
    h100 = sandbox.pools.get("h100x8", 0)
    h200 = sandbox.pools.get("h200x8", 0)
    assert (
        rows["gpu-east: ResourceClaimTemplate/ml-research/h100-gpu"]
        == f"{h100} node(s), {8 * h100} device(s), {8 * h100} at once"
    )
    assert (
        rows["gpu-east: ResourceClaimTemplate/inference/hopper-large-memory"]
        == f"{h200} node(s), {8 * h200} device(s), {8 * h200} at once"
    )
    assert result.returncode == 0, result.stdout


def test_unreachable_context_is_a_usage_error(sandbox: Sandbox) -> None:
    result = fleetctl(
        "validate", str(EXAMPLE), "--kubeconfig", str(sandbox.kubeconfig), "--context", "nope", "--cluster", "gpu-east"
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: context nope:")  # a clear usage error, not a traceback
