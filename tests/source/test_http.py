"""GitSource against the real ``git http-backend`` behind a loopback HTTP server with token auth.

Also the secret's whereabouts: while a fetch waits on the server, no process on the
machine has the token in its argv or environment; afterwards no file under the cache
directory (``.git/config`` included) contains it, and no error message does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.source import Credentials, GitSource, SourceError, TooLarge, Unauthorized, Unreachable
from tests.source.gitservers import SmartHttp, Upstream, git, tls_context

pytestmark = pytest.mark.anyio

TOKEN = "glpat-fleet-test-0123456789abcdef"


@pytest.fixture()
def http(upstream: Upstream) -> Iterator[tuple[SmartHttp, str]]:
    server = SmartHttp(root=upstream.root, token=TOKEN)
    with server.running() as port:
        yield server, f"http://127.0.0.1:{port}/repo.git"


def token_file(tmp_path: Path, token: str = TOKEN) -> Path:
    path = tmp_path / "secret" / "token"
    path.parent.mkdir(exist_ok=True)
    path.write_text(token + "\n")
    return path


def files_containing(directory: Path, needle: bytes) -> list[Path]:
    found = []
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            if not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
    return found


async def test_token_auth_and_the_token_is_nowhere(
    http: tuple[SmartHttp, str], upstream: Upstream, cache_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # gitpython logs every command it starts at DEBUG
    server, url = http
    src = GitSource(
        url=url, ref="main", path="fleet", cache_dir=cache_dir, credentials=Credentials(token_file=token_file(tmp_path))
    )
    checkout = await src.sync()
    assert checkout.revision == git("rev-parse", "HEAD", cwd=upstream.work)
    assert server.scanned >= 1, "the server looked at /proc while git waited on it"
    assert server.leaks == [], "the token was visible in a process's argv or environment"
    assert files_containing(cache_dir, TOKEN.encode()) == []
    configs = list((cache_dir / "repos").glob("*.git/config"))
    assert configs and all("127.0.0.1" not in c.read_text() for c in configs), "the URL is not stored either"
    assert (cache_dir / "askpass").exists()
    assert "Popen" in caplog.text and TOKEN not in caplog.text


async def test_wrong_token_is_unauthorized_without_the_secret_in_the_message(
    http: tuple[SmartHttp, str], cache_dir: Path, tmp_path: Path
) -> None:
    _, url = http
    wrong = "wrong-token-fedcba9876543210"
    src = GitSource(
        url=url,
        ref="main",
        path="fleet",
        cache_dir=cache_dir,
        credentials=Credentials(token_file=token_file(tmp_path, wrong)),
    )
    with pytest.raises(Unauthorized) as caught:
        await src.sync()
    assert caught.value.where == url
    assert wrong not in str(caught.value) and TOKEN not in str(caught.value)
    assert "token" in caught.value.hint


async def test_no_credentials_fails_at_once(http: tuple[SmartHttp, str], cache_dir: Path) -> None:
    _, url = http
    with pytest.raises(Unauthorized):
        await GitSource(url=url, ref="main", path="fleet", cache_dir=cache_dir, timeout=30).sync()


async def test_rotated_token_is_read_when_git_asks(
    http: tuple[SmartHttp, str], cache_dir: Path, tmp_path: Path
) -> None:
    _, url = http
    path = token_file(tmp_path, "expired-token")
    src = GitSource(url=url, ref="main", path="fleet", cache_dir=cache_dir, credentials=Credentials(token_file=path))
    with pytest.raises(Unauthorized):
        await src.sync()
    path.write_text(TOKEN)
    assert (await src.sync()).path.is_dir()


async def test_missing_token_file(http: tuple[SmartHttp, str], cache_dir: Path, tmp_path: Path) -> None:
    _, url = http
    creds = Credentials(token_file=tmp_path / "not-mounted")
    with pytest.raises(SourceError) as caught:
        await GitSource(url=url, ref="main", path="fleet", cache_dir=cache_dir, credentials=creds).sync()
    assert "not-mounted" in caught.value.what and "mounted" in caught.value.hint


def test_url_with_a_password_is_refused(cache_dir: Path) -> None:
    with pytest.raises(SourceError) as caught:
        GitSource(url=f"https://user:{TOKEN}@example.invalid/repo.git", ref=None, path="", cache_dir=cache_dir)
    assert TOKEN not in str(caught.value)
    assert caught.value.where == "https://example.invalid/repo.git"


async def test_dumb_http_gets_a_full_fetch(upstream: Upstream, cache_dir: Path, tmp_path: Path) -> None:
    upstream.commit({"fleet/a.yaml": "a: 1\n"})
    git("--git-dir", str(upstream.bare), "update-server-info", cwd=upstream.root)
    server = SmartHttp(root=upstream.root, token=TOKEN, dumb=True)
    with server.running() as port:
        src = GitSource(
            url=f"http://127.0.0.1:{port}/repo.git",
            ref="main",
            path="fleet",
            cache_dir=cache_dir,
            credentials=Credentials(token_file=token_file(tmp_path)),
        )
        checkout = await src.sync()
    assert checkout.revision == git("rev-parse", "HEAD", cwd=upstream.work)
    assert any(r.startswith("GET /repo.git/objects/") for r in server.requests), "served by the dumb protocol"
    assert (checkout.path / "a.yaml").exists()


async def test_large_fetch_is_stopped_mid_transfer(upstream: Upstream, cache_dir: Path, tmp_path: Path) -> None:
    upstream.commit({"fleet/noise.bin": os.urandom(6 * 1024 * 1024)})
    server = SmartHttp(root=upstream.root, token=TOKEN, rate=2 * 1024 * 1024)
    with server.running() as port:
        src = GitSource(
            url=f"http://127.0.0.1:{port}/repo.git",
            ref="main",
            path="fleet",
            cache_dir=cache_dir,
            credentials=Credentials(token_file=token_file(tmp_path)),
            max_bytes=1024 * 1024,
        )
        with pytest.raises(TooLarge) as caught:
            await src.sync()
    assert caught.value.what.endswith("it was stopped")


async def test_https_with_a_private_ca(upstream: Upstream, cache_dir: Path, tmp_path: Path) -> None:
    context, ca_file = tls_context(tmp_path / "tls")
    server = SmartHttp(root=upstream.root, token=TOKEN, tls=context)
    with server.running() as port:
        url = f"https://127.0.0.1:{port}/repo.git"
        token = token_file(tmp_path)
        untrusted = GitSource(
            url=url, ref="main", path="fleet", cache_dir=cache_dir / "a", credentials=Credentials(token_file=token)
        )
        with pytest.raises(Unreachable) as caught:
            await untrusted.sync()
        assert "CA" in caught.value.hint
        trusted = GitSource(
            url=url,
            ref="main",
            path="fleet",
            cache_dir=cache_dir / "b",
            credentials=Credentials(token_file=token, ca_file=ca_file),
        )
        checkout = await trusted.sync()
    assert checkout.revision == git("rev-parse", "HEAD", cwd=upstream.work)
