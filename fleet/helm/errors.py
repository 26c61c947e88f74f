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


class HelmTimeout(HelmError):
    """helm did not finish in time (it was stopped)."""


class HelmMissing(HelmError):
    """The helm binary is not where the settings say."""


__all__ = ["HelmError", "HelmMissing", "HelmTimeout"]
