"""The operator stage's rules as pure functions: versions, values, releases, CRD ownership and schemas."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import anyio

from fleet import helm
from fleet.engine import operators
from fleet.engine.plans import OperatorRelease
from fleet.inventory import pendings
from fleet.sandbox import charts
from tests.operator.conftest import UPSTREAM


def _desired(version: str = "v26.7.0", **kw: Any) -> OperatorRelease:
    base: dict[str, Any] = {
        "release": "gpu-operator",
        "namespace": "gpu-operator",
        "repository": "https://x",
        "chart": "gpu-operator",
        "version": version,
        "install_path": "gpuCluster",
        "values": {},
        "allow_downgrade": False,
        "allow_major": False,
        "driver_state_timeout": 600,
        "source": "operator/gpu-operator.yaml:1:1",
    }
    return OperatorRelease(**{**base, **kw})


def test_versions_need_an_allowance_to_go_down_or_across_a_major() -> None:
    assert operators.version_problem(_desired("v26.7.1"), running="v26.7.0") is None
    assert operators.version_problem(_desired("v26.7.0"), running=None) is None
    down = operators.version_problem(_desired("v26.7.0"), running="v26.7.1")
    assert down is not None and "a downgrade" in down[0] and "allowDowngrade" in down[1]
    assert operators.version_problem(_desired("v26.7.0", allow_downgrade=True), running="v26.7.1") is None
    major = operators.version_problem(_desired("v27.1.0"), running="v26.7.1")
    assert major is not None and "crosses a major version" in major[0]
    assert operators.version_problem(_desired("v27.1.0", allow_major=True), running="v26.7.1") is None


def test_both_allocation_paths_are_refused() -> None:
    both = {"clusterPolicy": {"deployCR": True}, "gpuCluster": {"deployCR": True}}
    problem = operators.values_problem(both)
    assert problem is not None and "clusterPolicy.deployCR: false" in problem[1]
    assert operators.values_problem({"clusterPolicy": {"deployCR": False}, "gpuCluster": {"deployCR": True}}) is None


def test_a_standalone_dra_driver_release_is_named() -> None:
    releases = [
        helm.Release(
            name="gpu-operator", namespace="gpu-operator", revision=1, status="deployed", chart="gpu-operator-v26.7.0"
        ),
        helm.Release(
            name="dra", namespace="nvidia-dra", revision=3, status="deployed", chart="nvidia-dra-driver-gpu-25.8.1"
        ),
    ]
    problem = operators.dra_release_problem(releases, desired=_desired())
    assert problem is not None and "nvidia-dra/dra (nvidia-dra-driver-gpu-25.8.1)" in problem[0]
    assert operators.dra_release_problem(releases[:1], desired=_desired()) is None


def test_chart_names_strip_their_version() -> None:
    r = helm.Release(name="x", namespace="y", revision=1, status="deployed", chart="dra-driver-nvidia-gpu-v0.4.1")
    assert r.chart_name == "dra-driver-nvidia-gpu"
    assert r.chart_version("dra-driver-nvidia-gpu") == "v0.4.1"


def test_crds_owned_by_another_release_are_named() -> None:
    crd = next(c for c in charts.crds(UPSTREAM.chart) if c["metadata"]["name"] == "computedomains.resource.nvidia.com")
    owned = {
        **crd,
        "metadata": {
            "name": crd["metadata"]["name"],
            "annotations": {"meta.helm.sh/release-name": "dra", "meta.helm.sh/release-namespace": "nvidia-dra"},
        },
    }
    problems = operators.crd_owner_problems([crd], {crd["metadata"]["name"]: owned}, desired=_desired())
    assert [p[0].split(";")[0] for p in problems] == [
        "CRD computedomains.resource.nvidia.com belongs to Helm release nvidia-dra/dra"
    ]
    assert operators.crd_owner_problems([crd], {crd["metadata"]["name"]: crd}, desired=_desired()) == []


def test_dropped_fields_and_who_uses_them(tmp_path: Path) -> None:
    patched = charts.derive(UPSTREAM, tmp_path, version="v26.7.1")
    new = next(c for c in charts.crds(patched) if c["spec"]["names"]["kind"] == "GPUCluster")
    old = next(c for c in charts.crds(UPSTREAM.chart) if c["spec"]["names"]["kind"] == "GPUCluster")
    assert operators.dropped_fields(old, new) == {}
    assert operators.dropped_fields(new, old) == {"v1alpha1": ["spec.draDriver.logLevel"]}
    assert operators.uses({"spec": {"draDriver": {"logLevel": 3}}}, "spec.draDriver.logLevel")
    assert not operators.uses({"spec": {"draDriver": {}}}, "spec.draDriver.logLevel")


def test_a_node_stuck_in_a_driver_upgrade_state() -> None:
    node = {
        "metadata": {
            "name": "gpu-1",
            "managedFields": [
                {"manager": "kubelet", "time": "2026-01-01T00:00:00Z", "fieldsV1": {"f:status": {}}},
                {
                    "manager": "gpu-operator",
                    "time": "2026-01-01T10:00:00Z",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:nvidia.com/gpu-driver-upgrade-state": {}}}},
                },
            ],
        }
    }
    since = operators.label_since(node, operators.UPGRADE_STATE)
    assert since == datetime.datetime(2026, 1, 1, 10, tzinfo=datetime.UTC)
    state = operators.DriverState(node="gpu-1", state="pod-restart-required", since=since, events=("Drain: evicting",))
    now = datetime.datetime(2026, 1, 1, 10, 45, tzinfo=datetime.UTC)
    assert operators.states_text([state], limit=1800, now=now) == (
        "driver upgrade: gpu-1 stuck in pod-restart-required for 45 min; events: Drain: evicting"
    )
    assert operators.states_text([state], limit=3600, now=now) == "driver upgrade: gpu-1 pod-restart-required"
    done = operators.DriverState(node="gpu-1", state="upgrade-done", since=since)
    assert not done.stuck(now=now, limit=60)


def test_pod_constraints_name_the_excluding_rule() -> None:
    node = {
        "metadata": {"name": "n", "labels": {"pool": "h100"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
    }
    assert pendings.node_excluded({"spec": {}}, node) == "taint nvidia.com/gpu=present:NoSchedule not tolerated"
    tolerant = {"spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}
    assert pendings.node_excluded(tolerant, node) == ""
    pinned = {"spec": {**tolerant["spec"], "nodeSelector": {"pool": "a100"}}}
    assert pendings.node_excluded(pinned, node) == "nodeSelector pool=a100 (node has h100)"
    affinity = {
        "spec": {
            **tolerant["spec"],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["h200"]}]}
                        ]
                    }
                }
            },
        }
    }
    assert pendings.node_excluded(affinity, node) == "required node affinity does not match"


def test_the_plan_carries_the_operator_release_with_the_guides_values(tmp_path: Any) -> None:
    from fleet.engine.pipelines import load_plan
    from tests.operator.repos import OperatorRepo

    repo = OperatorRepo(root=tmp_path / "repo", chart_repo="oci://registry.example/nvidia")
    repo.team("ml", namespaces=["ml"], group="ml")
    repo.values = {**repo.values, "dcgmExporter": {"enabled": False}}
    op = load_plan(repo.write(), cluster=repo.cluster).operator
    assert op is not None
    assert (op.release, op.namespace, op.version, op.install_path) == (
        "gpu-operator",
        "gpu-operator",
        "v26.7.0",
        "gpuCluster",
    )
    assert op.values["clusterPolicy"] == {"deployCR": False}
    assert op.values["driver"] == {"nvidiaDriverCRD": {"enabled": True}}
    assert op.values["dcgmExporter"] == {"enabled": False}
    assert op.source.startswith("operator/gpu-operator.yaml:")
    chart = helm.ChartRef(repository=op.repository, name=op.chart, version=op.version)
    assert chart.args() == ["oci://registry.example/nvidia/gpu-operator", "--version", "v26.7.0"]
    assert helm.ChartRef(repository="./charts/gpu-operator", name="gpu-operator", version="v1.0.0").args() == [
        "./charts/gpu-operator"
    ]


def test_a_refused_helm_is_told_apart_and_names_the_overlay() -> None:
    refused = helm.HelmError(
        "helm list failed: list: failed to list: secrets is forbidden: User "
        '"system:serviceaccount:fleet-system:fleet" cannot list resource "secrets" at the cluster scope',
    )
    assert helm.forbidden(refused)
    assert not helm.forbidden(helm.HelmError("helm upgrade failed: clusterPolicy.deployCR and ... cannot both be true"))
    assert "kubectl apply -k overlays/gpu-operator" in helm.errors.FORBIDDEN_HINT


def test_without_cluster_wide_secrets_the_releases_are_those_of_the_operator_namespace() -> None:
    asked: list[str | None] = []

    class Scoped:
        async def releases(self, *, namespace: str | None = None) -> list[helm.Release]:
            asked.append(namespace)
            if namespace is None:
                raise helm.HelmError('helm list failed: secrets is forbidden: cannot list resource "secrets"')
            return [helm.Release(name="gpu-operator", namespace=namespace, revision=1, status="deployed", chart="x")]

    class Broken:
        async def releases(self, *, namespace: str | None = None) -> list[helm.Release]:
            raise helm.HelmError("helm list failed: Kubernetes cluster unreachable")

    found = anyio.run(lambda: operators.visible_releases(Scoped(), namespace="gpu-operator"))  # type: ignore[arg-type]
    assert [(r.namespace, r.name) for r in found] == [("gpu-operator", "gpu-operator")]
    assert asked == [None, "gpu-operator"]
    try:
        anyio.run(lambda: operators.visible_releases(Broken(), namespace="gpu-operator"))  # type: ignore[arg-type]
    except helm.HelmError as err:
        assert "unreachable" in err.what  # not a permission problem: not hidden by the fallback
    else:
        raise AssertionError("an unreachable cluster was taken for an empty namespace")


def test_an_identity_that_may_not_read_releases_removes_none_and_does_not_fail() -> None:
    """The in-cluster base install with helm on PATH (the image) and a fleet without a GPUOperator."""

    class Refused:
        writes = 0

        async def releases(self, *, namespace: str | None = None) -> list[helm.Release]:
            raise helm.HelmError('helm list failed: secrets is forbidden: cannot list resource "secrets"')

    from fleet.engine.operators import removals

    assert anyio.run(lambda: removals.found(h=Refused(), prune=True)) == []  # type: ignore[arg-type]


def test_helm_gets_its_own_timeout_shorter_than_the_kill_deadline() -> None:
    from pathlib import Path

    from fleet import helm

    for deadline, own in ((300.0, 270), (120.0, 108), (40.0, 30), (5.0, 1)):
        assert helm.Settings(binary=Path("helm"), timeout=deadline).operation_timeout == own


def test_history_times_and_helm_error_blocks_are_read() -> None:
    import datetime

    from fleet.engine.operators import upgrades
    from fleet.helm import releases

    when = upgrades.updated({"updated": "2026-12-05T20:01:02.123456789Z"})
    assert when == datetime.datetime(2026, 12, 5, 20, 1, 2, 123456, tzinfo=datetime.UTC)
    assert upgrades.updated({"updated": "2026-12-05T20:01:02.5+01:00"}) == datetime.datetime(
        2026, 12, 5, 19, 1, 2, 500000, tzinfo=datetime.UTC
    )
    assert upgrades.updated({}) is None
    stderr = "Error: UPGRADE FAILED: pre-upgrade hooks failed: 1 error occurred:\n\t* timed out waiting\n\nmore"
    assert releases._error_text(stderr) == (
        "UPGRADE FAILED: pre-upgrade hooks failed: 1 error occurred: * timed out waiting"
    )


def test_the_chart_crds_say_which_kinds_are_cluster_scoped() -> None:
    """Before a first install GPUCluster is not served: its scope comes from NVIDIA's CRD (no namespace)."""
    from fleet.engine.operators import renders

    scopes = renders.crd_scopes(charts.crds(UPSTREAM.chart))
    assert scopes[("nvidia.com/v1alpha1", "GPUCluster")] is False
    assert scopes[("nvidia.com/v1alpha1", "NVIDIADriver")] is False
    assert scopes[("resource.nvidia.com/v1beta1", "ComputeDomain")] is True
