"""Who is looking at the console, and the error for a credential that says nobody.

The console never decides what a person may see: it impersonates a ``Viewer``'s user and
groups on every read and lets Kubernetes RBAC answer. So a ``Viewer`` is only what the
API server needs for ``Impersonate-User`` and ``Impersonate-Group``, when the credential
stops being good (``expires``), and how it was established (``via``), which the pages show.

A credential that is missing, malformed, forged or expired raises ``Unauthenticated``: the
console turns it into a 401 page that says what was wrong and how to log in again, never a
traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fleet.errors import FleetError

Via = Literal["oidc", "token", "anonymous", "kubeconfig"]


@dataclass(frozen=True)
class Viewer:
    """A person or program looking at the console, as Kubernetes will know them."""

    user: str
    groups: tuple[str, ...]
    expires: float
    """Epoch seconds after which the credential is no longer good; 0: no expiry known."""
    via: Via

    def expired(self, *, now: float) -> bool:
        return bool(self.expires) and now >= self.expires


class Unauthenticated(FleetError):
    """A credential that does not establish a viewer: missing, malformed, forged, refused or expired."""


__all__ = ["Unauthenticated", "Via", "Viewer"]
