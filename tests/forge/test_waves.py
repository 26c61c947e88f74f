"""Rollout waves through a real Gitea: a later wave's controller waits for the earlier wave's commit status.

``fleet.yaml`` says ``waves: [[west], [east]]`` with a 5 s bake. The controller of ``east``
(the test's cluster, on the sandbox) follows a private repository on the real Gitea, posts
its own ``fleet/east`` statuses there and reads ``fleet/west``'s back through Gitea's API.
``west``'s controller is played by the test: it posts ``fleet/west`` through Gitea's API as
that controller would (``success`` once applied, ``failure`` with the finding). A second
sandbox for ``west`` would add a whole control plane to a 2-core machine and prove nothing
more about the coordination, which happens on the forge alone: what ``east`` reads is
exactly what a real ``west`` posts (``tests/forge/test_gitea.py`` checks those posts).

The disruption classification (``fleet.engine.disruptions``) is being merged separately:
until it is, the test marks every DeviceClass change disruptive (``Change.disruption``), as
the classification does for a selector that allocated claims would no longer satisfy.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fleet import hosts, kube
from fleet.engine import applies
from fleet.engine.changesets import Change
from fleet.sandbox import Sandbox
from fleet.source import Credentials
from tests import waits
from tests.apply.repos import Repo
from tests.controller.conftest import running
from tests.controller.test_loop import fleetsync, get
from tests.forge.conftest import ForgeRemote, Server

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.extras("gitea"),
    pytest.mark.anyio,
    pytest.mark.usefixtures("fleetsync_crd"),
]

BAKE = 5


@dataclass(frozen=True)
class Disruption:
    reason: str = "the test marks DeviceClass changes disruptive"
    nodes: frozenset[str] = frozenset()
    claims: tuple[str, ...] = ()


@pytest.fixture()
def disruptive_classes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every DeviceClass change is disruptive (what the classification says of a tightened selector)."""
    original = applies.Sync.wait

    def wait(self: applies.Sync, change: Change) -> None:
        if change.ref.kind == "DeviceClass":
            change.disruption = Disruption()
        original(self, change)

    monkeypatch.setattr(applies.Sync, "wait", wait)
    yield


def waved(repo: Repo, *, west: str) -> None:
    """The Fleet lists ``west`` and the test's cluster, in two waves with a 5 s bake."""
    repo.files["fleet.yaml"] = f"""\
        apiVersion: fleet.gpufleet.dev/v1alpha1
        kind: Fleet
        metadata:
          name: test
        spec:
          clusters: [{west}, {repo.cluster}]
          rollout:
            waves: [[{west}], [{repo.cluster}]]
            bake: {BAKE}s
        """
    repo.files[f"clusters/{west}.yaml"] = f"""\
        apiVersion: fleet.gpufleet.dev/v1alpha1
        kind: Cluster
        metadata:
          name: {west}
        spec:
          kubernetesVersion: "1.36"
        """


def post(
    server: Server, remote: ForgeRemote, sha: str, *, cluster: str, state: str, description: str
) -> datetime.datetime:
    """Post ``fleet/<cluster>`` on ``sha`` as that cluster's controller would; when Gitea says it was posted."""
    answer = server.forge.api().call(
        "POST",
        f"/repos/{remote.repository}/statuses/{sha}",
        {"state": state, "context": f"fleet/{cluster}", "description": description},
    )
    return datetime.datetime.fromisoformat(answer["created_at"])


def east_states(server: Server, remote: ForgeRemote, sha: str, cluster: str) -> list[tuple[str, str]]:
    listed = server.forge.api().statuses(remote.repository, sha)
    return [(s["status"], s["description"]) for s in reversed(listed) if s["context"] == f"fleet/{cluster}"]


async def rollout(client: kube.Client, cluster: str) -> dict[str, Any]:
    return dict(((await fleetsync(client, cluster)).get("status") or {}).get("rollout") or {})


async def test_a_later_wave_waits_for_the_earlier_waves_success_and_bake_and_halts_on_its_failure(
    gitea: Server, sandbox: Sandbox, admin_client: kube.Client, tmp_path: Path, disruptive_classes: None
) -> None:
    remote = ForgeRemote(tmp_path / "git", forge=gitea.forge)
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.claim_template("ml", "single-gpu")
    east, west = repo.cluster, f"{repo.cluster}-west"
    waved(repo, west=west)
    first = remote.push(repo, message="the fleet, in two waves")
    ns, klass = repo.ns("ml"), repo.device_class_name
    api_url = f"{gitea.forge.url}api/v1"
    target = hosts.Target(provider="gitea", api_url=api_url, repository=remote.repository)
    token = gitea.forge.token_file
    reader = hosts.Reader(target=target, token_file=token, ttl=0.5)
    poster = hosts.Poster(target=target, token_file=token, debounce=0.2)

    async def live_class() -> dict[str, Any] | None:
        return await get(admin_client, "resource.k8s.io/v1", "DeviceClass", klass)

    async with running(
        sandbox,
        remote,
        cluster=east,
        cache_dir=tmp_path / "cache",
        git_credentials=Credentials(token_file=token, username="fleet"),
        poster=poster,
        reader=reader,
        wave_poll=0.5,
    ):
        # Wave 1 has said nothing: the safe part is applied, the DeviceClass waits, and the forge says so.
        waiting = f"wave 1 ({west}): {west} has not reported success for {first[:12]}"
        await waits.eventually(
            lambda: _rollout_is(admin_client, east, waitsFor=waiting, held=1), what="east waits for wave 1"
        )
        assert await get(admin_client, "resource.k8s.io/v1", "ResourceClaimTemplate", "single-gpu", ns)
        assert await live_class() is None, "a disruptive change went before wave 1 reported"
        status = await rollout(admin_client, east)
        assert (status["wave"], status["after"], status["bake"]) == (2, [west], f"{BAKE}s")
        await waits.eventually(
            lambda: _async(lambda: [s for s in east_states(gitea, remote, first, east) if waiting in s[1]]),
            what="east's pending status on Gitea names what it waits for",
        )
        assert east_states(gitea, remote, first, east)[-1][0] == "pending"

        # West succeeds: east bakes for 5 s from the time Gitea gives, then applies the DeviceClass.
        posted = post(gitea, remote, first, cluster=west, state="success", description="applied 5 objects")
        await waits.eventually(
            lambda: _rollout_starts(admin_client, east, "wave 1 baking until "), what="east bakes", within=30
        )
        assert await live_class() is None, "applied before the bake ended"
        created = await waits.eventually(live_class, what="the DeviceClass applied after the bake", within=60)
        applied_at = datetime.datetime.fromisoformat(created["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        assert applied_at >= posted + datetime.timedelta(seconds=BAKE), (applied_at, posted)
        await waits.eventually(lambda: _rollout_is(admin_client, east, waitsFor="", held=0), what="the wave let go")
        await waits.eventually(
            lambda: _async(lambda: east_states(gitea, remote, first, east)[-1][0] == "success"),
            what="east's success on Gitea",
        )
        assert reader.requests >= 2

        # A new revision: west fails it. East applies the safe part and halts the DeviceClass change.
        repo.device_class_expression = "device.driver == 'gpu.nvidia.com' || device.driver == 'gpu.example.com'"
        repo.claim_template("ml", "two-gpus", count=2)
        second = remote.push(repo, message="tighten the class")
        finding = f"clusters/{west}.yaml:7:3 schema: unknown field 'spec.bogus'"
        post(gitea, remote, second, cluster=west, state="failure", description=finding)
        halted = f'wave 1 failed: {west} failure "{finding}": later waves halt'
        await waits.eventually(
            lambda: _rollout_is(admin_client, east, waitsFor=halted, held=1), what="east halts", within=60
        )
        assert await get(admin_client, "resource.k8s.io/v1", "ResourceClaimTemplate", "two-gpus", ns)
        live = await live_class()
        assert live is not None and "gpu.example.com" not in str(live["spec"]), "the halted change was applied"
        held = (await fleetsync(admin_client, east))["status"]["waiting"]
        assert [(w["kind"], w["waitsFor"], w["action"]) for w in held] == [("DeviceClass", "wave", "configured")]


async def _async(check: Any) -> Any:
    return check()


async def _rollout_is(client: kube.Client, cluster: str, **expected: Any) -> bool:
    got = await rollout(client, cluster)
    return all(got.get(k) == v for k, v in expected.items())


async def _rollout_starts(client: kube.Client, cluster: str, prefix: str) -> bool:
    return str((await rollout(client, cluster)).get("waitsFor") or "").startswith(prefix)
