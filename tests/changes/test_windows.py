"""Maintenance windows as pure functions: open, closed, next opening, across zones and DST."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleet.manifests import windows
from fleet.manifests.windows import Window, WindowError

H = timedelta(hours=1)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


SATURDAY_BERLIN = Window(schedule="0 2 * * 6", duration=4 * H, time_zone="Europe/Berlin")


def test_a_window_is_open_from_its_start_for_its_duration_in_its_own_zone() -> None:
    # Saturday 2026-12-12 02:00 in Berlin (winter, UTC+1) is 01:00 UTC.
    assert SATURDAY_BERLIN.closes(utc(2026, 12, 12, 0, 59)) is None
    assert SATURDAY_BERLIN.closes(utc(2026, 12, 12, 1, 0)) == utc(2026, 12, 12, 5, 0)
    assert SATURDAY_BERLIN.closes(utc(2026, 12, 12, 4, 59)) == utc(2026, 12, 12, 5, 0)
    assert SATURDAY_BERLIN.closes(utc(2026, 12, 12, 5, 0)) is None
    # In summer (UTC+2) the same window opens at 00:00 UTC.
    assert SATURDAY_BERLIN.closes(utc(2026, 7, 4, 0, 0)) == utc(2026, 7, 4, 4, 0)
    assert SATURDAY_BERLIN.closes(utc(2026, 7, 3, 23, 59)) is None


def test_next_open_is_now_inside_a_window_and_the_next_start_outside() -> None:
    inside = utc(2026, 12, 12, 2, 0)
    assert SATURDAY_BERLIN.next_open(inside) == inside
    opens = SATURDAY_BERLIN.next_open(utc(2026, 12, 6, 9, 0))
    assert opens is not None and opens.astimezone(UTC) == utc(2026, 12, 12, 1, 0)
    assert opens.tzinfo is not None and str(opens.tzinfo) == "Europe/Berlin"


def test_a_start_in_the_spring_forward_gap_happens_when_the_clock_jumps() -> None:
    # 2027-03-28: Berlin's clocks go from 02:00 to 03:00; cron runs a 02:30 job at 03:00.
    night = Window(schedule="30 2 * * *", duration=H, time_zone="Europe/Berlin")
    opens = night.next_open(utc(2027, 3, 27, 23, 0))
    assert opens is not None and opens.astimezone(UTC) == utc(2027, 3, 28, 1, 0)


def test_of_several_windows_the_earliest_opening_wins() -> None:
    weekday = Window(schedule="0 22 * * 1-5", duration=2 * H, time_zone="UTC")
    at = utc(2026, 12, 7, 12, 0)  # a Monday
    assert windows.next_opening([SATURDAY_BERLIN, weekday], at) == utc(2026, 12, 7, 22, 0)
    assert windows.open_window([SATURDAY_BERLIN, weekday], utc(2026, 12, 7, 23, 0)) is weekday
    assert windows.open_window([SATURDAY_BERLIN, weekday], at) is None
    assert windows.next_opening([], at) is None


def test_a_window_longer_than_its_period_is_always_open() -> None:
    always = Window(schedule="0 * * * *", duration=2 * H)
    for minute in range(0, 180, 17):
        assert always.closes(utc(2026, 12, 6) + timedelta(minutes=minute)) is not None


@pytest.mark.parametrize(
    ("text", "seconds"), [("4h", 14400), ("90m", 5400), ("1h30m", 5400), ("45s", 45), ("2h0m5s", 7205)]
)
def test_durations_read_as_kubernetes_writes_them(text: str, seconds: int) -> None:
    assert windows.parse_duration(text).total_seconds() == seconds
    assert windows.parse_duration(windows.format_duration(windows.parse_duration(text))) == windows.parse_duration(text)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0m", "is zero"),
        ("0h0m", "is zero"),
        ("-1h", "is negative"),
        ("4 hours", "not a duration"),
        ("", "not a duration"),
        ("1d", "not a duration"),
        ("99999999999999999999h", "longer than a year"),
        ("8785h", "longer than a year"),
    ],
)
def test_bad_durations_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(WindowError, match=says) as raised:
        windows.parse_duration(text)
    assert raised.value.hint


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        ("0 0 30 2 *", "never opens"),
        ("0 0 31 4,6,9,11 *", "never opens"),
        ("0 2 * *", "4 fields, not 5"),
        ("0 0 0 2 * *", "6 fields, not 5"),
        ("61 2 * * *", "bad minute"),
        ("0 0 32 * *", "bad day-of-month"),
    ],
)
def test_bad_schedules_say_what_is_wrong(schedule: str, says: str) -> None:
    with pytest.raises(WindowError, match=says):
        windows.check_schedule(schedule)


def test_schedules_that_open_rarely_still_open() -> None:
    assert windows.check_schedule("0 0 29 2 *") == "0 0 29 2 *"  # leap days
    assert windows.check_schedule("0 0 29 2 1") == "0 0 29 2 1"  # day-of-month OR Monday


def test_an_unknown_zone_is_refused_with_a_hint() -> None:
    with pytest.raises(WindowError, match="unknown time zone 'Europe/Berlln'") as raised:
        windows.zone("Europe/Berlln")
    assert "IANA" in raised.value.hint
    with pytest.raises(WindowError):
        windows.zone("../etc/passwd")
