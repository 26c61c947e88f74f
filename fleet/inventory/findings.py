"""Findings of the satisfiability check, as plain data the validator turns into file:line.

A finding names *where inside the claim* it applies — request (and
firstAvailable subrequest) index, selector index, whether the selector is the
request's or its DeviceClass's, and the character offset inside the
expression — so ``fleetctl validate`` can attach the YAML file, line and
column of that exact field without this layer knowing about files.

Rule ids:

==========================  =========================================================
``cel-compile``             a selector does not compile (offset = first issue)
``cel-unknown-attribute``   a selector reads an attribute/capacity no device publishes
``cel-runtime-error``       a selector fails on some devices (pods stay Pending there)
``deviceclass-unknown``     the request names a DeviceClass that is not known
``claim-unsatisfiable``     no node of the cluster can satisfy the claim
``claim-invalid``           the claim's devices section is not a valid v1 shape
==========================  =========================================================
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

Severity = Literal["error", "warning"]
Source = Literal["request", "class", "constraint", "claim"]


@dataclasses.dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    hint: str = ""
    severity: Severity = "error"
    request: str | None = None  # request name, "req/sub" for a firstAvailable entry
    request_index: int | None = None  # index in spec.devices.requests
    subrequest_index: int | None = None  # index in firstAvailable
    source: Source = "claim"
    selector_index: int | None = None  # index in selectors (of the request or of the class)
    device_class: str | None = None
    constraint_index: int | None = None
    offset: int | None = None  # character offset inside the selector expression
    line: int | None = None  # 1-based, inside the expression
    column: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


__all__ = ["Finding", "Severity", "Source"]
