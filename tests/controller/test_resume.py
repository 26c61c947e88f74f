"""A failed reconcile is retried as soon as a watch gets an answer again, not after its backoff.

After a long outage the queue's per-key backoff (5 ms doubling, up to 5 min) may be far longer
than the outage's tail; ``Cache.on_resume`` (a watch answered after failures) makes the
controller forget that backoff and queue the cluster now. Pure: the controller is built but not
run, and nothing here talks to a server.
"""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from fleet.controller import caches, controllers
from fleet.kube import Client

pytestmark = pytest.mark.anyio


class NoSource:
    async def sync(self, *, collect: bool = True) -> Any:
        raise AssertionError("not fetched in this test")

    async def collect(self) -> None:
        raise AssertionError("not fetched in this test")


def controller() -> controllers.Controller:
    return controllers.Controller(
        client=cast(Client, object()), source=NoSource(), options=controllers.Options(cluster="gpu-east")
    )


async def test_a_watch_answering_again_retries_a_failed_reconcile_now() -> None:
    ctl = controller()
    for _ in range(16):
        ctl.queue.limiter.backoff("gpu-east")  # sixteen failed reconciles: the next waits 5 min
    delay = ctl.queue.add_rate_limited("gpu-east", reason="retry")
    assert delay == ctl.queue.limiter.cap
    ctl._on_resume(caches.watched_kinds()[0])
    with anyio.fail_after(1):
        item = await ctl.queue.get()
    assert item.key == "gpu-east"
    assert any(r.startswith("API server answers again") for r in item.reasons)
    assert ctl.queue.limiter.retries("gpu-east") == 0, "the backoff starts afresh"


async def test_a_watch_answering_again_without_failed_reconciles_queues_nothing() -> None:
    ctl = controller()
    ctl._on_resume(caches.watched_kinds()[0])
    with anyio.move_on_after(0.2) as waited:
        await ctl.queue.get()
    assert waited.cancelled_caught
