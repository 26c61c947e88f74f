"""The controller's settings: flags, each also ``FLEET_<FLAG>`` in the environment.

A controller runs unattended for months; a typo in its Deployment must stop it at
start with a line that names the flag, its environment variable and the value, not
with a traceback at the first reconcile an hour later. So every setting is parsed
and checked once, here, into one frozen model (pydantic-settings reads the
environment, argparse the flags; a flag beats its variable), and ``parse`` raises
``SettingsError`` listing every invalid setting, one line each.

Durations are written as Go and kubectl write them (``90s``, ``1m``, ``1h30m``,
``500ms``); ``--listen`` is ``HOST:PORT`` with an empty host meaning every interface.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pydantic_settings
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from fleet import engine, hosts
from fleet.builds import VersionAction
from fleet.engine import waits
from fleet.errors import FleetError
from fleet.kube import leases

if TYPE_CHECKING:
    from fleet.controller import options as controller_options

DriftPolicy = Literal["enforce", "report", "ignore"]
ENV_PREFIX = "FLEET_"
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


class SettingsError(FleetError):
    """One or more settings are invalid; ``problems`` has one line per setting."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(
            "invalid settings:\n  " + "\n  ".join(problems),
            where="fleet-controller",
            hint="fix the flags or FLEET_* variables named above (fleet-controller --help lists them)",
        )
        self.problems = problems


def parse_duration(text: str | float) -> float:
    """Seconds in a Go-style duration (``1m30s``, ``500ms``); a bare number is seconds."""
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        raw = text.strip()
        try:
            seconds = float(raw)
        except ValueError:
            parts = _DURATION.findall(raw)
            if not parts or "".join(n + u for n, u in parts) != raw:
                raise ValueError(f"{text!r} is not a duration (write e.g. 30s, 1m, 1h30m)") from None
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError(f"{text!r} must be longer than zero")
    return seconds


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``:8080`` = every interface) → (host, port)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not HOST:PORT (write e.g. :8080 or 127.0.0.1:8080)")
    return (host.strip("[]") or "0.0.0.0", int(port))


class Settings(BaseSettings):
    """Everything the controller needs to know before it starts."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid", populate_by_name=True)

    repo: str = Field(min_length=1, description="git URL of the fleet repository (https://, ssh://, git@, file://)")
    ref: str = Field("", description="branch, tag or commit to follow (default: the remote's default branch)")
    path: str = Field("", description="directory of the fleet inside the repository (default: its root)")
    cluster: str = Field(min_length=1, description="this cluster's name (clusters/<name>.yaml in the repository)")
    interval: float = Field(60.0, description="how often to poll the repository (default 1m)")
    resync: float = Field(600.0, description="full reconcile even without a change (default 10m)")
    webhook_secret_file: Path | None = Field(None, description="file holding the webhook's HMAC secret")
    git_token_file: Path | None = Field(None, description="file holding an HTTPS token for the repository")
    git_ssh_key_file: Path | None = Field(None, description="file holding an SSH private key for ssh:// URLs")
    git_known_hosts_file: Path | None = Field(None, description="known_hosts file for ssh:// URLs")
    git_ca_file: Path | None = Field(None, description="CA bundle (PEM) to verify an https:// git server with")
    listen: str = Field(":8080", description="HOST:PORT of /webhook, /healthz, /readyz, /metrics (default :8080)")
    kubeconfig: str | None = Field(None, description="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    context: str | None = Field(None, description="kubeconfig context")
    leader_elect: bool = Field(True, description="hold the cluster's Lease before writing (default on)")
    lease_duration: float = Field(
        15.0, description="how long a renewal of the Lease counts; a dead leader is replaced after it (default 15s)"
    )
    renew_deadline: float = Field(
        10.0, description="the leader stops writing when it could not renew for this long (default 10s)"
    )
    retry_period: float = Field(2.0, description="how often the Lease is renewed or tried (default 2s)")
    drift_policy: DriftPolicy | None = Field(
        None,
        description="report or ignore: use it instead of enforce for every object (a freeze); "
        "default: the repository's policies",
    )
    force_conflicts: bool = Field(
        False,
        description="take fields other field managers own (kubectl edit, other controllers) under every drift "
        "policy; default: enforce takes back the fields fleet declares, report reports each conflict with its "
        "manager (one object: annotate it fleet.gpufleet.dev/take-ownership)",
    )
    team_impersonation: Literal["required", "optional", "off"] = Field(
        "optional",
        description="write each team's objects as the team's ServiceAccount: required (the overlays' setting; a "
        "team without one is an error), optional (default: such a team's objects are written as the controller), "
        "off (docs/security.md)",
    )
    git_max_bytes: int | None = Field(
        None, gt=0, description="refuse a fetch or checkout larger than this many bytes (default: no limit)"
    )
    git_timeout: float = Field(60.0, description="how long one git fetch and checkout may take (default 1m)")
    health_timeout: float = Field(120.0, description="how long a stage's health gate may take (default 2m)")
    helm: Path | None = Field(
        None, description="helm binary for the GPU Operator stage (default: helm on PATH; without one it is skipped)"
    )
    helm_timeout: float = Field(
        300.0,
        description="how long one helm call may take before it is stopped (default 5m); helm's own --timeout is "
        "10% shorter, so helm records a failed hook itself",
    )
    state_dir: Path = Field(
        Path("/tmp/fleet"),
        description="the git cache, the checkouts and plans/ (stored plans); a writable emptyDir",
    )
    identity: str = Field("", description="this replica's name in the Lease (default: hostname_pid)")
    service_account_dir: Path = Field(
        Path("/var/run/secrets/kubernetes.io/serviceaccount"),
        description="where the pod's service account token and CA are (in-cluster configuration)",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log level")
    commit_status_token_file: Path | None = Field(
        None,
        description="file holding the git host's API token: post each revision's outcome as a commit status "
        "(context fleet/<cluster>) to GitHub, GitLab or Gitea (default: no commit statuses)",
    )
    commit_status_provider: hosts.Provider | None = Field(
        None, description="github, gitlab or gitea (default: from the repository URL's host: github.com, gitlab.com)"
    )
    commit_status_api_url: str | None = Field(
        None,
        description="the host's API base URL (default: api.github.com, gitlab.com/api/v4, or the repository's host "
        "with /api/v3 for GitHub Enterprise, /api/v4 for GitLab, /api/v1 for Gitea)",
    )
    commit_status_repository: str | None = Field(
        None, description="the repository's path on the host, owner/repo or group/project (default: from --repo)"
    )
    commit_status_target_url: str = Field(
        "", description="link shown with each commit status; {sha} and {cluster} are replaced (default: none)"
    )

    console: Literal["off", "oidc", "token", "anonymous"] = Field(
        "off",
        description="serve the console under /ui: oidc (log in with an OIDC provider; bearer tokens too), token "
        "(bearer tokens checked with TokenReview only) or anonymous (everyone is --console-anonymous-user); "
        "off by default",
    )
    console_oidc_issuer: str = Field("", description="the OIDC provider's issuer URL (--console oidc)")
    console_oidc_client_id: str = Field("", description="the console's OIDC client id")
    console_oidc_client_secret_file: Path | None = Field(None, description="file holding the OIDC client secret")
    console_url: str = Field(
        "",
        description="the console's external URL, e.g. https://fleet.example.com/ui: the OIDC redirect goes to "
        "URL/login/callback, and cookies are Secure when it is https",
    )
    console_oidc_user_prefix: str = Field("", description="prefix of the Kubernetes user an OIDC user becomes")
    console_oidc_group_prefix: str = Field(
        "", description="prefix of the Kubernetes groups an OIDC user's groups become"
    )
    console_anonymous_user: str = Field("", description="the identity every viewer has with --console anonymous")
    console_session_secret_file: Path | None = Field(
        None, description="file holding the key that signs session cookies (default: a new key per start)"
    )
    console_jaeger_url: str = Field("", description="Jaeger UI base URL: the console links each trace id there")

    @field_validator(
        "interval",
        "resync",
        "health_timeout",
        "helm_timeout",
        "git_timeout",
        "lease_duration",
        "renew_deadline",
        "retry_period",
        mode="before",
    )
    @classmethod
    def _duration(cls, value: Any) -> float:
        return parse_duration(value)

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        parse_listen(value)
        return value

    @property
    def address(self) -> tuple[str, int]:
        """``--listen`` as (host, port); an empty host is every interface."""
        return parse_listen(self.listen)

    @field_validator(
        "webhook_secret_file",
        "git_token_file",
        "git_ssh_key_file",
        "git_known_hosts_file",
        "git_ca_file",
        "commit_status_token_file",
        "console_oidc_client_secret_file",
        "console_session_secret_file",
    )
    @classmethod
    def _readable(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value} is not a readable file")
        return value

    @model_validator(mode="after")
    def _resync_after_poll(self) -> Settings:
        if self.resync < self.interval:
            raise ValueError(f"--resync ({self.resync:g}s) must not be shorter than --interval ({self.interval:g}s)")
        return self

    @model_validator(mode="after")
    def _lease_timings(self) -> Settings:
        # The old leader stops writing at its renew deadline, a follower takes over at the duration:
        # the gap between them (at least one retry period) is what keeps two leaders from writing at once.
        if not self.retry_period < self.renew_deadline <= self.lease_duration - self.retry_period:
            raise ValueError(
                f"lease timings must satisfy --retry-period ({self.retry_period:g}s) < --renew-deadline "
                f"({self.renew_deadline:g}s) <= --lease-duration ({self.lease_duration:g}s) - --retry-period, so "
                "that a leader which cannot renew stops writing before another replica may take over"
            )
        return self

    @model_validator(mode="after")
    def _commit_statuses(self) -> Settings:
        if self.commit_status_token_file is None:
            given = [
                flag(n)
                for n in ("commit_status_provider", "commit_status_api_url", "commit_status_repository")
                if getattr(self, n)
            ]
            if given or self.commit_status_target_url:
                names = ", ".join(given or [flag("commit_status_target_url")])
                raise ValueError(f"{names} needs --commit-status-token-file (commit statuses are off without a token)")
            return self
        self.commit_status_target  # noqa: B018 - checked at start, not at the first post
        link = self.commit_status_target_url
        if link and not link.startswith(("https://", "http://")):
            raise ValueError(f"--commit-status-target-url {link!r} is not an http(s) URL (the hosts refuse it)")
        return self

    @model_validator(mode="after")
    def _console(self) -> Settings:
        oidc = ("console_oidc_issuer", "console_oidc_client_id", "console_oidc_client_secret_file", "console_url")
        if missing := [flag(n) for n in oidc if self.console == "oidc" and not getattr(self, n)]:
            raise ValueError(f"--console oidc needs {', '.join(missing)}")
        if self.console == "anonymous" and not self.console_anonymous_user:
            raise ValueError("--console anonymous needs --console-anonymous-user: viewers get that identity's RBAC")
        if self.console_url and not self.console_url.startswith(("https://", "http://")):
            raise ValueError(f"--console-url {self.console_url!r} is not an http(s) URL")
        return self

    @property
    def commit_status_target(self) -> hosts.Target | None:
        """Where commit statuses go; None when they are off (no token file)."""
        if self.commit_status_token_file is None:
            return None
        try:
            return hosts.target(
                self.repo,
                provider=self.commit_status_provider,
                api_url=self.commit_status_api_url,
                repository=self.commit_status_repository,
            )
        except hosts.HostError as err:
            raise ValueError(f"commit statuses: {err.what} ({err.where}); {err.hint}") from None

    @property
    def lease_timings(self) -> leases.Timings:
        return leases.Timings(
            duration=self.lease_duration, renew_deadline=self.renew_deadline, retry_period=self.retry_period
        )


NOT_FROM_SETTINGS: dict[str, str] = {
    "dry_run": "the controller writes; `fleetctl diff` previews",
    "concurrency": "the engine's default: the controller has no such setting",
    "ignore_managers": "the drift policy decides what becomes of fields other managers own",
    "handover": "only `fleetctl import` hands live objects over",
}
"""The engine options no setting of the controller's sets, and why (``engine_options`` leaves them default)."""


def standing_options(options: controller_options.Options) -> engine.Options:
    """The engine's options the settings set, whatever the revision (``--force-conflicts``,
    ``--team-impersonation``, ``--health-timeout``, ``--drift-policy``, helm): what ``engine_options``
    starts from, and what the console's Revision page diffs with."""
    return engine.Options(
        force_conflicts=options.force_conflicts,
        drift_policy=options.drift_policy,
        impersonation=options.team_impersonation,
        health_timeout=options.health_timeout,
        helm=options.helm,
    )


def engine_options(
    options: controller_options.Options, *, plan: engine.Plan, emergency: str, reported: waits.Reported | None
) -> engine.Options:
    """The engine's options for one reconcile of ``plan``: the settings (``standing_options``), what the
    revision says (``prune``, ``allowEmpty``), the emergency and the earlier waves' statuses; none other
    (``NOT_FROM_SETTINGS``)."""
    return dataclasses.replace(
        standing_options(options),
        prune=plan.prune,
        allow_empty=plan.allow_empty,
        emergency=emergency,
        reported=reported,
    )


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def env_var(name: str) -> str:
    return ENV_PREFIX + name.upper()


def build_parser() -> argparse.ArgumentParser:
    """Flags for every setting; each help line names its environment variable."""
    parser = argparse.ArgumentParser(
        prog="fleet-controller",
        description="The in-cluster GitOps controller: keeps one cluster at the newest valid revision of a "
        "fleet repository. Every flag can also be set as FLEET_<FLAG> (e.g. FLEET_REPO).",
    )
    parser.add_argument("--version", action=VersionAction)
    for name, info in Settings.model_fields.items():
        kwargs: dict[str, Any] = {
            "dest": name,
            "default": argparse.SUPPRESS,
            "help": f"{(info.description or '').replace('%', '%%')} [{env_var(name)}]",  # argparse formats help
        }
        if name in ("leader_elect", "force_conflicts"):
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["metavar"] = name.upper().replace("_", "-")
        parser.add_argument(flag(name), **kwargs)
    return parser


def parse(argv: Sequence[str]) -> Settings:
    """Settings from ``argv`` and the environment; ``SettingsError`` listing every invalid one."""
    given = vars(build_parser().parse_args(list(argv)))
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise SettingsError([_problem(e, given=given) for e in exc.errors()]) from None
    except pydantic_settings.SettingsError as exc:  # a variable the environment source cannot decode
        raise SettingsError([str(exc)]) from None


def _problem(error: Any, *, given: dict[str, Any]) -> str:
    loc = [str(part) for part in error.get("loc", ())]
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    if not loc:
        return message
    name = loc[0]
    source = flag(name) if name in given else f"{flag(name)} / {env_var(name)}"
    if error.get("type") == "missing":
        return f"{source}: required, not set"
    if error.get("type") == "extra_forbidden":
        return f"{env_var(name)}: unknown setting"
    value = error.get("input")
    if isinstance(value, str) and value not in message:
        message += f" (got {value!r})"
    return f"{source}: {message}"


__all__ = ["DriftPolicy", "Settings", "SettingsError", "build_parser", "parse", "parse_duration", "parse_listen"]
