"""The console's ASGI app: pages, live updates, log-in, and the headers that keep it read-only and closed.

``build(source=..., login=..., access=...)`` gives a starlette app that both front doors serve:
``fleetctl console`` on loopback, and fleet-controller under ``/ui`` of its own server. Routes:

- ``/``: the fleet, one row per cluster; ``/clusters/{c}``: the last run, its changes and their
  decisions, held changes, GPU maintenances, drift, Events; ``/clusters/{c}/gpus``: pools → nodes →
  devices with who holds each (a node's page marks its devices under maintenance);
  ``/clusters/{c}/teams`` and ``/clusters/{c}/teams/{t}``: quota, templates,
  pending pods and why they wait.
- ``/events?cluster=…``: server-sent events, one ``changed`` event each time a shown cluster's
  snapshot changes; a page's ``#live`` part fetches itself again on it (htmx). Pages read the same
  without JavaScript.
- ``/revisions``: the repository's last commits; ``/revisions/{rev}``: what commit ``rev`` would change
  on each cluster, the comment ``fleetctl diff -o markdown`` prints (``fleet.console.revisions``).
- the ``Login``'s routes (``/login``, ``/callback``) and ``/logout`` (POST).

Every answer carries a strict Content-Security-Policy (scripts and styles from the console only,
no inline code, no framing), ``nosniff`` and ``no-referrer``; bad or expired credentials get a page
that says so and a 401, an unknown cluster or team a 404, and an unexpected error a page with no
traceback (the log has it). Nothing the console serves holds a secret value: it reads no Secret.
"""

from __future__ import annotations

import datetime
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleet.console import pages, svgs
from fleet.console.access import EVERYTHING, FLEETSYNCS, Access, Sight
from fleet.console.logins import Bearer, Login
from fleet.console.revisions import Revisions, UnknownRevision, per_cluster
from fleet.console.sources import Snapshot, Source, UnknownCluster
from fleet.console.viewers import Unauthenticated, Viewer
from fleet.errors import FleetError
from fleet.inventory.leftovers import STATES
from fleet.lrus import LRU
from fleet.views import devices, fleetsyncs

logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
STREAMS = 48
"""Live streams served at once; more get 503 (each holds a connection and a task; the server serves 64)."""
HEARTBEAT = 15.0
"""Seconds between keep-alive comments on a quiet stream."""
SESSION_HOURS = 8
PICTURES = 8
"""Device pictures kept: a few clusters' latest (each is its cluster's devices and holders)."""


class Headers:
    """ASGI middleware: the security headers on every HTTP answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.encode(), v.encode()) for k, v in HEADERS.items() if k.encode() not in present]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        states=STATES,
        no_pool=pages.NO_POOL,
        bar=svgs.bar,
        cells=svgs.cells,
        node_cells=lambda node: [(d.name, d.state) for d in node.devices],
        tally_counts=lambda t: {s: getattr(t, s) for s in STATES},
    )
    return env


class Console:
    """The app's state: where it reads, who may log in, and how it decides what each viewer sees."""

    def __init__(
        self,
        *,
        source: Source,
        login: Login,
        bearer: Bearer | None = None,
        access: Access | None = None,
        jaeger: str = "",
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        revisions: Revisions | None = None,
        after_picture: Callable[[], object] | None = None,
    ) -> None:
        self.source = source
        self.login = login
        self.bearer = bearer
        self.access = access
        self.jaeger = jaeger.rstrip("/")
        self.clock = clock
        self.env = _environment()
        self.revisions = revisions
        self.env.globals["has_revisions"] = revisions is not None
        self.streams = 0
        self._stopping: anyio.Event | None = None
        """Set when the server stops: live streams end (made with the first stream, in the loop)."""
        self.after_picture = after_picture
        self.pictures: LRU[tuple[str, ...], pages.Devices] = LRU(PICTURES)
        """Device pictures by what they depend on (``pages.picture_key``): a view does not rebuild
        8,000 devices' holders and states while no slice, claim or namespace changed."""
        self.views = 0
        """Pages rendered: the benchmark divides API requests by it."""

    # -- who is looking -----------------------------------------------------------------------

    async def viewer(self, request: Request) -> Viewer:
        if self.bearer is not None:
            given = await self.bearer.viewer(request)
            if given is not None:
                return given
        viewer = await self.login.viewer(request)
        if viewer is None:
            raise Unauthenticated("you are not logged in", hint=self._how_to_log_in())
        return viewer

    def _how_to_log_in(self) -> str:
        if self.login.mode == "kubeconfig":
            return "open the URL fleetctl console printed when it started (it carries the console's key)"
        if self.login.mode == "oidc":
            return "log in with your identity provider, or send Authorization: Bearer TOKEN"
        return "send Authorization: Bearer TOKEN"

    async def sight(self, viewer: Viewer, snapshot: Snapshot) -> Sight:
        if self.access is None or viewer.via == "kubeconfig":
            return EVERYTHING
        return await self.access.sight(viewer, snapshot)

    # -- pages --------------------------------------------------------------------------------

    def render(self, request: Request, template: str, viewer: Viewer, status: int = 200, **context: Any) -> Response:
        self.views += 1
        html = self.env.get_template(template).render(
            request=request,
            url_for=lambda name, **params: request.url_for(name, **params).path,
            viewer=viewer,
            logout=self.login.logout and viewer.via != "token",
            jaeger=self.jaeger,
            now=self.clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def live(self, request: Request, clusters: list[str]) -> str:
        query = "&".join(f"cluster={c}" for c in clusters)
        return f"{request.url_for('events').path}?{query}"

    async def fleet(self, request: Request) -> Response:
        viewer = await self.viewer(request)
        names = [c for c, _ in self.source.clusters()]
        found: dict[str, fleetsyncs.Row] = {}

        async def one(name: str) -> None:
            row = await self.source.row(name)
            may = viewer.via == "kubeconfig" or self.access is None or not row.reachable
            if not may and self.access is not None:
                may = await self.access.may(viewer, FLEETSYNCS, verb="get")
            found[name] = row if may else fleetsyncs.forbidden(row.cluster, row.context)

        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(one, name)
        rows = pages.fleet([found[n] for n in names])
        if _wants_json(request):
            return JSONResponse([r.document() for r in rows])
        counts = dict.fromkeys(("Ready", "Progressing", "Waiting", "Failed", "Unknown"), 0)
        for r in rows:
            counts[r.state] += 1
        return self.render(
            request,
            "fleet.html",
            viewer,
            title="Fleet",
            page="fleet",
            cluster="",
            rows=rows,
            counts=counts,
            live=self.live(request, names),
        )

    def cluster_page(
        self, request: Request, viewer: Viewer, snapshot: Snapshot, template: str, *, title: str, page: str, **data: Any
    ) -> Response:
        """A page of one cluster, following it live."""
        return self.render(
            request,
            template,
            viewer,
            title=title,
            page=page,
            cluster=snapshot.cluster,
            live=self.live(request, [snapshot.cluster]),
            **data,
        )

    async def _cluster(self, request: Request) -> tuple[Viewer, Snapshot, Sight]:
        viewer = await self.viewer(request)
        snapshot = await self.source.snapshot(request.path_params["cluster"])
        return viewer, snapshot, await self.sight(viewer, snapshot)

    async def cluster(self, request: Request) -> Response:
        viewer, snapshot, sight = await self._cluster(request)
        data = pages.cluster(snapshot, sight)
        columns = ("created", "configured", "unchanged", "deleted", "skipped", "failed")
        return self.cluster_page(
            request, viewer, snapshot, "cluster.html", title=snapshot.cluster, page="cluster", data=data,
            columns=columns, missing=data.missing,
        )  # fmt: skip

    async def _gpus(self, snapshot: Snapshot, sight: Sight) -> pages.Gpus:
        rules = pages.with_rules(snapshot, sight)
        key = pages.picture_key(snapshot, rules=rules)
        seen = self.pictures.get(key)
        if seen is None:
            pages.may_list_gpus(snapshot, sight)  # before the work, not after
            seen = await anyio.to_thread.run_sync(lambda: pages.picture(snapshot, rules=rules))
            self.pictures[key] = seen
            if self.after_picture is not None:
                await anyio.to_thread.run_sync(self.after_picture)
        return await anyio.to_thread.run_sync(pages.gpus, snapshot, sight, seen)

    async def gpus(self, request: Request) -> Response:
        viewer, snapshot, sight = await self._cluster(request)
        data = await self._gpus(snapshot, sight)
        if _wants_json(request):
            return JSONResponse(_gpus_json(data))
        title = f"GPUs of {snapshot.cluster}"
        return self.cluster_page(request, viewer, snapshot, "gpus.html", title=title, page="gpus", data=data)

    async def node(self, request: Request) -> Response:
        viewer, snapshot, sight = await self._cluster(request)
        found = pages.node(await self._gpus(snapshot, sight), request.path_params["node"])
        title = f"Node {found.name}"
        return self.cluster_page(request, viewer, snapshot, "node.html", title=title, page="gpus", n=found)

    async def teams(self, request: Request) -> Response:
        viewer, snapshot, sight = await self._cluster(request)
        found = await anyio.to_thread.run_sync(pages.team_list, snapshot, sight)
        title = f"Teams on {snapshot.cluster}"
        return self.cluster_page(request, viewer, snapshot, "teams.html", title=title, page="teams", teams=found)

    async def team(self, request: Request) -> Response:
        viewer, snapshot, sight = await self._cluster(request)
        name = request.path_params["team"]
        found = await anyio.to_thread.run_sync(pages.team_list, snapshot, sight)
        team = next((t for t in found if t.name == name), None)
        if team is None:
            raise HTTPException(
                404,
                f"no team {name!r} you may see on {snapshot.cluster}: it has no namespace there, or you may not see it",
            )
        return self.cluster_page(request, viewer, snapshot, "team.html", title=f"Team {name}", page="teams", t=team)

    # -- revisions (fleet.console.revisions) ------------------------------------------------

    async def revision_list(self, request: Request) -> Response:
        viewer = await self.viewer(request)
        if self.revisions is None:
            return self._no_repository(request)
        if not await self._revision_clusters(viewer):
            return self._not_allowed_revisions(request)
        asked = request.query_params.get("rev", "").strip()
        if asked:  # the page's form, which works without JavaScript
            return RedirectResponse(request.url_for("revision", rev=asked).path, status_code=303)
        commits = await self.revisions.log()
        if _wants_json(request):
            return JSONResponse([dict(vars(c)) for c in commits])
        return self.render(
            request, "revisions.html", viewer, title="Revisions", page="revisions", cluster="", commits=commits
        )

    async def revision(self, request: Request) -> Response:
        viewer = await self.viewer(request)
        if self.revisions is None:
            return self._no_repository(request)
        clusters = await self._revision_clusters(viewer)
        if not clusters:
            return self._not_allowed_revisions(request)
        rev = request.path_params["rev"]
        try:
            sha = await self.revisions.resolve(rev)
        except UnknownRevision as err:
            return self.error_page(request, 404, "No such revision", err.what, err.hint)
        shown = await per_cluster(self.revisions, sha, clusters)
        if _wants_json(request):
            return JSONResponse({"sha": sha, "clusters": [{**vars(d), "html": None} for d in shown]})
        return self.render(
            request,
            "revision.html",
            viewer,
            title=f"Revision {sha[:12]}",
            page="revisions",
            cluster="",
            sha=sha,
            diffs=shown,
        )

    async def _revision_clusters(self, viewer: Viewer) -> list[str]:
        """The clusters whose diffs ``viewer`` may read: those whose FleetSync they may ``get``.

        A diff is read with the console's rights, not the viewer's: it shows the repository's
        declared objects and what fleet would change on the cluster, which is what the FleetSync
        (and the Cluster page, ``Sight.fleetsync``) tells of its runs. Who may read that may read
        the diff; pods, claims and quotas stay behind the viewer's own RBAC on the other pages."""
        allowed = []
        for name, _ in self.source.clusters():
            if (await self.sight(viewer, await self.source.snapshot(name))).fleetsync:
                allowed.append(name)
        return allowed

    def _not_allowed_revisions(self, request: Request) -> Response:
        return self.error_page(
            request,
            403,
            "Not allowed",
            "the Revision page shows what fleet would change on a cluster: it needs get on the cluster's FleetSync",
            "ask for the fleet-console-viewer ClusterRole (overlays/console), or run fleetctl diff yourself",
        )

    def _no_repository(self, request: Request) -> Response:
        return self.error_page(
            request,
            404,
            "No repository",
            "this console was started without a fleet repository, so it cannot show what a commit changes",
            "start it with fleetctl console --repo PATH (a checkout of the fleet repository)",
        )

    # -- live ---------------------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        await self.viewer(request)
        known = {c for c, _ in self.source.clusters()}
        clusters = [c for c in request.query_params.getlist("cluster") if c in known] or sorted(known)
        if self.streams >= STREAMS:
            return Response("too many live pages open; reload later\n", status_code=503, media_type="text/plain")
        return StreamingResponse(self._stream(request, clusters), media_type="text/event-stream")

    def stop(self) -> None:
        """End the live streams: the server is stopping (``servers.serve``'s ``on_stop``)."""
        if self._stopping is not None:
            self._stopping.set()

    async def _stream(self, request: Request, clusters: list[str]) -> AsyncIterator[str]:
        self.streams += 1
        if self._stopping is None:
            self._stopping = anyio.Event()
        stopping = self._stopping
        try:
            versions = {c: (await self.source.snapshot(c)).version for c in clusters}
            yield "retry: 3000\n\n"
            while not stopping.is_set() and not await request.is_disconnected():
                changed: list[str] = []
                with anyio.move_on_after(HEARTBEAT):
                    changed = await self._next_change(clusters, versions, stopping)
                yield f"event: changed\ndata: {','.join(changed)}\n\n" if changed else ": still here\n\n"
        finally:
            self.streams -= 1

    async def _next_change(self, clusters: list[str], versions: dict[str, str], stopping: anyio.Event) -> list[str]:
        """The clusters whose snapshot changed first (``versions`` updated); none once ``stopping`` is set."""
        changed: list[str] = []
        async with anyio.create_task_group() as tg:

            async def stop() -> None:
                await stopping.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(stop)

            async def watch(cluster: str) -> None:
                versions[cluster] = await self.source.changed(cluster, versions[cluster])
                changed.append(cluster)
                tg.cancel_scope.cancel()

            for cluster in clusters:
                tg.start_soon(watch, cluster)
        return changed

    # -- log-out and errors -------------------------------------------------------------------

    async def logout(self, request: Request) -> Response:
        request.session.clear()
        return self.render(
            request,
            "error.html",
            Viewer(user="", groups=(), expires=0.0, via="anonymous"),
            title="Logged out",
            page="",
            cluster="",
            heading="Logged out",
            what="You are logged out of the fleet console.",
            hint="",
            login=self.login.login_url(request),
        )

    def error_page(self, request: Request, status: int, heading: str, what: str, hint: str = "") -> Response:
        if _wants_json(request):
            return JSONResponse({"error": what, "hint": hint}, status_code=status)
        login = self.login.login_url(request) if status == 401 else ""
        return self.render(
            request,
            "error.html",
            Viewer(user="", groups=(), expires=0.0, via="anonymous"),
            status=status,
            title=heading,
            page="",
            cluster="",
            heading=heading,
            what=what,
            hint=hint,
            login=login,
        )


def _wants_json(request: Request) -> bool:
    return request.query_params.get("o") == "json" or "application/json" in request.headers.get("accept", "")


def _gpus_json(data: pages.Gpus) -> dict[str, Any]:
    def device(d: devices.Device, node: pages.Node) -> dict[str, Any]:
        return {
            "node": d.node,
            "pool": d.pool,
            "name": d.name,
            "model": d.model,
            "memory": d.memory,
            "uuid": d.uuid,
            "state": d.state,
            "claim": d.claim,
            "pods": list(d.pods),
            "team": d.team,
            "taints": list(d.taints),
            "maintenance": [{"name": m.maintenance, "effect": m.effect} for m in node.marks.get(d.name, ())],
        }

    return {
        "models": [dict(vars(t)) for t in data.tallies],
        "devices": [device(d, n) for p in data.pools for n in p.nodes for d in n.devices],
        "hidden": data.hidden,
    }


def build(
    *,
    source: Source,
    login: Login,
    bearer: Bearer | None = None,
    access: Access | None = None,
    secret: str | None = None,
    secure: bool = False,
    jaeger: str = "",
    revisions: Revisions | None = None,
    after_picture: Callable[[], object] | None = None,
) -> tuple[Starlette, Console]:
    """The console's app and its state; ``secure``: cookies only over TLS (behind HTTPS); ``revisions``:
    where the Revision page reads commits (none: the page says how to give a repository);
    ``after_picture`` runs after a device picture was built (the controller hands the build's
    transient memory back to the system: ``fleet.controller.heaps.trim``)."""
    console = Console(
        source=source,
        login=login,
        bearer=bearer,
        access=access,
        jaeger=jaeger,
        revisions=revisions,
        after_picture=after_picture,
    )

    def guarded(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                if "key" in request.query_params and login.mode == "kubeconfig":
                    await console.viewer(request)  # the key opens the session; the URL loses it
                    return RedirectResponse(str(request.url.remove_query_params("key")), status_code=303)
                return await handler(request)
            except Unauthenticated as err:
                return console.error_page(request, 401, "Not logged in", err.what, err.hint)
            except UnknownCluster as err:
                return console.error_page(request, 404, "No such cluster", err.what, err.hint)
            except pages.UnknownNode as err:
                return console.error_page(request, 404, "No such node", err.what, err.hint)
            except pages.NotAllowed as err:
                return console.error_page(request, 403, "Not allowed", err.what, err.hint)
            except HTTPException as err:
                return console.error_page(request, err.status_code, "Not found", str(err.detail))
            except FleetError as err:
                logger.warning("console: %s", err)
                return console.error_page(request, 502, "The cluster did not answer", err.what, err.hint)

        return endpoint

    routes = [
        Route("/", guarded(console.fleet), name="fleet"),
        Route("/clusters/{cluster}", guarded(console.cluster), name="cluster"),
        Route("/clusters/{cluster}/gpus", guarded(console.gpus), name="gpus"),
        Route("/clusters/{cluster}/gpus/{node}", guarded(console.node), name="node"),
        Route("/clusters/{cluster}/teams", guarded(console.teams), name="teams"),
        Route("/clusters/{cluster}/teams/{team}", guarded(console.team), name="team"),
        Route("/events", guarded(console.events), name="events"),
        Route("/revisions", guarded(console.revision_list), name="revisions"),
        Route("/revisions/{rev:path}", guarded(console.revision), name="revision"),
        Route("/logout", console.logout, methods=["POST"], name="logout"),
        *[Route(r.path, guarded(r.endpoint), name=r.name) for r in login.routes() if isinstance(r, Route)],
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        return console.error_page(request, 404, "Not found", f"the console has no page {request.url.path}")

    async def failed(request: Request, exc: Exception) -> Response:
        logger.exception("console: %s %s failed", request.method, request.url.path, exc_info=exc)
        return console.error_page(
            request,
            500,
            "Something went wrong",
            "the console could not draw this page",
            "the controller's log says why",
        )

    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(Headers),
            Middleware(
                SessionMiddleware,
                secret_key=secret or secrets.token_urlsafe(32),
                session_cookie="fleet_console",
                max_age=SESSION_HOURS * 3600,
                same_site="lax",
                https_only=secure,
            ),
        ],
        exception_handlers={404: not_found, 500: failed},
    )
    return app, console


__all__ = ["CSP", "HEADERS", "Console", "build"]
