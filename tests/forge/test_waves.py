"""Rollout waves through a real Gitea, between two clusters, each with its own controller.

``fleet.yaml`` says ``waves: [[west], [east]]`` with a 5 s bake. ``east`` is the shared sandbox,
``west`` a second sandbox of its own (one L4 node); each runs the real controller, following one
private repository on the real Gitea and posting its ``fleet/<cluster>`` statuses there. No hub:
east reads west's statuses back through Gitea's API.

The disruptive change is real: in east a pod holds a claim the real scheduler allocated from the
test's DeviceClass, and the class's selector is tightened past that device
(``fleet.engine.disruptions``); east's disruption policy is ``force``, so only the waves hold it. In
west no pod runs, so the same change is safe there and goes at once. West then fails a revision
for real (a namespace its new team needs already exists there and is not fleet's): east applies
that revision's safe part and halts its disruptive part, naming west's failure.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from fleet import hosts, kube
from fleet.controller import holds
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


async def rollout(client: kube.Client, cluster: str) -> dict[str, Any]:
    return dict(((await fleetsync(client, cluster)).get("status") or {}).get("rollout") or {})


async def test_a_later_wave_waits_for_the_earlier_waves_success_and_bake_and_halts_on_its_failure(
    gitea: Server,
    sandbox: Sandbox,
    own_sandbox: Sandbox,
    admin_client: kube.Client,
    kubectl: Kubectl,
    tmp_path: Path,
) -> None:
    west_sandbox = own_sandbox  # wave 1's cluster: a second control plane, fleet's overlay installed
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
    credentials = Credentials(token_file=token, username="fleet")

    def poster() -> hosts.Poster:
        return hosts.Poster(target=target, token_file=token, debounce=0.2)

    async def applied_at(revision: str) -> bool:
        return bool(((await fleetsync(admin_client, east)).get("status") or {}).get("lastAppliedRevision") == revision)

    def states(sha: str, cluster: str) -> list[tuple[str, str, str]]:
        listed = gitea.forge.api().statuses(remote.repository, sha)
        return [
            (s["status"], s["description"], s["created_at"])
            for s in reversed(listed)
            if s["context"] == f"fleet/{cluster}"
        ]

    try:
        async with (
            running(
                west_sandbox,
                remote,
                cluster=west,
                cache_dir=tmp_path / "west-cache",
                git_credentials=credentials,
                poster=poster(),
            ),
            running(
                sandbox,
                remote,
                cluster=east,
                cache_dir=tmp_path / "east-cache",
                git_credentials=credentials,
                poster=poster(),
                reader=reader,
                looks=holds.Looks(wave_poll=0.5),
            ),
        ):
            # Everything of the first commit is safe (new objects): wave 2 applies it without waiting.
            await waits.eventually(lambda: applied_at(first), what="the first commit applied in east, all safe")
            _, uuid = trainer(kubectl, ns)
            before = live_selector(kubectl, repo)

            # Tightened past east's pod's device: disruptive in east, safe in west (no pod there). East
            # applies the safe part at once and holds the class until west's success has stood 5 s.
            repo.device_class_expression = f"device.attributes['gpu.nvidia.com'].uuid != '{uuid}'"
            repo.claim_template("ml", "two-gpus", count=2)
            second = remote.push(repo, message="tighten the class; a template")
            await waits.eventually(
                lambda: get(admin_client, "resource.k8s.io/v1", "ResourceClaimTemplate", "two-gpus", ns),
                what="the safe part applied in east",
            )
            west_success = await waits.eventually(
                lambda: _async(lambda: [s for s in states(second, west) if s[0] == "success"]),
                what="west's controller posts success on Gitea",
                within=60,
            )
            posted = datetime.datetime.fromisoformat(west_success[0][2])
            await waits.eventually(
                lambda: _async(lambda: live_selector(kubectl, repo) != before),
                what="the DeviceClass applied in east after west's success and the bake",
                within=60,
            )
            assert _applied_time(kubectl, repo) >= posted + datetime.timedelta(seconds=BAKE)
            held = [s for s in states(second, east) if s[0] == "pending" and "wave 1" in s[1]]
            assert held, f"east's pending status named the wave it waited for: {states(second, east)}"
            await waits.eventually(lambda: _rollout_is(admin_client, east, waitsFor="", held=0), what="the wave let go")
            await waits.eventually(
                lambda: _async(lambda: states(second, east)[-1][0] == "success"), what="east's success on Gitea"
            )
            status = await rollout(admin_client, east)
            assert (status["wave"], status["after"], status["bake"]) == (2, [west], f"{BAKE}s")
            assert reader.requests >= 1

            # A second pod in east on another device; the next revision tightens past that one too (so it
            # is disruptive again in east) and adds a team whose namespace already exists in west, not
            # fleet's: west refuses the revision and posts failure. East applies the safe part (the new
            # team) and halts the class change, naming west's failure.
            gpu_pod(kubectl, ns, name="trainer2", claim="held2")
            kubectl("wait", "-n", ns, "pod/trainer2", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")
            _, other = device_of(kubectl, ns, "held2")
            tightened = live_selector(kubectl, repo)
            blocked = repo.ns("blocked")
            west_sandbox.kubectl("create", "namespace", blocked)
            repo.team("blocked", namespaces=["blocked"], group="blocked")
            repo.device_class_expression += f" && device.attributes['gpu.nvidia.com'].uuid != '{other}'"
            third = remote.push(repo, message="tighten the class again; a team")
            failed = await waits.eventually(
                lambda: _async(lambda: [s for s in states(third, west) if s[0] == "failure"]),
                what="west's controller posts failure on Gitea",
                within=60,
            )
            halted = f'wave 1 failed: {west} failure "{failed[0][1]}": later waves halt'
            await waits.eventually(
                lambda: _rollout_is(admin_client, east, waitsFor=halted, held=1), what="east halts", within=60
            )
            assert await get(admin_client, "v1", "Namespace", blocked), "east applied the safe part"
            assert live_selector(kubectl, repo) == tightened, "the halted change was applied"
            held_now = (await fleetsync(admin_client, east))["status"]["waiting"]
            assert [(w["kind"], w["waitsFor"], w["action"]) for w in held_now] == [
                ("DeviceClass", "wave", "configured")
            ]
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
