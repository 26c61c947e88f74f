"""The Helm adapter's errors: what helm refused, for which release, and what to do.

    FleetError
     └── HelmError          helm exited non-zero (``.stderr`` holds its own words)
          ├── HelmTimeout   helm did not finish within the adapter's timeout
          └── HelmMissing   no helm binary where the settings point

Helm reports everything on stderr as ``Error: ...``; that line is the ``what``.
"""

from __future__ import annotations

from fleet.errors import FleetError


class HelmError(FleetError):
    """helm exited non-zero."""

    def __init__(self, what: str, *, where: str = "", hint: str = "", stderr: str = "") -> None:
        super().__init__(what, where=where, hint=hint)
        self.stderr = stderr


FORBIDDEN_HINT = (
    "the identity helm runs as (the kubeconfig's user; in a cluster, ServiceAccount fleet-system/fleet) "
    "lacks the permission named above: for the in-cluster controller apply the GPU Operator overlay "
    "(kubectl apply -k overlays/gpu-operator, docs/install.md); otherwise grant that verb and resource"
)
"""What to do when the API server refused helm (RBAC): said once, for every helm call."""


def forbidden(err: HelmError) -> bool:
    """Whether helm failed because the API server refused its identity (403/401)."""
    text = f"{err.what}\n{err.stderr}".lower()
    return "forbidden" in text or "unauthorized" in text


class HelmTimeout(HelmError):
    """helm did not finish in time (it was stopped)."""


class HelmMissing(HelmError):
    """The helm binary is not where the settings say."""


__all__ = ["FORBIDDEN_HINT", "HelmError", "HelmMissing", "HelmTimeout", "forbidden"]
