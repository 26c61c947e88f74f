"""fleet's only door to Kubernetes: one client (kr8s's credentials), typed errors, SSA, watches.

Everything else in fleet talks to a cluster through this package, so timeouts,
retries, error types and request accounting are decided once, here.

    client = await kube.connect(kubeconfig=None, context=None, timeout=30)   # like kubectl
    k = await client.kind(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    slices = (await client.list(k)).items                  # paginated; apiVersion/kind filled in
    pods = await client.list_if_served(api_version="v1", kind="Pod")  # [] when the kind is not served
    obj = await client.get(kube.Ref(api_version="v1", kind="Namespace", namespace="", name="team-a"))
    live = await client.apply(desired, field_manager="fleet", force=False, dry_run=True)
    await client.delete(ref, propagation="Background", uid=..., resource_version=...)
    kinds = await client.discover()                        # every kind served: plural + scope
    client.counts.writes, client.counts.snapshot()         # requests sent, by verb
    async for event in kube.watch(client=client, kind=k):  # list, then watch; 410 -> relist
        ...                                                # LISTED..., SYNCED, ADDED/MODIFIED/DELETED
    text = await client.metrics()                          # /metrics (tests/servermetrics.py parses it)
    await client.close()

- ``Client.request`` is the single request path: a timeout on every call, retries with
  backoff on 429/5xx/connection loss honouring ``Retry-After`` (``RetryPolicy``).
- Server-side apply sends ``application/apply-patch+yaml`` with ``fieldManager``,
  ``force`` and ``dryRun=All`` (kr8s has no apply).
- Errors are ``KubeError`` subclasses (``NotFound``, ``Conflict`` with ``.managers``,
  ``Forbidden``, ``Invalid`` with ``.causes``, ``TooManyRequests``, ``ServerError``,
  ``Unreachable``); see ``fleet.kube.errors`` for the tree.
- ``Kind`` names a resource type (group, version, plural, scope); ``Ref`` names one
  object and its inventory ``key``.
- ``fleet.kube.timestamps.parse`` reads the API server's RFC 3339 timestamps.
- ``fleet.kube.transports``: the session's connections, httpx's API over httpcore2's pool
  (httpx's own transport where a proxy applies).
- ``fleet.kube.leases`` holds a ``coordination.k8s.io`` Lease: acquire, renew in the
  background, release, and cancel the work under it when it is lost.
"""

from __future__ import annotations

from fleet.kube.clients import Client, ListResult, RequestCounts, connect, in_cluster
from fleet.kube.errors import (
    Cause,
    Conflict,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
    Unreachable,
)
from fleet.kube.kinds import Kind, Ref
from fleet.kube.retries import RetryPolicy
from fleet.kube.watches import Event, watch

__all__ = [
    "Cause",
    "Client",
    "Conflict",
    "Event",
    "Forbidden",
    "Invalid",
    "Kind",
    "KubeError",
    "ListResult",
    "NotFound",
    "Ref",
    "RequestCounts",
    "RetryPolicy",
    "ServerError",
    "TooManyRequests",
    "Unreachable",
    "connect",
    "in_cluster",
    "watch",
]
