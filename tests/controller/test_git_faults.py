"""Git faults (issue 11, item 5) through the controller: each has a clear FleetSync status, and the
last good revision stays enforced meanwhile (a RoleBinding deleted during the fault comes back).

The unreachable remote is ``test_sources.py``'s; here: history force-pushed, a commit that
deletes everything (refused unless the Fleet sets ``allowEmpty``), a repository over the
source's size limit. The 50,000-file repository is ``test_large_repository.py`` (slow).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from fleet import kube
from fleet.sandbox import Sandbox
from tests import waits
from tests.apply.repos import Repo
from tests.controller.conftest import Remote, git, running
from tests.controller.test_loop import _absent, _condition_at, _ready_at, condition, fleetsync, get, managed_versions

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]

RCT = "resource.k8s.io/v1"
RBAC = "rbac.authorization.k8s.io/v1"


@pytest.fixture()
def repo(tmp_path: Path) -> Repo:
    r = Repo(root=tmp_path / "unused")
    r.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    return r


async def _repaired_meanwhile(sandbox: Sandbox, client: kube.Client, namespace: str) -> None:
    """The last good revision is still enforced: a RoleBinding deleted now is re-created."""
    sandbox.kubectl("delete", "rolebinding", "fleet-team-claims", "-n", namespace)
    await waits.eventually(
        lambda: get(client, RBAC, "RoleBinding", "fleet-team-claims", namespace),
        within=30,
        what="RoleBinding repaired while the newest commit is not applied",
    )


async def test_a_force_pushed_history_is_followed_and_what_only_the_old_history_declared_is_pruned(
    sandbox: Sandbox, remote: Remote, repo: Repo, admin_client: kube.Client, tmp_path: Path
) -> None:
    ns = repo.ns("ml")
    repo.claim_template("ml", "kept")
    first = remote.push(repo, message="a team and a template")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache"):
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, first), what="Ready at the first commit")
        repo.claim_template("ml", "dropped")
        second = remote.push(repo, message="a template the force-push will drop")
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, second), what="Ready at the second commit")
        assert await get(admin_client, RCT, "ResourceClaimTemplate", "dropped", ns)

        # Someone rewrites main: back to the first commit, then another commit on top, pushed --force.
        remote.reset(first)
        del repo.claims["ml/dropped"]
        repo.claim_template("ml", "rewritten")
        third = remote.push(repo, message="rewritten history", force=True)
        ancestry = git(remote.work, "merge-base", second, third)
        assert ancestry == first, "the new head does not descend from the old one"

        synced = await waits.eventually(
            lambda: _ready_at(admin_client, repo.cluster, third), within=30, what="Ready at the rewritten head"
        )
        status = synced["status"]
        assert status["lastAttemptedRevision"] == third and status["enforcedRevision"] == third
        await waits.eventually(
            lambda: _absent(admin_client, RCT, "ResourceClaimTemplate", "dropped", ns),
            what="the template only the discarded history declared, pruned",
        )
        assert await get(admin_client, RCT, "ResourceClaimTemplate", "rewritten", ns)
        assert await get(admin_client, RCT, "ResourceClaimTemplate", "kept", ns)


async def test_a_commit_deleting_everything_is_refused_until_the_fleet_allows_an_empty_set(
    sandbox: Sandbox, remote: Remote, repo: Repo, admin_client: kube.Client, tmp_path: Path
) -> None:
    ns = repo.ns("ml")
    repo.claim_template("ml", "single-gpu")
    good = remote.push(repo, message="a team and a template")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache"):
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, good), what="Ready at the good commit")
        before = managed_versions(sandbox, repo.cluster)
        assert len(before) >= 6

        # 1. Every file deleted: the repository no longer names the cluster.
        def delete_all(work: Path) -> None:
            for child in work.iterdir():
                if child.name != ".git":
                    shutil.rmtree(child) if child.is_dir() else child.unlink()

        gone = remote.push(repo, message="delete every file", edit=delete_all)
        stalled = await waits.eventually(
            lambda: _condition_at(admin_client, repo.cluster, "Stalled", "True", attempted=gone),
            within=30,
            what="Stalled at the commit deleting every file",
        )
        finding = stalled["status"]["findings"][0]
        assert finding["location"] == f"clusters/{repo.cluster}.yaml", finding
        assert f"no Cluster named {repo.cluster!r}" in finding["message"], finding
        assert stalled["status"]["enforcedRevision"] == good and stalled["status"]["lastAppliedRevision"] == good
        assert managed_versions(sandbox, repo.cluster) == before

        # 2. Every object deleted, fleet.yaml and the Cluster kept: an empty plan, refused.
        repo.teams.clear()
        repo.claims.clear()
        repo.device_class = False
        empty = remote.push(repo, message="delete every object")
        stalled = await waits.eventually(
            lambda: _condition_at(admin_client, repo.cluster, "Stalled", "True", attempted=empty),
            within=30,
            what="Stalled at the empty commit",
        )
        status = stalled["status"]
        assert [f["rule"] for f in status["findings"]] == ["empty-revision"], status["findings"]
        assert status["findings"][0]["location"] == "fleet.yaml"
        assert f"declares no object for cluster {repo.cluster}" in status["findings"][0]["message"]
        assert status["enforcedRevision"] == good and status["lastAppliedRevision"] == good
        assert condition(stalled, "Ready") == "False"
        assert managed_versions(sandbox, repo.cluster) == before
        await _repaired_meanwhile(sandbox, admin_client, ns)

        # 3. The Fleet allows it: everything fleet applied is pruned.
        def allow_empty(work: Path) -> None:
            fleet = work / "fleet.yaml"
            fleet.write_text(fleet.read_text().replace("spec:\n", "spec:\n  allowEmpty: true\n", 1))

        allowed = remote.push(repo, message="empty on purpose", edit=allow_empty)
        await waits.eventually(
            lambda: _ready_at(admin_client, repo.cluster, allowed), within=90, what="Ready at the allowed empty commit"
        )
        await waits.eventually(
            lambda: _absent(admin_client, RCT, "ResourceClaimTemplate", "single-gpu", ns), what="pruned"
        )
        left = managed_versions(sandbox, repo.cluster)
        assert {k for k in left if not k.startswith("Namespace/")} == set(), left


async def test_a_repository_over_the_size_limit_is_refused_and_the_last_good_revision_stays_enforced(
    sandbox: Sandbox, remote: Remote, repo: Repo, admin_client: kube.Client, tmp_path: Path
) -> None:
    ns = repo.ns("ml")
    limit = 1024 * 1024
    good = remote.push(repo, message="a team")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", max_bytes=limit):
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, good), what="Ready at the small commit")

        def big_file(work: Path) -> None:
            (work / "data.bin").write_bytes(os.urandom(2 * limit))  # incompressible: the pack is as large

        remote.push(repo, message="a 2 MiB file", edit=big_file)

        async def too_large() -> dict[str, Any] | None:
            obj = await fleetsync(admin_client, repo.cluster)
            return obj if (obj.get("status") or {}).get("sourceReason") == "too-large" else None

        obj = await waits.eventually(too_large, within=30, what="sourceReason too-large")
        status = obj["status"]
        assert status["sourceReachable"] is False
        assert f"limit of {limit} bytes" in status["sourceError"], status["sourceError"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "SourceTooLarge")
        assert f"revision {good[:12]} stays enforced" in ready["message"]
        assert status["enforcedRevision"] == good and status["lastAppliedRevision"] == good
        await _repaired_meanwhile(sandbox, admin_client, ns)

        def drop_big_file(work: Path) -> None:
            (work / "data.bin").unlink()

        small = remote.push(repo, message="the file removed", edit=drop_big_file)
        recovered = await waits.eventually(
            lambda: _ready_at(admin_client, repo.cluster, small), within=30, what="Ready once the file is gone"
        )
        assert recovered["status"]["sourceReachable"] is True and recovered["status"]["sourceReason"] == ""
