"""The user-facing error every layer raises: what failed, where, and what to do.

fleet is used by people reading CI logs and terminal output, so an error is not
a stack trace but three parts: ``what`` went wrong, ``where`` (file:line:col,
object, cluster) and a ``hint`` that says what to do. Adapters keep their own
typed hierarchies (``fleet.kube.errors``...) and subclass this one, so the CLI
can print any of them the same way and exit 2.

    FleetError
     ├── fleet.sandbox.errors.SandboxError ...
     └── fleet.kube.errors.KubeError ...
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

_interrupted = False
"""Set by ``count_interrupts``' handler once SIGINT arrived."""


class FleetError(Exception):
    """An error with a location and a hint, printed to users as is."""

    def __init__(self, what: str, *, where: str = "", hint: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.where = where
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.where}: {self.what}" if self.where else self.what
        return f"{text}\n  hint: {self.hint}" if self.hint else text


def user_errors(group: BaseExceptionGroup[BaseException]) -> list[FleetError]:
    """The FleetErrors inside ``group`` (nested groups too), in order: what a user should read.

    anyio task groups wrap whatever a task raised in an ExceptionGroup, even a single
    error. A caller that catches the group unwraps it with this and re-raises or prints
    the user's error; anything else in the group is a bug and stays a traceback.
    """
    found: list[FleetError] = []
    for error in group.exceptions:
        if isinstance(error, FleetError):
            found.append(error)
        elif isinstance(error, BaseExceptionGroup):
            found.extend(user_errors(error))
    return found


def count_interrupts() -> None:
    """Remember SIGINT in this process before raising KeyboardInterrupt as Python does.

    Where SIGINT is ignored (a job started in the background), or has a handler of its own, or off the
    main thread, nothing changes. The ``fleetctl`` entry point installs it, and again after each async
    run (asyncio gives SIGINT back to Python's handler), so ``interrupt_inside`` knows Ctrl-C came even
    when a library swallowed it.
    """
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread sets signal handlers
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        global _interrupted
        _interrupted = True
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, interrupt)


def interrupt_inside(error: BaseException) -> bool:
    """Whether Ctrl-C caused ``error``: through its chain of causes, or SIGINT came (``count_interrupts``).

    A library may catch the interrupt and raise its own error from it: pydantic-core does so when
    Ctrl-C lands while it builds a model's validator lazily, and raises a ``SchemaError``. While it
    builds a serializer it raises one whose text alone names the KeyboardInterrupt, without the
    interrupt as its cause or context. Such an error is the user's interrupt, not a bug.
    """
    if _interrupted:
        return True
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


@contextlib.contextmanager
def unwrapped() -> Iterator[None]:
    """Raise a task group's ExceptionGroup of one exception as that exception.

    A task group that runs one piece of work beside helpers it cancels when the work ends (a
    signal watcher, a Lease's renewal) fails with the work's own error wrapped in a group.
    Around such a task group, this gives the caller that error as if no task group were there:
    a FleetError to print, a KeyboardInterrupt to exit on. A group of several stays a group.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        error: BaseException = group
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        if isinstance(error, BaseExceptionGroup):
            raise
        raise error from error.__cause__


__all__ = ["FleetError", "count_interrupts", "interrupt_inside", "unwrapped", "user_errors"]
