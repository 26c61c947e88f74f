"""overlays/ install what fleet needs in a cluster, and no more: checked on the real sandbox."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from fleet.sandbox import Sandbox, clusters, profiles

pytestmark = pytest.mark.sandbox
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gpu_east(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A sandbox with the nodes the example's gpu-east cluster expects."""
    directory = tmp_path_factory.mktemp("gpu-east")
    sb = clusters.up(directory=directory, profile=profiles.load(ROOT / "examples" / "sandbox" / "gpu-east.yaml"))
    try:
        yield sb
    finally:
        clusters.down(directory=directory)


def service_account_kubeconfig(sb: Sandbox, path: Path) -> Path:
    deadline = time.monotonic() + 60
    while True:
        secret = json.loads(sb.kubectl("get", "secret", "-n", "fleet-system", "fleet-ci-token", "-o", "json").stdout)
        if secret.get("data", {}).get("token"):
            break
        assert time.monotonic() < deadline, "the token controller never filled fleet-ci-token"
        time.sleep(0.3)
    token = base64.b64decode(secret["data"]["token"]).decode()
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "fleet-ci",
        "clusters": [{"name": "sandbox", "cluster": {"server": sb.server, "certificate-authority": str(sb.ca_file)}}],
        "users": [{"name": "fleet-ci", "user": {"token": token}}],
        "contexts": [{"name": "fleet-ci", "context": {"cluster": "sandbox", "user": "fleet-ci"}}],
    }
    with path.open("w") as fh:
        YAML(typ="safe", pure=True).dump(config, fh)
    return path


def fleetctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fleetctl", *args], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, NO_COLOR="1"), check=False)


def test_ci_runner_service_account_can_apply_and_prune_the_example(gpu_east: Sandbox, tmp_path: Path) -> None:
    gpu_east.kubectl("apply", "-k", str(ROOT / "overlays" / "ci-runner"))
    kc = str(service_account_kubeconfig(gpu_east, tmp_path / "ci.kubeconfig"))
    repo = str(ROOT / "examples" / "fleet")
    target = ["--cluster", "gpu-east", "--kubeconfig", kc, "--context", "fleet-ci"]
    applied = fleetctl("apply", repo, *target, "--prune")
    assert applied.returncode == 0, applied.stdout[-3000:] + "\n---\n" + applied.stderr[-3000:]
    diff = fleetctl("diff", repo, *target)
    assert diff.returncode == 0, diff.stdout[-2000:] + diff.stderr[-2000:]
    # Everything the team tenancy stage wrote exists, created by the service account.
    roles = json.loads(gpu_east.kubectl("get", "roles", "-A", "-l", "app.kubernetes.io/managed-by=fleet",
                                        "-o", "json").stdout)["items"]
    assert {r["metadata"]["namespace"] for r in roles} >= {"ml-research", "inference"}


APPLIER = ("base", ["-A", "--as=system:serviceaccount:fleet-system:fleet"])
IN_FLEET_SYSTEM = ("base", ["-n", "fleet-system", "--as=system:serviceaccount:fleet-system:fleet"])
READER = ("inventory-reader", ["--as=oncall", "--as-group=fleet:inventory-readers"])


@pytest.mark.parametrize(("overlay", "verb", "resource", "allowed"), [
    # the applier has only what `fleetctl apply --prune` uses
    (APPLIER, "patch", "deviceclasses.resource.k8s.io", "yes"),
    (APPLIER, "patch", "nodes", "yes"),
    (APPLIER, "create", "resourceclaimtemplates.resource.k8s.io", "yes"),
    (APPLIER, "delete", "resourceslices.resource.k8s.io", "no"),
    (APPLIER, "create", "clusterroles.rbac.authorization.k8s.io", "no"),
    (APPLIER, "get", "secrets", "no"),
    (APPLIER, "delete", "pods", "no"),
    # the writer Lease: read, watched, created, renewed and released in fleet-system only
    (IN_FLEET_SYSTEM, "update", "leases.coordination.k8s.io", "yes"),
    (IN_FLEET_SYSTEM, "create", "leases.coordination.k8s.io", "yes"),
    (IN_FLEET_SYSTEM, "watch", "leases.coordination.k8s.io", "yes"),
    (IN_FLEET_SYSTEM, "delete", "leases.coordination.k8s.io", "no"),
    (APPLIER, "update", "leases.coordination.k8s.io", "no"),
    # the inventory-reader group reads devices, nothing else
    (READER, "list", "resourceslices.resource.k8s.io", "yes"),
    (READER, "list", "deviceclasses.resource.k8s.io", "yes"),
    (READER, "patch", "deviceclasses.resource.k8s.io", "no"),
    (READER, "create", "resourceclaims.resource.k8s.io", "no"),
])
def test_overlay_grants_exactly_what_it_says(gpu_east: Sandbox, overlay: tuple[str, list[str]], verb: str,
                                             resource: str, allowed: str) -> None:
    name, identity = overlay
    gpu_east.kubectl("apply", "-k", str(ROOT / "overlays" / name))
    can = gpu_east.kubectl("auth", "can-i", verb, resource, *identity, check=False)
    assert can.stdout.strip() == allowed
