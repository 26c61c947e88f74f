"""Kubernetes' timestamps (RFC 3339) read as aware datetimes in UTC.

The API server writes ``metav1.Time`` as ``2026-12-05T20:01:02Z`` and ``MicroTime`` (Leases,
Events) with microseconds; helm writes nanoseconds and a zone offset. Python's
``datetime.fromisoformat`` reads all of them (it keeps microseconds of a longer fraction), so
one function serves every reader, and an absent or malformed stamp is ``None`` for the caller
to treat as "unknown" rather than an exception in the middle of a status or a gate.
"""

from __future__ import annotations

import datetime
from typing import Any


def parse(value: Any) -> datetime.datetime | None:
    """``value`` as an aware datetime in UTC (a stamp without a zone is UTC); None if empty or not a timestamp."""
    if not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed.astimezone(datetime.UTC) if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


__all__ = ["parse"]
