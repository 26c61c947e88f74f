"""``tests.waits``: a condition polled until a deadline returns what it found, or fails naming it."""

from __future__ import annotations

import itertools

import pytest

from tests import waits


def test_wait_for_returns_the_first_truthy_value() -> None:
    answers = iter([None, [], {"phase": "Running"}])
    assert waits.wait_for(lambda: next(answers), what="a running pod", every=0) == {"phase": "Running"}


def test_wait_for_fails_naming_what_it_awaited_the_last_value_and_the_details() -> None:
    with pytest.raises(AssertionError) as failed:
        waits.wait_for(list, what="a running pod", within=0.05, every=0.01, details=lambda: "log tail")
    assert str(failed.value) == "not within 0.05s: a running pod (last: [])\nlog tail"


@pytest.mark.anyio
async def test_eventually_returns_the_first_truthy_value() -> None:
    counter = itertools.count()

    async def third() -> int:
        n = next(counter)
        return n if n >= 2 else 0

    assert await waits.eventually(third, what="the third call", every=0) == 2


@pytest.mark.anyio
async def test_eventually_fails_naming_what_it_awaited_and_the_last_value() -> None:
    async def never() -> dict[str, str]:
        return {}

    with pytest.raises(AssertionError) as failed:
        await waits.eventually(never, what="Ready", within=0.05, every=0.01, details=lambda: "log tail")
    assert str(failed.value) == "not within 0.05s: Ready (last: {})\nlog tail"
