"""Controller tests: a real git remote (a bare repository served over ``file://``), the sandbox,
and the controller's loop running in the test's own event loop.

``remote`` is the repository the controller follows; ``Remote.push(repo)`` writes a
``tests.apply.repos.Repo`` into the work tree, commits and pushes it, exactly as a
merged pull request would land. ``running(...)`` starts the controller loop (source,
watches, queue, reconciler) against the sandbox as admin and stops it afterwards.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from fleet import hosts, kube
from fleet.controller import controllers, leaders
from fleet.engine import plancaches
from fleet.sandbox import Sandbox, credentials
from fleet.source import Credentials, GitSource
from tests.apply.repos import Repo
from tests.waits import established

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "overlays" / "base" / "fleetsync-crd.yaml"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()


class Remote:
    """A bare repository and a work tree that pushes to it."""

    def __init__(self, root: Path) -> None:
        self.bare = root / "remote.git"
        self.work = root / "work"
        self.bare.mkdir(parents=True)
        git(self.bare, "init", "-q", "--bare", "-b", "main")
        self.work.mkdir()
        git(self.work, "init", "-q", "-b", "main")
        git(self.work, "remote", "add", "origin", str(self.bare))

    @property
    def url(self) -> str:
        return f"file://{self.bare}"

    def push(self, repo: Repo, *, message: str, edit: Callable[[Path], None] | None = None, force: bool = False) -> str:
        """Write ``repo`` into the work tree (then ``edit`` it), commit, push; the new commit's SHA.

        ``force`` pushes with ``--force`` (after ``reset`` rewrote the history)."""
        repo.root = self.work
        repo.write()
        if edit is not None:
            edit(self.work)
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", message)
        git(self.work, "push", "-q", *(["--force"] if force else []), "origin", "main")
        return git(self.work, "rev-parse", "HEAD")

    def reset(self, revision: str) -> None:
        """Move the work tree's branch back to ``revision`` (the next push must ``force``)."""
        git(self.work, "reset", "-q", "--hard", revision)


@pytest.fixture()
def remote(tmp_path: Path) -> Remote:
    return Remote(tmp_path / "git")


@pytest.fixture(scope="session")
def fleetsync_crd(sandbox: Sandbox) -> None:
    sandbox.kubectl("apply", "-f", str(CRD))
    established(sandbox.kubectl, "fleetsyncs.fleet.gpufleet.dev")


@asynccontextmanager
async def running(
    sandbox: Sandbox,
    remote: Remote,
    *,
    cluster: str,
    cache_dir: Path,
    max_bytes: int | None = None,
    kubeconfig: Path | None = None,
    store: plancaches.PlanCache | None = None,
    git_credentials: Credentials | None = None,
    poster: hosts.Poster | None = None,
    reader: hosts.Reader | None = None,
    **options: Any,
) -> AsyncIterator[controllers.Controller]:
    """The controller loop for ``cluster`` following ``remote``, leading alone: as the sandbox admin,
    or as the current user of ``kubeconfig`` (e.g. fleet's ServiceAccount).

    ``max_bytes`` is the git source's size limit (``--git-max-bytes``); ``store`` keeps plans on disk
    (``plans/`` in the state directory, as ``mains.build`` gives it); ``git_credentials`` reach a private
    remote; ``poster`` and ``reader`` post and read commit statuses on a git host."""
    if kubeconfig is None:
        client = await kube.connect(kubeconfig=str(sandbox.kubeconfig), context=credentials.CLUSTER)
    else:
        client = await kube.connect(kubeconfig=str(kubeconfig))
    source = GitSource(
        url=remote.url,
        ref="main",
        path="",
        cache_dir=cache_dir,
        max_bytes=max_bytes,
        credentials=git_credentials,
    )
    options.setdefault("interval", 1.0)
    options.setdefault("health_timeout", 30.0)
    ctl = controllers.Controller(
        client=client,
        source=source,
        options=controllers.Options(cluster=cluster, **options),
        store=store,
        poster=poster,
        reader=reader,
    )
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ctl.run)
            tg.start_soon(
                lambda: leaders.elect(client=client, cluster=cluster, identity="test", enabled=False, leader=ctl.leader)
            )
            yield ctl
            tg.cancel_scope.cancel()
    finally:
        await client.close()


def fleetsync_events(sandbox: Sandbox, cluster: str) -> list[dict[str, Any]]:
    """The Events the controller recorded on its FleetSync (namespace ``default``, as kubectl shows them)."""
    out = sandbox.kubectl(
        "get", "events", "-n", "default", "--field-selector", f"involvedObject.name={cluster}", "-o", "json"
    ).stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items
