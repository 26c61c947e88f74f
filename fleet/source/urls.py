"""Repository URLs: which transport a URL uses, and how it may be shown.

A URL is shown in errors, logs, spans, status and Events, so it is always shown
through ``redact``: user information is dropped from ``http(s)`` URLs (where it
would be a login), kept for ``ssh`` (``git@host`` names an account, not a secret).
A URL that *carries* a password is refused outright (``check``): git would store it
in ``.git/config`` and print it in its own messages, and the whole point of mounted
credential files is that the secret lives nowhere else.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from fleet.source.errors import SourceError

_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/:]+)@)?(?P<host>[^/:]+):(?P<path>(?!//).*)$")
SCHEMES = frozenset({"https", "http", "ssh", "git", "file"})


def scheme(url: str) -> str:
    """``https``, ``http``, ``ssh``, ``git`` or ``file``; scp-like ``user@host:path`` is ``ssh``, a path ``file``."""
    if "://" in url:
        return urlsplit(url).scheme.lower()
    if _SCP_LIKE.match(url):
        return "ssh"
    return "file"


def redact(url: str) -> str:
    """The URL as it may be shown: no user information for http(s), never a password."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    if parts.scheme.lower() in ("ssh", "git+ssh", "ssh+git") and parts.username:
        netloc = f"{parts.username}@{netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def check(url: str) -> None:
    """Refuse URLs git cannot use safely here: unknown schemes and embedded passwords."""
    if not url or url.startswith("-"):
        raise SourceError(
            "the repository URL is empty or starts with '-'",
            where=redact(url),
            hint="give an https://, ssh://, git://, file:// URL or user@host:path",
        )
    kind = scheme(url)
    if kind not in SCHEMES:
        raise SourceError(
            f"unsupported repository URL scheme {kind!r}",
            where=redact(url),
            hint="use an https://, ssh://, git://, file:// URL or user@host:path",
        )
    if "://" in url and urlsplit(url).password is not None:
        raise SourceError(
            "the repository URL carries a password",
            where=redact(url),
            hint="remove it from the URL and mount it as a token file (credentials.token_file); "
            "git would store it in .git/config",
        )


__all__ = ["SCHEMES", "check", "redact", "scheme"]
