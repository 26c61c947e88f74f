"""``fleet.errors.unwrapped``: a task group's one failure comes out as itself, several stay a group."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import textwrap

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


def test_ctrl_c_that_a_library_names_only_in_its_text_still_ends_as_interrupted(tmp_path: pathlib.Path) -> None:
    """pydantic-core, interrupted while it builds a serializer, raises a SchemaError whose text alone
    says KeyboardInterrupt (CI, test_interrupt_while_rendering). The entry point counts SIGINT, so such
    an error ends as Ctrl-C does: exit 130, one line, no traceback."""
    script = tmp_path / "fleetctl_run.py"
    script.write_text(
        textwrap.dedent(
            """
            import signal, sys
            from fleetctl import __main__ as entry
            from fleetctl.commands import validate

            def build(args):
                try:
                    signal.raise_signal(signal.SIGINT)  # its handler runs before this returns
                except KeyboardInterrupt:
                    pass  # swallowed, as pydantic-core does
                else:
                    sys.exit("SIGINT raised no KeyboardInterrupt")
                raise RuntimeError("Error building `literal` serializer:\\n  KeyboardInterrupt: ")

            validate._validate = build
            sys.argv = ["fleetctl", "validate", sys.argv[1]]
            entry.main()
            """
        )
    )
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert (run.returncode, run.stderr.strip()) == (130, "fleetctl validate: interrupted"), run.stderr


def test_without_sigint_an_error_naming_an_interrupt_stays_a_bug(tmp_path: pathlib.Path) -> None:
    code = "from fleet.errors import count_interrupts, interrupt_inside; count_interrupts(); "
    code += "print(interrupt_inside(RuntimeError('KeyboardInterrupt: ')))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert run.stdout.strip() == "False"
