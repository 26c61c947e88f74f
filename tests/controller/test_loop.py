"""The controller loop against the sandbox and a real git remote: commits, bad commits, drift.

Each test makes real commits to its own repository (its own cluster name, ledger,
namespaces and DeviceClass) and runs the controller loop in-process, so it can read the
loop's own counters; what it asserts about the cluster it reads from the API server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fleet import kube
from fleet.controller import statuses
from fleet.engine import ownership, plancaches
from fleet.engine.plans import Plan
from fleet.sandbox import Sandbox, credentials
from tests import waits
from tests.apply.repos import Repo
from tests.controller.conftest import Remote, fleetsync_events, running

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]

RCT = "resource.k8s.io/v1"


async def get(
    client: kube.Client, api_version: str, kind: str, name: str, namespace: str = ""
) -> dict[str, Any] | None:
    try:
        return await client.get(kube.Ref(api_version=api_version, kind=kind, namespace=namespace, name=name))
    except kube.NotFound:
        return None


async def fleetsync(client: kube.Client, cluster: str) -> dict[str, Any]:
    return (await get(client, statuses.API_VERSION, statuses.KIND, cluster)) or {}


def condition(obj: dict[str, Any], kind: str) -> str:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c["type"] == kind:
            return str(c["status"])
    return ""


def fleetctl_status(sandbox: Sandbox, cluster: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "fleetctl", "status", "--cluster", cluster, "--kubeconfig", str(sandbox.kubeconfig)]
    argv += ["--context", credentials.CLUSTER, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def managed_versions(sandbox: Sandbox, cluster: str) -> dict[str, str]:
    """resourceVersion of every object fleet manages for ``cluster`` (by kind/namespace/name)."""
    kinds = "namespaces,roles,rolebindings,resourcequotas,deviceclasses,resourceclaimtemplates"
    selector = f"{ownership.MANAGED_BY}={ownership.MANAGER},{ownership.CLUSTER_LABEL}={cluster}"
    items = json.loads(sandbox.kubectl("get", kinds, "-A", "-l", selector, "-o", "json").stdout)["items"]
    return {
        f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
        for o in items
    }


@pytest.fixture()
def repo(tmp_path: Path) -> Repo:
    r = Repo(root=tmp_path / "unused")
    r.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    return r


async def test_a_commit_is_applied_and_its_revert_prunes_it(
    sandbox: Sandbox, remote: Remote, repo: Repo, admin_client: kube.Client, tmp_path: Path
) -> None:
    first = remote.push(repo, message="a team")
    ns = repo.ns("ml")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache") as ctl:
        await waits.eventually(lambda: get(admin_client, "v1", "Namespace", ns), what=f"namespace {ns}")
        synced = await waits.eventually(
            lambda: _ready_at(admin_client, repo.cluster, first), what="FleetSync Ready at the first commit"
        )
        assert synced["status"]["lastAppliedRevision"] == first

        repo.claim_template("ml", "single-gpu")
        second = remote.push(repo, message="ml: a claim template")
        await waits.eventually(
            lambda: get(admin_client, RCT, "ResourceClaimTemplate", "single-gpu", ns), what="template"
        )
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, second), what="Ready at the second commit")

        repo.claims.clear()
        third = remote.push(repo, message="Revert: ml: a claim template")
        await waits.eventually(
            lambda: _absent(admin_client, RCT, "ResourceClaimTemplate", "single-gpu", ns), what="template pruned"
        )
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, third), what="Ready at the revert")
        assert ctl.stats.plans == 3


@dataclass(frozen=True)
class RecordingStore(plancaches.PlanCache):
    """A plan cache that records what each ``get`` found and each ``put`` stored."""

    found: list[bool] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)

    def get(self, key: str) -> Plan | None:
        plan = super().get(key)
        self.found.append(plan is not None)
        return plan

    def put(self, key: str, plan: Plan) -> bool:
        self.stored.append(plan.revision)
        return super().put(key, plan)


async def test_a_restarted_controller_takes_the_plan_it_stored(
    sandbox: Sandbox, remote: Remote, repo: Repo, admin_client: kube.Client, tmp_path: Path
) -> None:
    """The state directory outlives a container restart (an emptyDir): the new process finds the
    plan of the revision it left applied, plans nothing and writes nothing."""
    repo.claim_template("ml", "single-gpu")
    first = remote.push(repo, message="a team")
    before = RecordingStore(tmp_path / "state" / "plans")
    cache = tmp_path / "cache"
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=cache, store=before, store_after=0.5):
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, first), what="Ready at the first commit")

        async def stored() -> bool:
            return before.stored == [first]

        await waits.eventually(stored, what="the plan stored once no newer one came")
    assert before.found == [False] and before.stored == [first], "stored once, not again at shutdown"
    applied = managed_versions(sandbox, repo.cluster)

    after = RecordingStore(tmp_path / "state" / "plans")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", store=after) as ctl:

        async def reconciled() -> bool:
            return ctl.stats.finished >= 1

        await waits.eventually(reconciled, what="the restarted controller's first reconcile")
    assert after.found == [True] and after.stored == [], "the stored plan, not a new one"
    assert managed_versions(sandbox, repo.cluster) == applied, "nothing written"


async def test_a_controller_stopping_stores_the_plan_it_has_not_stored_yet(
    sandbox: Sandbox, remote: Remote, repo: Repo, admin_client: kube.Client, tmp_path: Path
) -> None:
    """Commits in a row are not each pickled (``store_after``): the last plan is stored when the
    controller stops, so the next start takes it back."""
    repo.claim_template("ml", "single-gpu")
    first = remote.push(repo, message="a team")
    store = RecordingStore(tmp_path / "state" / "plans")
    cache = tmp_path / "cache"
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=cache, store=store, store_after=3600):
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, first), what="Ready at the first commit")
        assert store.stored == [], "not stored while commits may still come"
    assert store.stored == [first], "stored on the way out"


async def test_a_bad_commit_changes_nothing_and_the_fix_recovers(
    sandbox: Sandbox, remote: Remote, repo: Repo, admin_client: kube.Client, tmp_path: Path
) -> None:
    repo.claim_template("ml", "single-gpu")
    good = remote.push(repo, message="good")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache"):
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, good), what="Ready at the good commit")
        before = managed_versions(sandbox, repo.cluster)
        assert len(before) >= 6

        def break_quota(work: Path) -> None:
            team = work / "teams" / "ml" / "team.yaml"
            team.write_text(team.read_text().replace("spec:\n", "spec:\n  bogus: true\n", 1))

        bad = remote.push(repo, message="bad: unknown field", edit=break_quota)
        stalled = await waits.eventually(
            lambda: _condition_at(admin_client, repo.cluster, "Stalled", "True", attempted=bad), what="Stalled"
        )
        status = stalled["status"]
        assert condition(stalled, "Ready") == "False"
        assert status["lastAppliedRevision"] == good and status["enforcedRevision"] == good
        assert status["findings"], status
        assert {"location": "teams/ml/team.yaml:6:3", "rule": "schema", "message": "unknown field 'spec.bogus'"} in (
            status["findings"]
        )
        assert managed_versions(sandbox, repo.cluster) == before
        shown = fleetctl_status(sandbox, repo.cluster)
        assert shown.returncode == 1, shown.stderr
        assert "teams/ml/team.yaml:6:3 schema unknown field 'spec.bogus'" in shown.stdout
        assert f"applied    {good}" in shown.stdout and f"attempted  {bad}" in shown.stdout

        fixed = remote.push(repo, message="fix")
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, fixed), what="Ready after the fix")
        assert condition(await fleetsync(admin_client, repo.cluster), "Stalled") == "False"
        shown = fleetctl_status(sandbox, repo.cluster, "-o", "json")
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert json.loads(shown.stdout)[0]["status"]["lastAppliedRevision"] == fixed


@pytest.mark.parametrize("policy", ["enforce", "report"])
async def test_drift_from_watch_events_follows_the_policy(
    sandbox: Sandbox, remote: Remote, tmp_path: Path, admin_client: kube.Client, policy: str
) -> None:
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4, drift=policy)
    ns = repo.ns("ml")
    dc = repo.device_class_name
    revision = remote.push(
        repo,
        message="drift policy",
        edit=lambda work: _fleet_default_drift(work, policy),
    )
    # The DeviceClass edit below takes its selectors under kubectl's field manager: under enforce fleet
    # takes them back with force (tests/controller/test_conflicts.py), under report it leaves them.
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache") as ctl:
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, revision), what="Ready")
        reconciles = ctl.stats.reconciles
        patch = json.dumps({"spec": {"selectors": [{"cel": {"expression": "device.driver == 'drifted'"}}]}})
        sandbox.kubectl("patch", "deviceclass", dc, "--type=merge", "-p", patch)
        sandbox.kubectl("delete", "rolebinding", "fleet-team-claims", "-n", ns)

        if policy == "enforce":

            async def repaired() -> bool:
                live = await get(admin_client, RCT, "DeviceClass", dc)
                rb = await get(admin_client, "rbac.authorization.k8s.io/v1", "RoleBinding", "fleet-team-claims", ns)
                expression = (live or {})["spec"]["selectors"][0]["cel"]["expression"]
                return rb is not None and expression == repo.device_class_expression

            await waits.eventually(repaired, within=30, what="DeviceClass and RoleBinding repaired")
        else:

            async def reported() -> dict[str, Any] | None:
                obj = await fleetsync(admin_client, repo.cluster)
                kinds = {d["kind"] for d in (obj.get("status") or {}).get("drift") or ()}
                return obj if {"DeviceClass", "RoleBinding"} <= kinds else None

            obj = await waits.eventually(reported, within=30, what="drift in status")
            assert {d["action"] for d in obj["status"]["drift"]} == {"reported"}
            assert obj["status"]["driftCount"] >= 2
            live = await get(admin_client, RCT, "DeviceClass", dc)
            assert (
                live is not None and live["spec"]["selectors"][0]["cel"]["expression"] == "device.driver == 'drifted'"
            )
            assert (
                await get(admin_client, "rbac.authorization.k8s.io/v1", "RoleBinding", "fleet-team-claims", ns) is None
            )
            events = fleetsync_events(sandbox, repo.cluster)
            assert any(e["reason"] == "Drift" and "DeviceClass" in e["message"] for e in events)
            scraped = ctl.metrics.render()[0].decode()
            assert 'fleet_drift_detected_total{stage="classes"}' in scraped
        assert ctl.stats.reconciles > reconciles  # woken by the watch events, not a poll of the cluster


def _fleet_default_drift(work: Path, policy: str) -> None:
    fleet = work / "fleet.yaml"
    fleet.write_text(fleet.read_text().replace("spec:\n", f"spec:\n  defaults:\n    driftPolicy: {policy}\n", 1))


async def _ready_at(client: kube.Client, cluster: str, revision: str) -> dict[str, Any] | None:
    obj = await fleetsync(client, cluster)
    status = obj.get("status") or {}
    ok = condition(obj, "Ready") == "True" and status.get("lastAppliedRevision") == revision
    return obj if ok else None


async def _condition_at(
    client: kube.Client, cluster: str, kind: str, value: str, *, attempted: str
) -> dict[str, Any] | None:
    obj = await fleetsync(client, cluster)
    ok = condition(obj, kind) == value and (obj.get("status") or {}).get("lastAttemptedRevision") == attempted
    return obj if ok else None


async def _absent(client: kube.Client, api_version: str, kind: str, name: str, namespace: str) -> bool:
    return await get(client, api_version, kind, name, namespace) is None
