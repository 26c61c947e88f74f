"""fleet's image, and the overlay's Deployment run from it as a podman pod (test and benchmark infrastructure).

``build`` is ``./dev image``: buildah builds the Dockerfile once per content of its inputs.
``render`` is what an operator writes to install fleet: a kustomization on top of an
overlay that sets the image, the ``FLEET_*`` ConfigMap values and (with host networking,
where the pod shares the host's ports) a free port. ``play`` runs that render's
Deployment with ``podman kube play --network host`` and adds only what a cluster adds to a
pod: the API server's ServiceAccount admission mounts the token (TokenRequest) and CA at
the standard path, and the kubelet sets ``KUBERNETES_SERVICE_HOST``/``PORT`` (podman
accepts no projected volume, so the directory is a hostPath). Everything else, from the
securityContext to the emptyDirs, is podman's reading of the manifest as rendered.

Where podman 4.3.1 reads a manifest differently from a kubelet, ``play`` and ``Pod`` do
the kubelet's part, from the manifest:

- podman publishes every ``containerPort``, which host networking refuses: the played pod
  has no port list (on the host's network it only names the port, for the probes);
- podman mounts no Secret volume (it skips an optional one, crashes on a required one):
  each is a directory of the Secret's keys, as the kubelet's secret volume writes it
  (empty for an ``optional`` Secret that does not exist);
- the readiness and liveness probes are HTTP requests from outside the container (podman
  would run liveness as ``curl`` inside it, and the image has no curl);
- ``stop`` waits the manifest's ``terminationGracePeriodSeconds`` (podman ignores it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fleet.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
LOCK = Path("/tmp/fleet-podman-pod.lock")
"""podman's pod names are the host's: two test runs on one machine take turns."""


@dataclass(frozen=True)
class Image:
    """An image built by ``./dev image`` and the podman configuration it was built with."""

    ref: str
    containers_conf: str

    def podman(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "CONTAINERS_CONF": self.containers_conf}
        proc = subprocess.run(["podman", *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
        return proc

    def size(self, ref: str | None = None) -> int:
        """Bytes of ``ref`` (default: this image), as podman counts them."""
        return int(self.podman("image", "inspect", "--format", "{{.Size}}", ref or self.ref).stdout.strip())


def build() -> Image:
    """``./dev image``: the image of this tree, built unless one with the same inputs exists."""
    proc = subprocess.run([str(ROOT / "dev"), "image"], capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"./dev image exited {proc.returncode}:\n{proc.stderr[-6000:]}")
    values = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return Image(ref=values["FLEET_IMAGE"], containers_conf=values["CONTAINERS_CONF"])


def render(
    sandbox: Sandbox, directory: Path, *, overlay: str, image: Image, config: dict[str, str], port: int
) -> list[dict[str, Any]]:
    """The objects of ``overlays/<overlay>`` with an operator's kustomization on top, as kubectl renders them."""
    directory.mkdir(parents=True, exist_ok=True)
    name, _, tag = image.ref.rpartition(":")
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(ROOT / "overlays" / overlay, directory)],
        "images": [{"name": "ghcr.io/gpufleet/fleet", "newName": name, "newTag": tag}],
        "configMapGenerator": [
            {"name": "fleet-controller", "behavior": "merge", "literals": [f"{k}={v}" for k, v in config.items()]}
        ],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": "fleet-controller"},
                "patch": json.dumps(
                    {
                        "spec": {
                            "template": {
                                "spec": {
                                    "containers": [
                                        {"name": "controller", "env": [{"name": "FLEET_LISTEN", "value": f":{port}"}]}
                                    ]
                                }
                            }
                        },
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "metadata": {"name": "fleet-controller"},
                    }
                ),
            },
            {
                "target": {"kind": "Deployment", "name": "fleet-controller"},
                "patch": json.dumps(
                    [{"op": "replace", "path": "/spec/template/spec/containers/0/ports/0/containerPort", "value": port}]
                ),
            },
        ],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return [d for d in yaml.safe_load_all(sandbox.kubectl("kustomize", str(directory)).stdout) if d]


def service_account(sandbox: Sandbox, directory: Path, *, namespace: str, name: str) -> Path:
    """What the API server mounts into the pod: a TokenRequest token of ``namespace/name``, the CA, the namespace."""
    directory.mkdir(parents=True)
    token = sandbox.kubectl("create", "token", name, "-n", namespace, "--duration=1h").stdout.strip()
    (directory / "token").write_text(token)
    shutil.copy(sandbox.ca_file, directory / "ca.crt")
    (directory / "namespace").write_text(namespace)
    directory.chmod(0o755)
    for file in directory.iterdir():
        file.chmod(0o644)  # a projected volume's default mode
    return directory


@dataclass
class Pod:
    """The Deployment's one pod in podman: ``container`` is its one container."""

    image: Image
    name: str
    container: str
    spec: dict[str, Any]
    """The pod template's spec as rendered (and admitted)."""

    @property
    def main(self) -> dict[str, Any]:
        [container] = self.spec["containers"]
        return dict(container)

    def port(self, name_or_number: str | int) -> int:
        if isinstance(name_or_number, int):
            return name_or_number
        [port] = [p["containerPort"] for p in self.main["ports"] if p["name"] == name_or_number]
        return int(port)

    def url(self, path: str, *, port: str | int = "http") -> str:
        return f"http://127.0.0.1:{self.port(port)}{path}"

    def probe(self, kind: str) -> bool:
        """``readinessProbe`` or ``livenessProbe`` as the kubelet runs an httpGet probe: 200-399 passes."""
        get = self.main[kind]["httpGet"]
        try:
            with urllib.request.urlopen(self.url(get["path"], port=get["port"]), timeout=5) as response:
                return 200 <= response.status < 400
        except (urllib.error.URLError, OSError):
            return False

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        request = urllib.request.Request(self.url(path), data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as err:
            return int(err.code)

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url(path), timeout=10) as response:
            return bytes(response.read())

    def inspect(self) -> dict[str, Any]:
        [data] = json.loads(self.image.podman("container", "inspect", self.container).stdout)
        return dict(data)

    def state(self) -> dict[str, Any]:
        return dict(self.inspect()["State"])

    def logs(self) -> str:
        proc = self.image.podman("logs", self.container, check=False)
        return proc.stdout + proc.stderr

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return self.image.podman("exec", self.container, *command, check=False)

    def memory_mib(self) -> tuple[float, float]:
        """Resident memory of the container's main process (fleet-controller) and its peak, in MiB."""
        pid = self.state()["Pid"]
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

    def stop(self) -> float:
        """SIGTERM, SIGKILL after the manifest's ``terminationGracePeriodSeconds`` as a kubelet does; seconds taken."""
        grace = int(self.spec.get("terminationGracePeriodSeconds", 30))
        started = time.monotonic()
        self.image.podman("stop", f"--time={grace}", self.container, timeout=grace + 60)
        return time.monotonic() - started


def admitted(deployment: dict[str, Any], *, account: Path, apiserver_port: int) -> dict[str, Any]:
    """The Deployment as a cluster runs its pod: the service account's volume and the service's variables added."""
    admitted = json.loads(json.dumps(deployment))
    spec = admitted["spec"]["template"]["spec"]
    if spec.get("automountServiceAccountToken", True):
        spec.setdefault("volumes", []).append(
            {"name": "kube-api-access", "hostPath": {"path": str(account), "type": "Directory"}}
        )
        for container in spec["containers"]:
            mount = {"name": "kube-api-access", "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True}
            container.setdefault("volumeMounts", []).append(mount)
    for container in spec["containers"]:
        container.setdefault("env", []).extend(
            [
                {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                {"name": "KUBERNETES_SERVICE_PORT", "value": str(apiserver_port)},
            ]
        )
    return dict(admitted)


@contextlib.contextmanager
def play(
    image: Image,
    objects: list[dict[str, Any]],
    directory: Path,
    *,
    account: Path,
    apiserver_port: int,
    secrets: dict[str, dict[str, bytes]] | None = None,
) -> Iterator[Pod]:
    """``podman kube play --network host`` of the rendered Deployment and its ConfigMap; removed on exit.

    ``secrets`` are the Secrets the cluster would hold, by name (key → bytes)."""
    [deployment] = [d for d in objects if d["kind"] == "Deployment"]
    configmaps = [d for d in objects if d["kind"] == "ConfigMap"]
    deployment = admitted(deployment, account=account, apiserver_port=apiserver_port)
    spec = deployment["spec"]["template"]["spec"]
    # podman 4.3 publishes every containerPort, which host networking refuses; on the host's network a
    # containerPort only names the port (the probes' "http"), so podman gets the pod without the list.
    played = json.loads(json.dumps(deployment))
    for container in played["spec"]["template"]["spec"]["containers"]:
        container.pop("ports", None)
    directory.mkdir(parents=True, exist_ok=True)
    # podman 4.3.1 mounts no Secret volume (it skips an optional one and crashes on a required one): each
    # is the directory the kubelet's secret volume writes, the Secret's keys as files.
    for volume in played["spec"]["template"]["spec"].get("volumes", []):
        source = volume.pop("secret", None)
        if source is None:
            continue
        data = (secrets or {}).get(source["secretName"])
        if data is None and not source.get("optional"):
            raise AssertionError(f"the pod needs Secret {source['secretName']}: pass it in secrets")
        files = directory / "secrets" / source["secretName"]
        files.mkdir(parents=True)
        files.chmod(0o755)
        for key, value in (data or {}).items():
            (files / key).write_bytes(value)
            (files / key).chmod(source.get("defaultMode", 0o644))
        volume["hostPath"] = {"path": str(files), "type": "Directory"}
    manifest = directory / "pod.yaml"
    manifest.write_text(yaml.safe_dump_all([*configmaps, played], sort_keys=False))
    name = f"{deployment['metadata']['name']}-pod-0"
    container = f"{name}-{spec['containers'][0]['name']}"
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            image.podman("kube", "play", "--replace", "--network", "host", str(manifest), timeout=300)
            yield Pod(image=image, name=name, container=container, spec=spec)
        finally:
            image.podman("pod", "rm", "--force", "--time=0", name, check=False, timeout=120)
