"""for_each: at most N items in flight, all of them done, in order of start, and no task per item."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from fleet.engine.workers import for_each


def test_at_most_n_at_a_time_every_item_once_started_in_order() -> None:
    started: list[int] = []
    running = peak = 0

    async def fn(item: int) -> None:
        nonlocal running, peak
        started.append(item)
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.001 * (item % 3))
        running -= 1

    anyio.run(lambda: for_each(range(50), fn, concurrency=4))
    assert sorted(started) == list(range(50)) and started[:4] == [0, 1, 2, 3]
    assert peak == 4


def test_tasks_are_the_workers_not_the_items() -> None:
    tasks: set[int] = set()

    async def fn(_item: int) -> None:
        task = anyio.get_current_task()
        tasks.add(task.id)
        await anyio.lowlevel.checkpoint()

    anyio.run(lambda: for_each(range(1_000), fn, concurrency=8))
    assert len(tasks) == 8


def test_a_cancelled_run_starts_nothing_more() -> None:
    started: list[int] = []

    async def fn(item: int) -> None:
        started.append(item)
        await anyio.sleep(10)

    async def main() -> None:
        with anyio.move_on_after(0.05):
            await for_each(range(100), fn, concurrency=3)

    anyio.run(main)
    assert started == [0, 1, 2]


def test_an_error_stops_the_others() -> None:
    async def fn(item: int) -> None:
        if item == 5:
            raise ValueError("boom")
        await anyio.lowlevel.checkpoint()

    with pytest.raises(ExceptionGroup):
        anyio.run(lambda: for_each(range(100), fn, concurrency=2))
