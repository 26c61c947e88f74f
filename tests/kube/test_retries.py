"""Backoff grows, is capped, and never undercuts what the server asked for."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from fleet.kube import retries


def test_backoff_grows_and_is_capped() -> None:
    policy = retries.RetryPolicy(base=0.1, cap=1.0)
    rng = random.Random(1)
    delays = [policy.delay(attempt=n, retry_after=None, rng=rng) for n in range(1, 10)]
    assert 0.05 <= delays[0] <= 0.1
    assert all(0.5 <= d <= 1.0 for d in delays[5:])


def test_retry_after_is_honoured_and_capped() -> None:
    policy = retries.RetryPolicy(base=0.1, cap=1.0, retry_after_cap=30)
    assert policy.delay(attempt=1, retry_after=7.0) == 7.0
    assert policy.delay(attempt=1, retry_after=600.0) == 30.0


def test_retry_after_header_forms() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retries.retry_after_seconds("3", now=now) == 3.0
    assert retries.retry_after_seconds("Thu, 01 Jan 2026 12:00:05 GMT", now=now) == 5.0
    assert retries.retry_after_seconds("soon", now=now) is None
    assert retries.retry_after_seconds(None, now=now) is None
