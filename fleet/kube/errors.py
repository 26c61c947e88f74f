"""Typed errors for everything that can go wrong talking to a Kubernetes API server.

The engine reacts to *what state the server is in* (the object is missing, somebody
else owns the field, the request was malformed), never to HTTP details, and never
to kr8s or httpx types: the transport underneath can be replaced without touching
a caller. Every error keeps the original exception chained (``raise ... from``) and
is a ``FleetError``, so the CLI prints it as what / where / hint.

    FleetError
     └── KubeError                    any failure of a Kubernetes request
          ├── NotFound                404: the object (or its kind) does not exist
          ├── Conflict                409: SSA field conflict, AlreadyExists, failed precondition
          │                                (``managers``: the other field managers, parsed)
          ├── Forbidden               403: RBAC said no (``401`` maps here too)
          ├── Invalid                 400/422 (and SSA's schema 500): the object was rejected
          │                                (``causes``: field, message)
          ├── TooManyRequests         429 after every retry (``retry_after`` seconds)
          ├── ServerError             5xx after every retry
          └── Unreachable             connection refused/reset or timed out after every retry

``status`` is the HTTP status code (0 when there was no response) and ``reason`` the
Kubernetes ``Status.reason`` (``AlreadyExists``, ``Conflict``, ``Invalid``...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fleet.errors import FleetError

IMMUTABLE_DETAIL = "field is immutable"
"""apimachinery's ``validation.FieldImmutableErrorMsg``: the detail of every immutable-field cause."""
_MANAGER = re.compile(r'conflicts? with "([^"]+)"')
FIELD_MANAGER_CONFLICT = "FieldManagerConflict"
"""``Status.details.causes[].reason`` of one field another manager owns (server-side apply)."""
_SCHEMA_ERROR = re.compile(r"failed to create typed patch object|field not declared in schema")


@dataclass(frozen=True)
class Cause:
    """One field the server rejected: ``field`` is a JSON path like ``spec.selectors[0]``."""

    field: str
    message: str
    reason: str = ""

    @property
    def immutable(self) -> bool:
        """The field may not change once set (Kubernetes' ``ValidateImmutableField``).

        The API reports it as a ``FieldValueInvalid`` cause on the field, whose
        detail is apimachinery's constant ``FieldImmutableErrorMsg``; the cause's
        type and field are structured, only that fixed detail is text.
        """
        return self.reason == "FieldValueInvalid" and bool(self.field) and self.message.endswith(IMMUTABLE_DETAIL)


class KubeError(FleetError):
    """A Kubernetes request failed; ``status``/``reason`` say how."""

    def __init__(self, what: str, *, where: str = "", hint: str = "", status: int = 0, reason: str = "") -> None:
        super().__init__(what, where=where, hint=hint)
        self.status = status
        self.reason = reason


class NotFound(KubeError):
    """The object, or its kind, does not exist on the server."""


class Conflict(KubeError):
    """Another writer got there first: an SSA field conflict, AlreadyExists or a failed precondition."""

    def __init__(
        self,
        what: str,
        *,
        where: str = "",
        hint: str = "",
        status: int = 409,
        reason: str = "Conflict",
        managers: tuple[str, ...] = (),
        causes: tuple[Cause, ...] = (),
    ) -> None:
        super().__init__(what, where=where, hint=hint, status=status, reason=reason)
        self.managers = managers
        self.causes = causes

    @property
    def fields(self) -> tuple[tuple[str, str], ...]:
        """(other field manager, field path) per field-manager conflict, from the server's status causes."""
        found = []
        for cause in self.causes:
            if cause.reason == FIELD_MANAGER_CONFLICT:
                names = conflict_managers(cause.message)
                found.append((names[0] if names else "", cause.field))
        return tuple(found)


class Forbidden(KubeError):
    """The credentials in use may not do this (RBAC, or not authenticated)."""


class Invalid(KubeError):
    """The server rejected the object itself; ``causes`` lists the fields and why."""

    def __init__(
        self,
        what: str,
        *,
        where: str = "",
        hint: str = "",
        status: int = 422,
        reason: str = "Invalid",
        causes: tuple[Cause, ...] = (),
    ) -> None:
        super().__init__(what, where=where, hint=hint, status=status, reason=reason)
        self.causes = causes

    @property
    def immutable(self) -> bool:
        """Rejected only because fields that may not change would change: every cause says so."""
        return bool(self.causes) and all(c.immutable for c in self.causes)


class TooManyRequests(KubeError):
    """The server kept throttling (429) after every retry."""

    def __init__(
        self,
        what: str,
        *,
        where: str = "",
        hint: str = "",
        status: int = 429,
        reason: str = "",
        retry_after: float = 0.0,
    ) -> None:
        super().__init__(what, where=where, hint=hint, status=status, reason=reason)
        self.retry_after = retry_after


class ServerError(KubeError):
    """The server failed (5xx) after every retry."""


class Unreachable(KubeError):
    """No answer: connection refused, reset, or the call timed out, after every retry."""


UNAVAILABLE = (Unreachable, ServerError, TooManyRequests)
"""Failures of the server, not of the request: another request now would fail the same way."""


def conflict_managers(message: str) -> tuple[str, ...]:
    """The field managers named in an SSA conflict message, in order, without repeats.

    The API server words it ``Apply failed with 2 conflicts: conflicts with "kubectl"
    using v1:\\n- .spec.x`` or, per manager, ``conflict with "a" ...``.
    """
    seen: dict[str, None] = {}
    for name in _MANAGER.findall(message):
        seen.setdefault(name, None)
    return tuple(seen)


def from_status(*, status: int, body: object, where: str, retry_after: float = 0.0) -> KubeError:
    """Build the typed error for an HTTP ``status`` and its decoded ``body`` (a Status, or text)."""
    reason = ""
    message = ""
    causes: tuple[Cause, ...] = ()
    if isinstance(body, dict):
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or "")
        details = body.get("details")
        if isinstance(details, dict):
            causes = tuple(
                Cause(
                    field=str(c.get("field") or ""),
                    message=str(c.get("message") or ""),
                    reason=str(c.get("reason") or ""),
                )
                for c in details.get("causes") or ()
                if isinstance(c, dict)
            )
    elif body:
        message = str(body)
    message = message or f"HTTP {status}"
    if status == 404:
        return NotFound(message, where=where, status=status, reason=reason)
    if status == 409:
        managers = conflict_managers(message)
        hint = (
            f"another field manager ({', '.join(managers)}) owns these fields; "
            "change them through that owner, or take ownership with --force-conflicts"
            if managers
            else "the object changed or already exists; retry"
        )
        return Conflict(message, where=where, hint=hint, status=status, reason=reason, managers=managers, causes=causes)
    if status in (401, 403):
        return Forbidden(
            message,
            where=where,
            status=status,
            reason=reason,
            hint="check the credentials of the kubeconfig context and their RBAC permissions",
        )
    if status in (400, 422):
        return Invalid(message, where=where, status=status, reason=reason, causes=causes)
    if status == 429:
        return TooManyRequests(
            message,
            where=where,
            status=status,
            reason=reason,
            retry_after=retry_after,
            hint="the API server is overloaded; retry later",
        )
    if status >= 500 and _SCHEMA_ERROR.search(message):
        # Server-side apply reports a body that does not fit the schema as a 500.
        return Invalid(
            message,
            where=where,
            status=status,
            reason=reason or "Invalid",
            hint="fix the field named above; kubectl explain shows the schema",
        )
    if status >= 500:
        return ServerError(message, where=where, status=status, reason=reason)
    return KubeError(message, where=where, status=status, reason=reason)


__all__ = [
    "FIELD_MANAGER_CONFLICT",
    "IMMUTABLE_DETAIL",
    "UNAVAILABLE",
    "Cause",
    "Conflict",
    "Forbidden",
    "Invalid",
    "KubeError",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unreachable",
    "conflict_managers",
    "from_status",
]
