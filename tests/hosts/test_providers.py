"""Which commit status API a repository URL means, each API's request, and what its answers mean (pure)."""

from __future__ import annotations

import email.utils

import pytest

from fleet.hosts import errors, providers
from fleet.hosts.providers import CommitStatus, Target

SHA = "0123456789abcdef0123456789abcdef01234567"
STATUS = CommitStatus(
    sha=SHA,
    context="fleet/gpu-east",
    state="failure",
    description="teams/a/t.yaml:3:5 cel: x",
    target_url="https://x/y",
)


@pytest.mark.parametrize(
    ("url", "provider", "api", "repository"),
    [
        ("https://github.com/org/fleet.git", "github", "https://api.github.com", "org/fleet"),
        ("git@github.com:org/fleet.git", "github", "https://api.github.com", "org/fleet"),
        ("ssh://git@github.com/org/fleet", "github", "https://api.github.com", "org/fleet"),
        ("https://x-access-token@github.com/org/fleet/", "github", "https://api.github.com", "org/fleet"),
        ("https://gitlab.com/group/sub/fleet.git", "gitlab", "https://gitlab.com/api/v4", "group/sub/fleet"),
        ("git@gitlab.com:group/fleet.git", "gitlab", "https://gitlab.com/api/v4", "group/fleet"),
        ("https://codeberg.org/org/fleet.git", "gitea", "https://codeberg.org/api/v1", "org/fleet"),
    ],
)
def test_known_hosts_are_detected_from_the_url(url: str, provider: str, api: str, repository: str) -> None:
    assert providers.target(url) == Target(provider=provider, api_url=api, repository=repository)  # type: ignore[arg-type]


def test_a_self_hosted_server_needs_its_provider_named() -> None:
    with pytest.raises(errors.HostError) as caught:
        providers.target("https://git.example.com/org/fleet.git")
    assert "--commit-status-provider" in caught.value.hint
    assert providers.target("https://git.example.com:8443/group/sub/fleet.git", provider="gitlab") == Target(
        "gitlab", "https://git.example.com:8443/api/v4", "group/sub/fleet"
    )
    assert providers.target("ssh://git@ghe.example.com:2222/org/fleet.git", provider="github") == Target(
        "github", "https://ghe.example.com/api/v3", "org/fleet"
    )
    assert providers.target("git@forge.example.com:org/fleet.git", provider="gitea") == Target(
        "gitea", "https://forge.example.com/api/v1", "org/fleet"
    )
    given = providers.target(
        "file:///srv/fleet.git", provider="github", api_url="http://127.0.0.1:9/api/", repository="org/fleet"
    )
    assert given == Target("github", "http://127.0.0.1:9/api", "org/fleet")


def test_unusable_repository_paths_and_api_urls_are_refused() -> None:
    with pytest.raises(errors.HostError, match="not a github repository path"):
        providers.target("https://github.com/org/sub/fleet.git")
    with pytest.raises(errors.HostError, match="local repository"):
        providers.target("file:///srv/fleet.git", provider="gitea")
    with pytest.raises(errors.HostError, match="not http"):
        providers.target("https://github.com/o/r", api_url="ftp://x")
    with pytest.raises(errors.HostError) as caught:
        providers.target("https://user:hunter2@git.example.com/org/fleet.git")
    assert "hunter2" not in str(caught.value)


def test_github_request() -> None:
    req = providers.request(Target("github", "https://api.github.com", "org/fleet"), STATUS)
    assert (req.method, req.url) == ("POST", f"https://api.github.com/repos/org/fleet/statuses/{SHA}")
    assert req.headers["Accept"] == "application/vnd.github+json"
    assert req.headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert req.body == {
        "state": "failure",
        "context": "fleet/gpu-east",
        "description": "teams/a/t.yaml:3:5 cel: x",
        "target_url": "https://x/y",
    }
    assert providers.authorization("github", "tok") == {"Authorization": "Bearer tok"}


def test_gitlab_request() -> None:
    req = providers.request(Target("gitlab", "https://gitlab.com/api/v4", "group/sub/fleet"), STATUS)
    assert req.url == f"https://gitlab.com/api/v4/projects/group%2Fsub%2Ffleet/statuses/{SHA}"
    assert req.body == {
        "state": "failed",
        "name": "fleet/gpu-east",
        "description": "teams/a/t.yaml:3:5 cel: x",
        "target_url": "https://x/y",
    }
    assert providers.authorization("gitlab", "tok") == {"PRIVATE-TOKEN": "tok"}


def test_gitea_request_is_githubs_shape_under_api_v1() -> None:
    success = CommitStatus(sha=SHA, context="fleet/gpu-west", state="success", description="applied 412 objects")
    req = providers.request(Target("gitea", "https://codeberg.org/api/v1", "org/fleet"), success)
    assert req.url == f"https://codeberg.org/api/v1/repos/org/fleet/statuses/{SHA}"
    assert req.body == {"state": "success", "context": "fleet/gpu-west", "description": "applied 412 objects"}
    assert providers.authorization("gitea", "tok") == {"Authorization": "token tok"}


def test_descriptions_are_one_line_within_each_hosts_limit() -> None:
    long = CommitStatus(sha=SHA, context="c", state="pending", description="word\n" * 100)
    github = providers.request(Target("github", "https://api.github.com", "o/r"), long).body["description"]
    gitlab = providers.request(Target("gitlab", "https://gitlab.com/api/v4", "g/p"), long).body["description"]
    assert len(github) == 140 and github.endswith("…") and "\n" not in github
    assert len(gitlab) == 255


NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("status", "headers", "kind", "wait"),
    [
        (401, {}, errors.Unauthorized, 0.0),
        (403, {}, errors.Forbidden, 0.0),
        (404, {}, errors.NotFound, 0.0),
        (422, {}, errors.Invalid, 0.0),
        (400, {}, errors.Invalid, 0.0),
        (502, {}, errors.Unreachable, 0.0),
        (429, {"Retry-After": "7"}, errors.RateLimited, 7.0),
        (403, {"Retry-After": "30"}, errors.RateLimited, 30.0),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 42)}, errors.RateLimited, 42.0),
        (429, {"RateLimit-Remaining": "0", "RateLimit-Reset": str(int(NOW) + 5)}, errors.RateLimited, 5.0),
        (429, {}, errors.RateLimited, 60.0),
        (429, {"Retry-After": email.utils.formatdate(NOW + 90, usegmt=True)}, errors.RateLimited, 90.0),
    ],
)
def test_answers(status: int, headers: dict[str, str], kind: type[errors.HostError], wait: float) -> None:
    err = providers.verdict(status=status, headers=headers, body=b"{}", where="POST u", now=NOW)
    assert type(err) is kind
    assert err.retry_after == pytest.approx(wait)
    assert err.retry == (kind in (errors.RateLimited, errors.Unreachable))
    assert providers.verdict(status=201, headers={}, body=b"", where="POST u", now=NOW) is None


def test_the_hosts_message_is_quoted_without_the_token() -> None:
    body = b'{"message": "Bad credentials: tok-123 is not valid", "documentation_url": "https://docs"}'
    err = providers.verdict(status=401, headers={}, body=body, where="POST u", now=NOW, secrets=("tok-123",))
    assert err is not None and "Bad credentials: *** is not valid" in str(err) and "tok-123" not in str(err)
    gitlab = providers.verdict(status=403, headers={}, body=b'{"error":"insufficient_scope"}', where="w", now=NOW)
    assert gitlab is not None and "insufficient_scope" in gitlab.what
    limited = b'{"message":"You have exceeded a secondary rate limit"}'
    secondary = providers.verdict(status=403, headers={}, body=limited, where="w", now=NOW)
    assert isinstance(secondary, errors.RateLimited) and secondary.retry_after == 60.0


def test_the_package_exports_what_the_controller_uses() -> None:
    import fleet.hosts

    public = {n for n in vars(fleet.hosts) if not n.startswith("_") and n != "annotations"}
    assert set(fleet.hosts.__all__) == public - {"errors", "posters", "providers", "readers"}
