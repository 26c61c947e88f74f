"""The real controller process posts each revision's outcome as a commit status.

``python -m fleet.controller`` with the commit status flags follows a real git remote and
applies to the sandbox; the git host's API is ``tests.hosts.apis.StatusAPI``, a loopback
HTTP server standing in for GitHub's statuses API (a SaaS API that cannot be reached from
here: a test double, which records each request for the test to check). An applied
commit gets ``success`` with the number of objects, a rejected one ``failure`` with its
first finding's ``file:line:col``; a reconcile repeated for the same revision posts
nothing new, and ``fleet_commit_status_posts_total`` counts the posts.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet.sandbox import Sandbox
from fleet.sandbox.processes import free_port
from tests import waits
from tests.apply.repos import Repo
from tests.controller.conftest import Remote
from tests.controller.replicas import Replicas
from tests.hosts.apis import Received, StatusAPI

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("fleetsync_crd")]

TOKEN = "status-token-0123456789abcdef"


def statuses_for(api: StatusAPI, sha: str) -> list[Received]:
    with api.lock:
        return [r for r in api.received if r.path.endswith(f"/statuses/{sha}")]


def last_state(api: StatusAPI, sha: str) -> str:
    posted = statuses_for(api, sha)
    return str(posted[-1].json()["state"]) if posted else ""


def metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        f"{s.name}{{{','.join(f'{k}={v}' for k, v in sorted(s.labels.items()))}}}": s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_applied_is_success_and_rejected_is_failure_with_file_and_line(
    sandbox: Sandbox, remote: Remote, tmp_path: Path
) -> None:
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.claim_template("ml", "single-gpu")
    good = remote.push(repo, message="good")
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    api = StatusAPI()
    port = free_port()
    replicas = Replicas(sandbox, remote, repo.cluster, tmp_path)
    with api.serving() as base:
        try:
            replicas.start(
                "poster",
                "--no-leader-elect",
                f"--listen=127.0.0.1:{port}",
                f"--commit-status-token-file={token}",
                "--commit-status-provider=github",
                f"--commit-status-api-url={base}/api/v3",
                "--commit-status-repository=org/fleet",
                "--commit-status-target-url=https://dash.example.com/{cluster}/{sha}",
            )
            waits.wait_for(
                lambda: last_state(api, good) == "success", within=120, what="success posted for the good commit"
            )

            def break_team(work: Path) -> None:
                team = work / "teams" / "ml" / "team.yaml"
                team.write_text(team.read_text().replace("spec:\n", "spec:\n  bogus: true\n", 1))

            bad = remote.push(repo, message="bad: unknown field", edit=break_team)
            waits.wait_for(
                lambda: last_state(api, bad) == "failure", within=120, what="failure posted for the bad commit"
            )
            seen = metrics(port)
        finally:
            replicas.stop()
    log = replicas.log("poster", tail=100_000)
    assert TOKEN not in log

    applied = statuses_for(api, good)
    assert [r.json()["state"] for r in applied] in (["pending", "success"], ["success"]), applied
    success = applied[-1]
    assert success.method == "POST" and success.path == f"/api/v3/repos/org/fleet/statuses/{good}"
    assert success.headers["authorization"] == f"Bearer {TOKEN}"
    assert success.headers["accept"] == "application/vnd.github+json"
    assert success.headers["x-github-api-version"] == "2022-11-28"
    assert success.json() == {
        "state": "success",
        "context": f"fleet/{repo.cluster}",
        "description": success.json()["description"],
        "target_url": f"https://dash.example.com/{repo.cluster}/{good}",
    }
    assert success.json()["description"].startswith("applied ") and success.json()["description"].endswith(" objects")

    [failure] = statuses_for(api, bad)
    assert failure.json()["description"] == "teams/ml/team.yaml:6:3 schema: unknown field 'spec.bogus'"
    assert failure.json()["context"] == f"fleet/{repo.cluster}"
    assert seen.get("fleet_commit_status_posts_total{result=posted}", 0) == len(api.received)
