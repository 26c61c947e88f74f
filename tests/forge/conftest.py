"""A real Gitea for the forge tests, started once per module (it takes a few seconds, and the
suite's time is counted): the sandbox's own Gitea, built from its Go module.

``gitea`` yields a ``Server``: the running ``Forge`` and its process, which a fault test
stops and starts again (same port, database and tokens). ``ForgeRemote`` is a
``tests.controller.conftest.Remote`` whose work tree pushes to a repository on it, so the
controller helpers (``Replicas``) follow it over HTTP as they follow a bare repository.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.sandbox import binaries, forges, processes
from tests.controller.conftest import Remote, fleetsync_crd, git
from tests.faults.conftest import own_sandbox

__all__ = ["ForgeRemote", "Server", "fleetsync_crd", "gitea", "own_sandbox"]


@dataclass
class Server:
    forge: forges.Forge
    gitea: binaries.Gitea
    running: processes.Running
    logs: Path

    def stop(self) -> None:
        processes.stop(self.running)

    def start(self) -> None:
        self.running = forges.serve(forge=self.forge, gitea=self.gitea, logs=self.logs)


@pytest.fixture(scope="module")
def gitea(tmp_path_factory: pytest.TempPathFactory, binaries_cache: Path) -> Iterator[Server]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLEET_CACHE_DIR", str(binaries_cache))
        built, _ = binaries.build_gitea()
    root = tmp_path_factory.mktemp("gitea")
    forge, running = forges.start(directory=root / "forge", gitea=built, logs=root / "logs")
    server = Server(forge=forge, gitea=built, running=running, logs=root / "logs")
    try:
        yield server
    finally:
        server.stop()


class ForgeRemote(Remote):
    """A new private repository on the forge; the work tree pushes to it with the admin's token."""

    def __init__(self, root: Path, *, forge: forges.Forge) -> None:
        super().__init__(root)
        self.name = f"t-{uuid.uuid4().hex[:8]}"
        forge.api().create_repository(self.name)
        self.repository = f"{forges.ADMIN}/{self.name}"
        self.clone = forge.clone_url(self.repository)
        authed = self.clone.replace("http://", f"http://{forges.ADMIN}:{forge.token}@", 1)
        git(self.work, "remote", "set-url", "origin", authed)

    @property
    def url(self) -> str:
        return self.clone
