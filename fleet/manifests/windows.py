"""Maintenance windows and durations: what a Cluster's ``spec.maintenance`` means in time.

A window is a cron schedule (when it opens), a duration (how long it stays open) and an IANA
time zone (in which the schedule is read). It is open at ``t`` when the schedule's latest start
at or before ``t`` is less than ``duration`` ago. Schedules are the five fields of Debian's cron
(day-of-month OR day-of-week when neither is ``*``), evaluated by cronsim in the window's own
zone, with cron's handling of daylight saving time: a start that falls in a spring-forward gap
happens when the clock jumps, one in a repeated hour happens once. So ``0 2 * * 6`` in
``Europe/Berlin`` opens at 02:00 Berlin time every Saturday, summer and winter, and the
controller's own zone (UTC in its image) never matters.

Durations are written as Kubernetes writes them (``4h``, ``90m``, ``1h30m``, ``45s``), never zero
or negative. Everything here is pure: the models validate with it (a window that never opens, an
unknown zone and a zero duration are findings with their line), and the engine asks it whether a
disruptive change may go now or when the next window opens.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import cronsim

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
LONGEST = timedelta(days=366)
"""The longest duration, deadline or bake: longer ones are typos (and beyond what a timedelta holds)."""
HORIZON = timedelta(days=366 * 5)
"""A window whose schedule starts no time within this span from now never opens, for all practical purposes."""


class WindowError(ValueError):
    """A schedule, duration or zone that cannot be used: ``str`` says what, ``hint`` what to write."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def parse_duration(text: str, *, what: str = "duration") -> timedelta:
    """``4h``, ``90m``, ``1h30m``, ``45s`` → a positive timedelta; WindowError otherwise."""
    if text.strip().startswith("-"):
        raise WindowError(f"{what} {text!r} is negative", hint=f"a {what} must be longer than zero, e.g. 1h")
    found = _DURATION.match(text.strip()) if text.strip() else None
    if found is None or not any(found.groups()):
        raise WindowError(
            f"{what} {text!r} is not a duration",
            hint="write hours, minutes and seconds as Kubernetes does, e.g. 4h, 90m or 1h30m",
        )
    hours, minutes, seconds = (int(g or 0) for g in found.groups())
    if hours * 3600 + minutes * 60 + seconds > LONGEST.total_seconds():
        raise WindowError(
            f"{what} {text!r} is longer than a year",
            hint=f"a {what} is at most {int(LONGEST.total_seconds()) // 3600}h",
        )
    value = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    if value <= timedelta(0):
        raise WindowError(f"{what} {text!r} is zero", hint=f"a {what} must be longer than zero, e.g. 1h")
    return value


def format_duration(value: timedelta) -> str:
    """The shortest ``1h30m`` form of ``value`` (whole seconds)."""
    total = int(value.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{seconds}s" if seconds else "")
    return text or "0s"


@functools.lru_cache(maxsize=64)
def zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA zone ``name``; WindowError for one the tz database does not know."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise WindowError(
            f"unknown time zone {name!r}",
            hint="use an IANA zone name such as UTC, Europe/Berlin or America/New_York",
        ) from exc


@dataclass(frozen=True)
class Window:
    """One maintenance window: opens at each start of ``schedule`` (read in ``time_zone``) for ``duration``."""

    schedule: str
    duration: timedelta
    time_zone: str = "UTC"

    def __str__(self) -> str:
        return f"{self.schedule} ({self.time_zone}) for {format_duration(self.duration)}"

    def _starts(self, at: datetime, *, reverse: bool) -> datetime | None:
        local = at.astimezone(zone(self.time_zone))
        try:
            return next(iter(cronsim.CronSim(self.schedule, local, reverse=reverse)))
        except StopIteration:
            return None

    def last_start(self, at: datetime) -> datetime | None:
        """The schedule's latest start at or before ``at`` (None: none in the last 50 years)."""
        return self._starts(at + timedelta(seconds=1), reverse=True)

    def closes(self, at: datetime) -> datetime | None:
        """When the window open at ``at`` closes; None when it is closed at ``at``."""
        start = self.last_start(at)
        if start is None:
            return None
        end = start + self.duration
        return end if at < end else None

    def next_open(self, at: datetime) -> datetime | None:
        """``at`` when the window is open then, else its next start (None: none within 50 years)."""
        if self.closes(at) is not None:
            return at
        return self._starts(at, reverse=False)


def parse_window(*, schedule: str, duration: str, time_zone: str = "UTC") -> Window:
    """A Window from its manifest fields, each checked (WindowError says which and what to write)."""
    window = Window(schedule=check_schedule(schedule), duration=parse_duration(duration), time_zone=time_zone)
    zone(time_zone)
    return window


def check_schedule(schedule: str) -> str:
    """``schedule`` when it is five cron fields that start within ``HORIZON``; WindowError otherwise."""
    fields = schedule.split()
    if len(fields) != 5:
        raise WindowError(
            f"schedule {schedule!r} has {len(fields)} fields, not 5",
            hint="write minute hour day-of-month month day-of-week, e.g. '0 2 * * 6' for Saturdays at 02:00",
        )
    now = datetime.now(UTC)
    try:
        first = next(iter(cronsim.CronSim(schedule, now)))
    except cronsim.CronSimError as exc:
        if _parses(" ".join([*fields[:3], "*", fields[4]])):
            first = None  # each field is valid alone: the days never come in the months named
        else:
            raise WindowError(
                f"schedule {schedule!r}: {str(exc).lower()}",
                hint="write minute hour day-of-month month day-of-week, e.g. '0 2 * * 6' for Saturdays at 02:00",
            ) from exc
    except StopIteration:
        first = None
    if first is None or first - now > HORIZON:
        raise WindowError(
            f"schedule {schedule!r} never opens (no start in the next {HORIZON.days // 366} years)",
            hint="check the day of month against the month (e.g. 30 February never comes)",
        )
    return schedule


def _parses(schedule: str) -> bool:
    try:
        cronsim.CronSim(schedule, datetime.now(UTC))
    except cronsim.CronSimError:
        return False
    return True


def open_window(windows: Iterable[Window], at: datetime) -> Window | None:
    """The first of ``windows`` open at ``at``, if any."""
    for window in windows:
        if window.closes(at) is not None:
            return window
    return None


def next_opening(windows: Iterable[Window], at: datetime) -> datetime | None:
    """The earliest time at or after ``at`` at which one of ``windows`` is open (``at`` when one is)."""
    found = [t for t in (w.next_open(at) for w in windows) if t is not None]
    return min(found) if found else None


__all__ = [
    "HORIZON",
    "LONGEST",
    "Window",
    "WindowError",
    "check_schedule",
    "format_duration",
    "next_opening",
    "open_window",
    "parse_duration",
    "parse_window",
    "zone",
]
