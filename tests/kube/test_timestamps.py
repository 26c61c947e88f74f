"""``fleet.kube.timestamps``: the API server's and helm's RFC 3339 stamps, read as UTC (pure)."""

from __future__ import annotations

import datetime

import pytest

from fleet.kube import timestamps

UTC = datetime.UTC


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        ("2026-12-05T20:01:02Z", datetime.datetime(2026, 12, 5, 20, 1, 2, tzinfo=UTC)),  # metav1.Time
        ("2026-12-05T20:01:02.123456Z", datetime.datetime(2026, 12, 5, 20, 1, 2, 123456, tzinfo=UTC)),  # MicroTime
        ("2026-12-05T20:01:02.123456789Z", datetime.datetime(2026, 12, 5, 20, 1, 2, 123456, tzinfo=UTC)),  # helm
        ("2026-12-05T21:01:02.5+01:00", datetime.datetime(2026, 12, 5, 20, 1, 2, 500000, tzinfo=UTC)),
        ("2026-12-05T20:01:02", datetime.datetime(2026, 12, 5, 20, 1, 2, tzinfo=UTC)),  # no zone: UTC
    ],
)
def test_a_stamp_is_an_aware_datetime_in_utc(stamp: str, expected: datetime.datetime) -> None:
    parsed = timestamps.parse(stamp)
    assert parsed == expected
    assert parsed is not None and parsed.utcoffset() == datetime.timedelta(0)


@pytest.mark.parametrize("value", [None, "", "yesterday", "2026-13-01T00:00:00Z"])
def test_an_absent_or_malformed_stamp_is_none(value: object) -> None:
    assert timestamps.parse(value) is None
