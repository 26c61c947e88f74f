"""The operator stage end to end: real helm, NVIDIA's chart on the loopback repository, the sandbox's API server.

The played operator (``fleet.sandbox.operators``) does what the real controller does for GPUCluster
gpu-cluster: the kubelet-plugin DaemonSet and DeviceClasses from NVIDIA's state manifests, then the
GPUCluster's status once the DaemonSet's pods run; the gate's failure path runs without it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fleet import engine, helm
from fleet.engine import drains, operators, previews
from fleet.errors import FleetError
from fleet.sandbox import Sandbox, credentials
from fleet.sandbox.operators import StandInOperator
from tests.apply.conftest import Engine
from tests.changes.test_holds import device_of
from tests.conftest import Kubectl, gpu_pod
from tests.operator.conftest import NAMESPACE, RELEASE, UPSTREAM, install_cluster_policy
from tests.operator.repos import OperatorRepo

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("cleanup_release")]

RELEASE_WRITES = engine.stages.WRITTEN_RESOURCES | {
    "secrets",
    "customresourcedefinitions",
    "gpuclusters",
    "daemonsets",
    "clusterpolicies",
}


@pytest.fixture()
def fleet(sandbox: Sandbox, op_repo: OperatorRepo, helm_settings: helm.Settings) -> Engine:
    return Engine(sandbox, op_repo)


def _helm(settings: helm.Settings, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [
        str(settings.binary),
        *args,
        "--kube-context",
        credentials.CLUSTER,
        "--kubeconfig",
        str(settings.kubeconfig),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _release(settings: helm.Settings) -> dict[str, object]:
    out = json.loads(_helm(settings, "list", "-n", NAMESPACE, "-o", "json", "-a").stdout or "[]")
    return next((r for r in out if r["name"] == RELEASE), {})


def _operator_entry(changes: engine.ChangeSet) -> engine.Change:
    return next(e for e in changes.entries if e.ref.kind == "HelmRelease")


def test_install_gate_noop_and_upgrade_with_crds_first(
    sandbox: Sandbox, fleet: Engine, op_repo: OperatorRepo, helm_settings: helm.Settings, kubectl: Kubectl
) -> None:
    with StandInOperator(sandbox, upstream=UPSTREAM):
        changes = fleet.apply(helm=helm_settings)
        entry = _operator_entry(changes)
        assert (entry.action, entry.error) == (engine.Action.CREATED, "")
        assert (_release(helm_settings)["chart"], _release(helm_settings)["revision"]) == ("gpu-operator-v26.7.0", "1")
        # The gate passed: GPUCluster Ready, the kubelet plugin available, classes and slices present.
        assert fleet.run(lambda c: operators.ready_problems(client=c, plan=fleet.plan())) == []

        # No-op: the release matches, so no helm write and no API write at all.
        writes = fleet.server_writes(lambda: fleet.apply(helm=helm_settings))
        assert writes == 0
        assert _release(helm_settings)["revision"] == "1"
        assert _operator_entry(fleet.apply(helm=helm_settings)).action == engine.Action.UNCHANGED

        # Upgrade: fleet applies the new chart's CRDs before helm upgrade (helm alone never would).
        op_repo.version = "v26.7.1"
        changes = fleet.apply(helm=helm_settings)
        entry = _operator_entry(changes)
        assert (entry.action, entry.error) == (engine.Action.CONFIGURED, "")
        assert entry.before is not None and entry.after is not None
        assert (entry.before["version"], entry.after["version"]) == ("v26.7.0", "v26.7.1")
        crd = json.loads(kubectl("get", "crd", "gpuclusters.nvidia.com", "-o", "json").stdout)
        dra = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["draDriver"]
        assert "logLevel" in dra["properties"]
        assert (_release(helm_settings)["chart"], _release(helm_settings)["revision"]) == ("gpu-operator-v26.7.1", "2")


def test_gate_times_out_naming_what_is_missing(
    fleet: Engine, op_repo: OperatorRepo, helm_settings: helm.Settings
) -> None:
    op_repo.pool(
        "b200",
        selector={"sandbox.fleet.gpufleet.dev/pool": "h100x8"},
        labels={f"t-{op_repo.id}": "b200"},
        nodes=1,
        product="NVIDIA B200",
    )
    with pytest.raises(engine.HealthTimeout) as err:
        fleet.apply(helm=helm_settings, health_timeout=4.0)
    text = str(err.value)
    assert "stage operator not healthy" in text
    assert "GPUCluster gpu-cluster: state unset" in text
    assert "pool b200 expects NVIDIA B200" in text


def test_diff_shows_version_values_and_rendered_objects(
    sandbox: Sandbox, fleet: Engine, op_repo: OperatorRepo, helm_settings: helm.Settings
) -> None:
    first = fleet.diff(helm=helm_settings)
    created = {(e.ref.kind, e.ref.name): e for e in first.entries if e.stage == "operator"}
    assert created[("HelmRelease", RELEASE)].action == engine.Action.CREATED
    assert created[("Deployment", "gpu-operator")].action == engine.Action.CREATED
    assert created[("GPUCluster", "gpu-cluster")].action == engine.Action.CREATED
    # The operator's controller creates the kubelet plugin, not the chart.
    assert ("DaemonSet", "nvidia-dra-driver-kubelet-plugin") not in created
    assert _release(helm_settings) == {}  # a diff installs nothing
    with StandInOperator(sandbox, upstream=UPSTREAM):
        fleet.apply(helm=helm_settings)
    op_repo.version = "v26.7.1"
    op_repo.values = {**op_repo.values, "dcgmExporter": {"enabled": False}}
    changed = {(e.ref.kind, e.ref.name): e for e in fleet.diff(helm=helm_settings).entries if e.stage == "operator"}
    release = changed[("HelmRelease", RELEASE)]
    text = previews.unified(release)
    assert "-version: v26.7.0" in text and "+version: v26.7.1" in text
    assert "+    enabled: false" in text
    assert changed[("CustomResourceDefinition", "gpuclusters.nvidia.com")].action == engine.Action.CONFIGURED
    gpucluster = previews.unified(changed[("GPUCluster", "gpu-cluster")])
    assert "-    enabled: true" in gpucluster and "+    enabled: false" in gpucluster
    assert release.disruption is None, "a new chart version and DCGM's values restart none of the three"
    op_repo.values = {**op_repo.values, "draDriver": {**op_repo.values["draDriver"], "version": "v0.6.0"}}
    [release] = [e for e in fleet.diff(helm=helm_settings).entries if e.ref.kind == "HelmRelease"]
    assert release.disruption is not None
    assert release.disruption.reason.startswith("restarts the DRA kubelet plugin (GPUCluster spec.draDriver.version")


def _refusal(fleet: Engine, settings: helm.Settings) -> str:
    with pytest.raises(operators.OperatorRefused) as err:
        fleet.apply(helm=settings)
    return str(err.value)


def test_guards_refuse_with_reason_and_fix(
    sandbox: Sandbox,
    fleet: Engine,
    op_repo: OperatorRepo,
    helm_settings: helm.Settings,
    kubectl: Kubectl,
    tmp_path: Path,
) -> None:
    op_repo.version = "v26.7.1"
    with StandInOperator(sandbox, upstream=UPSTREAM):
        fleet.apply(helm=helm_settings)

    op_repo.version = "v26.7.0"
    text = _refusal(fleet, helm_settings)
    assert "v26.7.0 is older than the running v26.7.1: a downgrade" in text and "allowDowngrade" in text
    op_repo.version = "v27.1.0"
    text = _refusal(fleet, helm_settings)
    assert "crosses a major version" in text and "allowMajor" in text

    op_repo.version = "v26.7.1"
    op_repo.values = {**op_repo.values, "dcgmExporter": {"enabled": False}}  # a change, so the guards run
    install_cluster_policy(kubectl, helm_settings.binary)
    text = _refusal(fleet, helm_settings)
    assert "ClusterPolicy cluster-policy exists" in text and "not an in-place conversion" in text
    kubectl("delete", "clusterpolicy", "cluster-policy")

    other = _tiny_chart(tmp_path, "dra-driver-nvidia-gpu")
    assert _helm(helm_settings, "install", "dra", str(other), "-n", "dra-test", "--create-namespace").returncode == 0
    try:
        text = _refusal(fleet, helm_settings)
        assert "separate DRA driver release dra-test/dra" in text and "helm uninstall dra -n dra-test" in text
    finally:
        _helm(helm_settings, "uninstall", "dra", "-n", "dra-test")

    kubectl("delete", "crd", "computedomains.resource.nvidia.com")
    owner = _tiny_chart(tmp_path, "compute-domains", crd=True)
    assert _helm(helm_settings, "install", "cd-owner", str(owner), "-n", "dra-test").returncode == 0
    try:
        text = _refusal(fleet, helm_settings)
        assert "CRD computedomains.resource.nvidia.com belongs to Helm release dra-test/cd-owner" in text
    finally:
        _helm(helm_settings, "uninstall", "cd-owner", "-n", "dra-test")
        kubectl("delete", "namespace", "dra-test", "--wait=false", check=False)
    assert _release(helm_settings)["revision"] == "1"  # every refusal left the release alone

    # A CRD change that drops a field a stored object uses is refused, naming both.
    kubectl("patch", "gpucluster", "gpu-cluster", "--type=merge", "-p", '{"spec":{"draDriver":{"logLevel":4}}}')
    op_repo.version = "v26.7.0"
    op_repo.upgrade = {"allowDowngrade": True}
    text = _refusal(fleet, helm_settings)
    assert "drops field spec.draDriver.logLevel (v1alpha1), which stored objects use: gpu-cluster" in text
    assert _release(helm_settings)["revision"] == "1"


def test_both_deploy_crs_is_refused_before_anything_runs(op_repo: OperatorRepo, fleet: Engine) -> None:
    op_repo.values = {**op_repo.values, "clusterPolicy": {"deployCR": True}}
    with pytest.raises(FleetError) as err:
        fleet.plan()
    assert "clusterPolicy.deployCR=false" in str(err.value)
    assert operators.values_problem({"clusterPolicy": {"deployCR": True}, "gpuCluster": {"deployCR": True}})


def trainer_on_a_gpu(kubectl: Kubectl, namespace: str) -> None:
    """Pod ``trainer`` holding claim ``held`` of the driver's class, as the guide's pods do."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "held"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }
    gpu_pod(kubectl, namespace, name="trainer", claim="held", also=(claim,))


def test_removal_waits_for_claims_then_uninstalls_with_hooks(
    sandbox: Sandbox,
    fleet: Engine,
    op_repo: OperatorRepo,
    helm_settings: helm.Settings,
    kubectl: Kubectl,
    namespace: str,
) -> None:
    op_repo.version = "v26.7.1"
    with StandInOperator(sandbox, upstream=UPSTREAM):
        fleet.apply(helm=helm_settings)
    trainer_on_a_gpu(kubectl, namespace)
    kubectl("wait", "-n", namespace, "pod/trainer", "--for=condition=Ready", "--timeout=60s")

    op_repo.version, op_repo.upgrade = "v26.7.0", {"allowDowngrade": True}
    text = _refusal(fleet, helm_settings)
    assert "downgrading the operator is blocked while ResourceClaims hold the driver's GPUs" in text
    assert f"{namespace}/held (pods trainer)" in text

    op_repo.version = None
    entry = _operator_entry(fleet.apply(helm=helm_settings, prune=True))
    # A disruptive change like any other: held for the jobs (policy wait), as diff shows it, not refused.
    assert entry.action == engine.Action.SKIPPED and not entry.failed and entry.held is not None
    assert entry.held.on == "claims" and entry.intended == engine.Action.DELETED
    assert entry.decision is not None and entry.decision.to_json() == {
        "verdict": "hold", "verb": "helm-uninstall", "as": "fleet",
    }  # fmt: skip
    assert entry.disruption is not None and f"{namespace}/held" in entry.disruption.claims
    assert "guide's order" in entry.disruption.reason
    assert _release(helm_settings)["status"] == "deployed"

    kubectl("delete", "-n", namespace, "pod/trainer", "resourceclaim/held", "--wait=true", "--timeout=60s")
    entry = _operator_entry(fleet.apply(helm=helm_settings, prune=True))
    assert (entry.action, entry.error) == (engine.Action.DELETED, "")
    assert _release(helm_settings) == {}
    # The chart's pre-delete hook ran (its Job is deleted once it succeeded; the Job controller's Events stay).
    events = kubectl(
        "get", "events", "-n", NAMESPACE, "--field-selector", "involvedObject.name=gpu-operator-cleanup-gpucluster"
    )
    assert "SuccessfulCreate" in events.stdout


def test_a_held_upgrade_drains_the_nodes_of_its_claims_under_policy_drain(
    sandbox: Sandbox,
    fleet: Engine,
    op_repo: OperatorRepo,
    helm_settings: helm.Settings,
    kubectl: Kubectl,
    namespace: str,
) -> None:
    op_repo.cluster_spec = {"disruption": {"policy": "drain", "maxUnavailable": 1}}
    with StandInOperator(sandbox, upstream=UPSTREAM):
        fleet.apply(helm=helm_settings)
    trainer_on_a_gpu(kubectl, namespace)
    node = ""
    try:
        kubectl("wait", "-n", namespace, "pod/trainer", "--for=condition=Ready", "--timeout=60s")
        node, _ = device_of(kubectl, namespace, "held")
        # A new DRA kubelet plugin restarts it on every GPU node: held for the claims, and drained.
        op_repo.values = {**op_repo.values, "draDriver": {**op_repo.values["draDriver"], "version": "v0.6.0"}}
        entry = _operator_entry(fleet.apply(helm=helm_settings))
        assert entry.action == engine.Action.SKIPPED and entry.waiting is not None and entry.waiting.on == "claims"
        assert f"draining node {node}: pod {namespace}/trainer evicted" in entry.reason
        live = json.loads(kubectl("get", "node", node, "-o", "json").stdout)
        assert live["spec"].get("unschedulable") is True
        assert live["metadata"]["annotations"][drains.DRAINED_FOR] == entry.ref.key
        assert _release(helm_settings)["revision"] == "1", "held: helm did not run"
    finally:
        kubectl("delete", "-n", namespace, "pod/trainer", "--wait=true", "--timeout=60s", check=False)
        if node:
            kubectl("uncordon", node, check=False)


def _tiny_chart(tmp_path: Path, name: str, *, crd: bool = False) -> Path:
    root = tmp_path / name
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text(json.dumps({"apiVersion": "v2", "name": name, "version": "0.4.1"}))
    if crd:
        body = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "computedomains.resource.nvidia.com"},
            "spec": {
                "group": "resource.nvidia.com",
                "scope": "Namespaced",
                "names": {
                    "kind": "ComputeDomain",
                    "plural": "computedomains",
                    "singular": "computedomain",
                    "listKind": "ComputeDomainList",
                },
                "versions": [
                    {
                        "name": "v1beta1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    }
                ],
            },
        }
    else:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config"}, "data": {}}
    (root / "templates" / "object.yaml").write_text(json.dumps(body))
    return root


def test_driver_upgrade_states_show_in_diff_and_apply(
    sandbox: Sandbox, fleet: Engine, helm_settings: helm.Settings, kubectl: Kubectl
) -> None:
    with StandInOperator(sandbox, upstream=UPSTREAM):
        fleet.apply(helm=helm_settings)
    kubectl("label", "node", "h100x8-01", f"{operators.UPGRADE_STATE}=upgrade-required")
    try:
        diff = _operator_entry(fleet.diff(helm=helm_settings))
        applied = _operator_entry(fleet.apply(helm=helm_settings))
    finally:
        kubectl("label", "node", "h100x8-01", f"{operators.UPGRADE_STATE}-")
    assert diff.reason == applied.reason == "driver upgrade: h100x8-01 upgrade-required"


def test_a_failed_upgrade_is_rolled_back_from_helm_history(
    sandbox: Sandbox, fleet: Engine, op_repo: OperatorRepo, helm_settings: helm.Settings
) -> None:
    with StandInOperator(sandbox, upstream=UPSTREAM):
        fleet.apply(helm=helm_settings)
    # The API server rejects the operator's pods (an invalid toleration operator): helm marks revision 2 failed.
    op_repo.values = {**op_repo.values, "operator": {"tolerations": [{"key": "x", "operator": "Sometimes"}]}}
    changes = fleet.apply(helm=helm_settings)
    entry = _operator_entry(changes)
    assert "helm upgrade failed" in entry.error
    assert "rolled back to revision 1 (spec.remediation.strategy: rollback)" in entry.error
    history = json.loads(_helm(helm_settings, "history", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert [(h["revision"], h["status"]) for h in history] == [(1, "superseded"), (2, "failed"), (3, "deployed")]
