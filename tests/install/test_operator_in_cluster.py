"""The in-cluster controller runs the GPU Operator stage as its ServiceAccount, with exactly the
rights ``overlays/gpu-operator`` adds to the base install, and without them says what is missing.

As in test_in_cluster.py, the test plays the kubelet: it applies the overlays, writes a
TokenRequest token of ``fleet-system/fleet`` with the CA and namespace as a pod's service
account volume, and starts ``python -m fleet.controller`` with ``KUBERNETES_SERVICE_HOST``/
``PORT``, no kubeconfig and ``FLEET_HELM`` set to the sandbox's helm (the image ships helm on
PATH). The controller hands helm a kubeconfig of that same identity (``tokenFile``).
NVIDIA's chart is served on loopback; ``StandInOperator`` plays the operator and sets
``GPUCluster gpu-cluster`` Ready.

One controller process sees both: with the base install only, the operator stage is refused
naming the permission helm lacked and the overlay to apply; once the admin applies the
overlay, the same process (same token, nothing else changed) installs the release.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet import helm
from fleet.sandbox import Sandbox, credentials
from fleet.sandbox.operators import StandInOperator
from fleet.sandbox.processes import free_port
from tests import processes
from tests.conftest import NAMESPACE, RELEASE, Kubectl
from tests.controller.conftest import Remote
from tests.operator.conftest import UPSTREAM
from tests.operator.repos import OperatorRepo
from tests.waits import established

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("cleanup_release")]
ROOT = Path(__file__).resolve().parents[2]
SA = "system:serviceaccount:fleet-system:fleet"


@pytest.fixture()
def without_operator_rights(kubectl: Kubectl) -> Iterator[None]:
    """The base install only, before and after the test (the overlay's grants removed again)."""

    def unbind() -> None:
        kubectl("delete", "clusterrolebinding", "fleet-gpu-operator", "--ignore-not-found")
        kubectl("delete", "rolebinding", "-n", NAMESPACE, "fleet-gpu-operator", "--ignore-not-found")

    unbind()
    try:
        yield
    finally:
        unbind()


def _wait(check: Callable[[], Any], *, within: float, what: str, proc: subprocess.Popen[bytes], log: Path) -> Any:
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the controller exited {proc.returncode}\n{log.read_text()[-4000:]}"
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"not within {within:g}s: {what} (last: {last!r})\n{log.read_text()[-4000:]}")


@pytest.mark.usefixtures("without_operator_rights")
def test_the_installed_controller_runs_the_operator_stage_with_the_overlay_only(
    sandbox: Sandbox, kubectl: Kubectl, chart_repo: str, helm_settings: helm.Settings, tmp_path: Path
) -> None:
    kubectl("apply", "-k", str(ROOT / "overlays" / "base"))
    established(kubectl, "fleetsyncs.fleet.gpufleet.dev")
    denied = kubectl("auth", "can-i", "list", "secrets", "-n", NAMESPACE, f"--as={SA}", check=False)
    assert denied.stdout.strip() == "no"

    account = tmp_path / "serviceaccount"
    account.mkdir()
    token = kubectl("create", "token", "fleet", "-n", "fleet-system", "--duration=1h").stdout.strip()
    (account / "token").write_text(token)
    shutil.copy(sandbox.ca_file, account / "ca.crt")
    (account / "namespace").write_text("fleet-system")

    repo = OperatorRepo(root=tmp_path / "unused", chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    remote = Remote(tmp_path / "git")
    revision = remote.push(repo, message="the GPU Operator")
    cluster = repo.cluster

    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "KUBECONFIG", "KUBERNETES_", "HELM_"))}
    env.update(
        KUBERNETES_SERVICE_HOST="127.0.0.1",
        KUBERNETES_SERVICE_PORT=str(sandbox.ports["apiserver"]),
        FLEET_SERVICE_ACCOUNT_DIR=str(account),
        FLEET_REPO=remote.url,
        FLEET_REF="main",
        FLEET_CLUSTER=cluster,
        FLEET_INTERVAL="2s",
        FLEET_RESYNC="10s",
        FLEET_HEALTH_TIMEOUT="120s",
        FLEET_HELM=str(helm_settings.binary),
        FLEET_LISTEN=f"127.0.0.1:{free_port()}",
        FLEET_STATE_DIR=str(tmp_path / "state"),
        FLEET_IDENTITY="fleet-controller-operator-test",
        FLEET_LEADER_ELECT="false",
        FLEET_LOG_LEVEL=os.environ.get("FLEET_LOG_LEVEL", "info"),
        HOME=str(tmp_path),
    )
    log = tmp_path / "controller.log"

    def operator() -> dict[str, Any]:
        got = kubectl("get", "fleetsync", cluster, "-o", "json", check=False)
        status = (json.loads(got.stdout).get("status") or {}) if got.returncode == 0 else {}
        return {**(status.get("operator") or {}), "_applied": status.get("lastAppliedRevision")}

    with StandInOperator(sandbox, upstream=UPSTREAM), log.open("wb") as out:
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "fleet.controller"], stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip
        try:
            # The base install only: helm may not read its release record; status names what and the overlay.
            refused = _wait(
                lambda: (op := operator()).get("action") == "refused" and op,
                within=180, what="status.operator refused", proc=proc, log=log,
            )  # fmt: skip
            print(f"\nbase only: operator stage refused {time.monotonic() - started:.1f}s after the start")
            error = refused["error"]
            assert f"helm may not read release {NAMESPACE}/{RELEASE}" in error, error
            assert 'cannot list resource "secrets"' in error and SA in error, error
            assert "kubectl apply -k overlays/gpu-operator" in error, error
            assert refused["version"] == "" and refused["_applied"] != revision, refused
            assert _history(helm_settings) is None  # nothing was installed

            # The admin opts in: the same process, same token, installs the release on its next try.
            kubectl("apply", "-k", str(ROOT / "overlays" / "gpu-operator"))
            granted = time.monotonic()
            # "created" by the install; a reconcile queued meanwhile may already show "unchanged".
            done = _wait(
                lambda: (op := operator()).get("version") == "v26.7.0" and op.get("_applied") == revision and op,
                within=240, what="status.operator at v26.7.0 and the revision applied", proc=proc, log=log,
            )  # fmt: skip
            print(f"overlay applied → release installed and gated Ready: {time.monotonic() - granted:.1f}s")
            assert done["action"] in ("created", "unchanged"), done
            assert {k: v for k, v in done.items() if k not in ("_applied", "action")} == {
                "release": f"{NAMESPACE}/{RELEASE}",
                "version": "v26.7.0",
                "error": "",
                "driverStateTimeout": 1800,
                "driverUpgrade": [],
                "stuckCount": 0,
            }
            history = _history(helm_settings)
            assert history is not None
            assert [(h["revision"], h["status"], h["chart"], h["description"]) for h in history] == [
                (1, "deployed", "gpu-operator-v26.7.0", "Install complete")
            ]
            # helm ran with the ServiceAccount's token: the kubeconfig the controller wrote for it.
            helm_config = json.loads((tmp_path / "state" / "helm" / "in-cluster.kubeconfig").read_text())
            assert helm_config["users"] == [{"name": "service-account", "user": {"tokenFile": str(account / "token")}}]
            ready = json.loads(kubectl("get", "fleetsync", cluster, "-o", "json").stdout)["status"]["conditions"]
            assert any(c["type"] == "Ready" and c["status"] == "True" for c in ready), ready
            # What the overlay does not grant stays closed: Secrets outside the operator's namespace.
            for ns in ("kube-system", "fleet-system", "ml"):
                can = kubectl("auth", "can-i", "get", "secrets", "-n", ns, f"--as={SA}", check=False)
                assert can.stdout.strip() == "no", ns
            assert "Traceback" not in log.read_text(), log.read_text()[-4000:]
        finally:
            processes.stop(proc)


def _history(settings: helm.Settings) -> list[dict[str, Any]] | None:
    """``helm history`` of the operator release, read as the sandbox admin (None: no such release)."""
    argv = [str(settings.binary), "history", RELEASE, "-n", NAMESPACE, "-o", "json"]
    argv += ["--kube-context", credentials.CLUSTER, "--kubeconfig", str(settings.kubeconfig)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        assert "release: not found" in done.stderr, done.stderr
        return None
    return list(json.loads(done.stdout))
