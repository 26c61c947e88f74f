"""Bounded concurrency without a task per item: ``for_each(items, fn, concurrency=N)``.

The engine writes, deletes and dry-runs objects N at a time. Starting a task per object
and letting a ``CapacityLimiter`` hold all but N of them costs every waiting object a
coroutine, a task and a lock waiter, all alive at once: at an initial apply, the
controller's memory peak (``bench/run controller --tracemalloc`` shows it). Here N workers
take the items in order from one iterator, so only N are ever in flight or waiting.
Cancelling the caller cancels the workers: items not yet taken are never started, as with
the limiter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import anyio

T = TypeVar("T")


async def for_each(items: Iterable[T], fn: Callable[[T], Awaitable[None]], *, concurrency: int) -> None:
    """Await ``fn(item)`` for every item, at most ``concurrency`` at a time, starting them in order."""
    pending = iter(items)

    async def worker() -> None:
        for item in pending:  # one shared iterator: each item goes to exactly one worker
            await fn(item)

    async with anyio.create_task_group() as tg:
        for _ in range(max(1, concurrency)):
            tg.start_soon(worker)


__all__ = ["for_each"]
