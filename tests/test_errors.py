"""``fleet.errors.unwrapped``: a task group's one failure comes out as itself, several stay a group."""

from __future__ import annotations

import anyio
import pytest

from fleet.errors import FleetError, unwrapped

pytestmark = pytest.mark.anyio


async def _beside_a_helper(error: BaseException) -> None:
    """Raise ``error`` from a task group's body while a helper task waits to be cancelled."""
    with unwrapped():
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep_forever)
            raise error


async def test_the_one_failure_comes_out_as_itself_with_its_cause() -> None:
    cause = OSError("connection refused")
    error = FleetError("cluster gpu-east did not answer", hint="check the context")
    error.__cause__ = cause
    with pytest.raises(FleetError) as raised:
        await _beside_a_helper(error)
    assert raised.value is error and raised.value.__cause__ is cause


async def test_a_keyboard_interrupt_comes_out_as_itself() -> None:
    with pytest.raises(KeyboardInterrupt):
        await _beside_a_helper(KeyboardInterrupt())


async def test_a_nested_group_of_one_is_unwrapped_to_its_leaf() -> None:
    error = FleetError("bad revision")
    with pytest.raises(FleetError) as raised, unwrapped():
        raise ExceptionGroup("outer", [ExceptionGroup("inner", [error])])
    assert raised.value is error


async def test_several_failures_stay_a_group() -> None:
    async def fail(what: str) -> None:
        raise FleetError(what)

    with pytest.raises(ExceptionGroup) as raised, unwrapped():
        async with anyio.create_task_group() as tg:
            tg.start_soon(fail, "one")
            tg.start_soon(fail, "two")
    assert sorted(str(e) for e in raised.value.exceptions) == ["one", "two"]
