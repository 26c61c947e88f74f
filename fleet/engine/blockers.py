"""What forbids a deletion fleet would otherwise make: claims in use, and what others put in a namespace.

Deleting a namespace deletes everything in it. A team's namespace holds its jobs,
volumes and secrets, none of which fleet created, so a namespace fleet created is
deleted only when it holds nothing but what fleet put there. Every namespaced kind
the server can list is listed (discovery, one list per kind): anything not in the
ledger blocks, and the error lists it. Kubernetes itself puts a few objects into
every namespace (the ``default`` ServiceAccount, the ``kube-root-ca.crt``
ConfigMap, Events); those go with the namespace and do not block, nor do objects
already being deleted. A kind fleet may not list blocks too: fleet cannot prove
the namespace empty.

A ResourceClaim that is allocated or reserved for pods is in use: deleting it (by
pruning, or to replace an immutable field) would pull devices from under running
pods, so it is refused, naming the pods. The check is made on a fresh read just
before the delete, and the delete carries that read's ``resourceVersion`` as a
precondition: a claim reserved in between makes the delete fail, not succeed.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import anyio

from fleet.kube import Client, Kind, KubeError, NotFound, Ref

IMPLICIT = frozenset({("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")})
"""Objects Kubernetes creates in every namespace."""
EPHEMERAL_KINDS = frozenset({"Event"})
SHOWN = 20


def claim_users(claim: dict[str, Any]) -> list[str]:
    """Who holds a ResourceClaim: ``pod NAME`` per reservedFor entry, or ``allocated`` alone; [] when free."""
    status = claim.get("status") or {}
    users = [
        f"{str(r.get('resource') or 'pods').removesuffix('s')} {r.get('name')}" for r in status.get("reservedFor") or ()
    ]
    if not users and status.get("allocation"):
        users = ["allocated (to no pod yet)"]
    return users


def claim_block(ref: Ref, claim: dict[str, Any] | None) -> str:
    """Why ``claim`` may not be deleted or replaced: it is in use ("" when free or gone)."""
    users = claim_users(claim or {})
    return claim_in_use(ref, users) if users else ""


def claim_in_use(ref: Ref, users: list[str]) -> str:
    return (
        f"ResourceClaim {ref.namespace}/{ref.name} is in use ({', '.join(users)}); fleet never deletes or replaces "
        "a claim in use\n  hint: stop the pods first (the guide's clean-up order), then run again"
    )


async def namespaced_kinds(*, client: Client) -> list[Kind]:
    """One version per namespaced resource the server can list (discovery: two requests)."""
    return _namespaced_listable(await client.discover())


async def foreign_objects(
    *, client: Client, namespace: str, ours: Collection[str], kinds: list[Kind], concurrency: int = 8
) -> list[str]:
    """``Kind name`` of every object in ``namespace`` that fleet did not put there (``ours``: ledger keys)."""
    found: list[str] = []
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(kind: Kind) -> None:
        async with limiter:
            try:
                items = (await client.list(kind, namespace=namespace)).items
            except NotFound:
                return  # the kind went away since discovery
            except KubeError as err:  # not allowed to list, an aggregated API down: cannot prove it empty
                found.append(f"{kind.group_kind} (cannot list them: {err.what})")
                return
        for item in items:
            meta = item.get("metadata") or {}
            if (kind.kind, meta.get("name")) in IMPLICIT or meta.get("deletionTimestamp"):
                continue
            if Ref.of(item).key not in ours:
                found.append(f"{kind.kind} {meta.get('name')}")

    async with anyio.create_task_group() as tg:
        for kind in kinds:
            tg.start_soon(one, kind)
    return sorted(found)


async def namespace_block(*, client: Client, namespace: str, ours: Collection[str], kinds: list[Kind]) -> str:
    """Why ``namespace`` may not be deleted: objects fleet did not put there ("" when none)."""
    others = await foreign_objects(client=client, namespace=namespace, kinds=kinds, ours=ours)
    return namespace_not_empty(namespace, others) if others else ""


def _namespaced_listable(kinds: list[Kind]) -> list[Kind]:
    """One version per namespaced, listable resource (discovery lists the preferred version first)."""
    seen: dict[tuple[str, str], Kind] = {}
    for kind in kinds:
        if kind.namespaced and kind.listable and kind.kind not in EPHEMERAL_KINDS:
            seen.setdefault((kind.group, kind.plural), kind)
    return list(seen.values())


def namespace_not_empty(namespace: str, objects: list[str]) -> str:
    more = f", ... and {len(objects) - SHOWN} more" if len(objects) > SHOWN else ""
    return (
        f"namespace {namespace} holds objects fleet did not create: {', '.join(objects[:SHOWN])}{more}; "
        "deleting it would delete them\n  hint: move or delete them (stop pods with claims first: the guide's "
        "clean-up order) and run again, or annotate the Namespace fleet.gpufleet.dev/prune=disabled to keep it"
    )


__all__ = [
    "claim_block",
    "claim_in_use",
    "claim_users",
    "foreign_objects",
    "namespace_block",
    "namespace_not_empty",
    "namespaced_kinds",
]
