"""Findings: everything wrong with a revision, as data.

The loader, the models, the policy rules, CEL and the inventory check all
report the same record, so ``fleetctl validate`` can print them in one sorted
list (text, JSON or GitHub annotations) and the controller can put the first
one in the status. A finding never stops the others being found: a revision
with errors is reported whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from fleet.manifests.locations import Location

Severity = Literal["error", "warning"]


@dataclass(frozen=True, order=True)
class Finding:
    """One problem: which rule, where, what, and what to do about it.

    ``object`` is ``Kind/namespace/name`` (or ``Kind/name``) when the finding
    is about an object; ``cluster`` names the cluster(s) whose overlays made
    it appear, empty when it holds for the revision as written.
    """

    location: Location
    rule: str
    message: str
    severity: Severity = "error"
    hint: str = ""
    object: str = ""
    cluster: str = field(default="")

    def __str__(self) -> str:
        text = f"{self.location} {self.rule} {self.message}"
        return f"{text}\n  hint: {self.hint}" if self.hint else text


def has_errors(findings: tuple[Finding, ...] | list[Finding]) -> bool:
    """Whether any finding is an error (warnings do not fail a revision)."""
    return any(f.severity == "error" for f in findings)


__all__ = ["Finding", "Severity", "has_errors"]
