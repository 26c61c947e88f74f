"""The controller's HTTP server: ``/webhook``, ``/healthz``, ``/readyz``, ``/metrics``, and ``/ui`` (the console).

An ASGI app (starlette) served by uvicorn *inside* the controller's anyio task
group, so the server lives and dies with the controller (no thread, no second
event loop, no hand-parsed HTTP)::

    app = servers.build(metrics=m, ready=lambda: state.synced, on_push=wake, secret=s, ref="main")
    port = await task_group.start(functools.partial(servers.serve, app=app, host="0.0.0.0", port=8080))

- ``/webhook``: ``fleet.controller.webhooks.receive`` decides; the body is read as a
  stream and refused with 413 as soon as it passes 1 MiB (a ``Content-Length`` over
  it is refused before reading anything). A verified push to the followed ref calls
  ``on_push(ref)``: it must be cheap and not block (set an event that wakes the
  source). Every request is counted in ``fleet_webhook_requests_total{result}``.
  Without a secret the route answers 404: nothing unverified ever triggers a fetch.
  The signature check and JSON parsing of bodies over 16 KiB run in a worker thread
  (smaller ones are cheaper than the hand-off). At most 64
  connections are served at once (more get 503), which bounds what bodies in
  flight can hold. Accepted and ignored requests are logged one line each; refused
  ones (4xx) at most once per ``_QUIET`` seconds with the count of those not
  logged, and so is uvicorn's "Invalid HTTP request received." (``Quiet``): a flood
  of garbage must not become a flood of log lines.
- ``/healthz``: 200 while the event loop answers.
- ``/readyz``: 200 once ``ready()`` is true (the controller flips it after the first
  successful sync), else 503.
- ``/metrics``: the registry of ``fleet.controller.metrics.Metrics``, rendered in a
  worker thread (Prometheus text, or OpenMetrics when the scraper asks for it).

``serve`` binds the socket itself (a bind error is a ``FleetError`` naming the
address, not uvicorn's ``sys.exit``), reports the bound port through
``task_status.started`` (``port=0`` picks a free one), and leaves signal handling
to the controller: uvicorn's own handlers are not installed. When the surrounding
scope is cancelled the server stops accepting, lets requests in flight finish (at
most ``grace`` seconds) and returns.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import time
from collections.abc import Callable, Iterator

import anyio
import anyio.abc
import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp

from fleet.controller import webhooks
from fleet.controller.metrics import Metrics
from fleet.errors import FleetError

logger = logging.getLogger(__name__)

_CONCURRENCY = 64
"""Connections served at once; more get 503. Bounds the memory webhook bodies can hold (64 MiB)."""
_INLINE = 16 * 1024
"""Bodies up to this size (a push of a few commits; every garbage request) are verified on the
event loop: HMAC-SHA256 and JSON over so few bytes cost less than the hand-off to a worker
thread, which larger bodies get, so a flood of small garbage costs less CPU per request."""
_QUIET = 10.0
"""Seconds between two log lines about refused webhook requests."""


class Quiet(logging.Filter):
    """Lets one record through per ``period`` seconds, telling how many were held back since.

    As a filter on a logger (uvicorn's) it drops the records held back; ``allow()`` is
    the same decision for a caller that logs itself."""

    def __init__(self, period: float = _QUIET, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.period = period
        self.clock = clock
        self.held = 0
        self._next = float("-inf")

    def allow(self) -> int | None:
        """None to hold this one back, else how many were held back before it (then reset)."""
        now = self.clock()
        if now < self._next:
            self.held += 1
            return None
        self._next = now + self.period
        held, self.held = self.held, 0
        return held

    def filter(self, record: logging.LogRecord) -> bool:
        held = self.allow()
        if held is None:
            return False
        if held:
            record.msg = f"{record.msg} ({held} more in the last {self.period:g}s not logged)"
        return True


def build(
    *,
    metrics: Metrics,
    ready: Callable[[], bool],
    on_push: Callable[[str], None],
    secret: bytes | None,
    ref: str | None,
    deliveries: webhooks.Deliveries | None = None,
    console: ASGIApp | None = None,
) -> Starlette:
    """The ASGI app; ``ref`` is the followed ref (``None``: the remote's HEAD), ``secret`` the webhook secret,
    ``console`` the console's app, served under ``/ui`` (``fleet.controller.consoles``)."""
    seen = deliveries if deliveries is not None else webhooks.Deliveries()
    refusals = Quiet()

    async def webhook(request: Request) -> Response:
        verdict = await _receive(request, secret=secret, ref=ref, deliveries=seen)
        metrics.git.webhook_requests.labels(result=verdict.result).inc()
        if verdict.ref is not None:
            on_push(verdict.ref)
        client = request.client.host if request.client else "?"
        if verdict.status < 400:
            logger.info("webhook from %s: %s %s (%s)", client, verdict.status, verdict.result, verdict.reason)
        elif (held := refusals.allow()) is not None:
            logger.warning(
                "webhook from %s: %s %s (%s)%s",
                client,
                verdict.status,
                verdict.result,
                verdict.reason,
                f"; {held} more refused in the last {refusals.period:g}s, not logged "
                "(fleet_webhook_requests_total counts them all)"
                if held
                else "",
            )
        return JSONResponse({"result": verdict.result, "reason": verdict.reason}, status_code=verdict.status)

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(_: Request) -> Response:
        if ready():
            return PlainTextResponse("ok\n")
        return PlainTextResponse("not ready: no successful sync yet\n", status_code=503)

    async def scrape(request: Request) -> Response:
        render = functools.partial(metrics.render, accept=request.headers.get("accept", ""))
        body, content_type = await anyio.to_thread.run_sync(render)
        return Response(body, headers={"Content-Type": content_type})

    routes: list[BaseRoute] = [
        Route("/webhook", webhook, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", scrape, methods=["GET"]),
    ]
    if console is not None:
        routes.append(Mount("/ui", app=console))
    return Starlette(routes=routes)


async def _receive(
    request: Request, *, secret: bytes | None, ref: str | None, deliveries: webhooks.Deliveries
) -> webhooks.Verdict:
    if not secret:
        return webhooks.Verdict(404, "disabled", "the webhook receiver has no secret configured")
    too_large = webhooks.Verdict(413, "too-large", f"body over {webhooks.MAX_BODY} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > webhooks.MAX_BODY:
        return too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > webhooks.MAX_BODY:
            return too_large
    receive = functools.partial(
        webhooks.receive, headers=dict(request.headers), body=bytes(body), secret=secret, ref=ref, deliveries=deliveries
    )
    if len(body) <= _INLINE:
        return receive()
    # HMAC and JSON over up to 1 MiB: CPU work, kept off the event loop.
    return await anyio.to_thread.run_sync(receive)


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers (the controller decides when the server stops),
    telling when startup is over."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.settled = anyio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.settled.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(
    *,
    app: Starlette,
    host: str,
    port: int,
    grace: float = 5.0,
    on_stop: Callable[[], None] | None = None,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port`` until cancelled; ``task_status.started(port)`` once listening.

    ``on_stop`` is called when the server starts to stop: it ends the responses that would
    otherwise stream on (the console's live pages), so the shutdown need not cut them."""
    sock = _bind(host=host, port=port)
    invalid = Quiet()  # uvicorn warns once per request that is not HTTP
    logging.getLogger("uvicorn.error").addFilter(invalid)
    config = uvicorn.Config(
        app,
        http="h11",
        ws="none",
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
        limit_concurrency=_CONCURRENCY,
        timeout_graceful_shutdown=int(grace),
    )
    server = _Server(config)
    finished = anyio.Event()

    async def run() -> None:
        # Shielded: on cancellation the server is told to exit (below) and shuts down cleanly.
        with anyio.CancelScope(shield=True):
            try:
                await server.serve(sockets=[sock])
            finally:
                finished.set()
                server.settled.set()
                sock.close()
                logging.getLogger("uvicorn.error").removeFilter(invalid)

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        try:
            await server.settled.wait()
            if not server.started or finished.is_set():
                raise FleetError("the HTTP server stopped while starting", where=f"{host}:{port}")
            task_status.started(sock.getsockname()[1])
            await anyio.sleep_forever()
        finally:
            if on_stop is not None:
                on_stop()
            server.should_exit = True


def _bind(*, host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Inherited by accepted connections. Without it a kept-alive connection waits on every
        # response (Nagle's algorithm against the client's delayed ACK).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as err:
        sock.close()
        raise FleetError(
            f"cannot listen for HTTP: {err.strerror or err}",
            where=f"{host}:{port}",
            hint="choose another port (the controller's http port setting) or stop what listens there",
        ) from err
    return sock


__all__ = ["Quiet", "build", "serve"]
