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


__all__ = ["FleetError", "user_errors"]
