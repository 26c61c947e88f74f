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
from fleet.policy import structures, tenancy
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


@pytest.fixture()
def validation_misses_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn off the placement rules: a team's folder may then hold any kind (what only RBAC stops)."""

    def nothing(*args: object, **kwargs: object) -> Iterator[object]:
        return iter(())

    monkeypatch.setattr(structures, "placement", nothing)


HOSTILE_CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: {name}
spec:
  selectors:
  - cel:
      expression: "device.driver == 'gpu.nvidia.com'"
"""

HOSTILE_POOL = """\
apiVersion: fleet.gpufleet.dev/v1alpha1
kind: GPUNodePool
metadata:
  name: {name}
spec:
  nodeSelector:
    sandbox.fleet.gpufleet.dev/pool: l4x4
  labels:
    {label}: ml
  taints: []
  gpu:
    productName: NVIDIA L4
    count: 4
  nodes: 1
"""


def test_every_kind_of_a_team_folder_is_written_as_the_team(
    sandbox: Sandbox, repo: Repo, fleet: Engine, validation_misses_placement: None
) -> None:
    """The identity follows the file's origin, not its kind: a DeviceClass that selects every GPU and
    a GPUNodePool that labels a node no other pool selects, both in a team's folder, go as the team."""
    two_teams(repo)
    assert not fleet.apply(impersonation="required").failed
    label = f"t{repo.id}.example.com/owner"
    repo.files["teams/ml/every-gpu.yaml"] = HOSTILE_CLASS.format(name=f"every-{repo.id}.example.com")
    repo.files["teams/ml/pool.yaml"] = HOSTILE_POOL.format(name=f"mine-{repo.id}", label=label)
    repo.claim_template("ml", "legit", count=2)
    plan = fleet.plan()
    assert {d.team for d in plan.objects if d.ref.kind == "DeviceClass" and "every" in d.ref.name} == {"ml"}
    assert [p.team for p in plan.pools] == ["ml"], "validation missed both"
    try:
        changes = fleet.apply(impersonation="required")
        refused = {f"{c.ref.kind} {c.ref.name}": c for c in changes.failed}
        assert set(refused) == {f"DeviceClass every-{repo.id}.example.com", "Node l4x4-01"}, refused
        assert re.search(r"declared at teams/ml/every-gpu\.yaml:\d+:\d+", refused[next(iter(refused))].error)
        assert all("the API server refuses it to team 'ml'" in c.error for c in refused.values()), refused
        assert re.search(r"declared at teams/ml/pool\.yaml:\d+:\d+", refused["Node l4x4-01"].error)
        # Nothing of the revision is written: not the class, not the label, not the good template.
        classes = sandbox.kubectl("get", "deviceclasses", "-o", "name").stdout
        assert f"every-{repo.id}" not in classes
        node = json.loads(sandbox.kubectl("get", "node", "l4x4-01", "-o", "json").stdout)
        assert label not in node["metadata"].get("labels", {})
        assert "legit" not in templates(sandbox, repo.ns("ml"))
        assert written_at(sandbox, repo, plan.revision) == []
    finally:
        sandbox.kubectl("label", "node", "l4x4-01", f"{label}-", "fleet.gpufleet.dev/pool-", check=False)


def test_a_team_folder_cannot_install_the_gpu_operator(
    repo: Repo, fleet: Engine, validation_misses_placement: None
) -> None:
    two_teams(repo)
    repo.files["teams/ml/operator.yaml"] = OPERATOR
    plan = fleet.plan()
    assert plan.operator is not None and plan.operator.team == "ml"
    changes = fleet.apply(impersonation="optional")
    [refused] = changes.failed
    assert refused.refused and refused.stage == "operator"
    assert "declared at teams/ml/operator.yaml:" in refused.error and "team 'ml'" in refused.error
    assert len(changes.entries) == 1, "nothing else is applied"


OPERATOR = """\
apiVersion: fleet.gpufleet.dev/v1alpha1
kind: GPUOperator
metadata:
  name: gpu-operator
spec:
  namespace: gpu-operator
  chart:
    repository: https://helm.ngc.nvidia.com/nvidia
    name: gpu-operator
    version: v26.7.0
  installPath: gpuCluster
  values:
    clusterPolicy: {deployCR: false}
    gpuCluster: {deployCR: true}
    driver: {nvidiaDriverCRD: {enabled: true}}
"""


def test_drift_in_a_teams_rights_is_repaired_and_an_escalation_still_refused(
    sandbox: Sandbox,
    repo: Repo,
    validation_misses_namespaces: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Someone deletes a team's RoleBinding and one of its templates: the revision that restores the
    binding in its tenancy stage is not refused for the 403 the missing binding causes."""
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo.team("inf", namespaces=["inf", "canary"], group="inference")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("inf", "serving", namespace=repo.ns("canary"))
    path = str(repo.write())
    flags = ["--cluster", repo.cluster, "--team-impersonation", "required"]
    assert cli.run(["apply", path, *flags]) == 0
    canary = repo.ns("canary")

    def broken() -> None:
        sandbox.kubectl("delete", "rolebinding", "-n", canary, impersonations.TEAM_ROLE)
        sandbox.kubectl("delete", "resourceclaimtemplate", "-n", canary, "serving", "--ignore-not-found")

    broken()
    capsys.readouterr()
    assert cli.run(["diff", path, *flags, "-o", "json"]) == 1
    out = capsys.readouterr().out
    entries = {f"{e['object']['kind']} {e['object']['name']}": e for e in json.loads(out)["entries"]}
    template = entries["ResourceClaimTemplate serving"]
    assert template["action"] == "created" and not template["error"], template
    assert f"rights in {canary} are restored by this apply's tenancy stage" in template["reason"]
    decision = template["decision"]
    team = impersonations.user(repo.ns("inf"))
    assert decision == {"verdict": "write", "verb": "apply", "as": team}, "the decision is the apply's: as the team"
    bindings = [e for e in json.loads(out)["entries"] if e["object"]["kind"] == "RoleBinding"]
    assert {e["object"]["namespace"] for e in bindings if e["action"] == "created"} == {canary}

    assert cli.run(["diff", path, *flags]) == 1
    said = capsys.readouterr().out
    assert f"note: dry-run as fleet: team 'inf''s rights in {canary} are restored" in said, said
    assert cli.run(["apply", path, *flags]) == 0, capsys.readouterr().out
    assert "serving" in templates(sandbox, canary)
    sandbox.kubectl("get", "rolebinding", "-n", canary, impersonations.TEAM_ROLE)

    # A real escalation beside the same drift is still refused, and nothing is written.
    broken()
    repo.claim_template("inf", "sneaky", namespace=repo.ns("ml"))
    assert cli.run(["apply", str(repo.write()), *flags]) == 1
    out = capsys.readouterr()
    assert "sneaky" in out.out + out.err and "the API server refuses it to team 'inf'" in out.out + out.err
    assert "sneaky" not in templates(sandbox, repo.ns("ml"))
    assert "serving" not in templates(sandbox, canary), "nothing of the refused revision is written"


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
