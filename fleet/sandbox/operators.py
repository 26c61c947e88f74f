"""The GPU Operator's controller, played: what the real one does for a ``GPUCluster``, minus the GPUs.

NVIDIA's chart installs the operator's Deployment, and in the sandbox KWOK "runs" it, but
nothing there reconciles: the sandbox has no GPUs for a real controller to drive. So the
sandbox plays the controller's GPUCluster path, from NVIDIA's own files
(``charts.Upstream.manifests``, ``manifests/state-dra-driver`` at v26.7.0):

1. the node-labeling controller's deploy labels (``nvidia.com/gpu.deploy.dra-driver=true``
   and the rest of its GPUCluster set) on every node with ``nvidia.com/gpu.present=true``;
2. the DRA driver state: the ServiceAccount, the DeviceClasses and the
   ``nvidia-dra-driver-kubelet-plugin`` DaemonSet rendered from NVIDIA's templates with the
   GPUCluster's spec, in the operator's namespace (where the chart put its Deployment),
   with the same names, labels and selectors, owned by the GPUCluster (the DeviceClasses
   are not owned: the sandbox installs them at start, as if an operator had run before,
   and deleting a GPUCluster must not take them from other tests);
3. the GPUCluster's status as the controller writes it: ``state: ready`` with
   ``Ready=True`` (reason ``Reconciled``) once the DaemonSet's pods are available (KWOK runs
   them), else ``notReady`` with ``Error=True`` reason ``OperandNotReady``.

The templates are Go templates; helm renders them (``helm template`` of a throwaway chart),
with the controller's two Go-side helpers spelled in sprig: ``convertStringMapToCommaSeparatedString``
becomes a named template, and integer comparisons take ``int`` (helm's values are floats).
Tests, ``fleetctl demo`` and the benchmarks start it; the gate's failure paths are tested
without it.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from fleet.sandbox.charts import KUBELET_PLUGIN, RELEASED, Upstream
from fleet.sandbox.clusters import Sandbox
from fleet.sandbox.errors import SandboxError

FIELD_MANAGER = "gpu-operator"
GPU_NODES = "nvidia.com/gpu.present=true"
DEPLOY_LABELS = {
    "nvidia.com/gpu.deploy.driver": "true",
    "nvidia.com/gpu.deploy.dra-driver": "true",
    "nvidia.com/gpu.deploy.dra-validator": "true",
    "nvidia.com/gpu.deploy.dcgm-dra": "true",
    "nvidia.com/gpu.deploy.dcgm-exporter-dra": "true",
}
"""The node-labeling controller's GPUCluster deploy labels (controllers/state_manager.go gpuClusterStateLabels)."""
PLAYED = (
    "0100_kubeletplugin-service_account.yaml",
    "0400_deviceclass-gpu.yaml",
    "0410_deviceclass-mig.yaml",
    "0420_deviceclass-compute-domains.yaml",
    "0430_deviceclass-vfio-gpu.yaml",
    "0500_daemonset.yaml",
)
"""The state-dra-driver manifests the sandbox renders (RBAC, the compute-domain controller and the
ResourceSlice admission policy are for a driver that really runs)."""
HEALTHCHECK_PORTS = {"gpus": 51516, "computeDomains": 51515}
_HELPERS = """\
{{- define "fleet.csv" -}}
{{- $out := list -}}
{{- range $k, $v := . -}}{{- $out = append $out (printf "%s=%v" $k $v) -}}{{- end -}}
{{- join "," $out -}}
{{- end -}}
"""


def _time() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(*, ready: bool, namespace: str) -> dict[str, Any]:
    """The status the controller writes: ready, or waiting for its operands' pods."""
    now = _time()
    if ready:
        conditions = [
            {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "All resources have been "
             "successfully reconciled", "lastTransitionTime": now},
            {"type": "Error", "status": "False", "reason": "Ready", "message": "", "lastTransitionTime": now},
        ]  # fmt: skip
    else:
        conditions = [
            {"type": "Ready", "status": "False", "reason": "Error", "message": "", "lastTransitionTime": now},
            {"type": "Error", "status": "True", "reason": "OperandNotReady",
             "message": "Waiting for operand pods to be ready", "lastTransitionTime": now},
        ]  # fmt: skip
    return {"status": {"state": "ready" if ready else "notReady", "namespace": namespace, "conditions": conditions}}


def _plugin(spec: dict[str, Any]) -> dict[str, Any]:
    env = [{"Name": e.get("name", ""), "Value": e.get("value", "")} for e in spec.get("env") or ()]
    return {"Env": env, "Resources": spec.get("resources") or None}


def _port(spec: dict[str, Any], default: int) -> int:
    check = spec.get("healthcheck") or {}
    if check.get("enabled") is False:
        return -1
    return int(check.get("port") or default)


def render_data(gpucluster: dict[str, Any], *, namespace: str, validator_image: str) -> dict[str, Any]:
    """What the controller's ``getManifestObjects`` hands its templates, from the GPUCluster's spec."""
    spec = gpucluster.get("spec") or {}
    dra = spec.get("draDriver") or {}
    daemonsets = spec.get("daemonsets") or {}
    paths = spec.get("hostPaths") or {}
    gpus = (dra.get("gpus") or {}).get("kubeletPlugin") or {}
    domains = dra.get("computeDomains") or {}
    image = "{}/{}:{}".format(
        dra.get("repository") or "nvcr.io/nvidia", dra.get("image") or "dra-driver-nvidia-gpu", dra.get("version")
    )
    return {
        "DeviceClassAPIVersion": "resource.k8s.io/v1",
        "Namespace": namespace,
        "Daemonsets": {
            "Labels": daemonsets.get("labels") or {},
            "Annotations": daemonsets.get("annotations") or {},
            "PriorityClassName": daemonsets.get("priorityClassName") or "",
            "Tolerations": daemonsets.get("tolerations") or [],
        },
        "DRADriver": {
            "ImagePath": image,
            "InitImagePath": validator_image,
            "InitContainerResources": None,
            "Spec": {
                "ImagePullPolicy": dra.get("imagePullPolicy") or "",
                "ImagePullSecrets": dra.get("imagePullSecrets") or [],
                "IsComputeDomainsEnabled": bool(domains.get("enabled", False)),
                "GPUs": {"KubeletPlugin": _plugin(gpus)},
                "ComputeDomains": {
                    "KubeletPlugin": _plugin(domains.get("kubeletPlugin") or {}),
                    "Controller": _plugin(domains.get("controller") or {}),
                },
            },
        },
        "HostPaths": {
            "DriverInstallDir": paths.get("driverInstallDir") or "",
            "KubeletRootDir": paths.get("kubeletRootDir") or "",
        },
        "FeatureGates": dra.get("featureGates") or {},
        "GPUsHealthcheckPort": _port(gpus, HEALTHCHECK_PORTS["gpus"]),
        "ComputeDomainsHealthcheckPort": _port(domains.get("kubeletPlugin") or {}, HEALTHCHECK_PORTS["computeDomains"]),
    }


def _as_sprig(text: str) -> str:
    text = text.replace("convertStringMapToCommaSeparatedString ", 'include "fleet.csv" ')
    text = re.sub(r"\bgt (\.[A-Za-z.]+) 0\b", r"gt (int \1) 0", text)
    return "{{- with .Values.state }}\n" + text + "\n{{- end }}\n"


def render(upstream: Upstream, *, helm: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    """The played manifests rendered with ``data`` (``render_data``), as the controller renders them."""
    with tempfile.TemporaryDirectory(prefix="fleet-state-dra-driver-") as tmp:
        chart = Path(tmp) / "state-dra-driver"
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text(json.dumps({"apiVersion": "v2", "name": "state-dra-driver", "version": "0"}))
        (chart / "templates" / "_helpers.tpl").write_text(_HELPERS)
        for name in PLAYED:
            (chart / "templates" / name).write_text(_as_sprig((upstream.manifests / name).read_text()))
        values = Path(tmp) / "values.json"
        values.write_text(json.dumps({"state": data}))
        done = subprocess.run(
            [str(helm), "template", "state", str(chart), "-f", str(values)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    if done.returncode != 0:
        raise SandboxError(f"rendering NVIDIA's state-dra-driver manifests failed: {done.stderr.strip()}")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [d for d in yaml.load_all(done.stdout, Loader=loader) if isinstance(d, dict)]


class StandInOperator:
    """``with StandInOperator(sb, upstream=...):`` plays the operator's controller while the block runs.

    A thread reconciles each ``interval`` seconds: it renders and applies the DRA driver's
    objects when the GPUCluster (its uid, generation) or the operator's namespace changes,
    and writes the GPUCluster's status whenever the kubelet plugin's availability changes it.
    """

    def __init__(self, sandbox: Sandbox, *, upstream: Upstream, interval: float = 1.0) -> None:
        self.sandbox = sandbox
        self.upstream = upstream.require()
        self.interval = interval
        self.errors: list[str] = []
        self._applied: tuple[str, int, str] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="played-gpu-operator", daemon=True)

    def __enter__(self) -> StandInOperator:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.reconcile()
            except (SandboxError, subprocess.SubprocessError, ValueError) as err:
                self.errors.append(str(err))  # the gate shows what is missing; the test reads errors
            self._stop.wait(self.interval)

    def _json(self, *args: str) -> dict[str, Any] | None:
        got = self.sandbox.kubectl(*args, "-o", "json", check=False)
        return json.loads(got.stdout) if got.returncode == 0 else None

    def _operator(self) -> tuple[str, str]:
        """The namespace the chart installed the operator in, and its validator image (its env)."""
        found = self._json("get", "deployments", "-A", "-l", "app=gpu-operator")
        for deployment in (found or {}).get("items") or ():
            containers = deployment["spec"]["template"]["spec"].get("containers") or ()
            env = {e.get("name"): e.get("value") for c in containers for e in c.get("env") or ()}
            image = env.get("VALIDATOR_IMAGE") or f"nvcr.io/nvidia/gpu-operator:{RELEASED}"
            return deployment["metadata"]["namespace"], str(image)
        return "gpu-operator", f"nvcr.io/nvidia/gpu-operator:{RELEASED}"

    def reconcile(self) -> bool:
        """One pass of the controller; True when it wrote anything."""
        gpucluster = self._json("get", "gpuclusters.nvidia.com", "gpu-cluster")
        if gpucluster is None or gpucluster["metadata"].get("deletionTimestamp"):
            self._applied = None
            return False
        namespace, validator = self._operator()
        meta = gpucluster["metadata"]
        key = (meta["uid"], int(meta.get("generation", 0)), namespace)
        wrote = False
        if key != self._applied:
            self._apply(gpucluster, namespace=namespace, validator=validator)
            self._applied = key
            wrote = True
        daemonset = self._json("get", "daemonset", "-n", namespace, KUBELET_PLUGIN) or {}
        st = daemonset.get("status") or {}
        want = int(st.get("desiredNumberScheduled") or 0)
        ready = want > 0 and int(st.get("numberAvailable") or 0) >= want
        current = gpucluster.get("status") or {}
        if current.get("state") != ("ready" if ready else "notReady") or current.get("namespace") != namespace:
            self.sandbox.kubectl(
                "patch", "gpuclusters.nvidia.com", "gpu-cluster", "--subresource=status", "--type=merge",
                "-p", json.dumps(status(ready=ready, namespace=namespace)),
            )  # fmt: skip
            wrote = True
        return wrote

    def _apply(self, gpucluster: dict[str, Any], *, namespace: str, validator: str) -> None:
        self.sandbox.kubectl(
            "label", "nodes", "-l", GPU_NODES, "--overwrite", *(f"{k}={v}" for k, v in DEPLOY_LABELS.items())
        )
        data = render_data(gpucluster, namespace=namespace, validator_image=validator)
        owner = {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "GPUCluster",
            "name": gpucluster["metadata"]["name"],
            "uid": gpucluster["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        objects = render(self.upstream, helm=self.sandbox.binary("helm"), data=data)
        for obj in objects:
            if obj.get("kind") != "DeviceClass":
                obj["metadata"]["ownerReferences"] = [owner]
        listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        self.sandbox.kubectl(
            "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}", "-f", "-", stdin=listed
        )


__all__ = ["DEPLOY_LABELS", "PLAYED", "StandInOperator", "render", "render_data", "status"]
