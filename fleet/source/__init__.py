"""The git source (adapter layer): the newest commit of a remote ref, checked out for the engine.

    source = GitSource(url=..., ref="main", path="fleet", cache_dir=Path("/var/cache/fleet"),
                       credentials=Credentials(token_file=Path("/etc/fleet/git/token")))
    checkout = await source.sync()      # Checkout(revision=<sha>, path=<dir>, fetched_at=<time>)

``sync`` may be called at any time (poll timer, webhook); calls are serialised. A
failure raises a ``SourceError`` subclass (``fleet.source.errors``) whose ``where``
is the URL without credentials. How credentials stay secret:
``fleet.source.credentials``; how fetch, checkout and limits work:
``fleet.source.sources``.

A local checkout (``fleetctl``) is named by ``revision_id`` (``fleet.source.checkouts``):
its commit, with a hash of the loaded content when the work tree differs from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet import exports
from fleet.source.checkouts import revision_id
from fleet.source.credentials import Credentials
from fleet.source.errors import PathNotFound, RefNotFound, SourceError, TooLarge, Unauthorized, Unreachable

if TYPE_CHECKING:
    from fleet.source.sources import Changed, Checkout, GitSource

# The git source is imported on first use (PEP 562): it imports GitPython, which a
# fleetctl command, needing only ``revision_id``, never uses.
__getattr__ = exports.lazy(__name__, {"sources": "Changed Checkout GitSource"})

__all__ = [
    "Changed",
    "Checkout",
    "Credentials",
    "GitSource",
    "PathNotFound",
    "RefNotFound",
    "SourceError",
    "TooLarge",
    "Unauthorized",
    "Unreachable",
    "revision_id",
]
