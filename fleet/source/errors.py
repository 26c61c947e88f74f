"""Typed errors of the git source: what went wrong fetching a revision, never how git said it.

git reports almost every failure as exit code 128 with a line of English on
stderr; there is no structured status to react to. The source therefore sorts a
failure into one of these classes only to give the right hint (and a metric
label); no control flow upstream depends on the text. ``where`` is always the
repository URL *without* credentials (``urls.redact``), and the git output quoted
in ``what`` has any secret the source knows about removed.

    FleetError
     └── SourceError               any failure to bring a revision from the remote
          ├── Unreachable          DNS, refused connection, TLS, timed out
          ├── Unauthorized         the remote refused the credentials (or asked for some)
          ├── RefNotFound          the branch/tag does not exist on the remote
          ├── TooLarge             the fetched objects or the checked-out tree exceed ``max_bytes``
          └── PathNotFound         ``--path`` does not exist in the commit

``reason`` is a short stable word for metrics (``unreachable``, ``unauthorized``...).
"""

from __future__ import annotations

from fleet.errors import FleetError


class SourceError(FleetError):
    """The git source could not bring the newest revision; ``where`` is the URL without credentials."""

    reason = "error"


class Unreachable(SourceError):
    """The remote did not answer (DNS, connection refused, TLS, timeout)."""

    reason = "unreachable"


class Unauthorized(SourceError):
    """The remote refused the credentials, or wanted some and none were given."""

    reason = "unauthorized"


class RefNotFound(SourceError):
    """The ref to follow does not exist on the remote."""

    reason = "ref-not-found"


class TooLarge(SourceError):
    """The repository is over the configured size limit."""

    reason = "too-large"


class PathNotFound(SourceError):
    """The fleet repository's directory does not exist in the fetched commit."""

    reason = "path-not-found"


__all__ = ["PathNotFound", "RefNotFound", "SourceError", "TooLarge", "Unauthorized", "Unreachable"]
