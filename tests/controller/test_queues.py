"""The work queue: de-duplicated, one reconcile per key at a time, exponential backoff, token bucket."""

from __future__ import annotations

import anyio
import pytest

from fleet.controller.queues import RateLimiter, WorkQueue

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_failures_back_off_exponentially_up_to_the_cap_and_forget_resets() -> None:
    limiter = RateLimiter(base=0.005, cap=1.0, qps=1e9, burst=10**9)
    delays = [limiter.backoff("c") for _ in range(10)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[-1] == 1.0 and max(delays) == 1.0
    assert limiter.backoff("other") == 0.005
    limiter.forget("c")
    assert limiter.backoff("c") == 0.005


def test_the_token_bucket_spaces_items_beyond_the_burst() -> None:
    limiter = RateLimiter(qps=10.0, burst=2)
    assert [limiter.bucket(now=0.0) for _ in range(4)] == [0.0, 0.0, pytest.approx(0.1), pytest.approx(0.2)]
    assert limiter.bucket(now=10.0) == 0.0  # refilled


async def test_a_burst_of_adds_is_one_item_with_every_reason() -> None:
    queue = WorkQueue()
    for i in range(1000):
        queue.add("gpu-east", reason="drift" if i % 2 else "commit")
    assert len(queue) == 1
    item = await queue.get()
    assert item.key == "gpu-east" and set(item.reasons) == {"drift", "commit"}
    assert len(queue) == 0


async def test_a_key_added_while_processing_is_handed_out_again_only_after_done() -> None:
    queue = WorkQueue()
    queue.add("c", reason="commit")
    first = await queue.get()
    queue.add("c", reason="drift")
    queue.add("c", reason="drift")
    assert len(queue) == 0  # not twice in flight
    queue.done(first.key)
    second = await queue.get()
    assert second.reasons == ("drift",)


async def test_add_after_waits_for_its_time() -> None:
    clock = Clock()
    queue = WorkQueue(clock=clock)
    queue.add_after("c", delay=30.0, reason="retry")
    got: list[str] = []

    async def consume() -> None:
        got.append((await queue.get()).key)

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.wait_all_tasks_blocked()  # the consumer waits in get()
        assert got == []
        clock.now += 31.0
        queue.add("other", reason="wake")  # any add re-checks the due times
    assert got == ["c"]  # it was due first


async def test_close_ends_a_waiting_get() -> None:
    queue = WorkQueue()
    async with anyio.create_task_group() as tg:

        async def consume() -> None:
            with pytest.raises(anyio.EndOfStream):
                await queue.get()

        tg.start_soon(consume)
        await anyio.wait_all_tasks_blocked()  # the consumer waits in get()
        queue.close()
