"""Where the Revision page reads commits: a fleet repository, diffed against each cluster as ``fleetctl diff`` does.

The page asks a ``Revisions`` three things: which commit a name means (``resolve``), what the
branch's last commits are (``log``), and the comment ``fleetctl diff -o markdown --cluster C``
prints for a commit (``comment``). ``CheckoutRevisions`` answers from a local git repository
(``fleetctl console --repo``): each diff checks the commit out in a temporary worktree
(``fleet.source.worktrees``) and calls ``fleet.views.revisions.markdown``, the function the
command calls, through the cluster's context. ``FetchedRevisions`` answers in fleet-controller
from what its ``GitSource`` has fetched (``fleet.source.histories``): the followed ref's commits
in the cache repository under ``--state-dir``, never fetched for a page view, each diffed
against the controller's own cluster with its own client and settings (drift policy, team
impersonation, force-conflicts), so the page shows what this controller would do with it. The
page does not know which it has.

A diff costs a plan and a dry-run of every object, so both keep the comment of each (commit,
cluster) in an ``LRU`` (``limit`` entries) for ``ttl`` seconds (``Kept``): the cluster moves on,
and a kept diff says what was true when it was made (``Comment.taken``). One diff of a (commit,
cluster) runs at a time: a second viewer waits for the first one's answer instead of starting
another. A diff that fails (the cluster does not answer) is not kept.

Who may read a diff is the page's decision (``fleet.console.apps``), not the ``Revisions``'.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import anyio
from markupsafe import Markup

from fleet.console import markdowns
from fleet.errors import FleetError
from fleet.lrus import LRU
from fleet.source import histories, worktrees
from fleet.source.errors import RefNotFound
from fleet.views import revisions

logger = logging.getLogger(__name__)

Commit = worktrees.Commit
LOG = 20
"""Commits the revisions page lists."""
T = TypeVar("T")


class UnknownRevision(FleetError):
    """A page named a revision the repository does not have."""


@dataclass(frozen=True)
class Comment:
    sha: str
    cluster: str
    markdown: str
    taken: float
    """When the diff was made (``time.time()``)."""


class Revisions(Protocol):
    """What the Revision page reads commits through."""

    async def resolve(self, rev: str) -> str:
        """The full hash of the commit ``rev`` names; UnknownRevision if none."""
        ...

    async def log(self, limit: int = LOG) -> list[Commit]:
        """The branch's last ``limit`` commits, newest first."""
        ...

    async def comment(self, sha: str, cluster: str) -> Comment:
        """``fleetctl diff -o markdown --cluster CLUSTER`` of commit ``sha``; FleetError if it cannot be made."""
        ...


class Kept:
    """Comments of the commits of ``repo`` made once at a time and kept a while: what every ``Revisions``
    here shares. ``settings(cluster)`` gives how to diff on that cluster; a subclass says how one diff
    is made (``_diff``)."""

    def __init__(
        self,
        repo: Path,
        *,
        settings: Callable[[str], revisions.Settings],
        limit: int = 32,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.repo = repo
        self.settings = settings
        self.ttl = ttl
        self.clock = clock
        self.kept: LRU[tuple[str, str], Comment] = LRU(limit)
        self._running: dict[tuple[str, str], anyio.Event] = {}  # only while a diff runs: bounded by the requests
        self.diffs = 0
        """Diffs made: what the tests count."""

    async def comment(self, sha: str, cluster: str) -> Comment:
        key = (sha, cluster)
        while True:
            kept = self.kept.get(key)
            if kept is not None and self.clock() - kept.taken < self.ttl:
                return kept
            running = self._running.get(key)
            if running is None:
                break
            await running.wait()  # the other viewer's diff: kept when it worked, else made again here
        done = self._running[key] = anyio.Event()
        try:
            self.diffs += 1
            made = Comment(sha, cluster, await self._diff(sha, cluster), self.clock())
            self.kept[key] = made
            return made
        finally:
            del self._running[key]
            done.set()

    async def _diff(self, sha: str, cluster: str) -> str:
        raise NotImplementedError


@asynccontextmanager
async def _entered(checkout: AbstractContextManager[T]) -> AsyncIterator[T]:
    """A blocking checkout (git) entered and left in a worker thread; left even when cancelled."""
    value = await anyio.to_thread.run_sync(checkout.__enter__)
    try:
        yield value
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(checkout.__exit__, None, None, None)


class CheckoutRevisions(Kept):
    """Commits of a local fleet repository, each diffed in a temporary worktree: ``fleetctl console``
    builds the settings from ``fleetctl diff``'s defaults, through each cluster's context."""

    async def resolve(self, rev: str) -> str:
        try:
            return await anyio.to_thread.run_sync(worktrees.resolve, self.repo, rev)
        except RefNotFound as err:
            raise UnknownRevision(err.what, where=err.where, hint=err.hint) from err

    async def log(self, limit: int = LOG) -> list[Commit]:
        return await anyio.to_thread.run_sync(lambda: worktrees.log(self.repo, limit=limit))

    async def _diff(self, sha: str, cluster: str) -> str:
        async with _entered(worktrees.checkout(self.repo, sha)) as folder:
            return await revisions.markdown(folder, cluster=cluster, settings=self.settings(cluster))


class FetchedRevisions(Kept):
    """The commits fleet-controller's git source has fetched, each diffed against the controller's cluster.

    ``repo`` is the source's bare cache repository (``GitSource.repository``), ``ref`` the ref it
    fetches into (``sources.TARGET``), ``path`` the fleet's folder in the git repository. Nothing
    is fetched here: a commit the source has not fetched is an ``UnknownRevision``. The comment's
    base (claims and quotas) is the commit's first parent where the cache holds it."""

    def __init__(self, repo: Path, *, ref: str, path: str, settings: Callable[[str], revisions.Settings]) -> None:
        super().__init__(repo, settings=settings)
        self.ref = ref
        self.path = path

    async def resolve(self, rev: str) -> str:
        try:
            return await anyio.to_thread.run_sync(worktrees.resolve, self.repo, rev)
        except RefNotFound as err:
            raise UnknownRevision(
                f"the controller has not fetched a commit {rev!r}",
                where=err.where,
                hint="it shows the commits of the ref it follows that it has fetched (listed under Revisions); "
                "for another commit run fleetctl diff in a checkout of it",
            ) from err

    async def log(self, limit: int = LOG) -> list[Commit]:
        return await anyio.to_thread.run_sync(lambda: histories.history(self.repo, ref=self.ref, limit=limit))

    async def _diff(self, sha: str, cluster: str) -> str:
        async with _entered(histories.borrowed(self.repo, sha, path=self.path)) as (folder, parent):
            settings = dataclasses.replace(self.settings(cluster), base=parent or "")
            return await revisions.markdown(folder, cluster=cluster, settings=settings)


@dataclass(frozen=True)
class ClusterDiff:
    """One cluster of the Revision page: the comment as markdown and HTML, or why there is none."""

    cluster: str
    markdown: str = ""
    html: Markup = field(default_factory=Markup)
    taken: str = ""
    error: str = ""
    hint: str = ""


async def per_cluster(revisions: Revisions, sha: str, clusters: list[str]) -> list[ClusterDiff]:
    """Each cluster's comment for commit ``sha``, diffed at once on every cluster."""
    found: dict[str, ClusterDiff] = {}

    async def one(cluster: str) -> None:
        try:
            made = await revisions.comment(sha, cluster)
        except FleetError as err:
            logger.warning("console: the diff of %s on %s: %s", sha, cluster, err)
            found[cluster] = ClusterDiff(cluster, error=err.what, hint=err.hint)
            return
        text = await anyio.to_thread.run_sync(markdowns.to_html, made.markdown)
        taken = datetime.datetime.fromtimestamp(made.taken, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        found[cluster] = ClusterDiff(cluster, made.markdown, text, taken)

    async with anyio.create_task_group() as tg:
        for cluster in clusters:
            tg.start_soon(one, cluster)
    return [found[c] for c in clusters]


__all__ = [
    "LOG",
    "CheckoutRevisions",
    "ClusterDiff",
    "Comment",
    "Commit",
    "FetchedRevisions",
    "Kept",
    "Revisions",
    "UnknownRevision",
    "per_cluster",
]
