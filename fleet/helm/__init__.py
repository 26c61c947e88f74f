"""fleet's door to Helm: the real ``helm`` binary, run as async subprocesses with timeouts.

    h = helm.Helm(helm.Settings(binary=path, kubeconfig=..., context=...))
    chart = helm.ChartRef(repository="https://helm.ngc.nvidia.com/nvidia", name="gpu-operator", version="v26.7.0")
    await h.release(name="gpu-operator", namespace="gpu-operator")   # Release | None
    await h.crds(chart)                                               # the chart's crds/ (never upgraded by helm)
    await h.upgrade(chart, release=..., namespace=..., values={...})  # upgrade --install, labelled as fleet's
    await h.rollback(name=..., namespace=...)                         # from Helm's own history
    h.writes                                                          # release-changing calls made

Errors are ``HelmError`` (``HelmTimeout``, ``HelmMissing``), each a ``FleetError``; ``forbidden(err)``
says the API server refused helm's identity (its hint then names the RBAC overlay).
"""

from __future__ import annotations

from fleet.helm.errors import HelmError, HelmMissing, HelmTimeout, forbidden
from fleet.helm.releases import MANAGED_LABEL, ChartRef, Helm, Release, Settings

__all__ = [
    "MANAGED_LABEL",
    "ChartRef",
    "Helm",
    "HelmError",
    "HelmMissing",
    "HelmTimeout",
    "Release",
    "Settings",
    "forbidden",
]
