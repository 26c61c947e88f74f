"""Where the console reads a cluster: the API server (``fleetctl console``) or the controller's watch cache.

A page is drawn from one ``Snapshot`` of a cluster: its FleetSync and the objects of ``KINDS``.
Two sources make snapshots, and the pages cannot tell them apart:

- ``ApiSource`` lists through a kubeconfig context, as the person at the keyboard (``fleetctl
  console``): the API server's RBAC decides what each list returns, and a kind the viewer may not
  list is ``missing`` with the reason. Snapshots are kept ``ttl`` seconds per cluster, so the parts
  of one page and the viewers of one moment share one listing.
- ``CacheSource`` reads the controller's watch cache (``fleet.controller.caches.Cache``): a page
  view sends no request to the API server. What a viewer may see is then decided per object by
  ``fleet.console.access``.

``changed(cluster, since)`` returns when the cluster's snapshot version differs from ``since``:
the live parts of a page (server-sent events) wait on it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from fleet import kube
from fleet.errors import FleetError
from fleet.views import fleetsyncs

KindKey = tuple[str, str]
SLICES: KindKey = ("resource.k8s.io/v1", "ResourceSlice")
CLAIMS: KindKey = ("resource.k8s.io/v1", "ResourceClaim")
TEMPLATES: KindKey = ("resource.k8s.io/v1", "ResourceClaimTemplate")
CLASSES: KindKey = ("resource.k8s.io/v1", "DeviceClass")
NODES: KindKey = ("v1", "Node")
NAMESPACES: KindKey = ("v1", "Namespace")
QUOTAS: KindKey = ("v1", "ResourceQuota")
PODS: KindKey = ("v1", "Pod")
EVENTS: KindKey = ("v1", "Event")
RULES: KindKey = ("resource.k8s.io/v1", "DeviceTaintRule")
KINDS: tuple[KindKey, ...] = (SLICES, CLAIMS, TEMPLATES, CLASSES, NODES, NAMESPACES, QUOTAS, PODS, EVENTS, RULES)
"""Every kind a page reads."""
SELECTORS: Mapping[KindKey, str] = {PODS: "status.phase=Pending"}
"""Field selectors of kinds read in part: of pods, only those waiting (the holders of devices are
named by their claims' ``reservedFor``)."""
RESOURCES: Mapping[KindKey, tuple[str, str]] = {
    SLICES: ("resource.k8s.io", "resourceslices"),
    CLAIMS: ("resource.k8s.io", "resourceclaims"),
    TEMPLATES: ("resource.k8s.io", "resourceclaimtemplates"),
    CLASSES: ("resource.k8s.io", "deviceclasses"),
    NODES: ("", "nodes"),
    NAMESPACES: ("", "namespaces"),
    QUOTAS: ("", "resourcequotas"),
    PODS: ("", "pods"),
    EVENTS: ("", "events"),
    RULES: ("resource.k8s.io", "devicetaintrules"),
}
"""(API group, resource) of each kind: what an access review names."""
NAMESPACED: frozenset[KindKey] = frozenset({CLAIMS, TEMPLATES, QUOTAS, PODS, EVENTS})
EVENTS_KEPT = 200
"""Events of a snapshot: the most recent ones."""


class UnknownCluster(FleetError):
    """A page asked for a cluster the console does not know."""


@dataclass(frozen=True)
class Snapshot:
    """A cluster as one page sees it."""

    cluster: str
    context: str
    row: fleetsyncs.Row
    fleetsync: Mapping[str, Any] | None
    objects: Mapping[KindKey, Sequence[Mapping[str, Any]]]
    missing: Mapping[KindKey, str] = field(default_factory=dict)
    """Kinds that could not be read, with why (forbidden to this viewer, not served, not watched)."""
    version: str = ""
    taken: float = 0.0
    versions: Mapping[KindKey, str] = field(default_factory=dict)
    """Each kind's own version (a list's resourceVersion, or the watch's event count): what a figure
    computed from some kinds only is kept by (``fleet.console.apps``'s device pictures)."""

    def of(self, kind: KindKey) -> Sequence[Mapping[str, Any]]:
        return self.objects.get(kind, ())


class Source(Protocol):
    """What the console reads clusters through."""

    def clusters(self) -> list[tuple[str, str]]:
        """(cluster, context) of every cluster shown, in order."""
        ...

    async def snapshot(self, cluster: str) -> Snapshot: ...

    async def row(self, cluster: str) -> fleetsyncs.Row:
        """The cluster's row of the fleet page: its FleetSync only."""
        ...

    async def changed(self, cluster: str, since: str) -> str:
        """The cluster's snapshot version, once it differs from ``since``."""
        ...


def _recent(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    def when(e: Mapping[str, Any]) -> str:
        created = (e.get("metadata") or {}).get("creationTimestamp")
        return str(e.get("lastTimestamp") or e.get("eventTime") or created or "")

    return sorted(events, key=when, reverse=True)[:EVENTS_KEPT]


def _digest(parts: Sequence[str]) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


class ApiSource:
    """Clusters read through kubeconfig contexts, as the kubeconfig's user."""

    def __init__(
        self,
        clusters: Sequence[tuple[str, str]],
        *,
        kubeconfig: str | None,
        ttl: float = 2.0,
        poll: float = 2.0,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clusters = list(clusters)
        self.kubeconfig = kubeconfig
        self.ttl = ttl
        self.poll = poll
        self.timeout = timeout
        self.clock = clock
        self._clients: dict[str, kube.Client] = {}
        self._kept: dict[str, Snapshot] = {}  # one per cluster: bounded by the kubeconfig's contexts
        self._rows: dict[str, tuple[float, fleetsyncs.Row]] = {}  # likewise
        self._locks = {cluster: anyio.Lock() for cluster, _ in self._clusters}
        self.lists = 0
        """List requests sent: what the benchmark counts."""

    def clusters(self) -> list[tuple[str, str]]:
        return list(self._clusters)

    def _context(self, cluster: str) -> str:
        for name, context in self._clusters:
            if name == cluster:
                return context
        raise UnknownCluster(
            f"no cluster {cluster!r} in this console",
            hint="the clusters shown: " + ", ".join(c for c, _ in self._clusters),
        )

    async def _client(self, cluster: str) -> kube.Client:
        client = self._clients.get(cluster)
        if client is None:
            client = await kube.connect(
                kubeconfig=self.kubeconfig, context=self._context(cluster), timeout=self.timeout
            )
            self._clients[cluster] = client
        return client

    async def snapshot(self, cluster: str) -> Snapshot:
        context = self._context(cluster)
        async with self._locks[cluster]:
            kept = self._kept.get(cluster)
            if kept is not None and self.clock() - kept.taken < self.ttl:
                return kept
            taken = await self._read(cluster, context)
            self._kept[cluster] = taken
            return taken

    async def _read(self, cluster: str, context: str) -> Snapshot:
        try:
            with anyio.fail_after(self.timeout * 2):
                client = await self._client(cluster)
                fleetsync = await self._fleetsync(client, cluster)
        except (FleetError, TimeoutError) as err:
            self._clients.pop(cluster, None)
            why = str(err).splitlines()[0] if str(err) else f"no answer within {self.timeout * 2:g}s"
            row = fleetsyncs.unreachable(cluster, context, why)
            return Snapshot(cluster, context, row, None, {}, dict.fromkeys(KINDS, why), _digest([why]), self.clock())
        objects: dict[KindKey, Sequence[Mapping[str, Any]]] = {}
        missing: dict[KindKey, str] = {}
        versions: dict[KindKey, str] = {}

        async def one(key: KindKey) -> None:
            try:
                kind = await client.kind(api_version=key[0], kind=key[1])
                self.lists += 1
                listed = await client.list(kind, field_selector=SELECTORS.get(key))
            except kube.Forbidden:
                missing[key] = f"you may not list {RESOURCES[key][1]} in this cluster"
            except kube.NotFound:
                missing[key] = f"this cluster does not serve {key[1]} ({key[0]})"
            except FleetError as err:
                missing[key] = str(err).splitlines()[0]
            else:
                objects[key] = _recent(listed.items) if key == EVENTS else listed.items
                versions[key] = listed.resource_version

        async with anyio.create_task_group() as tg:
            for key in KINDS:
                tg.start_soon(one, key)
        if isinstance(fleetsync, kube.Forbidden):
            row, fleetsync = fleetsyncs.forbidden(cluster, context), None
        else:
            row = fleetsyncs.row_of(cluster, context, fleetsync)
        status_version = str(((fleetsync or {}).get("metadata") or {}).get("resourceVersion") or "")
        version = _digest([status_version, *(f"{k}={versions.get(k, missing.get(k, ''))}" for k in KINDS)])
        return Snapshot(cluster, context, row, fleetsync, objects, missing, version, self.clock(), versions)

    async def row(self, cluster: str) -> fleetsyncs.Row:
        """The cluster's row from its FleetSync alone (one GET, kept ``ttl`` seconds): the fleet page
        does not wait for each cluster's full listing."""
        context = self._context(cluster)
        kept = self._kept.get(cluster)
        if kept is not None and self.clock() - kept.taken < self.ttl:
            return kept.row
        got = self._rows.get(cluster)
        if got is not None and self.clock() - got[0] < self.ttl:
            return got[1]
        try:
            with anyio.fail_after(self.timeout * 2):
                fleetsync = await self._fleetsync(await self._client(cluster), cluster)
        except (FleetError, TimeoutError) as err:
            self._clients.pop(cluster, None)
            row = fleetsyncs.unreachable(cluster, context, str(err).splitlines()[0] if str(err) else "no answer")
        else:
            if isinstance(fleetsync, kube.Forbidden):
                row = fleetsyncs.forbidden(cluster, context)
            else:
                row = fleetsyncs.row_of(cluster, context, fleetsync)
        self._rows[cluster] = (self.clock(), row)
        return row

    async def _fleetsync(self, client: kube.Client, cluster: str) -> dict[str, Any] | kube.Forbidden | None:
        """The cluster's FleetSync; None when there is none; the refusal when the viewer may not read it."""
        self.lists += 1
        try:
            return await client.get(fleetsyncs.ref(cluster))
        except kube.NotFound:
            return None
        except kube.Forbidden as refused:
            return refused

    async def changed(self, cluster: str, since: str) -> str:
        while True:
            version = (await self.snapshot(cluster)).version
            if version != since:
                return version
            await anyio.sleep(self.poll)

    async def close(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            with anyio.CancelScope(shield=True):
                await client.close()


class CacheSource:
    """The controller's own cluster, read from its watch cache: no request per page view.

    ``objects(key)`` gives the cached objects of a kind (None: not cached); ``fleetsync()`` the
    FleetSync the controller last wrote; ``version()`` a number that moves with every watch event
    and status write.
    """

    def __init__(
        self,
        *,
        cluster: str,
        objects: Callable[[KindKey], Sequence[Mapping[str, Any]] | None],
        fleetsync: Callable[[], Mapping[str, Any] | None],
        version: Callable[[], int],
        kind_version: Callable[[KindKey], int] | None = None,
        poll: float = 1.0,
    ) -> None:
        self.cluster = cluster
        self._objects = objects
        self._fleetsync = fleetsync
        self._version = version
        self._kind_version = kind_version
        self.poll = poll

    def clusters(self) -> list[tuple[str, str]]:
        return [(self.cluster, "in-cluster")]

    async def snapshot(self, cluster: str) -> Snapshot:
        if cluster != self.cluster:
            raise UnknownCluster(f"no cluster {cluster!r} in this console", hint=f"this controller runs {self.cluster}")
        objects: dict[KindKey, Sequence[Mapping[str, Any]]] = {}
        missing: dict[KindKey, str] = {}
        for key in KINDS:
            found = self._objects(key)
            if found is None:
                missing[key] = f"the controller does not watch {key[1]}"
            else:
                objects[key] = _recent(found) if key == EVENTS else found
        fleetsync = self._fleetsync()
        row = fleetsyncs.row_of(self.cluster, "in-cluster", dict(fleetsync) if fleetsync is not None else None)
        versions = {k: str(self._kind_version(k)) for k in objects} if self._kind_version is not None else {}
        return Snapshot(
            self.cluster, "in-cluster", row, fleetsync, objects, missing, str(self._version()), 0.0, versions
        )

    async def row(self, cluster: str) -> fleetsyncs.Row:
        return (await self.snapshot(cluster)).row

    async def changed(self, cluster: str, since: str) -> str:
        while True:
            version = str(self._version())
            if version != since:
                return version
            await anyio.sleep(self.poll)


__all__ = [
    "CLAIMS",
    "CLASSES",
    "EVENTS",
    "KINDS",
    "NAMESPACED",
    "NAMESPACES",
    "NODES",
    "PODS",
    "QUOTAS",
    "RESOURCES",
    "RULES",
    "SLICES",
    "TEMPLATES",
    "ApiSource",
    "CacheSource",
    "KindKey",
    "Snapshot",
    "Source",
    "UnknownCluster",
]
