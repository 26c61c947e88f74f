"""Waiting for a condition with a deadline: the tests' one way to wait for a cluster or a process.

A fixed sleep is too short on a loaded machine (a flaky test) and too long everywhere else;
a condition polled until a deadline is neither. ``wait_for`` polls a function, ``eventually``
a coroutine function; both return the first truthy value the check gave, so a test asserts
on what it waited for. Past the deadline they fail with an AssertionError that names what was
awaited, the last value seen and, when ``details`` is given, what it returns (a log's tail).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


def wait_for(
    check: Callable[[], T],
    *,
    what: str,
    within: float = 60.0,
    every: float = 0.2,
    details: Callable[[], str] | None = None,
) -> T:
    """Call ``check`` every ``every`` seconds until it returns something truthy, and return that."""
    deadline = time.monotonic() + within
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(_failure(what=what, within=within, last=last, details=details))
        time.sleep(every)


async def eventually(
    check: Callable[[], Awaitable[T]],
    *,
    what: str,
    within: float = 60.0,
    every: float = 0.1,
    details: Callable[[], str] | None = None,
) -> T:
    """``wait_for`` for a coroutine function, on the event loop (other tasks run meanwhile)."""
    last: T | None = None
    with anyio.move_on_after(within):
        while True:
            last = await check()
            if last:
                return last
            await anyio.sleep(every)
    raise AssertionError(_failure(what=what, within=within, last=last, details=details))


def _failure(*, what: str, within: float, last: object, details: Callable[[], str] | None) -> str:
    text = f"not within {within:g}s: {what} (last: {last!r})"
    return f"{text}\n{details()}" if details is not None else text


__all__ = ["eventually", "wait_for"]


def established(kubectl: Callable[..., object], crd: str, *, within: float = 60.0) -> None:
    """Wait until CRD ``crd`` is Established, as ``kubectl wait --for=condition=Established`` does; a CRD
    created a moment ago may have no ``status.conditions`` yet, which that kubectl wait reports as an
    error ("accessor error: <nil>") instead of waiting, so the wait is repeated until it answers."""
    import subprocess

    def answered() -> bool:
        done = kubectl("wait", "--for=condition=Established", f"crd/{crd}", f"--timeout={int(within)}s", check=False)
        assert isinstance(done, subprocess.CompletedProcess)
        if done.returncode == 0:
            return True
        if "accessor error" in done.stderr or "not found" in done.stderr:
            return False
        raise AssertionError(f"kubectl wait for crd/{crd}: {done.stderr.strip()}")

    wait_for(answered, what=f"CRD {crd} to be Established", within=within)
