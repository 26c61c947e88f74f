"""Rules for the GPU Operator release: the DRA guide's install, checked before Helm runs it.

The guide installs GPU Operator v26.7.0 on the GPUCluster path:
``clusterPolicy.deployCR=false``, ``gpuCluster.deployCR=true`` and either
``driver.nvidiaDriverCRD.enabled=true`` (operator-managed driver) or
``driver.enabled=false`` (driver ≥580 preinstalled on the hosts). The chart's
own validations fail the install otherwise, and a ClusterPolicy beside a
GPUCluster is the guide's top conflict — so a wrong value is a finding here,
with the ``--set`` that fixes it, not a failed rollout later. GPUCluster
exists from v26.7.0 on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fleet.manifests import Finding, Manifest, kinds

_FIRST_GPUCLUSTER = (26, 7, 0)

_REQUIRED: dict[str, tuple[tuple[str, Any], ...]] = {
    "gpuCluster": (
        ("clusterPolicy.deployCR", False),
        ("gpuCluster.deployCR", True),
        ("driver.nvidiaDriverCRD.enabled", True),
    ),
    "preinstalledDriver": (
        ("clusterPolicy.deployCR", False),
        ("gpuCluster.deployCR", True),
        ("driver.enabled", False),
    ),
}


def check(operator: Manifest) -> Iterator[Finding]:
    assert isinstance(operator.model, kinds.GPUOperator)
    spec = operator.model.spec
    version = re.match(r"^v?([0-9]+)\.([0-9]+)\.([0-9]+)", spec.chart.version)
    if version and tuple(int(x) for x in version.groups()) < _FIRST_GPUCLUSTER:
        yield Finding(
            operator.positions.at(("spec", "chart", "version")),
            "operator-values",
            f"GPU Operator {spec.chart.version} has no GPUCluster (DRA) install path",
            hint="use v26.7.0 or later",
            object=operator.ref,
        )
    for dotted, wanted in _REQUIRED[spec.install_path]:
        present, value = _lookup(spec.values, dotted)
        if present and value == wanted and type(value) is type(wanted):
            continue
        path = ("spec", "values", *dotted.split("."))
        shown = "true" if wanted else "false"
        found = f"is {value!r}" if present else "is not set"
        yield Finding(
            operator.positions.at(path),
            "operator-values",
            f"installPath {spec.install_path} needs {dotted}={shown}, but it {found}",
            hint=f"set values.{dotted}: {shown} (helm --set {dotted}={shown}, as in the DRA guide)",
            object=operator.ref,
        )


def _lookup(values: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = values
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


__all__ = ["check"]
