"""The Helm adapter against the real helm binary, the sandbox's API server and a loopback chart repository."""

from __future__ import annotations

import anyio
import pytest

from fleet import helm
from tests.conftest import Kubectl
from tests.operator.conftest import GUIDE_VALUES, NAMESPACE, RELEASE, chart

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("cleanup_release")]


def test_install_upgrade_and_rollback_through_helm_history(
    chart_repo: str, helm_settings: helm.Settings, kubectl: Kubectl
) -> None:
    h = helm.Helm(helm_settings)

    async def main() -> None:
        assert await h.release(name=RELEASE, namespace=NAMESPACE) is None
        first = await h.upgrade(chart(chart_repo), release=RELEASE, namespace=NAMESPACE, values=GUIDE_VALUES)
        assert (first.revision, first.status, first.chart) == (1, "deployed", "gpu-operator-v26.7.0")
        assert first.labels == {"app.kubernetes.io/managed-by": "fleet"}
        assert await h.values(name=RELEASE, namespace=NAMESPACE) == GUIDE_VALUES

        second = await h.upgrade(
            chart(chart_repo, "v26.7.1"), release=RELEASE, namespace=NAMESPACE, values=GUIDE_VALUES
        )
        assert (second.revision, second.chart_version("gpu-operator")) == (2, "v26.7.1")

        await h.rollback(name=RELEASE, namespace=NAMESPACE, revision=1)
        back = await h.release(name=RELEASE, namespace=NAMESPACE)
        assert back is not None
        assert (back.revision, back.chart) == (3, "gpu-operator-v26.7.0")
        history = await h.history(name=RELEASE, namespace=NAMESPACE)
        assert [e["revision"] for e in history] == [1, 2, 3]
        assert "Rollback to 1" in history[-1]["description"]
        assert h.writes == 3

    anyio.run(main)
    # The chart's objects are in the cluster, made by helm from the loopback repository.
    kubectl("get", "deployment", "-n", NAMESPACE, "gpu-operator")
    kubectl("get", "gpucluster", "gpu-cluster")
    kubectl("get", "crd", "gpuclusters.nvidia.com", "computedomains.resource.nvidia.com")


def test_chart_crds_and_rendering_come_from_the_repository(chart_repo: str, helm_settings: helm.Settings) -> None:
    h = helm.Helm(helm_settings)

    async def main() -> None:
        crds = await h.crds(chart(chart_repo, "v26.7.1"))
        names = {c["metadata"]["name"] for c in crds}
        assert {"gpuclusters.nvidia.com", "clusterpolicies.nvidia.com", "computedomains.resource.nvidia.com"} <= names
        with pytest.raises(helm.HelmError) as offline:  # NVIDIA's chart checks .Capabilities for DRA
            await h.template(chart(chart_repo), release=RELEASE, namespace=NAMESPACE, values=GUIDE_VALUES)
        assert "requires a Kubernetes cluster that supports Dynamic Resource Allocation" in str(offline.value)
        rendered = await h.template(
            chart(chart_repo),
            release=RELEASE,
            namespace=NAMESPACE,
            values=GUIDE_VALUES,
            api_versions=("resource.k8s.io/v1", "resource.k8s.io/v1/DeviceClass"),
            kube_version="v1.36.0",
        )
        kinds = {(o["kind"], o["metadata"]["name"]) for o in rendered}
        assert ("GPUCluster", "gpu-cluster") in kinds
        assert ("Deployment", "gpu-operator") in kinds
        assert not any(k == "ClusterPolicy" for k, _ in kinds)
        assert h.writes == 0

    anyio.run(main)


def test_helm_errors_say_what_helm_refused(chart_repo: str, helm_settings: helm.Settings) -> None:
    h = helm.Helm(helm_settings)
    both = {**GUIDE_VALUES, "clusterPolicy": {"deployCR": True}}

    async def main() -> None:
        with pytest.raises(helm.HelmError) as err:
            await h.template(chart(chart_repo), release=RELEASE, namespace=NAMESPACE, values=both)
        assert "cannot both be true" in str(err.value)
        with pytest.raises(helm.HelmError) as missing:
            await h.crds(chart(chart_repo, "v99.0.0"))
        assert "v99.0.0" in str(missing.value)

    anyio.run(main)
