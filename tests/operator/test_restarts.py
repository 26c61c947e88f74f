"""What an operator upgrade restarts, judged on NVIDIA's chart v26.7.0 rendered by the real helm (offline)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anyio
import pytest

from fleet import helm
from fleet.engine.operators import capabilities, restarts
from tests.operator.conftest import GUIDE_VALUES, NAMESPACE, RELEASE, UPSTREAM

CLUSTER_POLICY_VALUES = {
    "clusterPolicy": {"deployCR": True},
    "gpuCluster": {"deployCR": False},
    "driver": {"nvidiaDriverCRD": {"enabled": False}},
}


@pytest.fixture(scope="module")
def render(helm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    h = helm.Helm(helm.Settings(binary=helm_binary, home=tmp_path_factory.mktemp("helm-home"), timeout=120))
    chart = helm.ChartRef(repository=str(UPSTREAM.chart), name="gpu-operator", version="v26.7.0")
    caps = capabilities.for_minor("1.36")

    def run(values: dict[str, Any], **over: Any) -> list[dict[str, Any]]:
        merged = copy.deepcopy(values)
        for dotted, value in over.items():
            *path, leaf = dotted.split("__")
            place = merged
            for part in path:
                place = place.setdefault(part, {})
            place[leaf] = value
        return anyio.run(
            lambda: h.template(
                chart,
                release=RELEASE,
                namespace=NAMESPACE,
                values=merged,
                api_versions=caps.api_versions,
                kube_version=caps.kube_version,
            )
        )

    return run


def test_the_guides_path_names_the_driver_and_the_kubelet_plugin_with_the_fields(render: Any) -> None:
    base = render(GUIDE_VALUES)
    driver = restarts.restarted(before=base, after=render(GUIDE_VALUES, driver__version="600.10.01"))
    assert driver is not None and driver.components == (restarts.DRIVER,)
    assert driver.reason() == "restarts the driver (NVIDIADriver spec.version 595.91.07 → 600.10.01)"
    plugin = restarts.restarted(before=base, after=render(GUIDE_VALUES, draDriver__version="v0.6.0"))
    assert plugin is not None and plugin.components == (restarts.KUBELET_PLUGIN,)
    assert "GPUCluster spec.draDriver.version v0.5.0 → v0.6.0" in plugin.reason()
    both = restarts.restarted(
        before=base, after=render(GUIDE_VALUES, driver__version="600.10.01", draDriver__version="v0.6.0")
    )
    assert both is not None and both.reason().startswith("restarts the driver and the DRA kubelet plugin (")
    tolerations = [{"key": "x", "operator": "Exists"}]
    shared = restarts.restarted(before=base, after=render(GUIDE_VALUES, daemonsets__tolerations=tolerations))
    assert shared is not None and restarts.KUBELET_PLUGIN in shared.components


def test_operator_only_and_other_operand_changes_are_safe(render: Any) -> None:
    base = render(GUIDE_VALUES)
    assert restarts.restarted(before=base, after=render(GUIDE_VALUES)) is None
    assert (
        restarts.restarted(before=base, after=render(GUIDE_VALUES, operator__resources={"limits": {"cpu": "1"}}))
        is None
    )
    assert restarts.restarted(before=base, after=render(GUIDE_VALUES, dcgmExporter__enabled=False)) is None


def test_the_clusterpolicy_path_names_the_device_plugin_and_the_driver(render: Any) -> None:
    base = render(CLUSTER_POLICY_VALUES)
    plugin = restarts.restarted(before=base, after=render(CLUSTER_POLICY_VALUES, devicePlugin__version="v0.21.0"))
    assert plugin is not None and plugin.components == (restarts.DEVICE_PLUGIN,)
    assert "ClusterPolicy spec.devicePlugin.version v0.20.0 → v0.21.0" in plugin.reason()
    driver = restarts.restarted(before=base, after=render(CLUSTER_POLICY_VALUES, driver__version="600.10.01"))
    assert driver is not None and driver.components == (restarts.DRIVER,)
    assert restarts.restarted(before=base, after=render(CLUSTER_POLICY_VALUES, gfd__enabled=False)) is None


def test_switching_install_path_restarts_what_both_renders_deploy(render: Any) -> None:
    found = restarts.restarted(before=render(CLUSTER_POLICY_VALUES), after=render(GUIDE_VALUES))
    assert found is not None
    assert found.components == (restarts.DRIVER, restarts.DEVICE_PLUGIN, restarts.KUBELET_PLUGIN)


def test_the_disruption_names_the_gpu_nodes_and_the_drivers_claims(render: Any) -> None:
    found = restarts.restarted(before=render(GUIDE_VALUES), after=render(GUIDE_VALUES, driver__version="600.10.01"))
    assert found is not None
    slices = [
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "gpu-1"}},
        {"spec": {"driver": "other.example.com", "nodeName": "cpu-1"}},
    ]
    claims = [
        {
            "metadata": {"namespace": "ml", "name": "train"},
            "status": {"allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "device": "gpu-0"}]}}},
        },
        {"metadata": {"namespace": "ml", "name": "pending"}, "status": {}},
    ]
    disruption = restarts.disruption(found, slices=slices, claims=claims)
    assert disruption.nodes == {"gpu-1"} and disruption.claims == ("ml/train",)
