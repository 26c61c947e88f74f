"""What the controller makes of the earlier waves' commit statuses (pure, and a refused read)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from fleet import hosts
from fleet.controller import rollouts
from fleet.engine.plans import ChangeRules
from fleet.hosts.providers import Posted

pytestmark = pytest.mark.anyio

R, D = "a" * 40, "d" * 40
WEST = "fleet/gpu-west"
RULES = ChangeRules(wave=2, earlier=(("gpu-west",),), bake=5.0)


def at(hour: int) -> datetime:
    return datetime(2026, 12, 6, hour, tzinfo=UTC)


def test_a_success_on_the_revision_or_a_descendant_counts_the_longest_standing_first() -> None:
    on_r = Posted(R, WEST, "success", "applied", at(9))
    on_d = Posted(D, WEST, "success", "applied", at(8))
    got = rollouts.combine(R, found=[{WEST: on_r}, {WEST: on_d}], clusters=["gpu-west"])
    assert got.clusters["gpu-west"].sha == D and got.clusters["gpu-west"].since == at(8)
    failed_d = Posted(D, WEST, "failure", "boom", at(10))
    got = rollouts.combine(R, found=[{WEST: on_r}, {WEST: failed_d}], clusters=["gpu-west"])
    assert got.clusters["gpu-west"].state == "success", "the revision itself succeeded there"
    got = rollouts.combine(R, found=[{WEST: None}, {WEST: failed_d}], clusters=["gpu-west"])
    assert (got.clusters["gpu-west"].state, got.clusters["gpu-west"].sha) == ("failure", D)
    assert rollouts.combine(R, found=[{WEST: None}], clusters=["gpu-west"]).clusters == {}


async def test_statuses_off_or_unreadable_is_an_error_the_engine_holds_on(tmp_path: Path) -> None:
    off = await rollouts.read(reader=None, rules=RULES, revision=R)
    assert "--commit-status-token-file" in off.error
    token = tmp_path / "token"
    token.write_text("forge-token-123\n")
    down = httpx.MockTransport(lambda r: httpx.Response(503, json={"message": "maintenance"}))
    target = hosts.Target("gitea", "https://forge.example.com/api/v1", "org/fleet")
    reader = hosts.Reader(target=target, token_file=token, transport=down)
    got = await rollouts.read(reader=reader, rules=RULES, revision=R)
    assert got.error.startswith("the host answered 503: maintenance (GET https://forge.example.com/api/v1/repos/")


def test_status_rollout_says_the_wave_what_it_follows_and_what_it_waits_for() -> None:
    assert rollouts.status(RULES, gate=None) == {
        "wave": 2, "after": ["gpu-west"], "bake": "5s", "waitsFor": "", "until": "", "held": 0
    }  # fmt: skip
