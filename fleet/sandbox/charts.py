"""NVIDIA's ``gpu-operator`` chart on a loopback Helm repository.

NVIDIA's chart repository cannot be reached from the sandbox, so the sandbox serves
NVIDIA's own chart itself: ``deployments/gpu-operator`` of NVIDIA/gpu-operator at
``v26.7.0`` with its vendored node-feature-discovery subchart (``tests/data/gpu-operator``
in fleet's repository; ``Upstream`` names that checkout). What the sandbox cannot run is
the operator's controller (no GPUs): ``fleet.sandbox.operators`` plays it.

The tagged tree's ``Chart.yaml`` says ``v1.0.0-devel``; NVIDIA's release sets the chart's
version and appVersion when it packages it, and so does ``package`` (``helm package
--version --app-version``). Versions that NVIDIA's repository lacks are derived from the
real chart (``derive``), never written from scratch:

- ``v26.7.1``, a patch release whose GPUCluster CRD adds ``spec.draDriver.logLevel``
  (what a CRD-only change of a patch release looks like: fleet applies CRDs before helm);
- ``v27.1.0``, the next major (the chart unchanged but for its version).

``serve(directory, upstream=...)`` packages them into a Helm repository (``index.yaml`` +
``.tgz``) and serves it over HTTP on 127.0.0.1; ``ChartRef(repository=url, ...)`` then
installs from it exactly as from ``https://helm.ngc.nvidia.com/nvidia``. The path to the
vendored tree is always an argument: nothing in the installed package reads a checkout.
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fleet.sandbox import versions
from fleet.sandbox.errors import SandboxError

CHART = "gpu-operator"
RELEASED = versions.GPU_OPERATOR
"""The tag of NVIDIA/gpu-operator that ``Upstream`` holds."""
KUBELET_PLUGIN = "nvidia-dra-driver-kubelet-plugin"
VERSIONS = (RELEASED, "v26.7.1", "v27.1.0")
"""Versions the sandbox repository serves: NVIDIA's release, then the derived patch release and next major."""


@dataclass(frozen=True)
class Upstream:
    """A copy of NVIDIA/gpu-operator at ``RELEASED``: its chart and the DRA driver's state manifests."""

    root: Path

    @property
    def chart(self) -> Path:
        return self.root / "deployments" / CHART

    @property
    def manifests(self) -> Path:
        """``manifests/state-dra-driver``: what the operator's controller renders for a GPUCluster."""
        return self.root / "manifests" / "state-dra-driver"

    def require(self) -> Upstream:
        for needed in (self.chart / "Chart.yaml", self.manifests / "0500_daemonset.yaml"):
            if not needed.is_file():
                raise SandboxError(
                    f"NVIDIA's gpu-operator {RELEASED} is not at {self.root} ({needed.name} is missing)",
                    where=str(self.root),
                    hint="run from a checkout of fleet's repository (tests/data/gpu-operator holds it)",
                )
        return self


def crds(chart: Path) -> list[dict[str, Any]]:
    """The CRDs in a chart folder's ``crds/`` (the chart's own, not its subcharts')."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out: list[dict[str, Any]] = []
    for path in sorted((chart / "crds").glob("*.yaml")):
        out += [d for d in yaml.load_all(path.read_text(), Loader=loader) if isinstance(d, dict)]
    return out


def derive(upstream: Upstream, directory: Path, *, version: str) -> Path:
    """Copy NVIDIA's chart into ``directory/<version>/gpu-operator`` as ``version`` would ship it; returns it.

    ``Chart.yaml`` gets the version (and appVersion), as NVIDIA's packaging sets them, so the
    folder is also a local-path chart of that version. ``RELEASED`` is otherwise NVIDIA's tree
    as it is; ``v26.7.1`` adds ``spec.draDriver.logLevel`` to the GPUCluster CRD; any other
    version is the real chart under another version number.
    """
    root = directory / version / CHART
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(upstream.require().chart, root)
    meta = root / "Chart.yaml"
    text = re.sub(r"(?m)^version: .*$", f"version: {version}", meta.read_text())
    meta.write_text(re.sub(r"(?m)^appVersion: .*$", f'appVersion: "{version}"', text))
    if version == "v26.7.1":
        path = root / "crds" / "nvidia.com_gpuclusters.yaml"
        crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        for served in crd["spec"]["versions"]:
            spec = served["schema"]["openAPIV3Schema"]["properties"]["spec"]
            spec["properties"]["draDriver"]["properties"]["logLevel"] = {
                "description": "LogLevel is the DRA driver's log verbosity (derived by fleet's sandbox)",
                "type": "integer",
            }
        path.write_text("---\n" + yaml.safe_dump(crd, sort_keys=False))
    return root


def package(
    upstream: Upstream, directory: Path, *, helm: Path, versions: tuple[str, ...] = VERSIONS, url: str = ""
) -> Path:
    """Package every version into ``directory/repo`` (``gpu-operator-<version>.tgz``) and write its ``index.yaml``."""
    repo = directory / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    for version in versions:
        src = derive(upstream, directory / "src", version=version)
        argv = [str(helm), "package", str(src), "--version", version, "--app-version", version, "-d", str(repo)]
        _helm(argv)
    _helm([str(helm), "repo", "index", str(repo), *(["--url", url] if url else [])])
    return repo


def _helm(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise SandboxError(f"{' '.join(argv[1:3])} failed: {done.stderr.strip()}", where=argv[2])


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def serve(directory: Path, *, helm: Path, upstream: Upstream, versions: tuple[str, ...] = VERSIONS) -> Iterator[str]:
    """Package the chart's versions and serve them as a Helm repository on 127.0.0.1; yields its URL."""
    repo = directory / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(repo)))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        package(upstream, directory, helm=helm, versions=versions, url=url)
        thread = threading.Thread(target=server.serve_forever, name="chart-repository", daemon=True)
        thread.start()
        try:
            yield url
        finally:
            server.shutdown()
    finally:
        server.server_close()


__all__ = ["CHART", "KUBELET_PLUGIN", "RELEASED", "VERSIONS", "Upstream", "crds", "derive", "package", "serve"]
