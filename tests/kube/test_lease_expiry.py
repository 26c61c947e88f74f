"""When a Lease counts as expired (``leases.Observer``), as pure functions of the record and the clocks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleet.kube import leases


def record(*, version: str = "1", renewed_ago: float | None = 0.0, duration: int = 15) -> leases.Record:
    renewed = None if renewed_ago is None else datetime.now(UTC) - timedelta(seconds=renewed_ago)
    return leases.Record(holder="a", renewed=renewed, duration=duration, resource_version=version)


def test_a_renewal_seen_at_once_expires_one_duration_after_it_was_written() -> None:
    assert leases.Observer().remaining(record(renewed_ago=0.4)) == pytest.approx(14.6, abs=0.05)


def test_the_age_by_the_holders_clock_is_trusted_up_to_the_skew_only() -> None:
    # A clock ahead of the holder's (or a record first read long after it was written)
    # makes a candidate early by at most SKEW, not by the whole difference.
    assert leases.Observer().remaining(record(renewed_ago=9.0)) == pytest.approx(15 - leases.SKEW, abs=0.05)
    # A clock behind the holder's makes it wait the whole duration from its own read.
    assert leases.Observer().remaining(record(renewed_ago=-30.0)) == pytest.approx(15.0, abs=0.05)
    assert leases.Observer().remaining(record(renewed_ago=None)) == pytest.approx(15.0, abs=0.05)


def test_the_same_record_read_again_keeps_its_first_sighting_and_a_new_one_restarts_it() -> None:
    observer = leases.Observer()
    first = observer.remaining(record(version="7", renewed_ago=0.5))
    # read again later, still unchanged: the clock keeps running from the first sighting
    assert observer.remaining(record(version="7", renewed_ago=5.0)) <= first
    assert observer.remaining(record(version="8", renewed_ago=0.0)) == pytest.approx(15.0, abs=0.05)


def test_long_dead_and_zero_duration_records_are_free_at_once() -> None:
    assert leases.Observer().expired(record(renewed_ago=31.0))  # older than twice the duration
    assert leases.Observer().expired(record(duration=0))
    assert not leases.Observer().expired(record(renewed_ago=29.0))
