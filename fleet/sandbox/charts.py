"""A stand-in ``gpu-operator`` chart and a chart repository on loopback.

NVIDIA's chart repository cannot be reached from the sandbox, and the real
operator needs real GPUs. The stand-in keeps what fleet's operator stage talks
to, as the real chart v26.7.0 ships it (docs/engine.md, "The operator stage"):

- ``crds/``: ``GPUCluster`` (nvidia.com/v1alpha1, cluster-scoped singleton
  ``gpu-cluster``, status ``state`` ready|notReady|disabled with conditions),
  ``ClusterPolicy``, ``NVIDIADriver`` and ``ComputeDomain`` (resource.nvidia.com);
- ``templates/``: the chart's own validations (both ``deployCR`` true fails,
  ``gpuCluster.deployCR`` with ``driver.enabled`` but no ``nvidiaDriverCRD`` fails,
  ``gpuCluster.deployCR`` where ``.Capabilities`` has no ``resource.k8s.io/v1/DeviceClass`` fails),
  the ``GPUCluster gpu-cluster`` CR (``helm.sh/resource-policy: keep``), the DRA
  kubelet-plugin DaemonSet, the driver's DeviceClasses and a pre-delete hook.

Nothing here plays the operator: a test (or ``fleetctl demo``) sets the
GPUCluster Ready, as the real controller would once its operands run.

The sandbox already installs the DeviceClasses when it starts (clusters.publish_gpus),
as if an operator had run before; the chart renders each one only while it is absent or
already this release's (Helm ``lookup``), so installing the stand-in does not fail on them.

``serve(directory)`` packages charts into a Helm repository (``index.yaml`` +
``.tgz``) and serves it over HTTP on 127.0.0.1; ``ChartRef(repository=url, ...)``
then installs from it exactly as from ``https://helm.ngc.nvidia.com/nvidia``.
"""

from __future__ import annotations

import copy
import functools
import http.server
import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fleet.sandbox import gpus

CHART = "gpu-operator"
KUBELET_PLUGIN = "nvidia-dra-driver-kubelet-plugin"
VERSIONS = ("v26.7.0", "v26.7.1", "v27.1.0")
"""Versions the sandbox repository serves: the guide's pin, a patch release whose GPUCluster
CRD adds ``spec.draDriver.logLevel``, and the next major."""


def _crd(
    *,
    group: str,
    kind: str,
    plural: str,
    version: str,
    spec: dict[str, Any],
    status: dict[str, Any],
    singleton: str | None = None,
) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    if singleton:
        schema["x-kubernetes-validations"] = [
            {"rule": f"self.metadata.name == '{singleton}'", "message": f"the only {kind} allowed is {singleton}"}
        ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": "Cluster",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [{"name": "Status", "type": "string", "jsonPath": ".status.state"}],
                }
            ],
        },
    }


_CONDITIONS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string"},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string"},
        },
    },
}


def _status(states: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "state": {"type": "string", "enum": states},
            "namespace": {"type": "string"},
            "conditions": _CONDITIONS,
        },
    }


def crds(version: str) -> list[dict[str, Any]]:
    """The CRDs of the stand-in chart at ``version``."""
    dra_driver: dict[str, Any] = {
        "type": "object",
        "properties": {
            "repository": {"type": "string"},
            "image": {"type": "string"},
            "version": {"type": "string"},
            "featureGates": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "computeDomains": {"type": "object", "properties": {"enabled": {"type": "boolean"}}},
            "gpus": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    if version >= "v26.7.1":
        dra_driver["properties"]["logLevel"] = {"type": "integer"}
    gpucluster_spec = {
        "type": "object",
        "properties": {
            "draDriver": dra_driver,
            "dcgmExporter": {"type": "object", "properties": {"enabled": {"type": "boolean"}}},
            "hostPaths": {
                "type": "object",
                "properties": {"driverInstallDir": {"type": "string"}, "kubeletRootDir": {"type": "string"}},
            },
        },
    }
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    out = [
        _crd(
            group="nvidia.com",
            kind="ClusterPolicy",
            plural="clusterpolicies",
            version="v1",
            spec=free,
            status=_status(["ignored", "ready", "notReady"]),
        ),
        _crd(
            group="nvidia.com",
            kind="NVIDIADriver",
            plural="nvidiadrivers",
            version="v1alpha1",
            spec=free,
            status=_status(["ignored", "ready", "notReady", "disabled"]),
        ),
        _crd(
            group="resource.nvidia.com",
            kind="ComputeDomain",
            plural="computedomains",
            version="v1beta1",
            spec=free,
            status=free,
        ),
    ]
    if version >= "v26.7.0":
        out.insert(
            0,
            _crd(
                group="nvidia.com",
                kind="GPUCluster",
                plural="gpuclusters",
                version="v1alpha1",
                spec=gpucluster_spec,
                status=_status(["ready", "notReady", "disabled"]),
                singleton="gpu-cluster",
            ),
        )
    return out


VALUES: dict[str, Any] = {
    "clusterPolicy": {"deployCR": True},
    "gpuCluster": {"deployCR": False},
    "driver": {"enabled": True, "nvidiaDriverCRD": {"enabled": False, "deployDefaultCR": True}},
    "draDriver": {
        "repository": "nvcr.io/nvidia",
        "image": "dra-driver-nvidia-gpu",
        "version": "v0.5.0",
        "featureGates": {},
        "computeDomains": {"enabled": True},
    },
    "dcgmExporter": {"enabled": True},
    "daemonsets": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
}
"""The real chart's defaults for the values the stand-in uses (deployments/gpu-operator/values.yaml)."""

_VALIDATIONS = """\
{{- if and .Values.clusterPolicy.deployCR .Values.gpuCluster.deployCR }}
{{- fail "clusterPolicy.deployCR and gpuCluster.deployCR cannot both be true" }}
{{- end }}
{{- if and .Values.gpuCluster.deployCR .Values.driver.enabled (not .Values.driver.nvidiaDriverCRD.enabled) }}
{{- fail "gpuCluster.deployCR with driver.enabled requires driver.nvidiaDriverCRD.enabled" }}
{{- end }}
{{- if and .Values.gpuCluster.deployCR (not (.Capabilities.APIVersions.Has "resource.k8s.io/v1/DeviceClass")) }}
{{- fail (print "gpuCluster.deployCR=true requires a Kubernetes cluster that supports Dynamic Resource "
  "Allocation (no resource.k8s.io DeviceClass API is served)") }}
{{- end }}
"""

_GPUCLUSTER = """\
{{- if .Values.gpuCluster.deployCR }}
apiVersion: nvidia.com/v1alpha1
kind: GPUCluster
metadata:
  name: gpu-cluster
  annotations:
    helm.sh/resource-policy: keep
spec:
  draDriver:
    repository: {{ .Values.draDriver.repository | quote }}
    image: {{ .Values.draDriver.image | quote }}
    version: {{ .Values.draDriver.version | quote }}
    featureGates: {{ .Values.draDriver.featureGates | toJson }}
    computeDomains:
      enabled: {{ .Values.draDriver.computeDomains.enabled }}
  dcgmExporter:
    enabled: {{ .Values.dcgmExporter.enabled }}
{{- end }}
"""

_CLUSTERPOLICY = """\
{{- if .Values.clusterPolicy.deployCR }}
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata:
  name: cluster-policy
spec: {}
{{- end }}
"""

_DAEMONSET = """\
{{- if .Values.gpuCluster.deployCR }}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: %(name)s
  labels: {app: %(name)s}
spec:
  selector:
    matchLabels: {app: %(name)s}
  template:
    metadata:
      labels: {app: %(name)s}
    spec:
      nodeSelector:
        nvidia.com/gpu.present: "true"
      tolerations: {{ .Values.daemonsets.tolerations | toJson }}
      containers:
      - name: gpus
        image: "{{ .Values.draDriver.repository }}/{{ .Values.draDriver.image }}:{{ .Values.draDriver.version }}"
{{- end }}
""".replace("%(name)s", KUBELET_PLUGIN)

_HOOK = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: gpu-operator-cleanup-ran
  annotations:
    helm.sh/hook: pre-delete
    helm.sh/hook-delete-policy: before-hook-creation
data:
  ran: "the pre-delete hook ran (the real chart runs /usr/bin/cleanup-gpuclusters here)"
"""


def _device_classes_template() -> str:
    parts = []
    for dc in gpus.device_classes():
        name = dc["metadata"]["name"]
        body = json.dumps({**dc, "metadata": {"name": name}})
        parts.append(
            f'{{{{- $dc := lookup "resource.k8s.io/v1" "DeviceClass" "" "{name}" }}}}\n'
            '{{- $owner := "" }}{{- if $dc }}{{- $owner = index ($dc.metadata.annotations | default dict) '
            '"meta.helm.sh/release-name" | default "" }}{{- end }}\n'
            "{{- if and .Values.gpuCluster.deployCR (or (not $dc) (eq $owner .Release.Name)) }}\n"
            f"---\n{body}\n"
            "{{- end }}\n"
        )
    return "".join(parts)


def write(directory: Path, *, version: str) -> Path:
    """Write the stand-in chart at ``version`` into ``directory/gpu-operator`` and return that folder."""
    root = directory / CHART
    (root / "crds").mkdir(parents=True, exist_ok=True)
    (root / "templates").mkdir(exist_ok=True)
    chart = {
        "apiVersion": "v2",
        "name": CHART,
        "version": version,
        "appVersion": version,
        "description": "fleet's stand-in for NVIDIA's gpu-operator chart (sandbox only)",
    }
    (root / "Chart.yaml").write_text(json.dumps(chart, indent=1) + "\n")
    (root / "values.yaml").write_text(json.dumps(copy.deepcopy(VALUES), indent=1) + "\n")
    for crd in crds(version):
        (root / "crds" / f"{crd['metadata']['name']}.yaml").write_text("---\n" + json.dumps(crd, indent=1) + "\n")
    templates = {
        "validations.yaml": _VALIDATIONS,
        "gpucluster.yaml": _GPUCLUSTER if version >= "v26.7.0" else "",
        "clusterpolicy.yaml": _CLUSTERPOLICY,
        "kubelet-plugin.yaml": _DAEMONSET,
        "deviceclasses.yaml": _device_classes_template(),
        "cleanup-hook.yaml": _HOOK,
    }
    for name, text in templates.items():
        (root / "templates" / name).write_text(text)
    return root


def package(directory: Path, *, helm: Path, versions: tuple[str, ...] = VERSIONS, url: str = "") -> Path:
    """Build and package every version into ``directory/repo`` and write its ``index.yaml``."""
    repo = directory / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    for version in versions:
        src = write(directory / "src" / version, version=version)
        subprocess.run([str(helm), "package", str(src), "-d", str(repo)], check=True, capture_output=True, timeout=60)
    argv = [str(helm), "repo", "index", str(repo)] + (["--url", url] if url else [])
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    return repo


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def serve(directory: Path, *, helm: Path, versions: tuple[str, ...] = VERSIONS) -> Iterator[str]:
    """Package the stand-in chart and serve it as a Helm repository on 127.0.0.1; yields its URL."""
    repo = directory / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(repo)))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    package(directory, helm=helm, versions=versions, url=url)
    thread = threading.Thread(target=server.serve_forever, name="chart-repository", daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


__all__ = ["CHART", "KUBELET_PLUGIN", "VALUES", "VERSIONS", "crds", "package", "serve", "write"]
