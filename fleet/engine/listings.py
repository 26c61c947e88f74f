"""Reading the live cluster for a diff: one paginated list per kind, never a GET per object.

A diff compares every desired object with its live twin. Fetching them one by one
costs a request each; listing costs one request (a few pages) per kind, whatever
the number of objects, and the API server answers lists from its watch cache.
``prefetch`` lists every kind the stage table applies before the plan is known, so
the CLI overlaps the API server's listing with its own parsing and validation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from fleet.engine.stages import STAGES
from fleet.kube import Client, Kind, ListResult, Ref
from fleet.kube.kinds import builtin as kinds_table
from fleet.kube.shapes import Shapes

LiveIndex = dict[str, dict[str, Any]]
"""Live objects by ``Ref.key``."""


class Reader(Protocol):
    """Where gates and classing may read live objects instead of listing: the controller's watch cache
    (already current, so reading it costs no request)."""

    async def list(self, kind: Kind, *, namespace: str | None = None) -> ListResult: ...


_STAGED = frozenset(kind for stage in STAGES for kind in stage.kinds)


async def live_index(*, client: Client, kinds: Iterable[tuple[str, str]]) -> LiveIndex:
    """Every live object of the given (apiVersion, kind)s, one paginated list per kind.

    Equal labels, specs and field-ownership sets are kept once (``kube.shapes``): objects fleet
    made from one template mostly differ in name and uid, and the decoded listing is the largest
    part of a large run's memory. The objects are read-only, as the controller's cache's are.
    """
    index: LiveIndex = {}
    shapes = Shapes()

    async def fetch(api_version: str, kind: str) -> None:
        for item in await client.list_if_served(api_version=api_version, kind=kind, each=shapes.share):
            index[Ref.of(item).key] = item

    async with anyio.create_task_group() as tg:
        for api_version, kind in sorted(set(kinds)):
            tg.start_soon(fetch, api_version, kind)
    return index


@dataclass(frozen=True)
class Prefetched:
    kinds: set[tuple[str, str]]
    live: LiveIndex


def staged_kinds() -> set[tuple[str, str]]:
    """(apiVersion, kind) of every kind the stage table applies."""
    return {(k.api_version, k.kind) for (_, kind), k in kinds_table().items() if kind in _STAGED}


MAINTENANCE_READS = frozenset({("resource.k8s.io/v1", "ResourceClaim"), ("resource.k8s.io/v1", "ResourceSlice")})
"""What the maintenance stage reads beside the kinds it applies: the slices it expands each
GPUMaintenance over, the claims allocated on their devices (``disruptions.Reads`` takes them from
the listing when it holds them)."""


async def prefetch(*, client: Client, also: Iterable[tuple[str, str]] = ()) -> Prefetched:
    """List every kind the stage table applies, and ``also`` these (``MAINTENANCE_READS``).

    The CLI runs this while it parses and validates the repository, so the API
    server's listing overlaps fleet's CPU work instead of following it.
    """
    kinds = staged_kinds() | set(also)
    return Prefetched(kinds=kinds, live=await live_index(client=client, kinds=kinds))


__all__ = ["MAINTENANCE_READS", "LiveIndex", "Prefetched", "Reader", "live_index", "prefetch", "staged_kinds"]
