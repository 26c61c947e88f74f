"""fleet-controller installed by the overlays, running as its ServiceAccount through the
in-cluster configuration, reconciles the example fleet with exactly the overlay's rights.

The sandbox's nodes run no containers, so the test does what the kubelet would: it
renders and applies ``overlays/single-replica`` (the CRD, RBAC, Deployment and Service),
asks the API server for a TokenRequest token of ``fleet-system/fleet``, writes it with
the CA and namespace as a pod's service account volume, and starts ``python -m
fleet.controller`` with ``KUBERNETES_SERVICE_HOST``/``PORT`` set and no kubeconfig. The
only difference from a pod is where that directory is (``FLEET_SERVICE_ACCOUNT_DIR``:
the test cannot write ``/var/run/secrets`` on a shared machine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from fleet.sandbox import Sandbox
from fleet.sandbox.processes import free_port
from tests import processes, waits
from tests.controller.conftest import Remote, git
from tests.waits import established

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_controller_reconciles_the_example_as_its_service_account(
    gpu_east: Sandbox, tmp_path: Path
) -> None:
    rendered = gpu_east.kubectl("kustomize", str(ROOT / "overlays" / "single-replica")).stdout
    gpu_east.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=rendered)
    established(gpu_east.kubectl, "fleetsyncs.fleet.gpufleet.dev")

    account = tmp_path / "serviceaccount"
    account.mkdir()
    token = gpu_east.kubectl("create", "token", "fleet", "-n", "fleet-system", "--duration=1h").stdout.strip()
    (account / "token").write_text(token)
    shutil.copy(gpu_east.ca_file, account / "ca.crt")
    (account / "namespace").write_text("fleet-system")

    remote = Remote(tmp_path / "git")
    shutil.copytree(ROOT / "examples" / "fleet", remote.work, dirs_exist_ok=True)
    git(remote.work, "add", "-A")
    git(remote.work, "commit", "-q", "-m", "the example fleet")
    git(remote.work, "push", "-q", "origin", "main")
    revision = git(remote.work, "rev-parse", "HEAD")

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "KUBECONFIG", "KUBERNETES_"))}
    env.update(
        KUBERNETES_SERVICE_HOST="127.0.0.1",
        KUBERNETES_SERVICE_PORT=str(gpu_east.ports["apiserver"]),
        FLEET_SERVICE_ACCOUNT_DIR=str(account),
        FLEET_REPO=remote.url,
        FLEET_REF="main",
        FLEET_CLUSTER="gpu-east",
        FLEET_INTERVAL="2s",
        FLEET_LISTEN=f"127.0.0.1:{port}",
        FLEET_STATE_DIR=str(tmp_path / "state"),
        FLEET_IDENTITY="fleet-controller-test",
        HOME=str(tmp_path),
    )
    # The overlay's own setting: teams' templates are written as the teams' ServiceAccounts.
    config = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "ConfigMap")
    assert config["data"]["FLEET_TEAM_IMPERSONATION"] == "required"
    env["FLEET_TEAM_IMPERSONATION"] = config["data"]["FLEET_TEAM_IMPERSONATION"]
    log = tmp_path / "controller.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fleet.controller"], stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        status: dict[str, object] = {}
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-4000:]
            got = gpu_east.kubectl("get", "fleetsync", "gpu-east", "-o", "json", check=False)
            if got.returncode == 0:
                status = json.loads(got.stdout).get("status") or {}
                ready = [c for c in status.get("conditions") or () if c["type"] == "Ready"]  # type: ignore[union-attr]
                if ready and ready[0]["status"] == "True" and status.get("lastAppliedRevision") == revision:
                    break
            time.sleep(1)
        else:
            raise AssertionError(f"not Ready at {revision}: {status}\n{log.read_text()[-4000:]}")

        text = log.read_text()
        assert "Forbidden" not in text and "forbidden" not in text, text[-4000:]
        lease = json.loads(
            gpu_east.kubectl("get", "lease", "-n", "fleet-system", "fleet-gpu-east", "-o", "json").stdout
        )
        assert lease["spec"]["holderIdentity"] == "fleet-controller-test"
        roles = json.loads(
            gpu_east.kubectl(
                "get", "roles", "-A", "-l", "app.kubernetes.io/managed-by=fleet", "-o", "json", "--show-managed-fields"
            ).stdout
        )["items"]
        assert {r["metadata"]["namespace"] for r in roles} >= {"ml-research", "inference"}
        # Written by the ServiceAccount, not by the admin running the test.
        managers = {m["manager"] for r in roles for m in r["metadata"].get("managedFields") or ()}
        assert managers == {"fleet"}
        for path in ("/healthz", "/readyz"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                assert response.status == 200
        # Leading: on a starved machine a renewal may miss its deadline and the Lease be taken again.
        waits.wait_for(
            lambda: b"fleet_leader 1.0" in _get(f"http://127.0.0.1:{port}/metrics"),
            within=30,
            what="fleet_leader 1.0 in /metrics",
            details=lambda: "\n".join(line for line in _get(f"http://127.0.0.1:{port}/metrics").decode().splitlines()
                                       if "leader" in line) + "\n" + log.read_text()[-3000:],
        )  # fmt: skip
        printed = gpu_east.kubectl("get", "fleetsyncs").stdout
        assert "gpu-east" in printed and revision in printed and "True" in printed
    finally:
        processes.stop(proc)


@pytest.mark.parametrize(("overlay", "replicas", "leader_elect"), [("single-replica", 1, "true"), ("ha", 2, "true")])
def test_controller_overlays_render_a_locked_down_deployment(
    gpu_east: Sandbox, overlay: str, replicas: int, leader_elect: str
) -> None:
    rendered = gpu_east.kubectl("kustomize", str(ROOT / "overlays" / overlay)).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [config] = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "fleet-controller"]
    assert {d["kind"] for d in docs} >= {"CustomResourceDefinition", "Service", "ClusterRole", "ServiceAccount"}
    spec = deployment["spec"]
    assert spec["replicas"] == replicas
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    env = {e["name"]: e.get("value") for e in container.get("env") or ()} | dict(config["data"])
    assert env.get("FLEET_LEADER_ELECT", "true") == leader_elect
    assert pod["serviceAccountName"] == "fleet"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert set(container["resources"]) == {"requests", "limits"}
    for role in (d for d in docs if d["kind"] in ("ClusterRole", "Role")):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"], role["metadata"]["name"]


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        body: bytes = response.read()
        return body
