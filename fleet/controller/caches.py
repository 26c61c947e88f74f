"""The controller's picture of the cluster: one watch per kind, kept in memory.

A reconcile must read live state without listing (an idle controller sends no LIST,
and a busy one does not multiply its load on the API server by its reconcile rate),
so every kind the engine reads — the stage table's kinds plus ResourceSlices for the
classes gate — is kept by ``fleet.kube.watch``'s list→watch loop: one LIST at start
(and after a ``410 Gone``), then only watch events and bookmarks.

``Cache`` serves the engine twice: ``prefetched()`` is the ``listings.Prefetched`` a
``Sync`` starts from (so it lists nothing), and ``list`` is the engine's
``healths.Reader`` (so health gates poll memory, not the API server). Objects are
shared, never copied: the engine only reads them (``normalisations.normalise`` copies
before it changes anything).

A watch that gets an answer again after failed attempts calls ``on_resume(kind)``: the API
server is back, and the controller retries a failed reconcile at once instead of sleeping out
its backoff.

Each stored object of a kind fleet writes shares the parts equal to another's
(``fleet.kube.shapes``): labels, ``spec`` and managedFields' field sets, which objects
applied from one template have in common; the strings of its metadata that repeat (namespace,
times, managers, the revision) are one string each (``intern_metadata``).

Every change is passed to ``on_event(type, new, old)``: the controller decides
there which ones are drift worth a reconcile. A relist replaces the kind's objects
and reports those that vanished meanwhile as ``DELETED``, so a deletion is never
missed across a 410.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio

from fleet.engine import listings, stages
from fleet.kube import Client, Kind, KubeError, ListResult, Ref, RetryPolicy, watch
from fleet.kube.kinds import builtin
from fleet.kube.shapes import Shapes, intern_metadata

logger = logging.getLogger(__name__)

OnEvent = Callable[[str, dict[str, Any], dict[str, Any] | None], Awaitable[None] | None]
WATCH_BACKOFF = RetryPolicy(attempts=1_000_000, base=0.2, cap=10.0)
"""Each watch's wait after a failure: 0.2 s doubling to 10 s (client-go's reflector goes to 30 s). After an
outage the first watch to get an answer wakes the controller (``on_resume``), so this cap bounds how
long a recovered API server goes unnoticed; 10 watches at 10 s are one request per second."""
READ_ONLY = (("resource.k8s.io/v1", "ResourceSlice"),)
"""Kinds the engine reads but never writes (the classes gate counts the driver's devices)."""
SERVED_FROM = (("resource.k8s.io/v1", "DeviceTaintRule"),)
"""Kinds a cluster serves only from some minor on (DeviceTaintRule: 1.37): watched where discovery lists
them, else kept empty and synced (a watch of a kind not served would never sync)."""


def watched_kinds() -> list[Kind]:
    """Every kind the stage table applies, plus the read-only ones: what the cache keeps."""
    staged = {kind for stage in stages.STAGES for kind in stage.kinds}
    table = builtin()
    found = [k for (_, kind), k in table.items() if kind in staged]
    found += [table[key] for key in READ_ONLY]
    return sorted(found)


class Cache:
    """Live objects of ``kinds``, by ``Ref.key``, kept current by one watch per kind."""

    def __init__(
        self,
        *,
        kinds: Iterable[Kind],
        on_event: OnEvent | None = None,
        on_resume: Callable[[Kind], None] | None = None,
        watch_timeout: int = 240,
        extra: Mapping[Kind, str] | None = None,
    ) -> None:
        self.extra = dict(extra or {})
        """Kinds kept for readers other than the engine (the console), each with its field selector
        ("" for all): not in ``prefetched``, and their events wake no reconcile."""
        self.kinds = list(kinds) + [k for k in self.extra if k not in kinds]
        self.watch_timeout = watch_timeout
        """Seconds the server keeps one watch request open before the loop resumes it."""
        self.on_resume = on_resume
        """Called with the kind whose watch got an answer again after failures (the API server is back)."""
        self.on_event = on_event
        self.objects: dict[tuple[str, str], dict[str, dict[str, Any]]] = {
            (k.api_version, k.kind): {} for k in self.kinds
        }
        self.synced_kinds: set[tuple[str, str]] = set()
        self.events = 0
        self.kind_events: dict[tuple[str, str], int] = dict.fromkeys(self.objects, 0)
        """Watch events (and relists) per kind: the console keeps what it computes from a kind by it."""
        self.shapes = Shapes()
        self._synced = anyio.Event()

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def run(self, *, client: Client) -> None:
        """Watch every kind until cancelled (each stream resumes, relists and backs off by itself)."""
        served = await self._served(client)
        async with anyio.create_task_group() as tg:
            for kind in self.kinds:
                if (kind.api_version, kind.kind) in served:
                    tg.start_soon(self._watch, client, kind)
                else:
                    self._synced_kind((kind.api_version, kind.kind))

    async def _served(self, client: Client) -> set[tuple[str, str]]:
        """The kinds to watch: all, less the ``SERVED_FROM`` ones discovery does not list (a discovery
        that fails leaves them in: their watches back off and retry as any watch does)."""
        every = {(k.api_version, k.kind) for k in self.kinds}
        if not every & set(SERVED_FROM):
            return every
        try:
            found = {(k.api_version, k.kind) for k in await client.discover()}
        except KubeError as err:
            logger.warning("discovery failed, watching every kind: %s", err.what)
            return every
        return {key for key in every if key not in SERVED_FROM or key in found}

    def _synced_kind(self, key: tuple[str, str]) -> None:
        self.synced_kinds.add(key)
        if len(self.synced_kinds) == len(self.kinds):
            self._synced.set()

    async def _watch(self, client: Client, kind: Kind) -> None:
        key = (kind.api_version, kind.kind)
        store = self.objects[key]
        share = self._kept if key not in READ_ONLY and kind not in self.extra else _kept
        listing: dict[str, dict[str, Any]] = {}
        resumed = None if self.on_resume is None else functools.partial(self.on_resume, kind)
        extra = kind in self.extra
        counted = self.kind_events
        async for event in watch(
            client=client,
            kind=kind,
            field_selector=self.extra.get(kind) or None,
            server_timeout=self.watch_timeout,
            backoff=WATCH_BACKOFF,
            on_resume=resumed,
        ):
            if event.type == "LISTED":
                listing[Ref.of(event.object).key] = share(event.object)
                continue
            if event.type != "LISTED":
                counted[key] = counted.get(key, 0) + 1
            if event.type == "SYNCED":
                vanished = {k: o for k, o in store.items() if k not in listing}
                changed = [(o, store.get(k)) for k, o in listing.items() if _version(store.get(k)) != _version(o)]
                store.clear()
                store.update(listing)
                listing = {}
                self._synced_kind(key)
                if extra:
                    self.events += 1
                    continue
                for gone in vanished.values():
                    await self._notify("DELETED", gone, gone)
                for new, prior in changed:
                    if prior is not None:
                        await self._notify("MODIFIED", new, prior)
                continue
            ref = Ref.of(event.object).key
            old = store.get(ref)
            if event.type == "DELETED":
                store.pop(ref, None)
            else:
                store[ref] = share(event.object)
            if extra:
                self.events += 1
                continue
            await self._notify(event.type, event.object, old)

    async def _notify(self, etype: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        self.events += 1
        if self.on_event is not None:
            result = self.on_event(etype, new, old)
            if result is not None:
                await result

    def _kept(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A watched object as the cache keeps it: its common parts shared (``Shapes``) and the
        strings of its metadata that repeat interned (``intern_metadata``)."""
        return intern_metadata(self.shapes.share(obj))

    def renew_shapes(self) -> None:
        """Keep in the shapes table only what the cached objects hold (``Shapes.renew``)."""
        extra = {(k.api_version, k.kind) for k in self.extra}
        self.shapes.renew(
            o
            for key, store in self.objects.items()
            if key not in READ_ONLY and key not in extra
            for o in store.values()
        )

    def size(self) -> int:
        """Objects held: bounded by the cluster's objects of the watched kinds, as an informer's store is."""
        return sum(len(objects) for objects in self.objects.values())

    def prefetched(self) -> listings.Prefetched:
        """Every cached object as the engine's ``Prefetched`` live state: a Sync lists nothing."""
        live: listings.LiveIndex = {}
        engine = {(k.api_version, k.kind) for k in self.kinds if k not in self.extra}
        for key in engine:
            live.update(self.objects[key])
        return listings.Prefetched(kinds=engine, live=live)

    async def list(self, kind: Kind, *, namespace: str | None = None) -> ListResult:
        """The cached objects of ``kind`` (in ``namespace``): the engine's ``healths.Reader``."""
        store = self.objects.get((kind.api_version, kind.kind))
        if store is None:
            raise KeyError(f"{kind.group_kind} is not cached")
        items = [o for o in store.values() if not namespace or (o.get("metadata") or {}).get("namespace") == namespace]
        return ListResult(items=items, resource_version="")


def _kept(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


def _version(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


__all__ = ["READ_ONLY", "SERVED_FROM", "WATCH_BACKOFF", "Cache", "OnEvent", "watched_kinds"]
