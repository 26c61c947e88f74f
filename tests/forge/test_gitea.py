"""fleet with a real git forge: the controller follows a repository on Gitea, as a platform team runs it.

The real ``fleet-controller`` process clones a private repository over HTTP with a token and
applies it to the sandbox. A team's change is a real pull request, opened through Gitea's
API; the Gitea Actions ``comment`` step of docs/validate.md posts ``fleetctl diff -o
markdown`` on it and edits that comment on the next push. The pull request is merged through
the API, and Gitea's own push webhook (``X-Gitea-Signature``) wakes the controller: the poll
interval is ten minutes, so only the webhook can bring the merge in time. Each revision's
outcome is a commit status that Gitea's API returns.

The faults (issue 32, §6) each leave the controller running and say why: a webhook with the
wrong secret, Gitea stopped, the token revoked. A forge answering 500 is the loopback double's
(``tests/hosts/test_posters.py``), where the answer can be chosen.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fleet.sandbox import Sandbox, clusters, credentials, forges, processes, versions
from fleet.sandbox.processes import free_port
from tests.apply.repos import Repo
from tests.controller.replicas import Replicas, ready_at
from tests.controller.test_commit_statuses import metrics
from tests.forge.conftest import ForgeRemote, Server
from tests.validate.test_ci_recipes import recipes
from tests.waits import wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.extras("gitea"), pytest.mark.usefixtures("fleetsync_crd")]

SECRET = "gitea-hook-secret"


def a_repo(tmp_path: Path) -> Repo:
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=8)
    repo.claim_template("ml", "single-gpu")
    return repo


def start_controller(
    replicas: Replicas, *, port: int, token: Path, secret: str, interval: str, remote: ForgeRemote
) -> None:
    secret_file = replicas.root / "webhook-secret"
    secret_file.write_text(secret)
    replicas.start(
        "ctl",
        "--no-leader-elect",
        f"--listen=127.0.0.1:{port}",
        f"--interval={interval}",
        f"--git-token-file={token}",
        f"--webhook-secret-file={secret_file}",
        f"--commit-status-token-file={token}",
        "--commit-status-provider=gitea",
    )


def states(server: Server, remote: ForgeRemote, sha: str, context: str) -> list[tuple[str, str]]:
    """(state, description) of every status ``context`` on ``sha``, oldest first, as Gitea's API lists them."""
    listed = server.forge.api().statuses(remote.repository, sha)
    return [(s["status"], s["description"]) for s in reversed(listed) if s["context"] == context]


def last_state(server: Server, remote: ForgeRemote, sha: str, context: str) -> str:
    posted = states(server, remote, sha, context)
    return posted[-1][0] if posted else ""


def fleetsync(sandbox: Sandbox, cluster: str) -> dict[str, Any]:
    out = sandbox.kubectl("get", "fleetsync", cluster, "-o", "json", check=False)
    return dict(json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def ready_reason(sandbox: Sandbox, cluster: str) -> str:
    ready = [c for c in fleetsync(sandbox, cluster).get("conditions") or () if c["type"] == "Ready"]
    return f"{ready[0]['status']}/{ready[0]['reason']}" if ready else ""


def comment_step(*, server: Server, remote: ForgeRemote, number: int, comment: Path) -> None:
    """The ``comment`` step of the Gitea Actions recipe in docs/validate.md, run as the runner would."""
    (workflow,) = [r for r in recipes() if isinstance(r, dict) and "issues" in r.get("permissions", {})]
    (step,) = [s for s in workflow["jobs"]["diff"]["steps"] if s.get("name") == "comment"]
    env = dict(
        os.environ,
        TOKEN=server.forge.token,
        API=f"{server.forge.url}api/v1",
        REPO=remote.repository,
        PR=str(number),
    )
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], cwd=comment.parent, env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr


def diff_markdown(sandbox: Sandbox, remote: ForgeRemote, cluster: str, out: Path) -> str:
    """``fleetctl diff -o markdown --base origin/main`` of the pull request's checkout, into ``out``."""
    argv = [sys.executable, "-m", "fleetctl", "diff", str(remote.work), "--cluster", cluster,
            "--kubeconfig", str(sandbox.kubeconfig), "--context", credentials.CLUSTER,
            "-o", "markdown", "--base", "origin/main"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr  # 1: changes
    out.write_text(done.stdout)
    return done.stdout


def test_a_pull_request_on_gitea_is_commented_merged_and_applied_by_its_webhook(
    gitea: Server, sandbox: Sandbox, tmp_path: Path
) -> None:
    remote = ForgeRemote(tmp_path / "git", forge=gitea.forge)
    repo = a_repo(tmp_path)
    first = remote.push(repo, message="the fleet")
    api, cluster, context = gitea.forge.api(), repo.cluster, f"fleet/{repo.cluster}"
    port = free_port()
    api.add_webhook(remote.repository, url=f"http://127.0.0.1:{port}/webhook", secret=SECRET, branch="main")
    replicas = Replicas(sandbox, remote, cluster, tmp_path)
    try:
        start_controller(replicas, port=port, token=gitea.forge.token_file, secret=SECRET, interval="10m",
                         remote=remote)  # fmt: skip
        wait_for(lambda: ready_at(sandbox, cluster, first), within=120, what="the first commit applied")
        wait_for(lambda: last_state(gitea, remote, first, context) == "success", within=60, what="success on it")
        posted = states(gitea, remote, first, context)
        assert [s for s, _ in posted] in (["pending", "success"], ["success"]), posted
        assert re.fullmatch(r"applied \d+ objects", posted[-1][1]), posted

        # A team's pull request: two pushes, one comment that CI edits in place.
        git = remote.work
        subprocess.run(["git", "-C", str(git), "checkout", "-q", "-b", "ml/two"], check=True)
        repo.claim_template("ml", "two-gpus", count=2)
        remote_branch_push(remote, repo, message="ml: two GPUs")
        pull = api.open_pull(remote.repository, head="ml/two", base="main", title="ml: a two-GPU template")
        comment = tmp_path / "ci" / "comment.md"
        comment.parent.mkdir()
        text = diff_markdown(sandbox, remote, cluster, comment)
        comment_step(server=gitea, remote=remote, number=pull["number"], comment=comment)
        [posted_comment] = api.comments(remote.repository, pull["number"])
        assert posted_comment["body"].strip() == text.strip()
        assert "`teams/ml/two-gpus.yaml:" in text and str(git) not in text, "files named from the repository root"

        repo.claim_template("ml", "three-gpus", count=3)
        remote_branch_push(remote, repo, message="ml: and three")
        text = diff_markdown(sandbox, remote, cluster, comment)
        comment_step(server=gitea, remote=remote, number=pull["number"], comment=comment)
        [edited] = api.comments(remote.repository, pull["number"])
        assert edited["id"] == posted_comment["id"] and "three-gpus" in edited["body"], "the same comment, edited"

        # Merged through the API: only Gitea's webhook can bring it before the 10-minute poll.
        before = metrics(port).get("fleet_webhook_requests_total{result=accepted}", 0)
        api.merge_pull(remote.repository, pull["number"], message="Merge pull request")
        merged = api.call("GET", f"/repos/{remote.repository}/pulls/{pull['number']}")["merge_commit_sha"]
        wait_for(lambda: ready_at(sandbox, cluster, merged), within=90, what="the merge applied through the webhook")
        assert metrics(port).get("fleet_webhook_requests_total{result=accepted}", 0) > before
        assert "X-Gitea-Signature" not in replicas.log("ctl", tail=100_000), "no refused delivery"
        wait_for(lambda: last_state(gitea, remote, merged, context) == "success", within=60, what="merge: success")

        # A bad commit on main: refused, and the forge shows why with file:line:col.
        subprocess.run(["git", "-C", str(git), "checkout", "-q", "main"], check=True)
        subprocess.run(["git", "-C", str(git), "pull", "-q", "origin", "main"], check=True, capture_output=True)

        def break_team(work: Path) -> None:
            team = work / "teams" / "ml" / "team.yaml"
            team.write_text(team.read_text().replace("spec:\n", "spec:\n  bogus: true\n", 1))

        bad = remote.push(repo, message="bad", edit=break_team)
        wait_for(lambda: last_state(gitea, remote, bad, context) == "failure", within=90, what="bad: failure")
        assert states(gitea, remote, bad, context)[-1][1] == "teams/ml/team.yaml:6:3 schema: unknown field 'spec.bogus'"
    finally:
        replicas.stop()
    assert gitea.forge.token not in replicas.log("ctl", tail=1_000_000)


def remote_branch_push(remote: ForgeRemote, repo: Repo, *, message: str) -> None:
    repo.root = remote.work
    repo.write()
    for argv in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message],
                 ["push", "-q", "origin", "HEAD"]):  # fmt: skip
        subprocess.run(["git", "-C", str(remote.work), *argv], check=True, capture_output=True, timeout=60)


def test_forge_faults_leave_the_controller_running_and_say_why(gitea: Server, sandbox: Sandbox, tmp_path: Path) -> None:
    remote = ForgeRemote(tmp_path / "git", forge=gitea.forge)
    repo = a_repo(tmp_path)
    first = remote.push(repo, message="the fleet")
    admin = gitea.forge.api(password=True)
    name = f"ctl-{remote.name}"
    token = tmp_path / "token"
    token.write_text(admin.create_token(name) + "\n")
    port = free_port()
    gitea.forge.api().add_webhook(
        remote.repository, url=f"http://127.0.0.1:{port}/webhook", secret="not-the-secret", branch="main"
    )
    replicas = Replicas(sandbox, remote, repo.cluster, tmp_path)
    cluster = repo.cluster
    try:
        start_controller(replicas, port=port, token=token, secret=SECRET, interval="2s", remote=remote)
        wait_for(lambda: ready_at(sandbox, cluster, first), within=120, what="the first commit applied")

        # A webhook signed with the wrong secret: refused (401), counted, logged; the poll still works.
        second = remote.push(repo, message="second")
        wait_for(lambda: metrics(port).get("fleet_webhook_requests_total{result=unauthorized}", 0) >= 1, within=60,
                 what="the wrongly signed delivery refused")  # fmt: skip
        assert "401 unauthorized (missing or wrong X-Gitea-Signature)" in replicas.log("ctl", tail=100_000)
        wait_for(lambda: ready_at(sandbox, cluster, second), within=60, what="the poll applied it all the same")

        # Gitea stopped: the source is unreachable, the last revision stays enforced; back when Gitea is.
        gitea.stop()
        try:
            wait_for(lambda: ready_reason(sandbox, cluster) == "False/SourceUnreachable", within=60,
                     what="Ready False, SourceUnreachable")  # fmt: skip
            status = fleetsync(sandbox, cluster)
            assert status["sourceReachable"] is False and status["enforcedRevision"] == second
            assert metrics(port).get("fleet_git_fetch_errors_total{reason=unreachable}", 0) >= 1
            assert replicas.procs["ctl"].poll() is None
        finally:
            gitea.start()
        wait_for(lambda: ready_reason(sandbox, cluster) == "True/Applied", within=60, what="Ready again")

        # The token revoked: the fetch is refused and the status says so; commit statuses are refused too.
        admin.delete_token(name)
        wait_for(lambda: ready_reason(sandbox, cluster) == "False/SourceUnauthorized", within=60,
                 what="Ready False, SourceUnauthorized")  # fmt: skip
        assert "authentication failed" in fleetsync(sandbox, cluster)["sourceError"].lower()
        assert metrics(port).get("fleet_git_fetch_errors_total{reason=unauthorized}", 0) >= 1
        assert replicas.procs["ctl"].poll() is None and processes.alive(gitea.running)
    finally:
        replicas.stop()


def test_sandbox_env_prints_the_forges_url_and_a_working_token_of_the_pinned_gitea(gitea: Server) -> None:
    root = gitea.forge.directory.parent
    clusters.Sandbox(directory=root, ports={"apiserver": 1}, bin_dir={"kubectl": "/bin/true"},
                     forge_port=gitea.forge.port).save()  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "fleetctl", "sandbox", "--dir", str(root), "env"],
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    exported = dict(re.findall(r"^export (FLEET_FORGE_\w+)=(\S+)$", done.stdout, re.MULTILINE))
    assert exported["FLEET_FORGE_URL"] == gitea.forge.url
    me = forges.Api(url=exported["FLEET_FORGE_URL"], token=exported["FLEET_FORGE_TOKEN"]).call("GET", "/user")
    assert me["login"] == forges.ADMIN and me["is_admin"] is True
    assert gitea.forge.api().call("GET", "/version") == {"version": versions.GITEA.removeprefix("v")}
