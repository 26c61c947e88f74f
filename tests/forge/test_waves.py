"""Rollout waves through a real Gitea: a later wave's controller waits for the earlier wave's commit status.

``fleet.yaml`` says ``waves: [[west], [east]]`` with a 5 s bake. The controller of ``east``
(the test's cluster, on the sandbox) follows a private repository on the real Gitea, posts
its own ``fleet/east`` statuses there and reads ``fleet/west``'s back through Gitea's API.
``west``'s controller is played by the test: it posts ``fleet/west`` through Gitea's API as
that controller would (``success`` once applied, ``failure`` with the finding). A second
sandbox for ``west`` would add a whole control plane to a 2-core machine and prove nothing
more about the coordination, which happens on the forge alone: what ``east`` reads is
exactly what a real ``west`` posts (``tests/forge/test_gitea.py`` checks those posts).

The disruptive change is real: a pod holds a claim the real scheduler allocated from the test's
DeviceClass, and the class's selector is tightened past that device (``fleet.engine.disruptions``).
``east``'s disruption policy is ``force``, so only the waves hold it.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from fleet import hosts, kube
from fleet.sandbox import Sandbox
from fleet.source import Credentials
from tests import waits
from tests.apply.repos import Repo
from tests.changes.test_holds import device_of, live_selector, trainer
from tests.conftest import Kubectl, gpu_pod
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
    gitea: Server, sandbox: Sandbox, admin_client: kube.Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    remote = ForgeRemote(tmp_path / "git", forge=gitea.forge)
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=8)
    repo.claim("ml", "held")
    repo.claim("ml", "held2")
    repo.claim_template("ml", "single-gpu")
    repo.cluster_spec = {"disruption": {"policy": "force"}}
    east, west = repo.cluster, f"{repo.cluster}-west"
    waved(repo, west=west)
    first = remote.push(repo, message="the fleet, in two waves")
    ns = repo.ns("ml")
    api_url = f"{gitea.forge.url}api/v1"
    target = hosts.Target(provider="gitea", api_url=api_url, repository=remote.repository)
    token = gitea.forge.token_file
    reader = hosts.Reader(target=target, token_file=token, ttl=0.5)
    poster = hosts.Poster(target=target, token_file=token, debounce=0.2)

    async def applied_at(revision: str) -> bool:
        return bool(((await fleetsync(admin_client, east)).get("status") or {}).get("lastAppliedRevision") == revision)

    try:
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
            # Everything of the first commit is safe (new objects): wave 2 applies it without waiting.
            await waits.eventually(lambda: applied_at(first), what="the first commit applied, all safe")
            _, uuid = trainer(kubectl, ns)
            before = live_selector(kubectl, repo)

            # Tightened past the pod's device: disruptive. Wave 1 has said nothing: the safe part is
            # applied, the DeviceClass waits, and the forge says so.
            repo.device_class_expression = f"device.attributes['gpu.nvidia.com'].uuid != '{uuid}'"
            repo.claim_template("ml", "two-gpus", count=2)
            second = remote.push(repo, message="tighten the class; a template")
            waiting = f"wave 1 ({west}): {west} has not reported success for {second[:12]}"
            await waits.eventually(
                lambda: _rollout_is(admin_client, east, waitsFor=waiting, held=1),
                what="east waits for wave 1",
                details=lambda: kubectl("get", "fleetsync", east, "-o", "jsonpath={.status}").stdout,
            )
            assert await get(admin_client, "resource.k8s.io/v1", "ResourceClaimTemplate", "two-gpus", ns)
            assert live_selector(kubectl, repo) == before, "a disruptive change went before wave 1 reported"
            status = await rollout(admin_client, east)
            assert (status["wave"], status["after"], status["bake"]) == (2, [west], f"{BAKE}s")
            await waits.eventually(
                lambda: _async(lambda: [s for s in east_states(gitea, remote, second, east) if waiting in s[1]]),
                what="east's pending status on Gitea names what it waits for",
            )
            assert east_states(gitea, remote, second, east)[-1][0] == "pending"

            # West succeeds: east bakes for 5 s from the time Gitea gives, then applies the DeviceClass.
            posted = post(gitea, remote, second, cluster=west, state="success", description="applied 6 objects")
            await waits.eventually(
                lambda: _rollout_starts(admin_client, east, "wave 1 baking until "), what="east bakes", within=30
            )
            assert live_selector(kubectl, repo) == before, "applied before the bake ended"
            await waits.eventually(
                lambda: _async(lambda: live_selector(kubectl, repo) != before),
                what="the DeviceClass applied after the bake",
                within=60,
            )
            assert _applied_time(kubectl, repo) >= posted + datetime.timedelta(seconds=BAKE)
            await waits.eventually(lambda: _rollout_is(admin_client, east, waitsFor="", held=0), what="the wave let go")
            await waits.eventually(
                lambda: _async(lambda: east_states(gitea, remote, second, east)[-1][0] == "success"),
                what="east's success on Gitea",
            )
            assert reader.requests >= 2

            # A second pod on another device; a new revision tightens the class past that one too (so it is
            # disruptive again), and west fails it. East applies the safe part and halts the class change.
            gpu_pod(kubectl, ns, name="trainer2", claim="held2")
            kubectl("wait", "-n", ns, "pod/trainer2", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")
            _, other = device_of(kubectl, ns, "held2")
            tightened = live_selector(kubectl, repo)
            repo.device_class_expression += f" && device.attributes['gpu.nvidia.com'].uuid != '{other}'"
            repo.claim_template("ml", "three-gpus", count=3)
            third = remote.push(repo, message="tighten the class again")
            finding = f"clusters/{west}.yaml:7:3 schema: unknown field 'spec.bogus'"
            post(gitea, remote, third, cluster=west, state="failure", description=finding)
            halted = f'wave 1 failed: {west} failure "{finding}": later waves halt'
            await waits.eventually(
                lambda: _rollout_is(admin_client, east, waitsFor=halted, held=1), what="east halts", within=60
            )
            assert await get(admin_client, "resource.k8s.io/v1", "ResourceClaimTemplate", "three-gpus", ns)
            assert live_selector(kubectl, repo) == tightened, "the halted change was applied"
            held = (await fleetsync(admin_client, east))["status"]["waiting"]
            assert [(w["kind"], w["waitsFor"], w["action"]) for w in held] == [("DeviceClass", "wave", "configured")]
    finally:
        for pod in ("trainer", "trainer2"):
            kubectl("delete", "-n", ns, f"pod/{pod}", "--wait=true", "--timeout=60s", check=False)


def _applied_time(kubectl: Kubectl, repo: Repo) -> datetime.datetime:
    """When fleet last applied the DeviceClass (its field manager's managedFields time)."""
    obj = json.loads(
        kubectl("get", "deviceclass", repo.device_class_name, "-o", "json", "--show-managed-fields").stdout
    )
    [entry] = [m for m in obj["metadata"]["managedFields"] if m["manager"] == "fleet" and m["operation"] == "Apply"]
    return datetime.datetime.fromisoformat(entry["time"].replace("Z", "+00:00"))


async def _async(check: Any) -> Any:
    return check()


async def _rollout_is(client: kube.Client, cluster: str, **expected: Any) -> bool:
    got = await rollout(client, cluster)
    return all(got.get(k) == v for k, v in expected.items())


async def _rollout_starts(client: kube.Client, cluster: str, prefix: str) -> bool:
    return str((await rollout(client, cluster)).get("waitsFor") or "").startswith(prefix)
