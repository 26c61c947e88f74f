"""What holds a disruptive change back, as a pure function: the window first, then the GPU jobs."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from fleet.engine import waits
from fleet.engine.disruptions import Disruption
from fleet.engine.plans import ChangeRules
from fleet.manifests.windows import Window

H = timedelta(hours=1)
SATURDAY = Window(schedule="0 2 * * 6", duration=4 * H, time_zone="Europe/Berlin")
SUNDAY = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
IN_WINDOW = datetime(2026, 12, 12, 2, 0, tzinfo=UTC)


IDLE = Disruption(reason="restarts the driver")
BUSY = Disruption(
    reason="restarts the driver", nodes=frozenset({"gpu-1", "gpu-2"}), claims=("ml/train-0", "ml/train-1")
)


def test_a_safe_change_never_waits() -> None:
    assert waits.decide(None, rules=ChangeRules(windows=(SATURDAY,)), now=SUNDAY) is None


def test_a_disruptive_change_waits_for_the_window_and_says_when_it_opens() -> None:
    wait = waits.decide(IDLE, rules=ChangeRules(windows=(SATURDAY,)), now=SUNDAY)
    assert wait is not None and wait.on == "window"
    assert wait.until is not None and wait.until.astimezone(UTC) == datetime(2026, 12, 12, 1, 0, tzinfo=UTC)
    assert str(wait) == "waits for the maintenance window (opens 2026-12-12 02:00 CET)"
    assert waits.next_look([wait], now=SUNDAY) == (wait.until - SUNDAY).total_seconds()


def test_inside_the_window_an_idle_change_goes() -> None:
    assert waits.decide(IDLE, rules=ChangeRules(windows=(SATURDAY,)), now=IN_WINDOW) is None
    assert waits.decide(IDLE, rules=ChangeRules(), now=SUNDAY) is None  # no windows: any time


def test_an_emergency_skips_the_window_but_not_the_jobs() -> None:
    rules = ChangeRules(windows=(SATURDAY,))
    assert waits.decide(IDLE, rules=rules, now=SUNDAY, emergency="CVE-2026-1234") is None
    wait = waits.decide(BUSY, rules=rules, now=SUNDAY, emergency="CVE-2026-1234")
    assert wait is not None and wait.on == "claims"


def test_policy_wait_holds_while_claims_are_allocated_and_reports_the_deadline() -> None:
    rules = ChangeRules(policy="wait", deadline=6 * 3600)
    wait = waits.decide(BUSY, rules=rules, now=SUNDAY)
    assert wait is not None and not wait.overdue
    assert wait.since == SUNDAY and wait.until == SUNDAY + 6 * H
    assert str(wait) == (
        "waits for 2 allocated claims (ml/train-0, ml/train-1) on nodes gpu-1, gpu-2 to end (policy wait)"
    )
    later = waits.decide(BUSY, rules=rules, now=SUNDAY + 7 * H, since=SUNDAY)
    assert later is not None and later.overdue and later.until is None and later.since == SUNDAY
    assert str(later).endswith("(overdue)")


def test_once_the_claims_end_the_change_goes() -> None:
    assert waits.decide(dataclasses.replace(IDLE, nodes=frozenset({"gpu-1"})), rules=ChangeRules(), now=SUNDAY) is None


def test_policy_force_goes_over_running_jobs_but_not_outside_the_window() -> None:
    assert waits.decide(BUSY, rules=ChangeRules(policy="force"), now=SUNDAY) is None
    wait = waits.decide(BUSY, rules=ChangeRules(policy="force", windows=(SATURDAY,)), now=SUNDAY)
    assert wait is not None and wait.on == "window"


def test_drain_holds_the_change_while_fleet_drains_the_nodes() -> None:
    wait = waits.decide(BUSY, rules=ChangeRules(policy="drain"), now=SUNDAY)
    assert wait is not None and wait.on == "claims"
    assert wait.reason.endswith("to end (policy drain: fleet drains them)")


def test_many_claims_are_summarised() -> None:
    many = dataclasses.replace(
        IDLE, nodes=frozenset(f"n{i}" for i in range(5)), claims=tuple(f"ml/c{i}" for i in range(7))
    )
    wait = waits.decide(many, rules=ChangeRules(), now=SUNDAY)
    assert wait is not None
    assert "7 allocated claims (ml/c0, ml/c1, ml/c2 and 4 more) on nodes n0, n1, n2 and 2 more" in wait.reason
