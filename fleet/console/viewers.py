"""Who is looking at the console, and the error for credentials that do not say.

Every read the console makes for a viewer is decided by Kubernetes RBAC for ``user`` and
``groups``: through access reviews in the controller, through the kubeconfig's own identity in
``fleetctl console``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fleet.errors import FleetError

Via = Literal["oidc", "token", "anonymous", "kubeconfig"]


@dataclass(frozen=True)
class Viewer:
    user: str
    groups: tuple[str, ...] = ()
    expires: float = 0.0
    """Epoch seconds after which the viewer must log in again; 0: no expiry."""
    via: Via = "oidc"


class Unauthenticated(FleetError):
    """Credentials missing, bad or expired: the console answers 401 with a page saying which."""


__all__ = ["Unauthenticated", "Via", "Viewer"]
