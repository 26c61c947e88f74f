"""A team's objects are written as the team: the API server's RBAC refuses what validation missed.

Validation is made to miss a hostile template (its ``team-namespace`` check turned off), so only
impersonation stands between the team's pull request and another team's namespace; the API
server of the real sandbox decides, and is asked afterwards what was written.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from fleet import engine
from fleet.engine import impersonations, ownership, pipelines
from fleet.policy import tenancy
from fleet.sandbox import Sandbox
from fleetctl import cli
from tests.apply.conftest import Engine
from tests.apply.repos import Repo

pytestmark = pytest.mark.sandbox


@pytest.fixture()
def validation_misses_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn off the check that keeps a team's claims in its own namespaces (rule ``team-namespace``)."""

    def nothing(*args: object, **kwargs: object) -> Iterator[object]:
        return iter(())

    monkeypatch.setattr(tenancy, "_namespace", nothing)


def two_teams(repo: Repo) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.team("inf", namespaces=["inf"], group="inference")
    repo.claim_template("ml", "one-gpu")
    repo.claim_template("inf", "serving")


def templates(sandbox: Sandbox, namespace: str) -> dict[str, dict[str, object]]:
    out = sandbox.kubectl("get", "resourceclaimtemplates", "-n", namespace, "-o", "json").stdout
    return {item["metadata"]["name"]: item for item in json.loads(out)["items"]}


def written_at(sandbox: Sandbox, repo: Repo, revision: str) -> list[str]:
    """Every object of the test's cluster that carries ``revision`` (what that revision wrote)."""
    kinds = "namespaces,serviceaccounts,roles,rolebindings,resourcequotas,resourceclaimtemplates,deviceclasses"
    selector = f"{ownership.CLUSTER_LABEL}={repo.cluster}"
    out = sandbox.kubectl("get", kinds, "-A", "-l", selector, "-o", "json").stdout
    return [
        f"{item['kind']} {item['metadata'].get('namespace', '')}/{item['metadata']['name']}"
        for item in json.loads(out)["items"]
        if (item["metadata"].get("annotations") or {}).get(ownership.REVISION) == revision
    ]


def test_the_api_server_refuses_what_validation_missed_and_nothing_is_written(
    sandbox: Sandbox, repo: Repo, fleet: Engine, validation_misses_namespaces: None
) -> None:
    two_teams(repo)
    first = fleet.apply(impersonation="required")
    assert not first.failed, [c.error for c in first.failed]
    account = sandbox.kubectl("get", "serviceaccount", "-n", repo.ns("ml"), impersonations.SERVICE_ACCOUNT).stdout
    assert impersonations.SERVICE_ACCOUNT in account

    # Team ml's pull request: a template in its own namespace and one in team inf's.
    repo.claim_template("ml", "legit", count=2)
    repo.claim_template("ml", "sneaky", namespace=repo.ns("inf"))
    plan = fleet.plan()
    assert {d.ref.name for d in plan.objects if d.team == "ml"} >= {"legit", "sneaky"}, "validation missed it"
    changes = fleet.apply(impersonation="required")

    refused = {c.ref.name: c for c in changes.failed}
    assert set(refused) == {"sneaky"}, [c.error for c in changes.failed]
    error = refused["sneaky"].error
    assert refused["sneaky"].refused
    assert re.search(r"declared at teams/ml/sneaky\.yaml:\d+:\d+", error), error
    assert f'User "{impersonations.user(repo.ns("ml"))}" cannot patch resource "resourceclaimtemplates"' in error
    assert f'in the namespace "{repo.ns("inf")}"' in error
    # The API server holds nothing of the refused revision: not the hostile template, not the good one.
    assert "sneaky" not in templates(sandbox, repo.ns("inf"))
    assert "legit" not in templates(sandbox, repo.ns("ml"))
    assert written_at(sandbox, repo, plan.revision) == []


def test_diff_shows_the_refusal(
    sandbox: Sandbox,
    repo: Repo,
    fleet: Engine,
    validation_misses_namespaces: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    two_teams(repo)
    assert not fleet.apply(impersonation="required").failed
    repo.claim_template("ml", "sneaky", namespace=repo.ns("inf"))
    path = str(repo.write())
    capsys.readouterr()
    code = cli.run(["diff", path, "--cluster", repo.cluster, "--team-impersonation", "required"])
    out = capsys.readouterr().out
    assert code == 1, out
    line = next(x for x in out.splitlines() if x.startswith("error:") and "sneaky" in x)
    assert re.search(r"declared at teams/ml/sneaky\.yaml:\d+:\d+", line), line
    assert "cannot patch resource" in line and repo.ns("inf") in line, line
    assert "sneaky" not in templates(sandbox, repo.ns("inf"))


def test_required_refuses_a_team_without_a_service_account(sandbox: Sandbox, repo: Repo, fleet: Engine) -> None:
    """A plan whose tenancy declares no ServiceAccount for the team (and a cluster without one): under
    ``required`` nothing is written; ``optional`` writes the team's objects as the controller."""
    two_teams(repo)
    plan = fleet.plan()
    without = dataclasses.replace(plan, objects=tuple(d for d in plan.objects if d.ref.kind != "ServiceAccount"))

    def apply(mode: impersonations.Mode) -> engine.ChangeSet:
        options = engine.Options(impersonation=mode, health_timeout=30.0)
        return fleet.run(lambda c: engine.reconcile(client=c, plan=without, options=options))

    changes = apply("required")
    refused = [c for c in changes.failed if c.refused]
    assert {c.ref.name for c in refused} == {"one-gpu", "serving"}
    assert all("has no ServiceAccount" in c.error and "teams/" in c.error for c in refused), refused
    assert written_at(sandbox, repo, plan.revision) == []

    changes = apply("optional")
    assert not changes.failed, [c.error for c in changes.failed]
    assert "one-gpu" in templates(sandbox, repo.ns("ml"))


def diffed(repo: Repo, mode: impersonations.Mode, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    """``fleetctl diff --team-impersonation MODE -o json``: its exit code and entries by object name."""
    capsys.readouterr()
    argv = ["diff", str(repo.root), "--cluster", repo.cluster, "--team-impersonation", mode, "--cache-dir", ""]
    code = cli.run([*argv, "-o", "json"])
    entries = json.loads(capsys.readouterr().out)["entries"]
    return code, {e["object"]["name"]: e for e in entries}


def test_diff_without_impersonation_previews_the_team_s_objects_as_the_controller(
    sandbox: Sandbox,
    repo: Repo,
    fleet: Engine,
    validation_misses_namespaces: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--team-impersonation off`` previews what ``apply --team-impersonation off`` writes: the hostile
    template is created, as the controller, not refused to the team."""
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    two_teams(repo)
    assert not fleet.apply(impersonation="required").failed
    repo.claim_template("ml", "sneaky", namespace=repo.ns("inf"))
    repo.write()
    code, entries = diffed(repo, "off", capsys)
    assert code == 1
    assert entries["sneaky"]["action"] == "created", entries["sneaky"]
    assert not entries["sneaky"]["refused"] and not entries["sneaky"]["error"]
    assert not [e["error"] for e in entries.values() if e["error"]]
    assert "sneaky" not in templates(sandbox, repo.ns("inf"))


def test_diff_required_refuses_a_team_without_a_service_account(
    sandbox: Sandbox, repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``apply`` does (``test_required_refuses_a_team_without_a_service_account``): the plan declares no
    ServiceAccount for the teams and the cluster holds none, so ``required`` refuses their objects."""
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    load_plan = pipelines.load_plan

    def without_accounts(*args: Any, **kwargs: Any) -> engine.Plan:
        plan = load_plan(*args, **kwargs)
        return dataclasses.replace(plan, objects=tuple(d for d in plan.objects if d.ref.kind != "ServiceAccount"))

    monkeypatch.setattr(pipelines, "load_plan", without_accounts)
    two_teams(repo)
    repo.write()
    code, entries = diffed(repo, "required", capsys)
    assert code == 1
    refused = {name for name, e in entries.items() if e["refused"]}
    assert refused == {"one-gpu", "serving"}, entries
    assert all("has no ServiceAccount" in entries[name]["error"] for name in refused)
