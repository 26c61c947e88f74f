"""The commit status APIs of GitHub, GitLab and Gitea/Forgejo, as data: which host, which request.

A team often sees only git, so the controller reports each revision's outcome where the
team looks: as a commit status on the commit, beside its CI checks (Flux's
notification-controller does the same). Three APIs cover the hosts people use:

| provider | request (``{api}`` is the API's base URL) | token header | states |
|---|---|---|---|
| ``github`` | ``POST {api}/repos/{owner}/{repo}/statuses/{sha}`` | ``Authorization: Bearer`` | success failure pending|
| ``gitlab`` | ``POST {api}/projects/{path, URL-encoded}/statuses/{sha}`` | ``PRIVATE-TOKEN`` | success failed pending |
| ``gitea``  | as GitHub's (Gitea and Forgejo copy its shape) | ``Authorization: token`` | success failure pending |

GitHub also gets ``Accept: application/vnd.github+json`` and ``X-GitHub-Api-Version:
2022-11-28``; its descriptions are cut at 140 characters (longer ones are refused), the
others' at 255. GitLab names the context ``name``. Everything here is pure: which
provider and API a repository URL means (``target``), the request for a status
(``request``), and what an answer means (``verdict``), so each is tested without a
network; ``fleet.hosts.posters`` sends the requests.

Reading is the other half (rollout waves: a later wave's controller reads the earlier
waves' ``fleet/<cluster>`` statuses, ``fleet.hosts.readers``). Each API lists a commit's
statuses, history included, with one ``GET``:

| provider | request (query: ``page=N`` and the page size) | context, state |
|---|---|---|
| ``github`` | ``GET {api}/repos/{owner}/{repo}/commits/{sha}/statuses`` (``per_page=100``) | ``context``, ``state`` |
| ``gitlab`` | ``GET {api}/projects/{path}/repository/commits/{sha}/statuses`` (``all=true``) | ``name``, ``status`` |
| ``gitea``  | as GitHub's, under ``/api/v1`` (``limit=50``) | ``context``, ``status`` |

Each status has ``created_at``. GitLab's ``all=true`` keeps the older statuses of a name
(by default it lists the latest only): a state's history is what says since when it
stands (``standing``), and so when a wave's bake began. States are read into the three
fleet posts: ``failed`` and ``error`` are ``failure``; anything else but ``success``
(``running``, ``canceled``, ``warning``) is ``pending``, which holds a later wave as a
missing status does.

The provider is detected from the repository URL's host (github.com, gitlab.com,
codeberg.org); a self-hosted server needs the provider named, and its API is then
assumed at the repository's host (``/api/v3`` GitHub Enterprise, ``/api/v4`` GitLab,
``/api/v1`` Gitea) unless an API URL is given.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from fleet.hosts import errors

Provider = Literal["github", "gitlab", "gitea"]
State = Literal["success", "failure", "pending"]
PROVIDERS: tuple[Provider, ...] = ("github", "gitlab", "gitea")
GITHUB_API_VERSION = "2022-11-28"
DESCRIPTION_LIMITS: dict[Provider, int] = {"github": 140, "gitlab": 255, "gitea": 255}
KNOWN_HOSTS: dict[str, tuple[Provider, str]] = {
    "github.com": ("github", "https://api.github.com"),
    "gitlab.com": ("gitlab", "https://gitlab.com/api/v4"),
    "codeberg.org": ("gitea", "https://codeberg.org/api/v1"),
}
API_PATHS: dict[Provider, str] = {"github": "/api/v3", "gitlab": "/api/v4", "gitea": "/api/v1"}
_GITLAB_STATES: dict[State, str] = {"success": "success", "failure": "failed", "pending": "pending"}
_SCP_LIKE = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^/:]+):(?P<path>(?!//).*)$")
RATE_LIMIT_WAIT = 60.0
"""Seconds to wait after a rate limit that says nothing of when it ends (GitHub: "at least one minute")."""


@dataclass(frozen=True)
class CommitStatus:
    """One status for one commit: what the host shows beside the commit's CI checks."""

    sha: str
    context: str
    """``fleet/<cluster>``: a later status with the same context replaces this one on the host."""
    state: State
    description: str
    target_url: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.sha, self.context)


@dataclass(frozen=True)
class Target:
    """Where statuses go: the provider, its API's base URL, and the repository's path there."""

    provider: Provider
    api_url: str
    repository: str
    """``owner/repo`` (GitHub, Gitea) or the project's full path ``group/subgroup/project`` (GitLab)."""


@dataclass(frozen=True)
class Request:
    """An HTTP request without its credential (``authorization`` gives the header)."""

    method: str
    url: str
    headers: dict[str, str]
    body: dict[str, str]

    @property
    def where(self) -> str:
        return f"{self.method} {self.url}"


def split_url(url: str) -> tuple[str, str, str]:
    """(scheme, host[:port], path without ``.git`` and slashes) of a git URL; scp-like is ``ssh``."""
    if "://" in url:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        return parts.scheme.lower(), netloc.lower(), _repo_path(parts.path)
    found = _SCP_LIKE.match(url)
    if found:
        return "ssh", found["host"].lower(), _repo_path(found["path"])
    return "file", "", _repo_path(url)


def _repo_path(path: str) -> str:
    path = path.strip("/")
    return path.removesuffix(".git").strip("/")


def target(
    repo_url: str, *, provider: Provider | None = None, api_url: str | None = None, repository: str | None = None
) -> Target:
    """The commit status API for the repository at ``repo_url``; ``HostError`` when it cannot be told."""
    scheme, netloc, path = split_url(repo_url)
    host = netloc.split(":")[0]
    known = KNOWN_HOSTS.get(host.removeprefix("www."))
    chosen = provider or (known[0] if known else None)
    shown = _redact(repo_url)
    if chosen is None:
        raise errors.HostError(
            f"cannot tell which commit status API {host or 'a local repository'} has",
            where=shown,
            hint="name it with --commit-status-provider github|gitlab|gitea (and --commit-status-api-url for a "
            "server whose API is not at the repository's host)",
        )
    if api_url:
        base = api_url.rstrip("/")
    elif known and known[0] == chosen:
        base = known[1]
    elif host and scheme in ("http", "https"):
        base = f"{scheme}://{netloc}{API_PATHS[chosen]}"
    elif host:
        base = f"https://{host}{API_PATHS[chosen]}"  # an ssh URL's port is not the API's
    else:
        raise errors.HostError(
            "a local repository has no commit status API of its own",
            where=shown,
            hint="give --commit-status-api-url and --commit-status-repository",
        )
    if not base.startswith(("https://", "http://")):
        raise errors.HostError(
            f"the commit status API URL {base!r} is not http(s)",
            where=shown,
            hint="write it as https://HOST/api/v4 (GitLab), https://HOST/api/v3 (GitHub Enterprise), "
            "https://HOST/api/v1 (Gitea)",
        )
    name = (repository or path).strip("/").removesuffix(".git")
    segments = [s for s in name.split("/") if s]
    if len(segments) < 2 or (chosen != "gitlab" and len(segments) != 2):
        shape = "group/project (subgroups allowed)" if chosen == "gitlab" else "owner/repo"
        raise errors.HostError(
            f"{name or '(empty)'!r} is not a {chosen} repository path ({shape})",
            where=shown,
            hint="give the repository's path on the host with --commit-status-repository",
        )
    return Target(provider=chosen, api_url=base, repository="/".join(segments))


def _redact(url: str) -> str:
    if "://" not in url:
        return url
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment="").geturl()


def describe(text: str, *, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def request(where: Target, status: CommitStatus) -> Request:
    """The documented request that posts ``status`` to ``where`` (no credential)."""
    description = describe(status.description, limit=DESCRIPTION_LIMITS[where.provider])
    sha = quote(status.sha, safe="")
    headers = {"Content-Type": "application/json"}
    if where.provider == "gitlab":
        project = quote(where.repository, safe="")
        body = {"state": _GITLAB_STATES[status.state], "name": status.context, "description": description}
        if status.target_url:
            body["target_url"] = status.target_url
        headers["Accept"] = "application/json"
        return Request("POST", f"{where.api_url}/projects/{project}/statuses/{sha}", headers, body)
    owner, repo = (quote(s, safe="") for s in where.repository.split("/"))
    body = {"state": status.state, "context": status.context, "description": description}
    if status.target_url:
        body["target_url"] = status.target_url
    if where.provider == "github":
        headers["Accept"] = "application/vnd.github+json"
        headers["X-GitHub-Api-Version"] = GITHUB_API_VERSION
    else:
        headers["Accept"] = "application/json"
    return Request("POST", f"{where.api_url}/repos/{owner}/{repo}/statuses/{sha}", headers, body)


PAGE_SIZES: dict[Provider, int] = {"github": 100, "gitlab": 100, "gitea": 50}
"""Statuses per page asked for: each API's maximum (Gitea's default ``MAX_RESPONSE_ITEMS`` is 50)."""
_READ_STATES: dict[str, State] = {"success": "success", "failure": "failure", "failed": "failure", "error": "failure"}


@dataclass(frozen=True)
class Posted:
    """A commit status as the host lists it."""

    sha: str
    context: str
    state: State
    description: str
    at: datetime.datetime | None
    """When the host says it was posted (``created_at``); None when it does not say."""
    id: int = 0
    """The host's id: orders statuses posted within the same second."""


def listing(where: Target, sha: str, *, page: int = 1) -> Request:
    """The documented request for one page of ``sha``'s commit statuses, history included (no credential)."""
    commit = quote(sha, safe="")
    size = PAGE_SIZES[where.provider]
    if where.provider == "gitlab":
        project = quote(where.repository, safe="")
        url = f"{where.api_url}/projects/{project}/repository/commits/{commit}/statuses?all=true&per_page={size}"
        return Request("GET", f"{url}&page={page}", {"Accept": "application/json"}, {})
    owner, repo = (quote(s, safe="") for s in where.repository.split("/"))
    base = f"{where.api_url}/repos/{owner}/{repo}/commits/{commit}/statuses"
    if where.provider == "github":
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": GITHUB_API_VERSION}
        return Request("GET", f"{base}?per_page={size}&page={page}", headers, {})
    return Request("GET", f"{base}?limit={size}&page={page}", {"Accept": "application/json"}, {})


def posted(provider: Provider, body: bytes, *, sha: str, where: str = "") -> list[Posted]:
    """The statuses in one page of ``listing``'s answer; ``HostError`` for an answer that is not a list of them."""
    try:
        data: Any = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, list):
        raise errors.HostError(
            "the host's commit status list is not a JSON list",
            where=where,
            hint="check --commit-status-api-url: it must be the API's base URL, not the web page's",
        )
    out = []
    for item in data:
        if not isinstance(item, dict):
            continue
        context = item.get("name" if provider == "gitlab" else "context")
        state = item.get("state" if provider == "github" else "status")
        if not isinstance(context, str) or not isinstance(state, str):
            continue
        out.append(
            Posted(
                sha=sha,
                context=context,
                state=_READ_STATES.get(state.lower(), "pending"),
                description=str(item.get("description") or ""),
                at=_timestamp(item.get("created_at")),
                id=item["id"] if isinstance(item.get("id"), int) else 0,
            )
        )
    return out


def _timestamp(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        at = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=datetime.UTC)


def standing(statuses: list[Posted], *, context: str) -> Posted | None:
    """``context``'s current status among ``statuses`` (one commit's), dated from when that state was first
    posted: a controller that restarts posts the same ``success`` again, and that must not restart a bake."""
    mine = sorted(
        (s for s in statuses if s.context == context),
        key=lambda s: (s.at or datetime.datetime.min.replace(tzinfo=datetime.UTC), s.id),
    )
    if not mine:
        return None
    newest = mine[-1]
    first = newest
    for earlier in reversed(mine[:-1]):
        if earlier.state != newest.state:
            break
        first = earlier
    return Posted(
        sha=newest.sha,
        context=context,
        state=newest.state,
        description=newest.description,
        at=first.at,
        id=newest.id,
    )


def authorization(provider: Provider, token: str) -> dict[str, str]:
    """The header that carries ``token`` for ``provider``."""
    if provider == "gitlab":
        return {"PRIVATE-TOKEN": token}
    if provider == "gitea":
        return {"Authorization": f"token {token}"}
    return {"Authorization": f"Bearer {token}"}


def wait_of(headers: dict[str, str], *, now: float) -> float:
    """Seconds the host asked to wait: ``Retry-After`` (seconds or an HTTP date), else the rate limit's
    reset (``X-RateLimit-Reset``, GitLab's ``RateLimit-Reset``: Unix seconds) when none remain; 0 if neither."""
    lower = {k.lower(): v.strip() for k, v in headers.items()}
    after = lower.get("retry-after", "")
    if after:
        try:
            return max(0.0, float(after))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(after)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                if when.tzinfo is None:
                    when = when.replace(tzinfo=datetime.UTC)
                return max(0.0, when.timestamp() - now)
    for name in ("x-ratelimit-reset", "ratelimit-reset"):
        reset = lower.get(name, "")
        remaining = lower.get(name.replace("reset", "remaining"), "0")
        if reset and remaining == "0":
            try:
                return max(0.0, float(reset) - now)
            except ValueError:
                continue
    return 0.0


def verdict(
    *, status: int, headers: dict[str, str], body: bytes, where: str, now: float, secrets: tuple[str, ...] = ()
) -> errors.HostError | None:
    """None for a 2xx answer, else the error it means (``secrets`` scrubbed from the quoted message)."""
    if 200 <= status < 300:
        return None
    message = _message(body)
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    wait = wait_of(headers, now=now)
    lower = {k.lower(): v.strip() for k, v in headers.items()}
    said = f": {message}" if message else ""
    limited = status == 429 or (
        status == 403
        and (lower.get("x-ratelimit-remaining") == "0" or "retry-after" in lower or "rate limit" in message.lower())
    )
    if limited:
        return errors.RateLimited(
            f"the host's rate limit ({status}){said}",
            where=where,
            hint="statuses are retried when the limit resets; a token of its own for fleet keeps CI's quota apart",
            status=status,
            retry_after=wait or RATE_LIMIT_WAIT,
        )
    if status == 401:
        return errors.Unauthorized(
            f"the token was refused (401){said}",
            where=where,
            hint="mount a valid token in --commit-status-token-file (GitHub: commit statuses write; GitLab: "
            "api scope, Developer role; Gitea: write:repository)",
            status=status,
        )
    if status == 403:
        return errors.Forbidden(
            f"the token may not write commit statuses here (403){said}",
            where=where,
            hint="grant the token's user write access to the repository (GitHub: commit statuses write; "
            "GitLab: Developer role)",
            status=status,
        )
    if status == 404:
        return errors.NotFound(
            f"no such repository or commit, or the token cannot see it (404){said}",
            where=where,
            hint="check the repository path (--commit-status-repository) and API URL; a private repository "
            "answers 404 to a token without access",
            status=status,
        )
    if status in (400, 422):
        return errors.Invalid(
            f"the host refused the status ({status}){said}",
            where=where,
            hint="the status is not sent again; a later revision's status is",
            status=status,
        )
    if status >= 500 or status == 408:
        return errors.Unreachable(
            f"the host answered {status}{said}",
            where=where,
            hint="retried with backoff",
            status=status,
            retry_after=wait,
        )
    return errors.HostError(f"the host answered {status}{said}", where=where, status=status)


def _message(body: bytes) -> str:
    """The host's own words: ``message`` (GitHub, Gitea, GitLab) or ``error`` (GitLab), on one line, short."""
    text = body.decode(errors="replace").strip()
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        found = data.get("message") or data.get("error") or ""
        text = found if isinstance(found, str) else json.dumps(found)
    return " ".join(text.split())[:300]


__all__ = [
    "API_PATHS",
    "DESCRIPTION_LIMITS",
    "GITHUB_API_VERSION",
    "KNOWN_HOSTS",
    "PAGE_SIZES",
    "PROVIDERS",
    "CommitStatus",
    "Posted",
    "Provider",
    "Request",
    "State",
    "Target",
    "authorization",
    "describe",
    "listing",
    "posted",
    "request",
    "split_url",
    "standing",
    "target",
    "verdict",
    "wait_of",
]
