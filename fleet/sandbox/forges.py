"""The sandbox's git forge: a real Gitea on loopback, where the fleet repository lives in the demo.

Pull requests, their comments, push webhooks and commit statuses are what teams see of
fleet; a loopback double of a host's API can only say what its author believed. So the
sandbox runs Gitea itself (built from its Go module by ``fleet.sandbox.binaries``), headless:

- ``app.ini`` is written here: SQLite in the forge's directory, ``INSTALL_LOCK`` (no web
  installer), HTTP on a free 127.0.0.1 port and no SSH, ``STATIC_ROOT_PATH`` at the module
  copy (templates and locales), and ``[security] ALLOWED_HOST_LIST = loopback``, which Gitea
  1.27 also uses for webhooks: its default, ``external``, would refuse to deliver to a
  controller on 127.0.0.1. Gitea refuses to run as root unless told otherwise; the sandbox
  tells it so when it is root (CI containers), as it listens on loopback only.
- ``gitea migrate`` creates the database, ``gitea admin user create`` the admin user
  ``fleet`` and ``gitea admin user generate-access-token --scopes all`` its token, kept in
  ``admin-token`` (mode 0600) beside ``app.ini``; then ``gitea web`` serves.
- ``[oauth2]`` is on: Gitea is the OpenID provider the console logs in through
  (``fleet.sandbox.identities`` makes its users, groups and client). It signs ID tokens with
  RS256 and the key in ``data/jwt/private.pem``, written here (2048 bits): Gitea would
  otherwise generate a 4096-bit key at its first start, seconds of a CI core.

``Api`` is the few calls the demo and the tests make (repositories, webhooks, pull requests,
comments, commit statuses), over the documented REST API (``/api/v1``) with the token.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fleet.sandbox import binaries, processes
from fleet.sandbox.errors import SandboxError, StartError

ADMIN = "fleet"
"""The forge's admin user: owns the demo's repository and its token."""
ADMIN_EMAIL = "fleet@sandbox.invalid"


class ForgeError(SandboxError):
    """A call to the sandbox's Gitea failed; ``status`` is its HTTP status (0: no answer)."""

    def __init__(self, what: str, *, where: str = "", hint: str = "", status: int = 0) -> None:
        super().__init__(what, where=where, hint=hint)
        self.status = status


@dataclass(frozen=True)
class Forge:
    """A running Gitea: where it answers and where its admin token is."""

    directory: Path
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def app_ini(self) -> Path:
        return self.directory / "app.ini"

    @property
    def token_file(self) -> Path:
        return self.directory / "admin-token"

    @property
    def token(self) -> str:
        return self.token_file.read_text().strip()

    @property
    def password(self) -> str:
        """The admin's password: Gitea manages tokens (``/users/{name}/tokens``) only with a password."""
        return (self.directory / "admin-password").read_text().strip()

    def api(self, *, token: str | None = None, password: bool = False) -> Api:
        """The REST API as the admin: with its token (or ``token``), or with its password."""
        if password:
            return Api(url=self.url, password=self.password)
        return Api(url=self.url, token=self.token if token is None else token)

    def clone_url(self, repository: str) -> str:
        """``http://127.0.0.1:PORT/owner/repo.git``: clone over HTTP, the token as the password."""
        return f"{self.url}{repository}.git"


def app_ini(*, directory: Path, port: int, static_root: Path, as_root: bool) -> str:
    """Gitea's configuration for a loopback-only, headless server whose state is under ``directory``."""
    root_line = "I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true\n" if as_root else ""
    return f"""\
; Written by fleet's sandbox (fleet/sandbox/forges.py).
APP_NAME = fleet sandbox forge
RUN_MODE = prod
WORK_PATH = {directory}
{root_line}
[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = {port}
ROOT_URL = http://127.0.0.1:{port}/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
STATIC_ROOT_PATH = {static_root}
APP_DATA_PATH = {directory / "data"}

[database]
DB_TYPE = sqlite3
PATH = {directory / "data" / "gitea.db"}

[repository]
ROOT = {directory / "repositories"}
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = {secrets.token_urlsafe(32)}
INTERNAL_TOKEN = {secrets.token_urlsafe(48)}
ALLOWED_HOST_LIST = loopback

[webhook]
DELIVER_TIMEOUT = 10

[service]
DISABLE_REGISTRATION = true

[oauth2]
ENABLED = true
JWT_SIGNING_ALGORITHM = RS256
JWT_SIGNING_PRIVATE_KEY_FILE = jwt/private.pem
DEFAULT_APPLICATIONS =

[actions]
ENABLED = false

[indexer]
REPO_INDEXER_ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[mailer]
ENABLED = false

[log]
MODE = console
LEVEL = warn
ROOT_PATH = {directory / "log"}
"""


def _cli(gitea: binaries.Gitea, forge: Forge, *args: str) -> str:
    argv = [str(gitea.binary), "--config", str(forge.app_ini), "--work-path", str(forge.directory), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, env=_env(forge))
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise StartError(
            f"gitea {' '.join(args[:3])} failed (exit {proc.returncode}):\n{tail}",
            where=str(forge.app_ini),
            hint="check the Gitea build (`fleetctl sandbox build`) and that git is on PATH",
        )
    return proc.stdout


def _env(forge: Forge) -> dict[str, str]:
    # Gitea reads GITEA_* from its environment over app.ini: none of the caller's leak in.
    return {k: v for k, v in os.environ.items() if not k.startswith("GITEA_")} | {
        "GITEA_WORK_DIR": str(forge.directory)
    }


def start(*, directory: Path, gitea: binaries.Gitea, logs: Path) -> tuple[Forge, processes.Running]:
    """Configure a new Gitea in ``directory`` (database, admin user, token) and serve it on a free port."""
    directory.mkdir(parents=True, exist_ok=True)
    forge = Forge(directory=directory, port=processes.free_port())
    forge.app_ini.write_text(
        app_ini(directory=directory, port=forge.port, static_root=gitea.static_root, as_root=os.getuid() == 0)
    )
    _signing_key(directory / "data" / "jwt" / "private.pem")
    _cli(gitea, forge, "migrate")
    password = secrets.token_urlsafe(18)
    _cli(gitea, forge, "admin", "user", "create", "--username", ADMIN, "--email", ADMIN_EMAIL,
         f"--password={password}", "--admin", "--must-change-password=false")  # fmt: skip
    token = _cli(gitea, forge, "admin", "user", "generate-access-token", "--username", ADMIN,
                 "--token-name", "sandbox", "--scopes", "all", "--raw").strip()  # fmt: skip
    for name, secret in (("admin-password", password), ("admin-token", token)):
        (directory / name).write_text(secret + "\n")
        (directory / name).chmod(0o600)
    return forge, serve(forge=forge, gitea=gitea, logs=logs)


def _signing_key(path: Path) -> None:
    """An RSA key in PKCS#8 PEM, as Gitea's ``JWT_SIGNING_PRIVATE_KEY_FILE`` wants, unless one is there."""
    if path.exists():
        return
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def serve(*, forge: Forge, gitea: binaries.Gitea, logs: Path) -> processes.Running:
    """``gitea web`` on the forge's configuration (again, after a stop); returns once its API answers."""
    running = processes.start(
        "gitea",
        [str(gitea.binary), "--config", str(forge.app_ini), "--work-path", str(forge.directory), "web"],
        logs=logs,
        env=_env(forge),
    )
    processes.wait_ready(running, f"{forge.url}api/healthz", timeout=120)
    return running


@dataclass(frozen=True)
class Api:
    """Gitea's REST API (``/api/v1``) with a token: the calls the demo and the tests make."""

    url: str
    token: str = ""
    password: str = ""
    """With a password, requests log in as the admin by HTTP Basic instead of the token."""
    timeout: float = 30.0

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request; the decoded JSON answer (None when empty), or ``ForgeError``."""
        url = f"{self.url.rstrip('/')}/api/v1{path}"
        data = None if body is None else json.dumps(body).encode()
        if self.password:
            login = base64.b64encode(f"{ADMIN}:{self.password}".encode()).decode()
            headers = {"Authorization": f"Basic {login}", "Accept": "application/json"}
        else:
            headers = {"Authorization": f"token {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            said = exc.read().decode(errors="replace").strip()[:300]
            raise ForgeError(
                f"Gitea answered {exc.code}: {said}",
                where=f"{method} {url}",
                hint="see the forge's log",
                status=exc.code,
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ForgeError(
                f"no answer from Gitea: {exc}", where=f"{method} {url}", hint="is the forge running?"
            ) from None
        return json.loads(text) if text.strip() else None

    def create_repository(self, name: str, *, description: str = "") -> dict[str, Any]:
        """An empty repository of the token's user (its default branch is ``main``)."""
        answer: dict[str, Any] = self.call(
            "POST", "/user/repos", {"name": name, "description": description, "default_branch": "main", "private": True}
        )
        return answer

    def add_webhook(self, repository: str, *, url: str, secret: str, branch: str = "*") -> dict[str, Any]:
        """A Gitea push webhook to ``url``, signed with ``secret`` (``X-Gitea-Signature``)."""
        body = {
            "type": "gitea",
            "config": {"url": url, "content_type": "json", "secret": secret, "http_method": "post"},
            "events": ["push"],
            "branch_filter": branch,
            "active": True,
        }
        answer: dict[str, Any] = self.call("POST", f"/repos/{_path(repository)}/hooks", body)
        return answer

    def open_pull(self, repository: str, *, head: str, base: str, title: str, body: str = "") -> dict[str, Any]:
        """A pull request from branch ``head`` into ``base``, once the forge has taken in the pushed branch."""
        self._until(lambda: head in self.branches(repository))
        answer: dict[str, Any] = self.call(
            "POST", f"/repos/{_path(repository)}/pulls", {"head": head, "base": base, "title": title, "body": body}
        )
        return answer

    def merge_pull(self, repository: str, number: int, *, message: str = "") -> None:
        """Merge with a merge commit, as the forge's button does; waits until the forge can merge it."""
        self._until(lambda: bool(self.call("GET", f"/repos/{_path(repository)}/pulls/{number}").get("mergeable")))
        self.call(
            "POST", f"/repos/{_path(repository)}/pulls/{number}/merge", {"Do": "merge", "merge_message_field": message}
        )

    def branches(self, repository: str) -> list[str]:
        """The branches the forge has taken in (it does so in the background after each push)."""
        listed = self.call("GET", f"/repos/{_path(repository)}/branches?limit=50") or []  # null while "empty"
        return [str(b["name"]) for b in listed]

    @staticmethod
    def _until(check: Callable[[], bool], *, within: float = 60.0) -> None:
        """Wait for what Gitea does in the background after a push (a branch known, a merge check)."""
        deadline = time.monotonic() + within
        while not check() and time.monotonic() < deadline:
            time.sleep(0.2)

    def comments(self, repository: str, number: int) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = self.call("GET", f"/repos/{_path(repository)}/issues/{number}/comments")
        return answer

    def statuses(self, repository: str, sha: str) -> list[dict[str, Any]]:
        """Every commit status of ``sha``, newest first."""
        answer: list[dict[str, Any]] = self.call("GET", f"/repos/{_path(repository)}/commits/{sha}/statuses")
        return answer

    def create_token(self, name: str) -> str:
        """A new access token of the admin with every scope (needs ``password``)."""
        answer = self.call("POST", f"/users/{ADMIN}/tokens", {"name": name, "scopes": ["all"]})
        return str(answer["sha1"])

    def delete_token(self, name: str) -> None:
        """Revoke the admin's token ``name`` (needs ``password``)."""
        self.call("DELETE", f"/users/{ADMIN}/tokens/{quote(name, safe='')}")


def _path(repository: str) -> str:
    owner, _, name = repository.partition("/")
    return f"{quote(owner, safe='')}/{quote(name, safe='')}"


__all__ = ["ADMIN", "Api", "Forge", "ForgeError", "app_ini", "serve", "start"]
