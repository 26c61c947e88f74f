"""Reading commit statuses: each API's documented request and answer (pure), and the reader's cache.

The reader against a real host is in ``tests/forge/test_waves.py`` (Gitea); here GitHub's
and GitLab's documented shapes are checked as data, and the cache against an
``httpx.MockTransport`` that counts the requests.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from fleet.hosts import errors, providers, readers
from fleet.hosts.providers import Posted, Target

pytestmark = pytest.mark.anyio

SHA = "0123456789abcdef0123456789abcdef01234567"
GITHUB = Target("github", "https://api.github.com", "org/fleet")
GITLAB = Target("gitlab", "https://gitlab.example.com/api/v4", "group/sub/fleet")
GITEA = Target("gitea", "https://codeberg.org/api/v1", "org/fleet")


def test_each_provider_lists_a_commits_statuses_as_documented() -> None:
    github = providers.listing(GITHUB, SHA, page=2)
    assert (github.method, github.url) == (
        "GET",
        f"https://api.github.com/repos/org/fleet/commits/{SHA}/statuses?per_page=100&page=2",
    )
    assert github.headers["Accept"] == "application/vnd.github+json" and github.headers["X-GitHub-Api-Version"]
    gitlab = providers.listing(GITLAB, SHA)
    assert gitlab.url == (
        f"https://gitlab.example.com/api/v4/projects/group%2Fsub%2Ffleet/repository/commits/{SHA}/statuses"
        "?all=true&per_page=100&page=1"
    )
    gitea = providers.listing(GITEA, SHA)
    assert gitea.url == f"https://codeberg.org/api/v1/repos/org/fleet/commits/{SHA}/statuses?limit=50&page=1"
    assert not github.body and not gitlab.body and not gitea.body


def test_answers_are_read_into_fleets_three_states() -> None:
    github = json.dumps([
        {"id": 2, "state": "success", "context": "fleet/gpu-west", "description": "applied 12 objects",
         "created_at": "2026-12-06T09:00:00Z"},
        {"id": 1, "state": "error", "context": "ci/build", "description": "", "created_at": "2026-12-06T08:00:00Z"},
    ]).encode()  # fmt: skip
    assert providers.posted("github", github, sha=SHA) == [
        Posted(SHA, "fleet/gpu-west", "success", "applied 12 objects", datetime(2026, 12, 6, 9, tzinfo=UTC), 2),
        Posted(SHA, "ci/build", "failure", "", datetime(2026, 12, 6, 8, tzinfo=UTC), 1),
    ]
    gitlab = json.dumps([
        {"id": 7, "status": "failed", "name": "fleet/gpu-west", "description": "x.yaml:1:1 schema: y",
         "created_at": "2026-12-06T09:00:00.000+01:00"},
        {"id": 8, "status": "running", "name": "fleet/gpu-north", "created_at": "2026-12-06T09:00:00.000Z"},
    ]).encode()  # fmt: skip
    failed, running = providers.posted("gitlab", gitlab, sha=SHA)
    assert (failed.context, failed.state, failed.at) == (
        "fleet/gpu-west",
        "failure",
        datetime(2026, 12, 6, 8, tzinfo=UTC),
    )
    assert running.state == "pending" and running.description == ""
    gitea = b'[{"id": 3, "status": "warning", "context": "fleet/x", "created_at": "2026-12-06T09:00:00+00:00"}]'
    assert [p.state for p in providers.posted("gitea", gitea, sha=SHA)] == ["pending"]
    with pytest.raises(errors.HostError, match="not a JSON list"):
        providers.posted("github", b"<html>sign in</html>", sha=SHA, where="GET x")


def at(hour: int) -> datetime:
    return datetime(2026, 12, 6, hour, tzinfo=UTC)


def test_a_state_stands_from_when_it_was_first_posted() -> None:
    west = "fleet/gpu-west"
    history = [
        Posted(SHA, west, "pending", "applying", at(7), 1),
        Posted(SHA, west, "success", "applied", at(8), 2),
        Posted(SHA, west, "success", "applied", at(9), 3),  # a restarted controller posts it again
        Posted(SHA, "fleet/gpu-east", "failure", "boom", at(10), 4),
    ]
    found = providers.standing(list(reversed(history)), context=west)
    assert found is not None and (found.state, found.at, found.id) == ("success", at(8), 3)
    again = providers.standing([*history, Posted(SHA, west, "failure", "broken", at(11), 5)], context=west)
    assert again is not None and (again.state, again.at, again.description) == ("failure", at(11), "broken")
    assert providers.standing(history, context="fleet/gpu-north") is None


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_answers_are_kept_for_the_ttl_in_a_bounded_cache(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("secret-token\n")
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = [{"id": 1, "status": "success", "context": "fleet/gpu-west", "created_at": "2026-12-06T09:00:00Z"}]
        return httpx.Response(200, json=body)

    clock = Clock()
    reader = readers.Reader(
        target=GITEA, token_file=token, ttl=15.0, limit=2, clock=clock, transport=httpx.MockTransport(answer)
    )
    first = await reader.statuses(SHA, contexts=["fleet/gpu-west", "fleet/gpu-north"])
    assert first["fleet/gpu-west"] is not None and first["fleet/gpu-west"].state == "success"
    assert first["fleet/gpu-north"] is None
    assert seen[0].headers["authorization"] == "token secret-token"
    clock.now += 10
    assert await reader.statuses(SHA, contexts=["fleet/gpu-west"]) == {"fleet/gpu-west": first["fleet/gpu-west"]}
    assert len(seen) == 1, "read within the ttl: kept"
    clock.now += 10
    await reader.statuses(SHA, contexts=["fleet/gpu-west"])
    assert len(seen) == 2, "past the ttl: read again"
    await reader.statuses("f" * 40, contexts=["fleet/gpu-west"])
    assert reader.size() == 2, "bounded by its limit"


async def test_a_refused_read_says_which_scope_reading_needs(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("secret-token\n")
    refuse = httpx.MockTransport(lambda r: httpx.Response(401, json={"message": "bad token secret-token"}))
    reader = readers.Reader(target=GITHUB, token_file=token, transport=refuse)
    with pytest.raises(errors.Unauthorized) as caught:
        await reader.statuses(SHA, contexts=["fleet/gpu-west"])
    assert "commit statuses read" in caught.value.hint and "secret-token" not in str(caught.value)
    assert reader.size() == 0, "a failed read is not kept"
