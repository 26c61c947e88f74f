"""The controller under --team-impersonation=required: a commit the API server refuses to its team
is reported with the file:line and the refusal, and nothing of it is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet import kube
from fleet.engine import impersonations
from fleet.policy import tenancy
from fleet.sandbox import Sandbox
from tests import waits
from tests.apply.repos import Repo
from tests.controller.conftest import Remote, running
from tests.controller.test_loop import condition, fleetsync, managed_versions

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]


@pytest.fixture()
def validation_misses_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn off the check that keeps a team's claims in its own namespaces (rule ``team-namespace``)."""

    def nothing(*args: object, **kwargs: object) -> Iterator[object]:
        return iter(())

    monkeypatch.setattr(tenancy, "_namespace", nothing)


async def test_a_refused_commit_is_reported_and_writes_nothing(
    sandbox: Sandbox,
    remote: Remote,
    admin_client: kube.Client,
    tmp_path: Path,
    validation_misses_namespaces: None,
) -> None:
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.team("inf", namespaces=["inf"], group="inference")
    repo.claim_template("ml", "one-gpu")
    good = remote.push(repo, message="two teams")

    async def ready_at(revision: str) -> dict[str, Any] | None:
        obj = await fleetsync(admin_client, repo.cluster)
        ok = condition(obj, "Ready") == "True" and (obj.get("status") or {}).get("lastAppliedRevision") == revision
        return obj if ok else None

    async def failed_at(revision: str) -> dict[str, Any] | None:
        obj = await fleetsync(admin_client, repo.cluster)
        status = obj.get("status") or {}
        ready = [c for c in status.get("conditions") or () if c["type"] == "Ready"]
        ok = ready and ready[0]["reason"] == "ReconcileFailed" and status.get("lastAttemptedRevision") == revision
        return obj if ok else None

    cache = tmp_path / "cache"
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=cache, team_impersonation="required"):
        await waits.eventually(lambda: ready_at(good), what="Ready at the good commit")
        before = managed_versions(sandbox, repo.cluster)
        assert any(key.startswith("ResourceClaimTemplate/") for key in before)

        repo.claim_template("ml", "two-gpus", count=2)
        repo.claim_template("ml", "sneaky", namespace=repo.ns("inf"))
        bad = remote.push(repo, message="ml: two templates, one in inf's namespace")
        refused = await waits.eventually(lambda: failed_at(bad), what="ReconcileFailed at the refused commit")

    assert refused is not None
    ready = next(c for c in refused["status"]["conditions"] if c["type"] == "Ready")
    assert "declared at teams/ml/sneaky.yaml:" in ready["message"], ready
    user = impersonations.user(repo.ns("ml"))
    assert f'User "{user}" cannot patch resource "resourceclaimtemplates"' in ready["message"], ready
    assert refused["status"]["lastAppliedRevision"] == good
    assert managed_versions(sandbox, repo.cluster) == before, "nothing of the refused commit was written"
