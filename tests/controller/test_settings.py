"""Settings: flags beat FLEET_* variables, and every invalid setting is one clear line at start."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from fleet import engine, kube
from fleet.controller import mains, settings
from fleet.controller.metrics import Metrics
from fleet.engine import waits

REQUIRED = {"FLEET_REPO": "file:///srv/fleet.git", "FLEET_CLUSTER": "gpu-east"}


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Only the variables a test sets: none of the developer's FLEET_* leak in."""
    for name in list(os.environ):
        if name.startswith("FLEET_"):
            monkeypatch.delenv(name)
    return monkeypatch


def setenv(monkeypatch: pytest.MonkeyPatch, values: dict[str, str]) -> None:
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def test_defaults_follow_the_issue(environment: pytest.MonkeyPatch) -> None:
    setenv(environment, REQUIRED)
    s = settings.parse([])
    assert s.interval == 60.0 and s.resync == 600.0
    assert s.address == ("0.0.0.0", 8080)
    assert s.leader_elect is True
    assert s.ref == "" and s.kubeconfig is None and s.drift_policy is None


def test_a_flag_beats_its_variable(environment: pytest.MonkeyPatch) -> None:
    setenv(environment, {**REQUIRED, "FLEET_INTERVAL": "5m", "FLEET_LISTEN": "127.0.0.1:9000"})
    s = settings.parse(["--interval", "1m30s", "--no-leader-elect", "--drift-policy", "report"])
    assert s.interval == 90.0
    assert s.address == ("127.0.0.1", 9000)
    assert s.leader_elect is False
    assert s.drift_policy == "report"


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90.0), ("1m", 60.0), ("1h30m", 5400.0), ("500ms", 0.5), ("2", 2.0), ("1m30s", 90.0)]
)
def test_durations_are_written_as_go_writes_them(text: str, seconds: float) -> None:
    assert settings.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1x", "m", "1m 30s", "-5s", "0s", "1m30"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        settings.parse_duration(text)


def test_every_invalid_setting_is_one_line_naming_flag_and_variable(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    setenv(environment, {"FLEET_DRIFT_POLICY": "warn", "FLEET_LISTEN": "localhost", "FLEET_LEADER_ELECT": "false"})
    with pytest.raises(settings.SettingsError) as caught:
        settings.parse(["--interval", "soon", "--webhook-secret-file", str(tmp_path / "missing")])
    problems = caught.value.problems
    assert problems == [
        "--repo / FLEET_REPO: required, not set",
        "--cluster / FLEET_CLUSTER: required, not set",
        "--interval: 'soon' is not a duration (write e.g. 30s, 1m, 1h30m)",
        f"--webhook-secret-file: {tmp_path / 'missing'} is not a readable file",
        "--listen / FLEET_LISTEN: 'localhost' is not HOST:PORT (write e.g. :8080 or 127.0.0.1:8080)",
        "--drift-policy / FLEET_DRIFT_POLICY: Input should be 'enforce', 'report' or 'ignore' (got 'warn')",
    ]


def test_the_entry_point_fails_with_one_line_per_setting_and_no_traceback() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env["FLEET_INTERVAL"] = "often"
    proc = subprocess.run(
        [sys.executable, "-m", "fleet.controller", "--cluster", "c"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "--repo / FLEET_REPO: required, not set" in proc.stderr
    assert "--interval / FLEET_INTERVAL: 'often' is not a duration" in proc.stderr


def test_an_otlp_protocol_fleet_does_not_send_stops_it_at_start_with_a_hint() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OTEL_"))}
    env |= {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    proc = subprocess.run(
        [sys.executable, "-m", "fleet.controller", "--repo", "file:///nowhere", "--cluster", "c"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: fleet exports traces over OTLP/HTTP (protobuf) only" in proc.stderr
    assert "hint: set it to http/protobuf" in proc.stderr


def test_taking_fields_from_other_managers_and_the_git_size_limit_are_opt_in(
    environment: pytest.MonkeyPatch,
) -> None:
    setenv(environment, REQUIRED)
    s = settings.parse([])
    assert s.force_conflicts is False and s.git_max_bytes is None and s.git_timeout == 60.0
    setenv(environment, {"FLEET_GIT_MAX_BYTES": "1048576", "FLEET_GIT_TIMEOUT": "2m"})
    s = settings.parse(["--force-conflicts"])
    assert s.force_conflicts is True and s.git_max_bytes == 1048576 and s.git_timeout == 120.0
    with pytest.raises(settings.SettingsError, match=r"git.max.bytes"):
        settings.parse(["--git-max-bytes", "0"])


def test_lease_timings_default_to_controller_runtime_and_can_be_shortened(environment: pytest.MonkeyPatch) -> None:
    setenv(environment, REQUIRED)
    s = settings.parse([])
    assert (s.lease_timings.duration, s.lease_timings.renew_deadline, s.lease_timings.retry_period) == (15, 10, 2)
    s = settings.parse(["--lease-duration", "10s", "--renew-deadline", "7s", "--retry-period", "2s"])
    assert (s.lease_timings.duration, s.lease_timings.renew_deadline, s.lease_timings.retry_period) == (10, 7, 2)


@pytest.mark.parametrize(
    "flags",
    [
        ["--lease-duration", "10s"],  # the default 10 s renew deadline would end after a follower may take over
        ["--renew-deadline", "14s"],  # less than a retry period before the duration
        ["--retry-period", "10s"],  # not shorter than the renew deadline
    ],
)
def test_unsafe_lease_timings_are_refused_naming_the_flags(environment: pytest.MonkeyPatch, flags: list[str]) -> None:
    setenv(environment, REQUIRED)
    with pytest.raises(settings.SettingsError) as err:
        settings.parse(flags)
    assert "--renew-deadline" in str(err.value) and "--lease-duration" in str(err.value)


def test_helm_gets_the_in_cluster_identity_as_a_kubeconfig(environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("t0ken")
    (account / "namespace").write_text("fleet-system")
    setenv(environment, {**REQUIRED, "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"})
    environment.delenv("KUBECONFIG", raising=False)
    config = settings.Settings(
        helm=Path(sys.executable), service_account_dir=account, state_dir=tmp_path / "state"
    )  # any existing file stands in for helm
    chosen = mains._helm(config)
    assert chosen is not None and chosen.kubeconfig is not None
    written = json.loads(Path(chosen.kubeconfig).read_text())
    assert written["clusters"] == [
        {
            "name": "in-cluster",
            "cluster": {"server": "https://10.0.0.1:6443", "certificate-authority": str(account / "ca.crt")},
        }
    ]
    assert written["users"] == [{"name": "service-account", "user": {"tokenFile": str(account / "token")}}]
    assert written["contexts"][0]["context"]["namespace"] == "fleet-system"
    assert "t0ken" not in Path(chosen.kubeconfig).read_text()  # the token stays in its file (rotated there)
    assert Path(chosen.kubeconfig).stat().st_mode & 0o077 == 0
    # With a kubeconfig given, helm uses it as is.
    given = mains._helm(settings.Settings(helm=Path(sys.executable), kubeconfig="/k", state_dir=tmp_path / "s2"))
    assert given is not None and given.kubeconfig == "/k"


def test_commit_statuses_are_off_without_a_token_and_checked_at_start(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    setenv(environment, {**REQUIRED, "FLEET_REPO": "git@gitlab.com:group/sub/fleet.git"})
    assert settings.parse([]).commit_status_target is None
    token = tmp_path / "token"
    token.write_text("t")
    environment.setenv("FLEET_COMMIT_STATUS_TOKEN_FILE", str(token))
    found = settings.parse(["--commit-status-target-url", "https://dash/{cluster}/{sha}"]).commit_status_target
    assert found is not None and (found.provider, found.api_url, found.repository) == (
        "gitlab",
        "https://gitlab.com/api/v4",
        "group/sub/fleet",
    )
    with pytest.raises(settings.SettingsError) as caught:
        settings.parse(["--repo", "https://git.example.com/org/fleet.git", "--commit-status-provider", "bitbucket"])
    assert "--commit-status-provider" in caught.value.problems[0]
    with pytest.raises(settings.SettingsError) as caught:
        settings.parse(["--repo", "https://git.example.com/org/fleet.git"])
    assert "name it with --commit-status-provider" in caught.value.problems[0]
    with pytest.raises(settings.SettingsError) as caught:
        settings.parse(["--commit-status-target-url", "grafana/d/{cluster}"])
    assert "is not an http(s) URL" in caught.value.problems[0]
    environment.delenv("FLEET_COMMIT_STATUS_TOKEN_FILE")
    with pytest.raises(settings.SettingsError) as caught:
        settings.parse(["--commit-status-provider", "gitea"])
    assert caught.value.problems == [
        "--commit-status-provider needs --commit-status-token-file (commit statuses are off without a token)"
    ]


def test_help_prints_every_flag_s_description_as_written() -> None:
    text = settings.build_parser().format_help()
    assert "helm's own --timeout is 10% shorter" in " ".join(text.split())


def test_the_engine_options_carry_every_setting_that_applies(environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """From the flags through ``mains.build`` to one reconcile's engine options: each is set, or
    ``settings.NOT_FROM_SETTINGS`` says why not."""
    setenv(environment, REQUIRED)
    flags = ["--force-conflicts", "--team-impersonation", "off", "--health-timeout", "7s", "--helm", sys.executable]
    flags += ["--drift-policy", "report"]
    config = settings.parse([*flags, "--state-dir", str(tmp_path)])
    ctl = mains.build(config, client=cast(kube.Client, object()), metrics=Metrics())
    plan = engine.Plan(cluster="gpu-east", revision="abc", objects=(), prune=True, allow_empty=True)
    reported = waits.Reported(revision="abc")
    options = settings.engine_options(ctl.options, plan=plan, emergency="the driver leaks", reported=reported)
    default = engine.Options()
    left = {f.name for f in dataclasses.fields(options) if getattr(options, f.name) == getattr(default, f.name)}
    assert left == set(settings.NOT_FROM_SETTINGS)
    assert (options.impersonation, options.health_timeout, options.emergency) == ("off", 7.0, "the driver leaks")
    assert options.helm is not None and options.helm.binary == Path(sys.executable)
