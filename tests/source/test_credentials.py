"""Pure parts of the source: URLs as shown, and the environment git gets (no secret in it)."""

from __future__ import annotations

from pathlib import Path

import pytest

import fleet.source
from fleet.source import Credentials, SourceError, credentials, urls


@pytest.mark.parametrize(
    ("url", "kind", "shown"),
    [
        ("https://github.com/org/repo.git", "https", "https://github.com/org/repo.git"),
        ("https://bot@gitlab.example/org/repo.git", "https", "https://gitlab.example/org/repo.git"),
        ("https://bot:tok@gitlab.example/org/repo.git?x=1#f", "https", "https://gitlab.example/org/repo.git?x=1"),
        ("ssh://git@github.com/org/repo.git", "ssh", "ssh://git@github.com/org/repo.git"),
        ("git@github.com:org/repo.git", "ssh", "git@github.com:org/repo.git"),
        ("git://127.0.0.1:9418/repo.git", "git", "git://127.0.0.1:9418/repo.git"),
        ("file:///srv/repo.git", "file", "file:///srv/repo.git"),
        ("/srv/repo.git", "file", "/srv/repo.git"),
    ],
)
def test_scheme_and_redact(url: str, kind: str, shown: str) -> None:
    assert urls.scheme(url) == kind
    assert urls.redact(url) == shown


def test_check_refuses_passwords_and_unknown_schemes() -> None:
    with pytest.raises(SourceError, match="password"):
        urls.check("https://u:p@host/x.git")
    with pytest.raises(SourceError, match="scheme"):
        urls.check("ftp://host/x.git")
    urls.check("https://u@host/x.git")


def test_token_environment_names_the_file_not_the_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-value")
    env = credentials.environment(
        Credentials(token_file=token, username="x-access-token"), url="https://h/x.git", helper_dir=tmp_path / "c"
    )
    assert all("s3cr3t-value" not in value for value in env.values())
    assert env["FLEET_GIT_TOKEN_FILE"] == str(token)
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_CONFIG_KEY_0"] == "credential.helper" and env["GIT_CONFIG_VALUE_0"] == ""
    helper = Path(env["GIT_ASKPASS"])
    assert helper.parent == tmp_path / "c" and "s3cr3t-value" not in helper.read_text()
    assert helper.stat().st_mode & 0o777 == 0o700


def test_ca_file(tmp_path: Path) -> None:
    env = credentials.environment(Credentials(ca_file=tmp_path / "ca.pem"), url="https://h/x", helper_dir=tmp_path)
    assert env["GIT_SSL_CAINFO"] == str(tmp_path / "ca.pem")
    with pytest.raises(SourceError, match="CA file"):
        credentials.check(Credentials(ca_file=tmp_path / "missing.pem"), url="https://h/x")


def test_no_credentials_never_prompt(tmp_path: Path) -> None:
    env = credentials.environment(None, url="https://h/x.git", helper_dir=tmp_path)
    assert env["GIT_ASKPASS"] == "/bin/false" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert "GIT_SSH_COMMAND" not in env


def test_scrub() -> None:
    assert credentials.scrub("bad token abc123 here", secrets=["abc123"]) == "bad token *** here"


def test_public_surface() -> None:
    source_side = {
        "Checkout",
        "Credentials",
        "GitSource",
        "PathNotFound",
        "RefNotFound",
        "SourceError",
        "TooLarge",
        "Unauthorized",
        "Unreachable",
    }
    exported = fleet.source.__all__
    assert source_side <= set(exported), "the remote side's API (docs/source.md)"
    assert exported == sorted(set(exported)) and all(hasattr(fleet.source, name) for name in exported)
    assert not any(name.startswith("_") for name in exported)
