"""Typed errors of a git host's API: why a commit status was not posted, never the token.

A host answers with an HTTP status; the class says what a person must do about it,
and whether posting the same status later can succeed (``retry``). ``where`` is the
request's method and URL (which carries no credential: the token travels in a header
only), and a message quoted from the host's answer has the token scrubbed from it.

    FleetError
     └── HostError              any failure to post a commit status
          ├── Unreachable       no answer, a timeout, a 5xx (retried with backoff)
          ├── RateLimited       429, or 403 with x-ratelimit-remaining 0 or Retry-After (retried when the host says)
          ├── Unauthorized      401: the token is refused (not retried)
          ├── Forbidden         403: the token may not write statuses there (not retried)
          ├── NotFound          404: no such repository or commit, or the token cannot see it (not retried)
          └── Invalid           400/422: the host refused the status itself (not retried)

``reason`` is a short stable word for the ``fleet_commit_status_posts_total`` metric.
"""

from __future__ import annotations

from fleet.errors import FleetError


class HostError(FleetError):
    """A commit status was not posted; ``where`` is the request, without credentials."""

    reason = "error"
    retry = False

    def __init__(self, what: str, *, where: str = "", hint: str = "", status: int = 0, retry_after: float = 0.0):
        super().__init__(what, where=where, hint=hint)
        self.status = status
        self.retry_after = retry_after
        """Seconds the host asked to wait before the next request (``Retry-After``, ``X-RateLimit-Reset``)."""


class Unreachable(HostError):
    """The host did not answer, or answered with a server error."""

    reason = "unreachable"
    retry = True


class RateLimited(HostError):
    """The host's rate limit: retried after ``retry_after`` seconds."""

    reason = "rate-limited"
    retry = True


class Unauthorized(HostError):
    """The host refused the token (401)."""

    reason = "unauthorized"


class Forbidden(HostError):
    """The token is valid but may not write commit statuses to this repository (403)."""

    reason = "forbidden"


class NotFound(HostError):
    """No such repository or commit, or the token cannot see it (404)."""

    reason = "not-found"


class Invalid(HostError):
    """The host refused the status itself (400, 422): e.g. GitHub's 1,000 statuses per SHA and context."""

    reason = "invalid"


__all__ = ["Forbidden", "HostError", "Invalid", "NotFound", "RateLimited", "Unauthorized", "Unreachable"]
