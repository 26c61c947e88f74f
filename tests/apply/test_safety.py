"""Conflicts, health gates, team RBAC, blocked team removal and resuming a killed run, on the sandbox."""

from __future__ import annotations

import json

import pytest

from fleet import engine, kube
from fleet.engine import plans, renders
from fleet.sandbox import credentials
from tests.apply.conftest import Engine, actions, run_until_killed
from tests.apply.repos import Repo
from tests.conftest import Kubectl

pytestmark = pytest.mark.sandbox


def test_enforce_takes_back_a_declared_field_naming_who_changed_it_and_leaves_the_rest(
    fleet: Engine, repo: Repo
) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    fleet.apply()
    ns = repo.ns("ml")
    fleet.run(
        lambda c: c.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"fleet.gpufleet.dev/team": "someone-else", "extra": "kept"}},
            },
            field_manager="ops-script",
            force=True,
        )
    )

    repaired = fleet.apply()
    entry = next(e for e in repaired.entries if str(e.ref) == f"Namespace {ns}")
    assert not repaired.failed and entry.action == engine.Action.CONFIGURED and entry.forced and entry.drift
    assert [c.manager for c in entry.conflicts] == ["ops-script"]
    [repair] = entry.repairs
    assert (repair.field, repair.manager) == (".metadata.labels.fleet.gpufleet.dev/team", "ops-script")
    assert (repair.before, repair.after) == ('"someone-else"', '"ml"')
    live = fleet.run(lambda c: c.get(kube.Ref("v1", "Namespace", "", ns)))
    assert live["metadata"]["labels"]["fleet.gpufleet.dev/team"] == "ml"
    assert live["metadata"]["labels"]["extra"] == "kept", "a label fleet does not declare was touched"


def test_health_gate_timeout_names_object_and_condition(fleet: Engine, repo: Repo) -> None:
    label = f"t{repo.id}.example.com/pool"
    repo.pool("h100", selector={"sandbox.fleet.gpufleet.dev/pool": "h100x8"}, labels={label: "h100"}, nodes=5)
    with pytest.raises(engine.HealthTimeout) as err:
        fleet.apply(health_timeout=2.0)
    assert err.value.stage.name == "pools"
    assert "GPUNodePool h100: 2 of 5 expected nodes match sandbox.fleet.gpufleet.dev/pool=h100x8" in str(err.value)

    repo.pools.clear()
    repo.team("ml", namespaces=["ml"], group="ml-research")
    released = fleet.apply(prune=True)
    assert {str(e.ref) for e in released.entries if e.action == engine.Action.DELETED} == {
        "Node h100x8-01",
        "Node h100x8-02",
    }

    async def labelled(c: kube.Client) -> list[str]:
        nodes = (await c.list(await c.kind(api_version="v1", kind="Node"))).items
        return [n["metadata"]["name"] for n in nodes if label in (n["metadata"].get("labels") or {})]

    assert fleet.run(labelled) == []


def test_pool_keeps_taints_it_does_not_own() -> None:
    rule = plans.PoolRule(
        name="p",
        selector={"pool": "a"},
        labels={"x": "1"},
        taints=({"key": "fleet", "effect": "PreferNoSchedule"},),
        nodes=1,
        gpu_product="NVIDIA H100",
        gpus_per_node=8,
        source="pools/p.yaml:1:1",
    )
    node = {
        "metadata": {"name": "n1", "labels": {"pool": "a"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
    }
    [desired] = plans.pool_objects((rule,), nodes=[node])
    assert desired.field_manager == "fleet-pools"
    assert desired.obj["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "fleet", "effect": "PreferNoSchedule"},
    ]


def test_team_user_can_claim_only_in_its_namespace(fleet: Engine, repo: Repo, namespace: str, kubectl: Kubectl) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")  # alice is in group ml-research
    fleet.apply()
    ns = repo.ns("ml")

    def claim(in_ns: str) -> str:
        return json.dumps(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "mine", "namespace": in_ns},
                "spec": {
                    "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": repo.device_class_name}}]}
                },
            }
        )

    alice = f"alice@{credentials.CLUSTER}"
    assert kubectl("create", "-f", "-", stdin=claim(ns), context=alice).returncode == 0
    assert kubectl("get", "resourceclaim", "mine", "-n", ns, context=alice).returncode == 0
    elsewhere = kubectl("create", "-f", "-", stdin=claim(namespace), context=alice, check=False)
    assert elsewhere.returncode != 0 and "forbidden" in elsewhere.stderr
    classes = kubectl("get", "deviceclasses", context=alice, check=False)
    assert classes.returncode != 0 and "forbidden" in classes.stderr
    slices = kubectl("get", "resourceslices", context=alice, check=False)
    assert slices.returncode != 0 and "forbidden" in slices.stderr
    with pytest.raises(kube.Forbidden):
        fleet.run(
            lambda c: c.get(kube.Ref("resource.k8s.io/v1", "DeviceClass", "", repo.device_class_name)), context=alice
        )


def test_removing_a_team_with_running_claim_pods_is_blocked(fleet: Engine, repo: Repo, kubectl: Kubectl) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one-gpu")
    fleet.apply()
    ns = repo.ns("ml")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": ns},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    kubectl("wait", "-n", ns, "pod/trainer", "--for=jsonpath={.status.phase}=Running", "--timeout=60s")

    repo.teams.clear()
    repo.claims.clear()
    blocked = fleet.apply(prune=True)
    [entry] = [e for e in blocked.failed if e.ref.kind == "Namespace"]
    assert "trainer" in entry.error and ns in entry.error
    assert fleet.run(lambda c: c.get(kube.Ref("v1", "Namespace", "", ns)))["status"]["phase"] == "Active"

    kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s")
    pruned = fleet.apply(prune=True)
    assert actions(pruned)[f"Namespace {ns}"] == "deleted" and not pruned.failed


def test_killed_run_resumes_without_repeating_finished_writes(fleet: Engine, repo: Repo) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one-gpu")
    plan = fleet.plan()

    # namespaces, operator, classes, tenancy; then the process "dies"
    fleet.run(lambda c: run_until_killed(c, plan, before="pools"))

    async def resumed(c: kube.Client) -> tuple[engine.ChangeSet, dict[str, int]]:
        changes = await engine.reconcile(client=c, plan=plan, options=engine.Options(health_timeout=30))
        return changes, c.counts.snapshot()

    changes, counts = fleet.run(resumed)
    assert {e.stage for e in changes.entries} == {"claims"}, "finished stages are not re-done"
    assert actions(changes) == {f"ResourceClaimTemplate {repo.ns('ml')}/one-gpu": "created"}
    # One object write (the template) plus three writes of the ledger: its new entry before
    # the create (a new claims shard), "claims done" and "run complete" (the index). Nothing
    # of earlier stages.
    assert counts["apply"] == 1
    assert (counts.get("create", 0), counts.get("update", 0)) == (1, 2)
    assert not fleet.diff().changed


def test_classes_gate_checks_the_published_gpu_model(fleet: Engine, repo: Repo) -> None:
    label = f"t{repo.id}.example.com/pool"
    repo.pool(
        "h200",
        selector={"sandbox.fleet.gpufleet.dev/pool": "h200x8"},
        labels={label: "h200"},
        nodes=1,
        product="NVIDIA H100 80GB HBM3",
    )
    with pytest.raises(engine.HealthTimeout) as err:
        fleet.apply(health_timeout=1.0)
    assert err.value.stage.name == "classes"
    assert "Node h200x8-01: GPUs are NVIDIA H200, pool h200 expects NVIDIA H100 80GB HBM3" in str(err.value)


@pytest.mark.parametrize("policy", ["report", "ignore"])
def test_cluster_drift_follows_the_team_drift_policy(fleet: Engine, repo: Repo, policy: str) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4, drift=policy)
    fleet.apply()
    ns = repo.ns("ml")
    key = f"{repo.device_class_name}.deviceclass.resource.k8s.io/devices"
    quota = kube.Ref("v1", "ResourceQuota", ns, renders.QUOTA_NAME)
    fleet.run(
        lambda c: c.apply(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": quota.name, "namespace": ns},
                "spec": {"hard": {key: "9"}},
            },
            field_manager="ops",
            force=True,
        )
    )

    changes = fleet.apply()
    entry = next(e for e in changes.entries if e.ref == quota)
    assert not changes.failed
    if policy == "report":
        assert entry.action == engine.Action.SKIPPED and "drift policy report" in entry.reason and "ops" in entry.reason
    else:
        assert entry.action == engine.Action.UNCHANGED and "drift policy ignore" in entry.reason
    assert fleet.run(lambda c: c.get(quota))["spec"]["hard"][key] == "9"

    repo.team("ml", namespaces=["ml"], group="ml-research", quota=6, drift=policy)
    changed_in_git = fleet.apply(force_conflicts=True)
    assert next(e for e in changed_in_git.entries if e.ref == quota).action == engine.Action.CONFIGURED
    assert fleet.run(lambda c: c.get(quota))["spec"]["hard"][key] == "6"


def test_under_report_a_git_change_to_a_field_another_manager_owns_is_a_conflict_naming_it(
    fleet: Engine, repo: Repo
) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4, drift="report")
    fleet.apply()
    ns = repo.ns("ml")
    key = f"{repo.device_class_name}.deviceclass.resource.k8s.io/devices"
    quota = kube.Ref("v1", "ResourceQuota", ns, renders.QUOTA_NAME)
    fleet.run(
        lambda c: c.apply(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": quota.name, "namespace": ns},
                "spec": {"hard": {key: "9"}},
            },
            field_manager="ops",
            force=True,
        )
    )
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=6, drift="report")
    changes = fleet.apply()
    [failed] = changes.failed
    assert failed.ref == quota and '"ops"' in failed.error and not failed.forced
    assert "tenancy" in changes.summary(), "a conflict on an existing object stopped the run"
    assert fleet.run(lambda c: c.get(quota))["spec"]["hard"][key] == "9"
    assert actions(fleet.apply(force_conflicts=True))[str(quota)] == "configured"
    assert fleet.run(lambda c: c.get(quota))["spec"]["hard"][key] == "6"


def test_pool_taints_join_and_leave_the_nodes_other_taints(fleet: Engine, repo: Repo) -> None:
    key = f"t{repo.id}.example.com/dedicated"
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.pool(
        "h100",
        selector={"sandbox.fleet.gpufleet.dev/pool": "h100x8"},
        labels={f"t{repo.id}.example.com/p": "yes-h100"},
        nodes=2,
        taints=f"[{{key: {key}, value: ml, effect: PreferNoSchedule}}]",
    )
    applied = fleet.apply()
    assert not applied.failed, "the node lifecycle controller co-owns taints: pools apply with force"
    node = kube.Ref("v1", "Node", "", "h100x8-01")

    def taints() -> list[str]:
        return sorted(t["key"] for t in fleet.run(lambda c: c.get(node))["spec"].get("taints") or ())

    assert taints() == sorted(["nvidia.com/gpu", key])

    repo.pools.clear()
    released = fleet.apply(prune=True)
    assert actions(released)["Node h100x8-01"] == "deleted" and not released.failed
    assert taints() == ["nvidia.com/gpu"], "the taints others put there stay"
    labels = fleet.run(lambda c: c.get(node))["metadata"]["labels"]
    assert f"t{repo.id}.example.com/p" not in labels and "fleet.gpufleet.dev/pool" not in labels
