"""Preview = action on the sandbox: what ``diff`` decides for each change is what ``apply`` records.

Each scenario sets up one cluster state, then previews and applies it under the same options
(``tests.apply.agreements``) and compares every entry's decision. Beside the comparison, each pins
the decision the engine owes its focal entry (docs/engine.md, "One decision per change"): its
verdict, its verb, as whom, forced or not. Here: creation, prune, blocked prune, a claim in use,
identity, RBAC refusals, a GPUOperator in a team's folder, conflicts, drift repair and the drift
policy option. Holds, waits, waves and drains are in ``tests/changes/test_preview_is_action.py``;
the operator's release in ``tests/operator/test_preview_is_action.py``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from fleet import engine, kube
from fleet.engine import impersonations, renders
from fleet.sandbox import Sandbox
from tests.apply.agreements import compare, compare_cli
from tests.apply.conftest import Engine
from tests.apply.repos import Repo
from tests.apply.test_impersonation import (  # noqa: F401 - fixtures, used by name
    OPERATOR,
    two_teams,
    validation_misses_namespaces,
    validation_misses_placement,
)
from tests.conftest import Kubectl, gpu_pod

pytestmark = pytest.mark.sandbox


def quota_key(repo: Repo) -> str:
    return f"{repo.device_class_name}.deviceclass.resource.k8s.io/devices"


def take_quota(fleet: Engine, repo: Repo, *, value: str, manager: str) -> kube.Ref:
    """``manager`` sets team ml's device quota to ``value`` with force: it now owns the field."""
    ns = repo.ns("ml")
    quota = kube.Ref("v1", "ResourceQuota", ns, renders.QUOTA_NAME)
    body = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": quota.name, "namespace": ns},
        "spec": {"hard": {quota_key(repo): value}},
    }
    fleet.run(lambda c: c.apply(body, field_manager=manager, force=True))
    return quota


def test_a_new_team_is_previewed_as_fleetctl_apply_writes_it(
    sandbox: Sandbox, repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real CLI: every object created, each as whom the apply writes it (the team's template as the
    team, whose ServiceAccount this very apply creates)."""
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one-gpu")
    printed = compare_cli(repo, capsys)
    assert (printed.diff_code, printed.apply_code) == (1, 0)
    template = printed.entry("apply", kind="ResourceClaimTemplate", name="one-gpu")["decision"]
    assert template["verdict"] == "write" and template["as"] == impersonations.user(repo.ns("ml")), template
    assert template.get("verb") == "apply", template
    namespace = printed.entry("apply", kind="Namespace", name=repo.ns("ml"))["decision"]
    assert namespace == {"verdict": "write", "verb": "apply", "as": "fleet"}, namespace


def test_a_removed_team_is_pruned_its_objects_deleted_as_the_team(fleet: Engine, repo: Repo) -> None:
    """Prune without anything blocking: the template the team's folder declared is deleted as the team,
    its namespace and tenancy (rendered from team.yaml) as fleet."""
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.team("inf", namespaces=["inf"], group="inference")
    repo.claim_template("ml", "one-gpu")
    assert not fleet.apply().failed
    del repo.teams["ml"], repo.claims["ml/one-gpu"]

    compared = compare(fleet, prune=True)
    template = compared.both(kind="ResourceClaimTemplate", name="one-gpu")
    assert template == {"verdict": "write", "verb": "delete", "as": impersonations.user(repo.ns("ml"))}, template
    namespace = compared.both(kind="Namespace", name=repo.ns("ml"))
    assert namespace == {"verdict": "write", "verb": "delete", "as": "fleet"}, namespace
    assert not compared.apply.failed


def test_under_required_a_team_without_service_account_is_refused_its_prune(
    fleet: Engine, repo: Repo, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The team's ServiceAccount is gone (live and from the plan): its template cannot be deleted as the
    team, and ``required`` writes a team's objects only as the team."""
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one-gpu")
    assert not fleet.apply(impersonation="required").failed
    ns = repo.ns("ml")
    kubectl("delete", "serviceaccount", "-n", ns, impersonations.SERVICE_ACCOUNT)
    planned = fleet.plan

    def without_accounts() -> engine.Plan:
        plan = planned()
        return dataclasses.replace(plan, objects=tuple(d for d in plan.objects if d.ref.kind != "ServiceAccount"))

    monkeypatch.setattr(fleet, "plan", without_accounts)
    del repo.claims["ml/one-gpu"]

    compared = compare(fleet, prune=True, impersonation="required")
    refused = compared.both(kind="ResourceClaimTemplate", name="one-gpu")
    assert refused["verdict"] == "refuse", refused
    assert kubectl("get", "resourceclaimtemplate", "-n", ns, "one-gpu", check=False).returncode == 0


def test_a_claim_in_use_is_refused_its_replace_and_its_prune(fleet: Engine, repo: Repo, kubectl: Kubectl) -> None:
    """A pod holds the declared claim: a change of its immutable spec (a replace) and its removal (a
    prune) are refused, in the preview as in the apply."""
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim("ml", "held")
    assert not fleet.apply().failed
    ns = repo.ns("ml")
    gpu_pod(kubectl, ns, name="trainer", claim="held")
    try:
        kubectl("wait", "-n", ns, "pod/trainer", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")

        repo.claim("ml", "held", count=2)
        replaced = compare(fleet, what="replace of a claim in use")
        decision = replaced.both(kind="ResourceClaim", name="held")
        assert decision["verdict"] == "refuse" and decision.get("verb") == "replace", decision

        del repo.claims["ml/held"]
        pruned = compare(fleet, prune=True, what="prune of a claim in use")
        decision = pruned.both(kind="ResourceClaim", name="held")
        assert decision["verdict"] == "refuse" and decision.get("verb") == "delete", decision
        assert kubectl("get", "resourceclaim", "-n", ns, "held", check=False).returncode == 0
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)


def test_a_namespace_holding_what_fleet_did_not_create_is_refused_its_prune(
    sandbox: Sandbox,
    fleet: Engine,
    repo: Repo,
    kubectl: Kubectl,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the engine, then the real CLI (``fleetctl apply --prune -o json``): the same refusal."""
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    assert not fleet.apply().failed
    ns = repo.ns("ml")
    kubectl("create", "configmap", "notes", "-n", ns)
    repo.teams.clear()

    compared = compare(fleet, prune=True)
    decision = compared.both(kind="Namespace", name=ns)
    assert decision["verdict"] == "refuse" and decision.get("verb") == "delete", decision
    assert kubectl("get", "namespace", ns, check=False).returncode == 0

    printed = compare_cli(repo, capsys, apply_flags=["--prune"], what="fleetctl diff / apply --prune")
    for side in ("diff", "apply"):
        said = printed.entry(side, kind="Namespace", name=ns)["decision"]
        assert said["verdict"] == "refuse", (side, said)
    assert kubectl("get", "namespace", ns, check=False).returncode == 0


@pytest.mark.usefixtures("validation_misses_namespaces")
def test_a_teams_object_the_api_server_refuses_is_refused_in_both(repo: Repo, fleet: Engine) -> None:
    """RBAC under impersonation: team ml's template in team inf's namespace."""
    two_teams(repo)
    assert not fleet.apply(impersonation="required").failed
    repo.claim_template("ml", "sneaky", namespace=repo.ns("inf"))

    compared = compare(fleet, impersonation="required", stops=True)
    decision = compared.both(kind="ResourceClaimTemplate", name="sneaky")
    assert decision["verdict"] == "refuse" and decision["as"] == impersonations.user(repo.ns("ml")), decision


@pytest.mark.usefixtures("validation_misses_placement")
def test_a_gpu_operator_in_a_team_folder_is_refused_in_both(repo: Repo, fleet: Engine) -> None:
    """Refused before any write, whether or not a helm binary is configured (here none is)."""
    two_teams(repo)
    repo.files["teams/ml/operator.yaml"] = OPERATOR
    compared = compare(fleet, stops=True)
    decision = compared.both(kind="HelmRelease", name="gpu-operator", stage="operator")
    assert decision["verdict"] == "refuse", decision


def test_a_conflict_is_decided_alike_without_force_and_forced_with_it(fleet: Engine, repo: Repo) -> None:
    """Under drift policy report, git changes a field another manager owns: a conflict; with
    ``force_conflicts`` the write takes it, and says so."""
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4, drift="report")
    assert not fleet.apply().failed
    quota = take_quota(fleet, repo, value="9", manager="ops")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=6, drift="report")

    unforced = compare(fleet, what="without force_conflicts")
    decision = unforced.both(kind="ResourceQuota", name=quota.name)
    assert "force" not in decision, decision
    assert fleet.run(lambda c: c.get(quota))["spec"]["hard"][quota_key(repo)] == "9"

    forced = compare(fleet, force_conflicts=True, what="with force_conflicts")
    decision = forced.both(kind="ResourceQuota", name=quota.name)
    assert decision == {"verdict": "write", "verb": "apply", "as": "fleet", "force": True}, decision
    assert fleet.run(lambda c: c.get(quota))["spec"]["hard"][quota_key(repo)] == "6"


def test_enforce_repairs_a_field_another_manager_took_with_force_in_both(fleet: Engine, repo: Repo) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    assert not fleet.apply().failed
    ns = repo.ns("ml")
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": ns, "labels": {"fleet.gpufleet.dev/team": "someone-else"}},
    }
    fleet.run(lambda c: c.apply(body, field_manager="ops-script", force=True))

    compared = compare(fleet)
    decision = compared.both(kind="Namespace", name=ns)
    assert decision == {"verdict": "write", "verb": "apply", "as": "fleet", "force": True}, decision


def test_the_drift_policy_option_leaves_drift_in_diff_and_apply(fleet: Engine, repo: Repo) -> None:
    """``Options(drift_policy="report")`` replaces the repository's default (enforce) for the run."""
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    assert not fleet.apply().failed
    quota = take_quota(fleet, repo, value="9", manager="ops")

    compared = compare(fleet, drift_policy="report")
    decision = compared.both(kind="ResourceQuota", name=quota.name)
    assert decision["verdict"] == "leave" and "force" not in decision, decision
    assert fleet.run(lambda c: c.get(quota))["spec"]["hard"][quota_key(repo)] == "9", "reported, not repaired"


def test_fleetctl_drift_policy_report_leaves_drift_in_diff_and_apply(
    sandbox: Sandbox, repo: Repo, fleet: Engine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through the real CLI: ``--drift-policy report`` on both commands."""
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    assert not fleet.apply().failed
    quota = take_quota(fleet, repo, value="9", manager="ops")
    printed = compare_cli(repo, capsys, "--drift-policy", "report")
    entry = printed.entry("diff", kind="ResourceQuota", name=quota.name)
    assert entry["decision"]["verdict"] == "leave", json.dumps(entry)
    assert fleet.run(lambda c: c.get(quota))["spec"]["hard"][quota_key(repo)] == "9"
