"""fleet's own list→watch loop, because kr8s' ``watch`` re-requests in a hot loop on 410.

A Kubernetes watch is a long HTTP response of JSON lines. It ends for ordinary
reasons: the server's ``timeoutSeconds`` elapsed, a load balancer cut an idle
connection, the API server restarted. Each time we resume from the last
``resourceVersion`` seen. Bookmarks (``allowWatchBookmarks``) move that version
forward even when nothing we watch changes, so a resume rarely starts from a version
etcd has already compacted. When it does, the server says ``410 Gone`` (as an HTTP
status or as an ``ERROR`` event) and the only correct move is to list again: events
between the compacted version and now are lost, and a fresh list is the truth.
That is normal, not an error, and the loop does it without a busy spin: every
failure waits with backoff, and the wait resets after a healthy stream.

If no line (not even a bookmark) arrives for ``inactivity`` seconds the connection
is presumed dead and re-opened: silent half-open TCP connections otherwise stall a
controller forever.

Consumers get ``Event``s: ``LISTED`` for each object of a (re)list followed by one
``SYNCED`` (so they can forget objects not seen), then ``ADDED``/``MODIFIED``/``DELETED``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from fleet.kube import clients, errors, kinds, retries

logger = logging.getLogger(__name__)
EXPIRED = "watch %s: resourceVersion %s expired, relisting"
"""Logged once per relist after a 410 Gone (the kind's ``group_kind`` and the expired version)."""
RESUMING = "watch %s: from resourceVersion %s"
"""Logged (DEBUG) as each watch request opens: the version it resumes from, a bookmark's included."""


@dataclass(frozen=True)
class Event:
    """One change: ``type`` is LISTED, SYNCED, ADDED, MODIFIED or DELETED."""

    type: str
    object: dict[str, Any] = field(default_factory=dict)


class _Gone(Exception):
    """The resourceVersion we resume from was compacted: list again."""


async def watch(
    *,
    client: clients.Client,
    kind: kinds.Kind,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    inactivity: float = 300.0,
    server_timeout: int = 240,
    backoff: retries.RetryPolicy | None = None,
    since: str = "",
    on_resume: Callable[[], None] | None = None,
    _max_lists: int | None = None,  # used in tests to stop the loop
) -> AsyncGenerator[Event, None]:
    """List ``kind`` then watch it forever, resuming and relisting as described above.

    ``since`` starts with a watch from that resourceVersion instead of a list (a
    consumer that kept its state); if it has expired, the loop lists as usual.
    ``on_resume`` is called when the server answers again after failed attempts (the
    first list or watch line after them): the API server is back.
    """
    backoff = backoff or retries.RetryPolicy(attempts=1_000_000, base=0.2, cap=30.0)
    failures = 0
    lists = 0
    version = since
    while True:
        if not version:
            if _max_lists is not None and lists >= _max_lists:
                return
            try:
                listed = await client.list(
                    kind, namespace=namespace, label_selector=label_selector, field_selector=field_selector
                )
            except errors.KubeError as exc:
                failures += 1
                await _pause(backoff=backoff, failures=failures, why=exc)
                continue
            lists += 1
            if failures:
                failures = 0
                if on_resume is not None:
                    on_resume()
            version = listed.resource_version
            for item in listed.items:
                yield Event("LISTED", item)
            yield Event("SYNCED")
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": version,
            "timeoutSeconds": str(server_timeout),
        }
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        logger.debug(RESUMING, kind.group_kind, version)
        try:
            async with client.stream(
                "GET",
                kind.path(namespace=namespace),
                verb="watch",
                params=params,
                read_timeout=inactivity,
                where=f"watch {kind.group_kind}",
            ) as response:
                received = 0
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    received += 1
                    event = clients.decoded(line)
                    obj = event.get("object") or {}
                    etype = event.get("type", "")
                    if etype == "ERROR":
                        if obj.get("code") == 410:
                            raise _Gone()
                        raise errors.from_status(
                            status=int(obj.get("code") or 500), body=obj, where=f"watch {kind.group_kind}"
                        )
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if failures:
                        failures = 0
                        if on_resume is not None:
                            on_resume()
                    if etype == "BOOKMARK":
                        continue
                    obj.setdefault("apiVersion", kind.api_version)
                    obj.setdefault("kind", kind.kind)
                    yield Event(etype, obj)
            if not received:  # closed at once: never spin
                failures += 1
                await _pause(backoff=backoff, failures=failures, why=RuntimeError("empty watch"))
        except _Gone:
            logger.info(EXPIRED, kind.group_kind, version)
            version = ""
        except errors.KubeError as exc:
            if exc.status == 410:
                logger.info(EXPIRED, kind.group_kind, version)
                version = ""
                continue
            failures += 1
            await _pause(backoff=backoff, failures=failures, why=exc)


async def _pause(*, backoff: retries.RetryPolicy, failures: int, why: Exception) -> None:
    delay = backoff.delay(attempt=failures, retry_after=None)
    logger.warning("watch interrupted (%s); retrying in %.1fs", why, delay)
    await anyio.sleep(delay)


__all__ = ["EXPIRED", "RESUMING", "Event", "watch"]
