"""Rollout waves as a pure function: what the earlier waves' commit statuses let a later wave do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from fleet.engine import pipelines, waits
from fleet.engine.plans import ChangeRules
from tests.changes.test_validate import repo_with
from tests.changes.test_waits import BUSY, IDLE, SATURDAY

SHA = "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"
NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
H = timedelta(hours=1)
EAST = ChangeRules(wave=2, earlier=(("gpu-west",),), bake=3600.0)


def reported(**clusters: waits.Report) -> waits.Reported:
    return waits.Reported(revision=SHA, clusters={k.replace("_", "-"): v for k, v in clusters.items()})


def success(at: datetime, *, sha: str = SHA) -> waits.Report:
    return waits.Report(state="success", sha=sha, since=at, description="applied 12 objects")


def test_a_later_wave_waits_until_the_earlier_one_reports_success() -> None:
    wait = waits.decide(IDLE, rules=EAST, now=NOW, reported=reported())
    assert wait is not None and wait.on == "wave" and wait.until is None
    assert wait.reason == "wave 1 (gpu-west): gpu-west has not reported success for 1a2b3c4d5e6f"
    pending = waits.Report(state="pending", sha=SHA, since=NOW, description="applying 12 objects")
    wait = waits.decide(IDLE, rules=EAST, now=NOW, reported=reported(gpu_west=pending))
    assert wait is not None and wait.reason.endswith('1a2b3c4d5e6f (pending: "applying 12 objects")')


def test_a_success_bakes_then_lets_the_change_go() -> None:
    wait = waits.decide(IDLE, rules=EAST, now=NOW, reported=reported(gpu_west=success(NOW - 0.25 * H)))
    assert wait is not None and wait.on == "wave"
    assert wait.until == NOW + 0.75 * H
    assert wait.reason == "wave 1 baking until 2026-12-06 09:45 UTC"
    assert waits.next_look([wait], now=NOW) == 0.75 * 3600
    assert waits.decide(IDLE, rules=EAST, now=NOW, reported=reported(gpu_west=success(NOW - H))) is None


def test_a_failure_halts_the_later_waves_and_names_the_finding() -> None:
    failed = waits.Report(state="failure", sha=SHA, since=NOW, description="teams/ml/team.yaml:6:3 schema: bogus")
    wait = waits.decide(IDLE, rules=EAST, now=NOW, reported=reported(gpu_west=failed))
    assert wait is not None and wait.until is None
    assert wait.reason == 'wave 1 failed: gpu-west failure "teams/ml/team.yaml:6:3 schema: bogus": later waves halt'


def test_every_cluster_of_every_earlier_wave_counts_and_a_failure_is_named_first() -> None:
    third = ChangeRules(wave=3, earlier=(("gpu-west", "gpu-north"), ("gpu-east",)), bake=3600.0)
    down = waits.Report(state="failure", sha=SHA, since=NOW, description="failed: boom")
    wait = waits.decide(IDLE, rules=third, now=NOW, reported=reported(gpu_west=success(NOW - 2 * H), gpu_east=down))
    assert wait is not None and wait.reason.startswith("wave 2 failed: gpu-east failure")
    wait = waits.decide(IDLE, rules=third, now=NOW, reported=reported(gpu_west=success(NOW - 2 * H)))
    assert wait is not None and wait.reason.startswith("wave 1 (gpu-west, gpu-north): gpu-north has not reported")
    everyone = reported(gpu_west=success(NOW - 2 * H), gpu_north=success(NOW - 3 * H), gpu_east=success(NOW - 0.5 * H))
    wait = waits.decide(IDLE, rules=third, now=NOW, reported=everyone)
    assert wait is not None and wait.reason == "wave 2 baking until 2026-12-06 09:30 UTC"


def test_a_success_on_a_descendant_counts() -> None:
    later = success(NOW - 2 * H, sha="ffff" + SHA[4:])
    assert waits.decide(IDLE, rules=EAST, now=NOW, reported=reported(gpu_west=later)) is None


def test_statuses_that_cannot_be_read_hold_the_change() -> None:
    broken = waits.Reported(revision=SHA, error="GET …/statuses: the token was refused (401)")
    wait = waits.decide(IDLE, rules=EAST, now=NOW, reported=broken)
    assert wait is not None and wait.on == "wave"
    assert wait.reason == (
        "wave 1 (gpu-west): the git host's commit statuses cannot be read "
        "(GET …/statuses: the token was refused (401)): held until they can"
    )


def test_the_first_wave_and_clusters_in_no_wave_do_not_wait_for_waves() -> None:
    for rules in (ChangeRules(wave=1, bake=3600.0), ChangeRules()):
        assert waits.decide(IDLE, rules=rules, now=NOW, reported=reported()) is None


def test_waves_come_before_the_window_and_the_jobs() -> None:
    rules = ChangeRules(wave=2, earlier=(("gpu-west",),), bake=3600.0, windows=(SATURDAY,))
    wait = waits.decide(BUSY, rules=rules, now=NOW, reported=reported())
    assert wait is not None and wait.on == "wave"
    wait = waits.decide(BUSY, rules=rules, now=NOW, reported=reported(gpu_west=success(NOW - H)))
    assert wait is not None and wait.on == "window"


def test_an_emergency_skips_the_waves_as_it_skips_the_window_but_not_the_jobs() -> None:
    assert waits.decide(IDLE, rules=EAST, now=NOW, reported=reported(), emergency="CVE-2026-1234") is None
    wait = waits.decide(BUSY, rules=EAST, now=NOW, reported=reported(), emergency="CVE-2026-1234")
    assert wait is not None and wait.on == "claims"


def test_without_statuses_read_waves_are_not_checked_and_a_safe_change_never_waits() -> None:
    assert waits.decide(IDLE, rules=EAST, now=NOW) is None
    assert waits.decide(None, rules=EAST, now=NOW, reported=reported()) is None


def test_fleet_yaml_gives_each_cluster_its_wave_the_earlier_ones_and_the_bake(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, cluster="", fleet="  rollout:\n    waves: [[gpu-west], [gpu-east]]\n    bake: 30m\n")
    east = pipelines.check_and_plan(repo, cluster="gpu-east", revision="r1").plan
    west = pipelines.check_and_plan(repo, cluster="gpu-west", revision="r1").plan
    assert east is not None and west is not None
    assert (east.rules.wave, east.rules.earlier, east.rules.bake) == (2, (("gpu-west",),), 1800.0)
    assert (west.rules.wave, west.rules.earlier) == (1, ())
    plain = pipelines.check_and_plan(repo_with(tmp_path / "plain", cluster="", fleet=""), cluster="gpu-east").plan
    assert plain is not None and (plain.rules.wave, plain.rules.earlier, plain.rules.bake) == (0, (), 0.0)
