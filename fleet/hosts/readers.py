"""Reading a commit's statuses from the git host: how a later rollout wave sees the earlier ones.

Rollout waves have no hub: the controller of a cluster in wave 2 learns what wave 1 did
from the statuses wave 1's controllers posted on the commit (``fleet/<cluster>``, by
``fleet.hosts.posters``). ``Reader.statuses`` answers, for one commit and the contexts
asked, each context's standing status (``providers.standing``: its newest state, dated
from when that state was first posted, so the bake counts from the first success).

It is asked on every reconcile of a held revision, so answers are kept: per (SHA,
context), for ``ttl`` seconds, in an ``LRU`` of ``limit`` entries (the controller exports
its size as ``fleet_cache_entries{cache="commit_status_reads"}``). One request lists every
context of a commit, so a read fills the entries of all the contexts asked. A failed read
is not kept: the next reconcile asks again, and meanwhile the caller holds what depends
on it (fail safe).

Unlike posting, which must never slow a reconcile and so runs in a task of its own, a
read is awaited by the reconcile that needs it: the answer decides whether a disruptive
change goes. Its ``timeout`` bounds the wait, and only a revision whose cluster is in a
later wave reads at all.

The token is the poster's (``--commit-status-token-file``), read from its file at each
request as the poster does; reading needs the scope that lists statuses (GitHub: *Commit
statuses: read*; GitLab: ``read_api``, Reporter; Gitea: ``read:repository``), which the
write scopes the poster needs include.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from fleet.hosts import errors, providers
from fleet.hosts.posters import exchange, open_client, read_token
from fleet.hosts.providers import Posted, Target
from fleet.lrus import LRU
from fleet.telemetry import tracing

_READ_HINTS: dict[type[errors.HostError], str] = {
    errors.Unauthorized: "mount a valid token in --commit-status-token-file (GitHub: commit statuses read; "
    "GitLab: read_api scope, Reporter role; Gitea: read:repository)",
    errors.Forbidden: "grant the token's user read access to the repository's commit statuses",
}


class Reader:
    """Reads commit statuses (``statuses``), keeping each answer ``ttl`` seconds in a bounded cache."""

    def __init__(
        self,
        *,
        target: Target,
        token_file: Path,
        timeout: float = 10.0,
        ttl: float = 15.0,
        limit: int = 512,
        pages: int = 5,
        ca_file: Path | None = None,
        user_agent: str = "fleet-controller",
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.target = target
        self.token_file = token_file
        self.timeout = timeout
        self.ttl = ttl
        self.pages = pages
        """Pages read at most per commit: a commit with more statuses than that is read in part."""
        self.ca_file = ca_file
        self.user_agent = user_agent
        self._clock = clock
        self._transport = transport
        self._kept: LRU[tuple[str, str], tuple[float, Posted | None]] = LRU(limit)
        self._client: httpx.AsyncClient | None = None
        """One client for every read, opened at the first (its connections are reused)."""
        self.requests = 0
        """Requests sent (tests and metrics: a cached answer sends none)."""

    def size(self) -> int:
        return len(self._kept)

    async def statuses(self, sha: str, *, contexts: Sequence[str]) -> dict[str, Posted | None]:
        """Each of ``contexts``' standing status on commit ``sha`` (None: none posted); ``HostError`` when
        the host cannot be read."""
        now = self._clock()
        kept = {c: self._kept.get((sha, c)) for c in contexts}
        if all(k is not None and now - k[0] < self.ttl for k in kept.values()):
            return {c: k[1] for c, k in kept.items() if k is not None}
        listed = await self._read(sha)
        read_at = self._clock()
        out = {c: providers.standing(listed, context=c) for c in contexts}
        for context, found in out.items():
            self._kept[(sha, context)] = (read_at, found)
        return out

    async def _read(self, sha: str) -> list[Posted]:
        if self._client is None:
            self._client = await open_client(
                request_timeout=self.timeout,
                ca_file=self.ca_file,
                user_agent=self.user_agent,
                transport=self._transport,
            )
        listed: list[Posted] = []
        for page in range(1, self.pages + 1):
            found = await self._page(sha, page=page, client=self._client)
            listed += found
            if len(found) < providers.PAGE_SIZES[self.target.provider]:
                break
        return listed

    async def aclose(self) -> None:
        """Close the connections kept to the host (the controller's shutdown)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _page(self, sha: str, *, page: int, client: httpx.AsyncClient) -> list[Posted]:
        req = providers.listing(self.target, sha, page=page)
        token = await read_token(self.token_file, where=req.where)
        attributes = {"fleet.commit_status.provider": self.target.provider, tracing.REVISION: sha, "url.full": req.url}
        with tracing.tracer().start_as_current_span("read commit-statuses", attributes=attributes) as span:
            self.requests += 1
            response = await exchange(
                client, self.target, req, token=token, span=span, now=time.time(), hints=_READ_HINTS
            )
            return providers.posted(self.target.provider, response.content, sha=sha, where=req.where)


__all__ = ["Reader"]
