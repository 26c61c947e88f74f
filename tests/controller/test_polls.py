"""The poll schedule: a poll starts every ``--interval``, however long the fetch and maintenance took.

A commit's wait for the poll is what the polling latency goal (p50 ≤ interval/2 + 1 s) is made
of; if each cycle waited a whole interval *after* the fetch and the cache maintenance, every
cycle would be longer than the interval and so would the mean wait.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from fleet.controller import controllers, intakes


def test_the_delay_counts_from_the_start_of_the_poll() -> None:
    assert intakes.poll_delay(10.0, busy=0.0, jitter=0.0) == 10.0
    assert intakes.poll_delay(10.0, busy=1.5, jitter=0.0) == 8.5
    assert intakes.poll_delay(10.0, busy=1.5, jitter=0.1) == pytest.approx(9.5)
    assert intakes.poll_delay(10.0, busy=1.5, jitter=-0.1) == pytest.approx(7.5)


def test_a_poll_that_outlasts_the_interval_is_followed_after_a_tenth_of_it() -> None:
    assert intakes.poll_delay(10.0, busy=30.0, jitter=0.0) == 1.0
    assert intakes.poll_delay(10.0, busy=9.5, jitter=0.0) == 1.0


class SlowSource:
    """A source whose fetch and maintenance take ``busy`` seconds together; records each fetch's start."""

    def __init__(self, busy: float) -> None:
        self.busy = busy
        self.starts: list[float] = []

    async def sync(self, *, collect: bool = True) -> Any:
        self.starts.append(time.monotonic())
        await anyio.sleep(self.busy / 2)
        return SimpleNamespace(revision="a" * 40)

    async def collect(self) -> None:
        await anyio.sleep(self.busy / 2)


@pytest.mark.anyio
async def test_polls_start_every_interval_although_each_takes_a_third_of_it() -> None:
    """Up to 10 % early (the jitter), never late: a commit is found within one interval."""
    source = SlowSource(busy=0.3)
    options = controllers.Options(cluster="c", interval=0.9, jitter=0.1)
    ctl = controllers.Controller(client=SimpleNamespace(), source=source, options=options)  # type: ignore[arg-type]
    with anyio.move_on_after(4.0):
        await ctl.intake.poll()
    gaps = [b - a for a, b in zip(source.starts, source.starts[1:], strict=False)]
    assert len(gaps) >= 3, source.starts
    # Waiting a whole interval after the work would make each gap 1.2 s.
    assert all(0.8 <= g <= 0.95 for g in gaps), gaps
