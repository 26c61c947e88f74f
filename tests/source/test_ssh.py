"""GitSource over ssh against the real OpenSSH server on loopback (skipped where sshd is not installed).

Host keys are always checked against the given known_hosts file only: the right key
fetches, another key is refused, and so is an ssh URL without a known_hosts file.
"""

from __future__ import annotations

import getpass
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.source import Credentials, GitSource, SourceError, Unauthorized, credentials
from tests.source.gitservers import Sshd, Upstream, git

pytestmark = pytest.mark.anyio


@pytest.fixture()
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    # CI installs sshd (./dev setup) and runs as root: there a missing server is a failure, not a skip.
    missing = pytest.fail if os.environ.get("CI") else pytest.skip
    if Sshd.binary() is None:
        missing("OpenSSH server not installed (apt-get install openssh-server; ./dev setup does it as root)")
    if os.geteuid() != 0:
        missing("sshd on loopback needs root here (privilege separation directory /run/sshd)")
    server = Sshd(root=tmp_path / "sshd")
    with server.running():
        yield server


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def url(sshd: Sshd, upstream: Upstream) -> str:
    return f"ssh://{getpass.getuser()}@127.0.0.1:{sshd.port}{upstream.bare}"


async def test_ssh_key_with_strict_host_checking(
    sshd: Sshd, upstream: Upstream, cache_dir: Path, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts())
    creds = Credentials(ssh_key_file=sshd.client_key, known_hosts_file=known)
    checkout = await GitSource(
        url=url(sshd, upstream), ref="main", path="fleet", cache_dir=cache_dir, credentials=creds
    ).sync()
    assert checkout.revision == git("rev-parse", "HEAD", cwd=upstream.work)
    assert known.read_text() == sshd.known_hosts(), "ssh did not add anything to known_hosts"


async def test_unknown_host_key_is_refused(sshd: Sshd, upstream: Upstream, cache_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other_ed25519"
    keygen(other)
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts(key=other))
    creds = Credentials(ssh_key_file=sshd.client_key, known_hosts_file=known)
    with pytest.raises(Unauthorized) as caught:
        await GitSource(
            url=url(sshd, upstream), ref="main", path="fleet", cache_dir=cache_dir, credentials=creds
        ).sync()
    assert "known_hosts" in caught.value.hint


async def test_key_not_authorized(sshd: Sshd, upstream: Upstream, cache_dir: Path, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger_ed25519"
    keygen(stranger)
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts())
    creds = Credentials(ssh_key_file=stranger, known_hosts_file=known)
    with pytest.raises(Unauthorized):
        await GitSource(
            url=url(sshd, upstream), ref="main", path="fleet", cache_dir=cache_dir, credentials=creds
        ).sync()


def test_ssh_without_known_hosts_is_refused_before_git_runs(cache_dir: Path) -> None:
    with pytest.raises(SourceError) as caught:
        credentials.check(Credentials(ssh_key_file=Path("/k")), url="git@example.invalid:org/repo.git")
    assert "known_hosts" in caught.value.what
    with pytest.raises(SourceError):
        credentials.check(None, url="ssh://git@example.invalid/org/repo.git")


def test_ssh_command_is_strict_and_quoted() -> None:
    creds = Credentials(ssh_key_file=Path("/keys/id ed25519"), known_hosts_file=Path("/keys/known hosts"))
    args = shlex.split(credentials.ssh_command(creds, url="git@host:org/repo.git"))
    assert args[0] == "ssh"
    assert "StrictHostKeyChecking=yes" in args and "IdentitiesOnly=yes" in args and "BatchMode=yes" in args
    assert "UserKnownHostsFile=/keys/known hosts" in args
    assert args[args.index("-i") + 1] == "/keys/id ed25519"


async def test_key_readable_by_others_is_refused_with_the_fix(
    sshd: Sshd, upstream: Upstream, cache_dir: Path, tmp_path: Path
) -> None:
    loose = tmp_path / "loose_ed25519"
    loose.write_bytes(sshd.client_key.read_bytes())
    loose.chmod(0o644)
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts())
    creds = Credentials(ssh_key_file=loose, known_hosts_file=known)
    with pytest.raises(Unauthorized) as caught:
        await GitSource(
            url=url(sshd, upstream), ref="main", path="fleet", cache_dir=cache_dir, credentials=creds
        ).sync()
    assert "0600" in caught.value.hint
