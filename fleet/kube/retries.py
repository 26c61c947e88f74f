"""When to retry a Kubernetes request, and how long to wait first.

An API server under load answers 429 with ``Retry-After``; during an upgrade or an
etcd leader change it answers 5xx or drops connections. Those are transient: a
GitOps engine that gave up on the first one would flap between "failed" and "ok".
Everything else (404, 409, 403, 422...) is an answer and is returned at once.

The waits are exponential with full jitter (so many clients do not retry in step),
capped, and never shorter than what the server asked for in ``Retry-After``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRIABLE_STATUS = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` in total (1 = no retry); waits grow from ``base`` up to ``cap`` seconds."""

    attempts: int = 6
    base: float = 0.1
    cap: float = 5.0
    retry_after_cap: float = 30.0

    def delay(self, *, attempt: int, retry_after: float | None, rng: random.Random | None = None) -> float:
        """Seconds to wait before attempt number ``attempt + 1`` (``attempt`` counts from 1)."""
        ceiling = min(self.cap, self.base * (2 ** (attempt - 1)))
        jittered = (rng or random).uniform(ceiling / 2, ceiling)
        if retry_after is not None:
            return max(jittered, min(retry_after, self.retry_after_cap))
        return jittered


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: either delta-seconds or an HTTP date; None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


__all__ = ["RETRIABLE_STATUS", "RetryPolicy", "retry_after_seconds"]
