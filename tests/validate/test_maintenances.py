"""``fleetctl validate`` on GPUMaintenances as CI runs it: each bad one at its file:line with a hint, exit 1,
and the engine refuses to plan the revision, so nothing is applied."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fleet.engine import pipelines
from tests.manifests.repos import EXAMPLE
from tests.policy.test_maintenances import EAST
from tests.validate.test_cli import fleetctl

BAD = {
    "maintenance/b200.yaml": "clusters: {names: [gpu-east]}\ndevices:\n  selector: "
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'",
    "maintenance/cel.yaml": "clusters: {names: [gpu-east]}\ndevices:\n  selector: "
    "device.attributes['gpu.nvidia.com'].productName ==",
    "maintenance/h200.yaml": "clusters: {names: [gpu-east]}\ndevices:\n  pools: [h200]",
    "maintenance/west.yaml": "clusters: {names: [gpu-west]}\neffect: NoSchedule\nallowFullPool: true\n"
    "devices:\n  pools: [h100]",
    "maintenance/now.yaml": "clusters: {names: [gpu-east]}\ndirect: true\ndevices:\n  pools: [a100]\n"
    "  devices: [gpu-0]",
    "maintenance/a.yaml": "clusters: {names: [gpu-east]}\ndevices:\n  pools: [a100]\n  devices: [gpu-7]",
    "maintenance/b.yaml": "clusters: {names: [gpu-east]}\ndevices:\n  pools: [a100]\n  devices: [gpu-6, gpu-7]",
    "maintenance/uuid.yaml": "clusters: {names: [gpu-east]}\ndevices:\n  uuids:\n"
    "  - GPU-12345678-1234-1234-1234-123456789abc\n  - GPU-1234",
    "maintenance/pool.yaml": "clusters: {names: [gpu-east]}\ndevices:\n  pools: [h10]",
    "teams/inference/m.yaml": "clusters: {names: [gpu-east]}\ndevices:\n  nodes: [n1]",
    "clusters/gpu-east/maintenance/m.yaml": "clusters: {names: [gpu-west]}\ndevices:\n  nodes: [n1]",
    "clusters/gpu-north/maintenance/m.yaml": "devices:\n  nodes: [n1]",
    "pools/m.yaml": "clusters: {names: [gpu-east]}\ndevices:\n  nodes: [n1]",
}
"""One bad input per file (``spec`` only)."""

EXPECTED = [
    (
        "clusters/gpu-east/maintenance/m.yaml:5:22 maintenance-location",
        "remove spec.clusters, or move the file to maintenance/ to name the clusters there",
    ),
    ("clusters/gpu-north/maintenance/m.yaml:1:1 maintenance-location", "known clusters: gpu-east, gpu-west; move it"),
    ("maintenance/b.yaml:6:3 maintenance-overlap GPUMaintenance 'maintenance-b'", "a device is in one maintenance"),
    ("maintenance/b200.yaml:7:15 maintenance-devices warning:", "the devices there have productName = "),
    ("maintenance/cel.yaml:7:65 cel CEL selector does not compile", "fix the expression"),
    ("maintenance/h200.yaml:7:5 maintenance-full-pool", "or set allowFullPool: true if team inference can wait"),
    ("maintenance/now.yaml:6:3 maintenance-direct", "set spec.disruption (policy: wait or drain)"),
    ("maintenance/pool.yaml:7:13 maintenance-pool", "did you mean 'h100'? known pools: a100, a100-mig, h100, h200"),
    ("maintenance/uuid.yaml:9:7 schema spec.devices.uuids[1]: 'GPU-1234'", "copy it from `nvidia-smi -L`"),
    ("maintenance/west.yaml:5:3 maintenance-api cluster gpu-west (Kubernetes 1.36)", "or upgrade gpu-west to 1.37"),
    ("pools/m.yaml:1:1 maintenance-location", "move it to maintenance/ (spec.clusters says which clusters)"),
    ("teams/inference/m.yaml:1:1 team-kind GPUMaintenance", "the platform team takes devices out"),
]
"""For each file: how its line starts, and what its hint says."""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    shutil.copytree(EXAMPLE, target)
    (target / "clusters" / "gpu-east.yaml").write_bytes(EAST)
    for path, spec in BAD.items():
        name = path.removesuffix(".yaml").replace("/", "-")  # one name each: names are the fleet's
        body = "".join(f"  {line}\n" for line in spec.splitlines())
        text = f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: GPUMaintenance\nmetadata: {{name: {name}}}\nspec:\n"
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        (target / path).write_text(text + body + "  reason: a failing GPU\n")
    return target


def test_each_bad_maintenance_is_refused_at_its_line_with_a_hint(repo: Path) -> None:
    result = fleetctl("validate", str(repo), env={"NO_COLOR": "1"})
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for start, hint in EXPECTED:
        at = next((i for i, line in enumerate(lines) if line.startswith(f"{repo}/{start}")), None)
        assert at is not None, f"{start} not in:\n{result.stdout}"
        assert lines[at + 1].startswith("  hint: ") and hint in lines[at + 1], lines[at + 1]
    assert lines[-1].startswith(f"{len(EXPECTED) - 1} error(s), 1 warning(s)")


def test_a_revision_with_a_bad_maintenance_is_not_planned(repo: Path) -> None:
    with pytest.raises(pipelines.InvalidRevision) as refused:
        pipelines.load_plan(repo, cluster="gpu-east")
    assert {f.rule for f in refused.value.findings} >= {
        "maintenance-full-pool",
        "maintenance-direct",
        "maintenance-overlap",
        "maintenance-location",
    }
    for path in BAD:
        (repo / path).unlink()
    assert pipelines.load_plan(repo, cluster="gpu-east").maintenances == ()
