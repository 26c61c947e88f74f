"""Posting commit statuses beside the reconcile: a bounded, coalescing queue and one worker.

A git host that is slow, down, rate-limiting or refusing the token must never slow or
fail a reconcile: the reconcile only calls ``Poster.submit`` (no I/O, no await: a dict
update), and ``Poster.run``, a task in the controller's task group, sends the requests.

- **Coalesced.** Statuses wait keyed by (SHA, context); a newer one for the same key
  replaces the waiting one (the newest state wins, also while an earlier one is being
  retried), and a status equal to the last one posted for its key is not sent again:
  a reconcile repeated every few seconds for the same revision posts once. A status is
  posted ``debounce`` seconds (1 s) after it was first handed over, so a reconcile that
  finishes within that time posts its outcome alone, after it ended, not a ``pending``
  beside it (what a post beside a reconcile costs the loop: ``bench/run statuses``).
- **Bounded.** At most ``capacity`` keys wait; beyond that the oldest is dropped
  (``dropped`` in the metric) rather than letting memory grow while a host is down.
- **Retried** with exponential backoff (1 s doubling to 5 min, ``attempts`` tries) on
  no answer, timeouts and 5xx. A rate limit (429, or GitHub's 403 with
  ``x-ratelimit-remaining: 0``) waits as the host says: ``Retry-After`` seconds or an
  HTTP date, else until ``X-RateLimit-Reset`` / ``RateLimit-Reset`` (Unix seconds), else
  a minute; the wait holds every post to that host, not just the one refused.
  401, 403, 404, 400 and 422 are not retried: the same request would get the same answer.
  Nor is the same status sent again when the next reconcile hands it over (every resync
  and drift repair does): not after a 404, 400 or 422, and not for ``hold`` seconds (5 min)
  after a 401 or 403, so a revoked token costs one refused request per status and period,
  not one per reconcile (GitHub blocks clients that keep sending bad credentials), while a
  fixed Secret is used within the period.
- **The token** is read from its mounted file at each post (a rotated Secret is used
  without a restart) and travels only in its header. It is in no log line, span, error
  or metric: errors quote the host's message with the token scrubbed, and ``where`` is
  the request's URL, which never carries it.

Each attempt's outcome is handed to ``on_result`` (``posted``, an error's ``reason``,
``unchanged``, ``dropped``, ``error`` for anything unexpected); the controller counts them in
``fleet_commit_status_posts_total{result}``.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx
from opentelemetry import trace

from fleet.hosts import errors, providers
from fleet.hosts.providers import CommitStatus, Target
from fleet.telemetry import tracing

logger = logging.getLogger(__name__)

REMEMBERED = 1024
"""Keys whose last posted status is remembered (to skip posting it again)."""


class Poster:
    """Posts the commit statuses handed to ``submit``, one at a time, while ``run`` runs."""

    def __init__(
        self,
        *,
        target: Target,
        token_file: Path,
        timeout: float = 10.0,
        capacity: int = 64,
        debounce: float = 1.0,
        hold: float = 300.0,
        attempts: int = 8,
        backoff: tuple[float, float] = (1.0, 300.0),
        ca_file: Path | None = None,
        user_agent: str = "fleet-controller",
        on_result: Callable[[str], None] | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        clock: Callable[[], float] = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.target = target
        self.token_file = token_file
        self.timeout = timeout
        self.capacity = capacity
        self.debounce = debounce
        self.hold = hold
        self.attempts = attempts
        self.backoff = backoff
        self.ca_file = ca_file
        self.user_agent = user_agent
        self.on_result = on_result or (lambda result: None)
        self._sleep = sleep
        self._clock = clock
        self._transport = transport
        self._pending: OrderedDict[tuple[str, str], CommitStatus] = OrderedDict()
        self._since: dict[tuple[str, str], float] = {}
        """When each waiting key was first handed over (a replaced status keeps its key's time)."""
        self._posted: OrderedDict[tuple[str, str], CommitStatus] = OrderedDict()
        self._refused: OrderedDict[tuple[str, str], tuple[CommitStatus, float]] = OrderedDict()
        """Statuses the host refused, and until when the same one is not sent again."""
        self._inflight: CommitStatus | None = None
        self._not_before = 0.0
        self._wake = anyio.Event()
        self._idle = anyio.Event()
        self._idle.set()

    # -- the reconcile's side: no I/O ------------------------------------------------------------

    def submit(self, status: CommitStatus) -> None:
        """Queue ``status`` (replacing a waiting one for its SHA and context); returns at once."""
        key = status.key
        current = self._inflight if self._inflight is not None and self._inflight.key == key else None
        if current is None:
            current = self._posted.get(key)
        refused = self._refused.get(key)
        if status == current or (refused is not None and refused[0] == status and self._clock() < refused[1]):
            self._pending.pop(key, None)  # an older state waiting would overwrite the one that stands
            self._since.pop(key, None)
            self.on_result("unchanged")
            return
        self._pending[key] = status
        self._since.setdefault(key, self._clock())
        while len(self._pending) > self.capacity:
            (sha, context), old = self._pending.popitem(last=False)
            self._since.pop((sha, context), None)
            self.on_result("dropped")
            logger.warning(
                "commit status queue full (%d): dropped %s %s for %s", self.capacity, context, old.state, sha
            )
        if self._idle.is_set():
            self._idle = anyio.Event()
        self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._pending) + (self._inflight is not None)

    def posted(self, sha: str, context: str) -> CommitStatus | None:
        """The last status posted for (``sha``, ``context``) by this process."""
        return self._posted.get((sha, context))

    async def idle(self) -> None:
        """Return once nothing waits and nothing is being posted (tests and benchmarks)."""
        await self._idle.wait()

    # -- the worker ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Post what ``submit`` queued, until cancelled. Nothing it meets ends the controller's task
        group: an unusable CA file stops the poster alone, and an unexpected error is one status lost."""
        try:
            client = await open_client(
                request_timeout=self.timeout,
                ca_file=self.ca_file,
                user_agent=self.user_agent,
                transport=self._transport,
            )
        except errors.HostError as err:
            logger.error("commit statuses are off: %s", err.what)
            return
        async with client:
            while True:
                if not self._pending:
                    self._idle.set()
                    await self._wake.wait()
                    self._wake = anyio.Event()
                    continue
                _, status = self._pending.popitem(last=False)
                self._inflight = status
                try:
                    await self._deliver(status, client=client)
                except Exception:  # a bug must not end the task group the reconciles run in
                    self.on_result("error")
                    logger.exception("commit status %s for %s not posted", status.state, status.sha[:12])
                finally:
                    self._inflight = None

    async def _deliver(self, status: CommitStatus, *, client: httpx.AsyncClient) -> None:
        since = self._since.pop(status.key, None)
        if since is not None and (wait := since + self.debounce - self._clock()) > 0:
            await self._sleep(wait)  # a newer state for this key, handed over meanwhile, replaces it below
        attempt = 0
        while True:
            wait = self._not_before - self._clock()
            if wait > 0:
                await self._sleep(wait)
            newer = self._pending.pop(status.key, None)
            self._since.pop(status.key, None)
            if newer is not None:  # submitted while this one waited: the newest state wins
                status = self._inflight = newer
            try:
                await self.post(status, client=client)
            except errors.HostError as err:
                self.on_result(err.reason)
                attempt += 1
                if not err.retry or attempt >= self.attempts:
                    if isinstance(err, errors.Unauthorized | errors.Forbidden):
                        self._remember(self._refused, status, (status, self._clock() + self.hold))
                    elif not err.retry:
                        self._remember(self._refused, status, (status, float("inf")))
                    logger.warning(
                        "commit status %s %s for %s not posted%s: %s",
                        status.context,
                        status.state,
                        status.sha[:12],
                        f" after {attempt} attempts" if err.retry else "",
                        err,
                    )
                    return
                delay = err.retry_after or min(self.backoff[0] * 2 ** (attempt - 1), self.backoff[1])
                logger.info("commit status for %s: %s; retrying in %.1fs", status.sha[:12], err.what, delay)
                if isinstance(err, errors.RateLimited):
                    self._not_before = max(self._not_before, self._clock() + delay)
                else:
                    await self._sleep(delay)
                continue
            self.on_result("posted")
            self._remember(self._posted, status, status)
            self._refused.pop(status.key, None)
            logger.info("commit status %s %s posted for %s", status.context, status.state, status.sha[:12])
            return

    def size(self) -> int:
        """Statuses held: waiting, posted and refused ones (each bounded by ``capacity`` or ``REMEMBERED``)."""
        return len(self._pending) + len(self._posted) + len(self._refused)

    @staticmethod
    def _remember(memory: OrderedDict[tuple[str, str], Any], status: CommitStatus, value: Any) -> None:
        memory[status.key] = value
        memory.move_to_end(status.key)
        while len(memory) > REMEMBERED:
            memory.popitem(last=False)

    async def post(self, status: CommitStatus, *, client: httpx.AsyncClient) -> None:
        """One attempt: send ``status``; raises the ``HostError`` the answer means."""
        req = providers.request(self.target, status)
        token = await self._token(req.where)
        attributes = {
            "fleet.commit_status.provider": self.target.provider,
            "fleet.commit_status.state": status.state,
            "fleet.commit_status.context": status.context,
            tracing.REVISION: status.sha,
            "url.full": req.url,
        }
        with tracing.tracer().start_as_current_span("post commit-status", attributes=attributes) as span:
            await exchange(client, self.target, req, token=token, span=span, now=self._clock())

    async def _token(self, where: str) -> str:
        return await read_token(self.token_file, where=where)


async def open_client(
    *, request_timeout: float, ca_file: Path | None, user_agent: str, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """An HTTP client for the git host's API, made in a worker thread: loading the CA bundle (``ca_file``,
    else certifi's) reads files and parses certificates, which must not stall the event loop that renews
    the controller's Lease. ``HostError`` when ``ca_file`` is not usable."""

    def make() -> httpx.AsyncClient:
        verify: ssl.SSLContext | bool = True
        if ca_file is not None:
            try:
                verify = ssl.create_default_context(cafile=str(ca_file))
            except (OSError, ssl.SSLError) as exc:
                raise errors.HostError(
                    f"the CA file {ca_file} is not usable: {exc}",
                    where=str(ca_file),
                    hint="mount a PEM CA bundle at --git-ca-file",
                ) from None
        return httpx.AsyncClient(
            timeout=httpx.Timeout(request_timeout),
            verify=verify,
            headers={"User-Agent": user_agent},
            follow_redirects=False,
            transport=transport,
        )

    return await anyio.to_thread.run_sync(make)


async def exchange(
    client: httpx.AsyncClient,
    target: providers.Target,
    req: providers.Request,
    *,
    token: str,
    span: trace.Span,
    now: float,
    hints: Mapping[type[errors.HostError], str] | None = None,
) -> httpx.Response:
    """Send ``req`` with the token; the response, or the ``HostError`` it means (``providers.verdict``;
    ``hints`` replaces the hint of the errors named), with the answer on ``span``."""
    try:
        response = await client.request(
            req.method,
            req.url,
            headers={**req.headers, **providers.authorization(target.provider, token)},
            json=req.body or None,
        )
    except httpx.HTTPError as exc:
        span.set_attribute("error.type", type(exc).__name__)
        raise errors.Unreachable(
            f"no answer: {type(exc).__name__}",
            where=req.where,
            hint="check the network path to the git host (NetworkPolicy, proxy) and --commit-status-api-url",
        ) from None
    span.set_attribute("http.response.status_code", response.status_code)
    err = providers.verdict(
        status=response.status_code,
        headers=dict(response.headers),
        body=response.content,
        where=req.where,
        now=now,
        secrets=(token,),
    )
    if err is None:
        return response
    span.set_attribute("error.type", err.reason)
    hint = (hints or {}).get(type(err))
    if hint is None:
        raise err
    raise type(err)(err.what, where=err.where, hint=hint, status=err.status) from None


async def read_token(token_file: Path, *, where: str) -> str:
    """The API token, read from its file at each use (a rotated Secret is picked up without a restart)."""
    try:
        token = (await anyio.Path(token_file).read_text()).strip()
    except OSError as exc:
        raise errors.Unauthorized(
            f"cannot read the token file {token_file}: {exc.strerror}",
            where=where,
            hint="check the Secret is mounted at --commit-status-token-file and readable by the controller's user",
        ) from None
    if not token:
        raise errors.Unauthorized(
            f"the token file {token_file} is empty",
            where=where,
            hint="put the host's access token in the mounted Secret",
        )
    return token


__all__ = ["Poster", "exchange", "open_client", "read_token"]
