"""``fleet.errors.unwrapped``: a task group's one failure comes out as itself, several stay a group."""

from __future__ import annotations

import pathlib

import anyio
import pytest

from fleet.errors import FleetError, interrupt_inside, unwrapped

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


def _raised_from(inner: BaseException, outer: Exception) -> Exception:
    try:
        try:
            raise inner
        except BaseException:
            raise outer  # noqa: B904 - the implicit context is what pydantic-core leaves
    except Exception as caught:
        return caught


def test_an_error_raised_while_handling_ctrl_c_is_the_interrupt() -> None:
    # pydantic-core turns Ctrl-C during a lazy validator build into a SchemaError, with the
    # interrupt as its context.
    assert interrupt_inside(_raised_from(KeyboardInterrupt(), RuntimeError("schema build failed")))
    assert interrupt_inside(RuntimeError("x").with_traceback(None)) is False
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = ValueError("middle")
    wrapped.__cause__.__context__ = KeyboardInterrupt()
    assert interrupt_inside(wrapped)


def test_a_cycle_of_causes_ends() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first
    assert interrupt_inside(first) is False


def test_validate_ends_as_interrupted_when_a_library_wraps_ctrl_c(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetctl import cli
    from fleetctl.commands import validate

    def build(args: object) -> int:
        raise _raised_from(KeyboardInterrupt(), RuntimeError("schema build failed"))

    monkeypatch.setattr(validate, "_validate", build)
    assert cli.run(["validate", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "fleetctl validate: interrupted", err
