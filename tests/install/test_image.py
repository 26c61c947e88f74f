"""fleet's image as a platform team runs it: built from the Dockerfile by buildah, and the
``overlays/single-replica`` Deployment run from it by podman against the sandbox.

The image is built once for the module (``./dev image``, tagged by the content of its inputs,
so an unchanged tree is not built again). ``tests/install/pods.py`` plays the overlay's pod:
every setting (securityContext, env and ConfigMap, emptyDirs, Secret volumes, probes, the
grace period) is the manifest's, with host networking so the pod reaches the loopback
sandbox, and the ServiceAccount's TokenRequest token and CA at the standard path. The
controller in it reaches Ready on the example fleet with the GPU Operator stage (the image's
helm, NVIDIA's vendored chart served on loopback, the operator played by
``StandInOperator``), applies a commit a signed webhook announces, converges exactly after a
SIGKILL and a restart, and on SIGTERM releases the Lease and exits 0 within the grace period.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.sandbox import Sandbox, credentials
from fleet.sandbox.operators import StandInOperator
from fleet.sandbox.processes import free_port
from fleetctl.commands.demo import sandbox_overlay
from tests import waits
from tests.install import pods
from tests.operator.conftest import UPSTREAM
from tests.source.gitservers import Upstream, daemon
from tests.waits import established

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extras("image")]
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "gpu-east"
UID = "65532"
TEAM_CHANGE = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: {name}
  namespace: ml-research
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.nvidia.com
"""


@pytest.fixture(scope="module")
def image() -> pods.Image:
    return pods.build()


def run(image: pods.Image, *args: str) -> subprocess.CompletedProcess[str]:
    """``podman run`` of the image, without its HEALTHCHECK (podman schedules that through systemd, absent here)."""
    return image.podman("run", "--rm", "--no-healthcheck", *args, check=False)


def test_fleetctl_validates_a_mounted_repository_from_the_image(image: pods.Image, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "fleet", repo)
    ok = run(image, "-v", f"{repo}:/repo", "--entrypoint", "fleetctl", image.ref, "validate", "/repo")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Traceback" not in ok.stderr
    team = repo / "teams" / "inference" / "single-gpu.yaml"
    team.write_text(team.read_text().replace("deviceClassName: gpu.nvidia.com", "deviceClassName: no.such.class"))
    bad = run(image, "-v", f"{repo}:/repo", "--entrypoint", "fleetctl", image.ref, "validate", "/repo")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(r"teams/inference/single-gpu\.yaml:\d+", bad.stdout + bad.stderr), bad.stdout + bad.stderr


def test_the_image_ships_only_what_fleet_runs(image: pods.Image) -> None:
    script = (
        "echo packages=$(ls /opt/fleet/lib/python3.11/site-packages); "
        "echo leftovers=$(find /opt/fleet -name '*.c' -o -name '*.pyx' | wc -l); "
        "echo documentation=$(find /usr/share/man /usr/share/doc -type f ! -name copyright | wc -l); "
        "echo perl=$(find /usr/share/perl /usr/share/perl5/Git* /usr/lib/x86_64-linux-gnu/perl "
        "/usr/lib/x86_64-linux-gnu/libperl* -type f 2>/dev/null | wc -l); "
        "echo caches=$(find /root/.cache /var/cache/apt /var/lib/apt/lists -type f -size +0 2>/dev/null | wc -l); "
        "echo uid=$(id -u); echo helm=$(helm version --short); echo git=$(git --version); echo ssh=$(ssh -V 2>&1)"
    )
    listing = run(image, "--entrypoint", "sh", image.ref, "-c", script)
    assert listing.returncode == 0, listing.stderr
    found = dict(line.split("=", 1) for line in listing.stdout.splitlines())
    packages = found["packages"].split()
    for gone in ("pip", "setuptools", "pkg_resources", "pycparser", "_distutils_hack"):
        assert gone not in packages, gone
    assert "fleet" in packages and "cel_expr_python" in packages
    assert "markdown_it" in packages, "the console renders the diff's markdown (its Revision page)"
    assert found["leftovers"] == found["documentation"] == found["perl"] == found["caches"] == "0", found
    assert found["uid"] == UID and found["helm"] == "v3.21.4", found
    assert found["git"].startswith("git version 2.") and found["ssh"].startswith("OpenSSH_"), found
    # The venv imports: every module of fleet and fleetctl, as a start would reach them.
    imports = run(
        image,
        "--entrypoint",
        "python",
        image.ref,
        "-c",
        "import importlib, pkgutil, fleet, fleetctl\n"
        "for pkg in (fleet, fleetctl):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n",
    )
    assert imports.returncode == 0, imports.stderr


@pytest.mark.parametrize("case", ["read-only state directory", "unreadable CA"])
def test_a_place_the_controller_cannot_run_in_is_one_error_in_the_container(
    image: pods.Image, tmp_path: Path, case: str
) -> None:
    settings = ["-e", "FLEET_REPO=git://127.0.0.1:1/fleet.git", "-e", "FLEET_CLUSTER=gpu-east"]
    secure = ["--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges", "--user", f"{UID}:{UID}"]
    if case == "read-only state directory":
        args = [*settings, "-e", "FLEET_STATE_DIR=/var/lib/fleet"]
        expected = "error: /var/lib/fleet (--state-dir / FLEET_STATE_DIR): the state directory is not writable: "
    else:
        account = tmp_path / "serviceaccount"
        account.mkdir(mode=0o755)
        (account / "token").write_text("t0ken")
        (account / "token").chmod(0o644)
        (account / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
        (account / "ca.crt").chmod(0o600)  # root's: uid 65532 may not read it
        mount = f"{account}:{pods.SERVICE_ACCOUNT_DIR}:ro"
        args = [*settings, "-e", "FLEET_STATE_DIR=/tmp/state", "-v", mount, "-e", "KUBERNETES_SERVICE_HOST=10.0.0.1"]
        expected = f"error: {pods.SERVICE_ACCOUNT_DIR}/ca.crt: cannot read the API server's CA: Permission denied"
    proc = run(image, *secure, *args, image.ref)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith(expected), proc.stderr
    assert lines[1].startswith("  hint: ") and "Traceback" not in proc.stderr


def wait_for(check: Callable[[], Any], *, within: float, what: str, pod: pods.Pod) -> Any:
    """``waits.wait_for``, failing with the container's state and log."""
    return waits.wait_for(check, within=within, what=what, details=lambda: f"{pod.state()}\n{pod.logs()[-6000:]}")


def fleetsync(sandbox: Sandbox) -> dict[str, Any]:
    got = sandbox.kubectl("get", "fleetsync", CLUSTER, "-o", "json", check=False)
    return dict(json.loads(got.stdout).get("status") or {}) if got.returncode == 0 else {}


def applied(sandbox: Sandbox, revision: str) -> bool:
    status = fleetsync(sandbox)
    ready = [c for c in status.get("conditions") or () if c["type"] == "Ready"]
    return bool(ready) and ready[0]["status"] == "True" and status.get("lastAppliedRevision") == revision


def lease_holder(sandbox: Sandbox) -> str:
    lease = json.loads(sandbox.kubectl("get", "lease", "-n", "fleet-system", f"fleet-{CLUSTER}", "-o", "json").stdout)
    return str(lease["spec"].get("holderIdentity") or "")


def signed(body: bytes, secret: bytes) -> dict[str, str]:
    return {
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": hashlib.sha256(body).hexdigest()[:16],
        "X-Hub-Signature-256": "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }


@pytest.fixture()
def installed(gpu_east: Sandbox, helm_binary: Path) -> Iterator[None]:
    """The single-replica overlay and the GPU Operator stage's rights, applied as docs/install.md says;
    afterwards the operator's release and those rights are removed again (the sandbox is shared)."""
    rendered = gpu_east.kubectl("kustomize", str(ROOT / "overlays" / "single-replica")).stdout
    gpu_east.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=rendered)
    gpu_east.kubectl("apply", "--server-side", "-f", str(ROOT / "overlays" / "gpu-operator" / "operator.yaml"))
    established(gpu_east.kubectl, "fleetsyncs.fleet.gpufleet.dev")
    try:
        yield
    finally:
        subprocess.run(
            [
                str(helm_binary), "uninstall", "gpu-operator", "-n", "gpu-operator", "--wait",
                "--kubeconfig", str(gpu_east.kubeconfig), "--kube-context", credentials.CLUSTER,
            ],
            capture_output=True, timeout=180, check=False,
        )  # fmt: skip
        gpu_east.kubectl("delete", "gpucluster,clusterpolicy", "--all", "--ignore-not-found", check=False)
        gpu_east.kubectl("delete", "clusterrolebinding", "fleet-gpu-operator", "--ignore-not-found")
        gpu_east.kubectl("delete", "rolebinding", "-n", "gpu-operator", "fleet-gpu-operator", "--ignore-not-found")


@pytest.mark.usefixtures("installed")
def test_the_overlays_pod_runs_the_image_as_written(
    image: pods.Image, gpu_east: Sandbox, chart_repo: str, tmp_path: Path
) -> None:
    upstream = Upstream(tmp_path / "git")
    shutil.copytree(ROOT / "examples" / "fleet", upstream.work, dirs_exist_ok=True)
    first = upstream.commit(
        {"overlays/zz-sandbox/overlay.yaml": sandbox_overlay(cluster=CLUSTER, chart_repository=chart_repo)},
        message="the example fleet, its GPU Operator from the loopback chart repository",
    )
    webhook = b"webhook-" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:16].encode()
    account = pods.service_account(gpu_east, tmp_path / "serviceaccount", namespace="fleet-system", name="fleet")
    with daemon(base=upstream.root) as git_port, StandInOperator(gpu_east, upstream=UPSTREAM):
        config = {
            "FLEET_REPO": f"git://127.0.0.1:{git_port}/repo.git",
            "FLEET_REF": "main",
            "FLEET_CLUSTER": CLUSTER,
            "FLEET_WEBHOOK_SECRET_FILE": "/etc/fleet/webhook/secret",
        }
        objects = pods.render(
            gpu_east, tmp_path / "install", overlay="single-replica", image=image, config=config, port=free_port()
        )
        started = time.monotonic()
        with pods.play(
            image,
            objects,
            tmp_path / "pod",
            account=account,
            apiserver_port=gpu_east.ports["apiserver"],
            secrets={"fleet-webhook": {"secret": webhook}},
        ) as pod:
            # The securityContext as podman applied it: uid 65532, read-only root, no capability, no escalation.
            inspected = pod.inspect()
            assert inspected["Config"]["User"].split(":")[0] == UID
            assert inspected["HostConfig"]["ReadonlyRootfs"] is True
            assert not inspected["EffectiveCaps"]
            assert "no-new-privileges" in " ".join(inspected["HostConfig"]["SecurityOpt"] or ())
            assert pod.main["envFrom"] == [{"configMapRef": {"name": "fleet-controller"}}]

            wait_for(
                lambda: pod.probe("readinessProbe") and applied(gpu_east, first),
                within=300, what=f"Ready at {first} (readinessProbe and FleetSync)", pod=pod,
            )  # fmt: skip
            print(f"\nstart → Ready at the example, GPU Operator included: {time.monotonic() - started:.1f}s")
            status = fleetsync(gpu_east)
            assert status["operator"]["version"] == "v26.7.0" and not status["operator"].get("error"), status
            assert pod.probe("livenessProbe")
            assert lease_holder(gpu_east) == pod.name  # FLEET_IDENTITY is the pod's name (fieldRef)
            assert b"fleet_leader 1.0" in pod.get("/metrics")
            log = pod.logs()
            assert "Traceback" not in log and "orbidden" not in log, log[-4000:]
            written = pod.exec("ls", "/var/cache/fleet")  # the emptyDir holds the state: git, plans, helm
            assert {"git", "helm"} <= set(written.stdout.split()), written

            # A commit a signed webhook announces.
            second = upstream.commit({"teams/ml-research/image-a.yaml": TEAM_CHANGE.format(name="image-a")})
            body = json.dumps({"ref": "refs/heads/main", "after": second}).encode()
            announced = time.monotonic()
            assert pod.post("/webhook", body, signed(body, webhook)) == 202
            wait_for(lambda: applied(gpu_east, second), within=120, what=f"Ready at {second}", pod=pod)
            print(f"webhook → applied: {time.monotonic() - announced:.1f}s")
            forged = signed(body, b"not-the-secret")
            assert pod.post("/webhook", body, forged) == 401

            # SIGKILL in the middle of the next commit's reconcile, then the container restarted.
            third = upstream.commit(
                {
                    "teams/ml-research/image-a.yaml": None,
                    "teams/ml-research/image-b.yaml": TEAM_CHANGE.format(name="image-b"),
                }
            )
            body = json.dumps({"ref": "refs/heads/main", "after": third}).encode()
            assert pod.post("/webhook", body, signed(body, webhook)) == 202
            wait_for(
                lambda: fleetsync(gpu_east).get("lastAttemptedRevision") == third,
                within=60, what=f"the controller working on {third}", pod=pod,
            )  # fmt: skip
            image.podman("kill", "--signal=KILL", pod.container)
            wait_for(lambda: not pod.state()["Running"], within=30, what="the container killed", pod=pod)
            assert pod.state()["ExitCode"] == 137
            restarted = time.monotonic()
            # The pod's last container gone, podman stops the pod's infra container too, sooner or
            # later (its pod exit policy): the pod is started again, as the kubelet restarts a
            # container in a sandbox that is still there.
            image.podman("pod", "start", pod.name)
            wait_for(
                lambda: pod.probe("readinessProbe") and applied(gpu_east, third),
                within=180, what=f"Ready at {third} after the restart", pod=pod,
            )  # fmt: skip
            print(f"restart after SIGKILL → Ready: {time.monotonic() - restarted:.1f}s")
            # Exactly: nothing left to change, image-a pruned, image-b there, the Lease retaken by the same identity.
            checkout = tmp_path / "checkout"
            subprocess.run(["git", "clone", "-q", str(upstream.bare), str(checkout)], check=True)
            diff = subprocess.run(
                [
                    sys.executable, "-m", "fleetctl", "diff", str(checkout), "--cluster", CLUSTER,
                    "--kubeconfig", str(gpu_east.kubeconfig), "--context", credentials.CLUSTER,
                ],
                capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            assert diff.returncode == 0, diff.stdout + diff.stderr
            templates = gpu_east.kubectl("get", "resourceclaimtemplates", "-n", "ml-research", "-o", "name").stdout
            assert "image-b" in templates and "image-a" not in templates, templates
            assert lease_holder(gpu_east) == pod.name

            # SIGTERM: the Lease released, exit 0, within the manifest's grace period.
            rss, _ = pod.memory_mib()
            took = pod.stop()
            state = pod.state()
            assert state["ExitCode"] == 0, (state, pod.logs()[-4000:])
            assert took < pod.spec["terminationGracePeriodSeconds"], took
            assert lease_holder(gpu_east) == ""
            assert "SIGTERM: finishing the write in flight, then stopping" in pod.logs()
            print(f"SIGTERM → exited 0 in {took:.1f}s, Lease released; RSS before it {rss:.0f} MiB")
