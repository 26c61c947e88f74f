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


__all__ = ["FleetError"]
