"""fleet console: GPUs page p95, fleet page of 10 clusters, controller RSS, requests per view, console start.

Issue 43's figures, at ``--nodes`` GPU nodes (8 GPUs each) and ``--claims`` allocated claims
(defaults 1,000 and 4,000: 8,000 devices):

Part 1, in this process (no sandbox): the console app (``apps.build``) served by uvicorn on
loopback (``servers.serve``, as both front doors serve it), over a ``CacheSource`` whose objects
are the synthetic ResourceSlices of ``common.gpu_slices`` and claims of ``disruptions.claims``,
as the controller's watch cache holds them; the viewer is ``--console anonymous``'s, its access
reviews answered by a stub that allows everything (a viewer bound to ``view``), cached as in the
controller. Figures:

- ``gpus_p50_ms``/``gpus_p95_ms``: ``GET /clusters/C/gpus`` end to end over HTTP, ``--views``
  times after warm-up (target p95 ≤ 100 ms); ``gpus_pure_p95_ms``: ``pages.gpus`` alone (the
  pure part: the device picture and its grouping), and ``gpus_render_p95_ms`` the template's
  rendering of its result, so the split is visible; ``gpus_kib``: the page's size;
- ``fleet_p50_ms``/``fleet_p95_ms``: ``GET /`` with ``--clusters`` clusters, each a snapshot
  of the same objects (target ≤ 200 ms).

Part 2, against a sandbox of its own (``--no-sandbox`` skips it), with the same synthetic
slices and claims created in it (``--load-nodes``/``--load-claims``; default the same sizes):

- ``rss_off_mb``/``rss_on_mb``/``rss_growth_mb``: a ``fleet-controller`` process run twice
  against the same cluster after its initial apply, console off, then ``--console anonymous``
  with a user bound to ``view`` and ``fleet-console-viewer``; RSS of each after the same idle
  wait, the second after ``--views`` GPU and fleet page views (target growth ≤ 20 MiB);
- ``requests_per_view``: the API server's own ``apiserver_request_total`` during ``--views``
  page views, less the same controller's requests over the same idle time just before, divided
  by the views (target 0); ``first_view_reviews``: the SubjectAccessReviews the first view sent;
- ``console_url_s``/``console_page_s``: ``fleetctl console`` over ``--clusters`` contexts of the
  sandbox, from process start to its URL line and to the first fleet page answered, median of
  ``--starts`` runs (target ≤ 2 s); peer ``kubectl_proxy_s``: ``kubectl proxy`` from start to its
  first answer, in the same runs; ``api_fleet_cold_ms``/``api_fleet_warm_ms``: that console's
  fleet page listing ``--clusters`` clusters afresh, and within its snapshots' 2 s.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import httpx
from common import gpu_slices, result
from disruptions import claims as allocated_claims

from fleet.console import apps, logins, pages, sources
from fleet.console.access import Access
from fleet.controller import servers
from fleet.views import teams

TEAMS = 50
USER = "bench-viewer"


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def namespaces() -> list[dict[str, Any]]:
    """The claims' namespaces (``team-N``), each labelled with its fleet team."""
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": f"team-{i}", "labels": {teams.TEAM_LABEL: f"team{i}"}}}
        for i in range(TEAMS)
    ]  # fmt: skip


def nodes(count: int) -> list[dict[str, Any]]:
    """The GPU nodes, one in ten tainted as the driver taints an unhealthy GPU's node."""
    taint = {"key": "nvidia.com/gpu.unhealthy", "value": "xid-79", "effect": "NoSchedule"}
    return [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gpu-{i:04d}"},
         "spec": {"taints": [taint]} if i % 10 == 0 else {}}
        for i in range(count)
    ]  # fmt: skip


class Allowed:
    """An access review stub: every review allowed, as for a viewer bound to ``view`` cluster-wide."""

    def __init__(self) -> None:
        self.sent = 0

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.sent += 1
        return {"status": {"allowed": True}}


class Many:
    """``count`` clusters, each served by its own ``CacheSource`` over the same objects."""

    def __init__(self, count: int, objects: Mapping[sources.KindKey, Sequence[Mapping[str, Any]]]) -> None:
        self.sources = {
            f"cluster-{i:02d}": sources.CacheSource(
                cluster=f"cluster-{i:02d}", objects=objects.get, fleetsync=lambda: None, version=lambda: 1
            )
            for i in range(count)
        }

    def clusters(self) -> list[tuple[str, str]]:
        return [(c, "in-cluster") for c in self.sources]

    async def snapshot(self, cluster: str) -> sources.Snapshot:
        return await self.sources[cluster].snapshot(cluster)

    async def changed(self, cluster: str, since: str) -> str:
        return await self.sources[cluster].changed(cluster, since)


async def timed_gets(http: httpx.AsyncClient, url: str, *, views: int, warm: int = 5) -> tuple[list[float], int]:
    """Seconds of each of ``views`` GETs of ``url`` after ``warm`` untimed ones; the page's size in bytes."""
    size = 0
    for _ in range(warm):
        answer = await http.get(url)
        assert answer.status_code == 200, (url, answer.status_code, answer.text[:500])
        size = len(answer.content)
    took = []
    for _ in range(views):
        started = time.perf_counter()
        answer = await http.get(url)
        took.append(time.perf_counter() - started)
        assert answer.status_code == 200, answer.status_code
    return took, size


async def in_process(*, node_count: int, claim_count: int, views: int, clusters: int, profile: str) -> dict[str, Any]:
    slices = gpu_slices(node_count)
    held = allocated_claims(slices, claim_count)
    objects: dict[sources.KindKey, Sequence[Mapping[str, Any]]] = {
        sources.SLICES: slices,
        sources.CLAIMS: held,
        sources.NAMESPACES: namespaces(),
        sources.NODES: nodes(node_count),
        **{k: [] for k in (sources.TEMPLATES, sources.CLASSES, sources.QUOTAS, sources.PODS, sources.EVENTS)},
    }
    devices = sum(len(s["spec"].get("devices") or ()) for s in slices)
    print(f"part 1 (in process): {node_count} nodes, {devices} devices, {len(held)} allocated claims", flush=True)
    one = Many(1, objects)
    stub = Allowed()
    login = logins.AnonymousLogin(user=USER)
    app, console = apps.build(source=one, login=login, access=Access(stub))  # type: ignore[arg-type]
    many_app, _ = apps.build(source=Many(clusters, objects), login=login, access=Access(Allowed()))  # type: ignore[arg-type]
    figures: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda task_status: servers.serve(app=app, host="127.0.0.1", port=0, task_status=task_status)
        )
        many_port = await tg.start(
            lambda task_status: servers.serve(app=many_app, host="127.0.0.1", port=0, task_status=task_status)
        )
        async with httpx.AsyncClient(timeout=60) as http:
            first = await http.get(f"http://127.0.0.1:{port}/clusters/cluster-00/gpus")
            assert first.status_code == 200, first.text[:500]
            reviews_first = stub.sent
            page, size = await timed_gets(http, f"http://127.0.0.1:{port}/clusters/cluster-00/gpus", views=views)
            assert stub.sent == reviews_first, "a cached viewer sent access reviews"
            fleet, fleet_size = await timed_gets(http, f"http://127.0.0.1:{many_port}/", views=views)
        tg.cancel_scope.cancel()
    snapshot = await one.snapshot("cluster-00")
    sight = await console.sight(await login.viewer(None), snapshot)  # type: ignore[arg-type]
    pure, render = [], []
    profiler = cProfile.Profile() if profile else None
    for _ in range(views):
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        data = pages.gpus(snapshot, sight)
        if profiler:
            profiler.disable()
        pure.append(time.perf_counter() - started)
        started = time.perf_counter()
        console.env.get_template("gpus.html").render(
            request=None, url_for=lambda name, **params: f"/{name}", viewer=None, logout=False, jaeger="",
            now="", title="GPUs", page="gpus", cluster="cluster-00", data=data, live="/events",
        )  # fmt: skip
        render.append(time.perf_counter() - started)
    if profiler:
        profiler.dump_stats(profile)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    ms = lambda xs, q: f"{pct(xs, q) * 1000:.1f}"  # noqa: E731
    print(f"  GET /clusters/C/gpus over HTTP ({size / 1024:.0f} KiB), {views} views: p50 {ms(page, 0.5)} ms, "
          f"p95 {ms(page, 0.95)} ms (target p95 ≤ 100 ms)")  # fmt: skip
    print(f"    of which pages.gpus (pure): p50 {ms(pure, 0.5)} ms, p95 {ms(pure, 0.95)} ms; the template's "
          f"rendering: p50 {ms(render, 0.5)} ms, p95 {ms(render, 0.95)} ms")  # fmt: skip
    print(f"    access reviews: {reviews_first} on the first view, 0 on the {views + 5} after")
    print(f"  GET / with {clusters} clusters ({fleet_size / 1024:.0f} KiB), {views} views: p50 {ms(fleet, 0.5)} ms, "
          f"p95 {ms(fleet, 0.95)} ms (target ≤ 200 ms)")  # fmt: skip
    figures.update(
        nodes=node_count, devices=devices, claims=len(held), views=views,
        gpus_p50_ms=ms(page, 0.5), gpus_p95_ms=ms(page, 0.95), gpus_pure_p95_ms=ms(pure, 0.95),
        gpus_render_p95_ms=ms(render, 0.95), gpus_kib=round(size / 1024),
        gpus_met="yes" if pct(page, 0.95) <= 0.1 else "no",
        clusters=clusters, fleet_p50_ms=ms(fleet, 0.5), fleet_p95_ms=ms(fleet, 0.95),
        fleet_met="yes" if pct(fleet, 0.95) <= 0.2 else "no",
    )  # fmt: skip
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000, help="GPU nodes (8 devices each)")
    parser.add_argument("--claims", type=int, default=4_000, help="allocated claims of one device each")
    parser.add_argument("--views", type=int, default=50, help="timed page views of each page")
    parser.add_argument("--clusters", type=int, default=10, help="clusters of the fleet page")
    parser.add_argument("--profile", default="", help="write a cProfile of pages.gpus here (and print its top)")
    args = parser.parse_args()
    figures = anyio.run(
        lambda: in_process(
            node_count=args.nodes,
            claim_count=args.claims,
            views=args.views,
            clusters=args.clusters,
            profile=args.profile,
        )
    )
    result(**figures)


if __name__ == "__main__":
    main()
