"""Fault tests reuse the apply tests' repository builder and engine runner, and the controller
tests' git remote and real controller processes (``replicas``).

``own_sandbox`` is a control plane of the fault module's own (one small GPU node), for
tests that stop kube-apiserver or etcd, compact etcd or throttle the API server: the
session's shared sandbox never sees those faults, so no other test is disturbed. It
has fleet installed by ``overlays/single-replica`` (CRD, ServiceAccount ``fleet-system/fleet``
and its RBAC), and ``service_account_kubeconfig`` connects as that ServiceAccount, as the
installed controller does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from fleet.sandbox import Sandbox, clusters, credentials, profiles
from tests.apply.conftest import fleet, repo
from tests.controller.conftest import fleetsync_crd, remote
from tests.controller.replicas import replicas
from tests.waits import established

ROOT = Path(__file__).resolve().parents[2]


def start_own_sandbox(directory: Path, *, apiserver_flags: tuple[str, ...] = ()) -> Sandbox:
    """A sandbox in ``directory`` with one L4 node and fleet's overlay installed (its Deployment never runs)."""
    sb = clusters.up(directory=directory, profile=profiles.Profile(pools={"l4x4": 1}), apiserver_flags=apiserver_flags)
    rendered = sb.kubectl("kustomize", str(ROOT / "overlays" / "single-replica")).stdout
    sb.kubectl("apply", "--server-side", "-f", "-", stdin=rendered)
    established(sb.kubectl, "fleetsyncs.fleet.gpufleet.dev")
    return sb


@pytest.fixture(scope="module")
def own_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    directory = tmp_path_factory.mktemp("own-sandbox")
    sb = start_own_sandbox(directory)
    try:
        yield sb
    finally:
        clusters.down(directory=directory)


def service_account_kubeconfig(sb: Sandbox, path: Path) -> Path:
    """A kubeconfig for ``fleet-system/fleet`` (a TokenRequest token), the controller's own identity."""
    token = sb.kubectl("create", "token", "fleet", "-n", "fleet-system", "--duration=2h").stdout.strip()
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": credentials.CLUSTER, "cluster": {"server": sb.server, "certificate-authority": str(sb.ca_file)}}
        ],
        "users": [{"name": "fleet", "user": {"token": token}}],
        "contexts": [{"name": "fleet", "context": {"cluster": credentials.CLUSTER, "user": "fleet"}}],
        "current-context": "fleet",
    }
    with path.open("w") as fh:
        YAML(typ="safe", pure=True).dump(config, fh)
    path.chmod(0o600)
    return path


__all__ = [
    "fleet",
    "fleetsync_crd",
    "own_sandbox",
    "remote",
    "replicas",
    "repo",
    "service_account_kubeconfig",
    "start_own_sandbox",
]
