"""Credentials for the git source: mounted files, turned into an environment for git.

The secret itself never leaves its file. It is not in git's argv (visible in
``ps``), not in an environment value, not in ``.git/config`` and not in any
message:

- **HTTPS token**: ``GIT_ASKPASS`` points at a small helper script in the cache
  directory (``askpass``). git runs it when the server asks for a login; the
  helper prints the username, or ``cat``s the token file *at that moment*, so a
  rotated Secret is picked up without a restart. The environment only carries the
  file's path. ``credential.helper`` is reset (through ``GIT_CONFIG_COUNT``, not
  argv) so no configured helper can store the token on disk.
- **SSH key**: ``GIT_SSH_COMMAND`` runs ``ssh -i KEY`` with ``IdentitiesOnly``,
  ``StrictHostKeyChecking=yes`` against the given ``known_hosts`` file only, and
  ``BatchMode`` (never a prompt). A host key that is not in the file is refused.
  ssh URLs without a ``known_hosts`` file are refused before git runs.

- **CA bundle** (``ca_file``): ``GIT_SSL_CAINFO``, for servers behind a private CA.
  Certificates are always verified; there is no switch to turn that off.

Whatever the credentials, ``GIT_TERMINAL_PROMPT=0``: a server that wants a login
and gets none fails at once instead of waiting on a terminal that is not there.
``secrets`` returns the values to scrub from any git output quoted in an error.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from fleet.source import urls
from fleet.source.errors import SourceError

ASKPASS = """#!/bin/sh
# fleet's git askpass helper: prints the username, or the token read from its mounted file.
case "$1" in
  Username*) printf '%s\\n' "$FLEET_GIT_USERNAME" ;;
  *) exec cat -- "$FLEET_GIT_TOKEN_FILE" ;;
esac
"""


@dataclass(frozen=True)
class Credentials:
    """Paths of mounted secret files; none of them is read until git asks."""

    token_file: Path | None = None
    """HTTPS: a file holding a token (or password), sent with ``username`` by HTTP Basic auth."""
    username: str = "git"
    """HTTPS login name; GitHub and GitLab accept any name with a token (``x-access-token``, ``oauth2``)."""
    ssh_key_file: Path | None = None
    """SSH: an unencrypted private key file, readable by the controller's user (if that user owns it,
    mode 0600 or stricter: ssh refuses a key others may read)."""
    known_hosts_file: Path | None = None
    """SSH: the ``known_hosts`` file; the only host keys accepted."""
    ca_file: Path | None = None
    """HTTPS: a CA bundle (PEM) to verify the server's certificate with, instead of the system's
    (a private GitLab behind an internal CA). Not a secret, but mounted the same way."""


def environment(credentials: Credentials | None, *, url: str, helper_dir: Path) -> dict[str, str]:
    """The environment for git talking to ``url``: askpass helper, ssh command, no prompts, no helpers."""
    env = {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "credential.helper",
        "GIT_CONFIG_VALUE_0": "",
    }
    creds = credentials or Credentials()
    if creds.ca_file is not None:
        env["GIT_SSL_CAINFO"] = str(creds.ca_file)
    if creds.token_file is not None:
        env["GIT_ASKPASS"] = str(_askpass(helper_dir))
        env["FLEET_GIT_TOKEN_FILE"] = str(creds.token_file)
        env["FLEET_GIT_USERNAME"] = creds.username
    if urls.scheme(url) == "ssh":
        env["GIT_SSH_COMMAND"] = ssh_command(creds, url=url)
        env["GIT_SSH_VARIANT"] = "ssh"
    return env


def ssh_command(credentials: Credentials, *, url: str) -> str:
    """``ssh`` with strict host checking against ``known_hosts_file`` only, and the key file only."""
    if credentials.known_hosts_file is None:
        raise SourceError(
            "an ssh repository needs a known_hosts file (host keys are always checked)",
            where=urls.redact(url),
            hint="mount the host's public key line(s) as a known_hosts file (ssh-keyscan HOST, verified out of band)",
        )
    parts = [
        "ssh",
        "-F",
        "/dev/null",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"UserKnownHostsFile={credentials.known_hosts_file}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "IdentitiesOnly=yes",
    ]
    if credentials.ssh_key_file is not None:
        parts += ["-i", str(credentials.ssh_key_file)]
    return shlex.join(parts)


def check(credentials: Credentials | None, *, url: str) -> None:
    """Refuse unusable credentials before git runs: missing files, ssh without known_hosts."""
    if urls.scheme(url) == "ssh":
        ssh_command(credentials or Credentials(), url=url)
    if credentials is None:
        return
    for label, path in (
        ("token file", credentials.token_file),
        ("ssh key file", credentials.ssh_key_file),
        ("known_hosts file", credentials.known_hosts_file),
        ("CA file", credentials.ca_file),
    ):
        if path is not None and not os.access(path, os.R_OK):
            raise SourceError(
                f"the {label} {path} is missing or not readable",
                where=urls.redact(url),
                hint="check the Secret is mounted at that path and readable by the controller's user",
            )


def secrets(credentials: Credentials | None) -> list[str]:
    """The secret values to scrub from any text shown to people (the token, as read now)."""
    found: list[str] = []
    if credentials is not None and credentials.token_file is not None:
        try:
            token = credentials.token_file.read_text().strip()
        except OSError:
            token = ""
        if token:
            found.append(token)
    return found


def scrub(text: str, *, secrets: list[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _askpass(helper_dir: Path) -> Path:
    helper = helper_dir / "askpass"
    if not helper.exists() or helper.read_text() != ASKPASS:
        helper_dir.mkdir(parents=True, exist_ok=True)
        partial = helper.with_suffix(".partial")
        partial.write_text(ASKPASS)
        partial.chmod(0o700)
        partial.replace(helper)
    return helper


__all__ = ["Credentials", "check", "environment", "scrub", "secrets", "ssh_command"]
