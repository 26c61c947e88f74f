"""Posting commit statuses to a loopback server that checks each request as each API documents it.

GitHub, GitLab and Gitea are SaaS APIs (or servers) that cannot be reached from here, so
``tests.hosts.apis.StatusAPI`` is a test double: a real HTTP server on 127.0.0.1 that
records every request and answers what the test scripts, including 401, 403, 404, 422
and rate limits (429, and GitHub's 403 with ``x-ratelimit-remaining: 0``, with
``Retry-After`` and ``X-RateLimit-Reset``). The poster's sleeps and clock are the test's,
so waits are checked as the values asked for, not timed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from fleet.hosts import Poster, providers
from fleet.hosts.providers import CommitStatus, Target
from tests.hosts.apis import Answer, StatusAPI

pytestmark = pytest.mark.anyio

SHA = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
TOKEN = "tok-" + "s3cr3t" * 4
NOW = 1_900_000_000.0


@dataclass
class Clock:
    """The poster's clock and sleep: a sleep moves the clock and is recorded, nothing waits."""

    now: float = NOW
    slept: list[float] = field(default_factory=list)

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds
        await anyio.lowlevel.checkpoint()


@dataclass
class Run:
    poster: Poster
    api: StatusAPI
    clock: Clock
    results: list[str]

    async def settle(self) -> None:
        with anyio.fail_after(20):
            await self.poster.idle()


@asynccontextmanager
async def posting(
    tmp_path: Path, provider: providers.Provider = "github", *, api: StatusAPI | None = None, **kwargs: Any
) -> AsyncIterator[Run]:
    api = api or StatusAPI()
    token_file = tmp_path / "token"
    if not token_file.exists():
        token_file.write_text(TOKEN + "\n")
    clock = Clock()
    results: list[str] = []
    with api.serving() as base:
        repository = "group/sub/fleet" if provider == "gitlab" else "org/fleet"
        where = Target(provider=provider, api_url=f"{base}{providers.API_PATHS[provider]}", repository=repository)
        kwargs.setdefault("debounce", 0.0)
        poster = Poster(
            target=where, token_file=token_file, on_result=results.append, sleep=clock.sleep, clock=clock.time, **kwargs
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(poster.run)
            yield Run(poster=poster, api=api, clock=clock, results=results)
            tg.cancel_scope.cancel()


def status(state: providers.State = "success", description: str = "applied 412 objects", **kw: str) -> CommitStatus:
    return CommitStatus(sha=kw.get("sha", SHA), context="fleet/gpu-east", state=state, description=description,
                        target_url=kw.get("target_url", ""))  # fmt: skip


async def test_github_request_as_documented(tmp_path: Path) -> None:
    async with posting(tmp_path, "github") as run:
        run.poster.submit(
            status("failure", "teams/ml/t.yaml:12:7 cel-compile: undeclared reference", target_url="https://grafana/x")
        )
        await run.settle()
    [got] = run.api.received
    assert got.method == "POST"
    assert got.path == f"/api/v3/repos/org/fleet/statuses/{SHA}"
    assert got.headers["authorization"] == f"Bearer {TOKEN}"
    assert got.headers["accept"] == "application/vnd.github+json"
    assert got.headers["x-github-api-version"] == "2022-11-28"
    assert got.headers["content-type"] == "application/json"
    assert got.headers["user-agent"] == "fleet-controller"
    assert got.json() == {
        "state": "failure",
        "context": "fleet/gpu-east",
        "description": "teams/ml/t.yaml:12:7 cel-compile: undeclared reference",
        "target_url": "https://grafana/x",
    }
    assert run.results == ["posted"]


async def test_gitlab_request_as_documented(tmp_path: Path) -> None:
    async with posting(tmp_path, "gitlab") as run:
        run.poster.submit(status("failure", "fleet.yaml:1:1 empty-revision"))
        await run.settle()
        run.poster.submit(status("pending", "applying", sha="f" * 40))
        await run.settle()
    first, second = run.api.received
    assert first.method == "POST"
    assert first.path == f"/api/v4/projects/group%2Fsub%2Ffleet/statuses/{SHA}"
    assert first.headers["private-token"] == TOKEN
    assert "authorization" not in first.headers
    assert first.headers["content-type"] == "application/json"
    assert first.json() == {"state": "failed", "name": "fleet/gpu-east", "description": "fleet.yaml:1:1 empty-revision"}
    assert second.json()["state"] == "pending" and second.path.endswith("/statuses/" + "f" * 40)


async def test_gitea_request_as_documented(tmp_path: Path) -> None:
    async with posting(tmp_path, "gitea") as run:
        run.poster.submit(status())
        await run.settle()
    [got] = run.api.received
    assert (got.method, got.path) == ("POST", f"/api/v1/repos/org/fleet/statuses/{SHA}")
    assert got.headers["authorization"] == f"token {TOKEN}"
    assert got.headers["content-type"] == "application/json"
    assert got.json() == {"state": "success", "context": "fleet/gpu-east", "description": "applied 412 objects"}


@pytest.mark.parametrize(
    ("code", "result", "body"),
    [
        (401, "unauthorized", b'{"message":"Bad credentials"}'),
        (403, "forbidden", b'{"message":"Resource not accessible by personal access token"}'),
        (404, "not-found", b'{"message":"Not Found"}'),
        (422, "invalid", b'{"message":"Validation Failed","errors":[{"message":"This SHA and context has reached '
                         b'the maximum number of statuses."}]}'),
    ],
)  # fmt: skip
@pytest.mark.parametrize("provider", providers.PROVIDERS)
async def test_refusals_are_not_retried_and_never_quote_the_token(
    tmp_path: Path,
    code: int,
    result: str,
    body: bytes,
    provider: providers.Provider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    echoed = body.replace(b'"message":"', f'"message":"{TOKEN} '.encode(), 1)  # a host quoting the token back
    api = StatusAPI(script=[Answer(status=code, body=echoed)])
    async with posting(tmp_path, provider, api=api) as run:
        run.poster.submit(status())
        await run.settle()
    assert len(run.api.received) == 1
    assert run.results == [result]
    assert run.clock.slept == []
    assert run.poster.posted(SHA, "fleet/gpu-east") is None
    assert f"not posted: POST {run.poster.target.api_url}" in caplog.text
    assert "***" in caplog.text and TOKEN not in caplog.text


async def test_a_refused_status_is_not_sent_again_at_every_reconcile(tmp_path: Path) -> None:
    api = StatusAPI(script=[Answer(status=401), Answer(), Answer(status=422)])
    async with posting(tmp_path, api=api) as run:
        run.poster.submit(status())
        await run.settle()
        run.poster.submit(status())  # the next reconcile of the same revision: not sent to a refusing host
        await run.settle()
        assert len(run.api.received) == 1
        run.clock.now += 301  # after the hold, a fixed token gets its chance
        run.poster.submit(status())
        await run.settle()
        assert len(run.api.received) == 2 and run.results == ["unauthorized", "unchanged", "posted"]
        run.poster.submit(status("failure", "failed: x"))
        await run.settle()
        run.clock.now += 100_000
        run.poster.submit(status("failure", "failed: x"))  # 422: the same request gets the same answer
        await run.settle()
    assert len(run.api.received) == 3
    assert run.results == ["unauthorized", "unchanged", "posted", "invalid", "unchanged"]


async def test_a_rate_limit_waits_for_retry_after(tmp_path: Path) -> None:
    api = StatusAPI(script=[Answer(status=429, headers={"Retry-After": "17"}, body=b'{"message":"slow down"}')])
    async with posting(tmp_path, "gitlab", api=api) as run:
        run.poster.submit(status())
        await run.settle()
    assert len(run.api.received) == 2
    assert run.api.received[0].body == run.api.received[1].body
    assert run.clock.slept == [17.0]
    assert run.results == ["rate-limited", "posted"]


async def test_githubs_403_rate_limit_waits_until_x_ratelimit_reset(tmp_path: Path) -> None:
    reset = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 125)}
    api = StatusAPI(script=[Answer(status=403, headers=reset, body=b'{"message":"API rate limit exceeded"}')])
    async with posting(tmp_path, api=api) as run:
        run.poster.submit(status())
        await run.settle()
        # The limit holds for the host, not just the refused post: the next one waits too.
        assert run.results == ["rate-limited", "posted"] and run.clock.slept == [125.0]
    assert len(run.api.received) == 2


async def test_server_errors_are_retried_with_backoff_then_given_up(tmp_path: Path) -> None:
    api = StatusAPI(script=[Answer(status=502, body=b"bad gateway")] * 2)
    async with posting(tmp_path, api=api) as run:
        run.poster.submit(status())
        await run.settle()
        assert run.clock.slept == [1.0, 2.0] and run.results == ["unreachable", "unreachable", "posted"]
    api = StatusAPI(script=[Answer(status=503)] * 10)
    async with posting(tmp_path, api=api, attempts=4) as run:
        run.poster.submit(status())
        await run.settle()
    assert len(run.api.received) == 4 and run.clock.slept == [1.0, 2.0, 4.0]


async def test_an_unreachable_host_never_blocks_submit(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    clock = Clock()
    results: list[str] = []
    where = Target("github", "http://127.0.0.1:9/api/v3", "org/fleet")  # nothing listens on port 9
    poster = Poster(
        target=where,
        token_file=token_file,
        on_result=results.append,
        sleep=clock.sleep,
        clock=clock.time,
        attempts=3,
        debounce=0.0,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(poster.run)
        poster.submit(status())
        with anyio.fail_after(20):
            await poster.idle()
        tg.cancel_scope.cancel()
    assert results == ["unreachable"] * 3


async def test_an_unexpected_error_loses_one_status_not_the_poster(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    results: list[str] = []
    api = StatusAPI()
    with api.serving() as base:
        poster = Poster(
            target=Target("github", "http://[::1/api/v3", "org/fleet"),  # httpx.InvalidURL: not an HTTP error
            token_file=token_file,
            on_result=results.append,
            debounce=0.0,
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(poster.run)
            poster.submit(status())
            with anyio.fail_after(20):
                await poster.idle()
            poster.target = Target("github", f"{base}/api/v3", "org/fleet")
            poster.submit(status(sha="d" * 40))
            with anyio.fail_after(20):
                await poster.idle()
            tg.cancel_scope.cancel()
    assert results == ["error", "posted"]


async def test_an_unusable_ca_file_stops_the_poster_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate")
    (tmp_path / "token").write_text(TOKEN)
    poster = Poster(
        target=Target("github", "https://127.0.0.1:9/api/v3", "org/fleet"),
        token_file=tmp_path / "token",
        ca_file=tmp_path / "ca.pem",
    )
    with anyio.fail_after(10):
        await poster.run()  # returns instead of raising into the controller's task group
    assert "commit statuses are off: the CA file" in caplog.text


async def test_statuses_are_coalesced_newest_wins_and_identical_ones_not_posted(tmp_path: Path) -> None:
    import threading

    api = StatusAPI(hold=threading.Event())
    async with posting(tmp_path, api=api) as run:
        run.poster.submit(status("pending", "applying revision"))
        await anyio.to_thread.run_sync(lambda: run.api.wait_for(1))  # in flight, held by the server
        run.poster.submit(status("success"))
        run.poster.submit(status("failure", "teams/a/t.yaml:3:5 rule: broken"))
        run.poster.submit(status("success"))
        assert run.poster.pending == 2
        assert api.hold is not None
        api.hold.set()
        await run.settle()
        run.poster.submit(status("success"))  # already posted: not again
        run.poster.submit(status("success"))
        await run.settle()
    states = [r.json()["state"] for r in run.api.received]
    assert states == ["pending", "success"]
    assert run.results.count("posted") == 2 and run.results.count("unchanged") == 2
    assert run.poster.posted(SHA, "fleet/gpu-east") == status("success")


async def test_a_status_waits_the_debounce_so_a_quick_outcome_replaces_pending(tmp_path: Path) -> None:
    async with posting(tmp_path, debounce=1.0) as run:
        run.poster.submit(status("pending", "applying 3 objects"))
        run.poster.submit(status("success", "applied 3 objects"))  # the reconcile ended within the second
        await run.settle()
        run.poster.submit(status("failure", "failed: x", sha="e" * 40))
        await run.settle()
    assert [r.json()["state"] for r in run.api.received] == ["success", "failure"]
    assert run.clock.slept == [1.0, 1.0]


async def test_the_queue_is_bounded_oldest_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import threading

    api = StatusAPI(hold=threading.Event())
    async with posting(tmp_path, api=api, capacity=2) as run:
        run.poster.submit(status(sha="0" * 40))
        await anyio.to_thread.run_sync(lambda: run.api.wait_for(1))
        for sha in ("1" * 40, "2" * 40, "3" * 40):
            run.poster.submit(status(sha=sha))
        assert api.hold is not None
        api.hold.set()
        await run.settle()
    posted = [r.path.rsplit("/", 1)[1][0] for r in run.api.received]
    assert posted == ["0", "2", "3"]
    assert run.results.count("dropped") == 1 and "dropped fleet/gpu-east success for 1111" in caplog.text


async def test_a_rotated_token_is_read_at_the_next_post(tmp_path: Path) -> None:
    async with posting(tmp_path, "gitea") as run:
        run.poster.submit(status(sha="a" * 40))
        await run.settle()
        (tmp_path / "token").write_text("rotated-token\n")
        run.poster.submit(status(sha="b" * 40))
        await run.settle()
        (tmp_path / "token").unlink()
        run.poster.submit(status(sha="c" * 40))
        await run.settle()
    assert [r.headers["authorization"] for r in run.api.received] == [f"token {TOKEN}", "token rotated-token"]
    assert run.results == ["posted", "posted", "unauthorized"]
