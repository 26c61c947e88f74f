"""What a viewer may see, as Kubernetes RBAC decides it: access reviews, remembered a minute.

In the controller the console draws pages from the watch cache, read with fleet's own rights, so
it asks the API server what each viewer could read for themselves: one ``SubjectAccessReview``
per (viewer, resource, namespace) for the verb ``list``, with the viewer's user and groups. The
answers are kept ``ttl`` seconds in a bounded table, so a page view in steady state sends no
request, and a change of RoleBindings shows within a minute.

``Sight`` is the result for one snapshot: which kinds the viewer sees everywhere, and in which
namespaces the others. A viewer from the kubeconfig (``fleetctl console``) reads with their own
credentials already, and sees whatever the API server returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from fleet import kube
from fleet.console.sources import NAMESPACED, RESOURCES, KindKey, Snapshot
from fleet.console.viewers import Viewer
from fleet.lrus import LRU

REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
FLEETSYNCS = ("fleet.gpufleet.dev", "fleetsyncs")


@dataclass(frozen=True)
class Sight:
    """Which objects of a snapshot a viewer may see."""

    everywhere: frozenset[KindKey] = frozenset()
    """Kinds the viewer may list in every namespace (or, cluster-scoped, at all)."""
    namespaces: Mapping[KindKey, frozenset[str]] = field(default_factory=dict)
    """Namespaced kinds the viewer may list in some namespaces only: those."""
    fleetsync: bool = False
    all: bool = False
    """The viewer reads with their own credentials: what was read is what they may see."""

    def sees(self, kind: KindKey, namespace: str = "") -> bool:
        if self.all or kind in self.everywhere:
            return True
        return bool(namespace) and namespace in self.namespaces.get(kind, frozenset())

    def seen(self, kind: KindKey, objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The objects of ``kind`` the viewer may see."""
        if self.all or kind in self.everywhere:
            return list(objects)
        allowed = self.namespaces.get(kind, frozenset())
        return [o for o in objects if (o.get("metadata") or {}).get("namespace") in allowed]


EVERYTHING = Sight(all=True, fleetsync=True)


class Access:
    """Access reviews for viewers, sent with ``client`` (fleet's identity) and remembered ``ttl`` s."""

    def __init__(
        self,
        client: kube.Client,
        *,
        ttl: float = 60.0,
        size: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl = ttl
        self.size = size
        self.clock = clock
        self._answers: LRU[tuple[str, tuple[str, ...], str, str, str, str], tuple[float, bool]] = LRU(size)
        self.reviews = 0
        """Reviews sent: a page view in steady state sends none."""

    async def may(self, viewer: Viewer, resource: tuple[str, str], namespace: str = "", *, verb: str = "list") -> bool:
        key = (viewer.user, viewer.groups, verb, resource[0], resource[1], namespace)
        kept = self._answers.get(key)
        now = self.clock()
        if kept is not None and now - kept[0] < self.ttl:
            return kept[1]
        allowed = await self._review(viewer, resource, namespace, verb)
        self._answers[key] = (now, allowed)
        return allowed

    async def _review(self, viewer: Viewer, resource: tuple[str, str], namespace: str, verb: str) -> bool:
        attributes = {"verb": verb, "group": resource[0], "resource": resource[1]}
        if namespace:
            attributes["namespace"] = namespace
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": viewer.user, "groups": list(viewer.groups), "resourceAttributes": attributes},
        }
        self.reviews += 1
        answer = await self.client.request(
            "POST", REVIEWS, verb="create", body=body, where=f"access review for {viewer.user}"
        )
        return bool((answer.get("status") or {}).get("allowed"))

    async def sight(self, viewer: Viewer, snapshot: Snapshot) -> Sight:
        """What ``viewer`` may see of ``snapshot``."""
        if viewer.via == "kubeconfig":
            return EVERYTHING
        everywhere: set[KindKey] = set()
        namespaces: dict[KindKey, set[str]] = {}
        present = {
            str((o.get("metadata") or {}).get("namespace") or "") for kind in NAMESPACED for o in snapshot.of(kind)
        } - {""}
        flags: dict[str, bool] = {}

        async def whole(kind: KindKey) -> None:
            if await self.may(viewer, RESOURCES[kind]):
                everywhere.add(kind)

        async def fleetsync() -> None:
            flags["fleetsync"] = await self.may(viewer, FLEETSYNCS, verb="get")

        async with anyio.create_task_group() as tg:
            tg.start_soon(fleetsync)
            for kind in snapshot.objects:
                tg.start_soon(whole, kind)

        async def within(kind: KindKey, namespace: str) -> None:
            if await self.may(viewer, RESOURCES[kind], namespace):
                namespaces.setdefault(kind, set()).add(namespace)

        async with anyio.create_task_group() as tg:
            for kind in snapshot.objects:
                if kind in NAMESPACED and kind not in everywhere:
                    for namespace in present:
                        tg.start_soon(within, kind, namespace)
        return Sight(
            everywhere=frozenset(everywhere),
            namespaces={k: frozenset(v) for k, v in namespaces.items()},
            fleetsync=flags.get("fleetsync", False),
        )


__all__ = ["EVERYTHING", "Access", "Sight"]
