"""``fleetctl validate --inventory FILE``: satisfiability on a snapshot of a cluster's ResourceSlices."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from fleet.inventory import snapshots
from tests import paths
from tests.manifests.repos import EXAMPLE, template
from tests.validate.test_cli import fleetctl

SLICES = paths.FIXTURES / "resourceslices"


def snapshot(tmp_path: Path, *names: str, cluster: str) -> Path:
    slices = [doc for name in names for doc in yaml.safe_load_all((SLICES / name).read_text()) if doc]
    path = tmp_path / f"{cluster or 'anon'}.yaml"
    path.write_text(snapshots.dump(snapshots.snapshot(slices=slices, cluster=cluster)))
    return path


def test_satisfiable_templates_print_their_nodes_and_devices(tmp_path: Path) -> None:
    east = snapshot(tmp_path, "h100-node.yaml", "h200-node.yaml", "a100-node.yaml", cluster="gpu-east")
    result = fleetctl("validate", str(EXAMPLE), "--inventory", str(east), env={"NO_COLOR": "1"})
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    assert lines[1] == "satisfiability:"
    hopper = next(line for line in lines if "hopper-large-memory" in line)
    assert hopper.endswith(f": 1 node(s), 8 device(s), 8 at once [snapshot {east}]")  # only the H200 has > 80Gi
    two = next(line for line in lines if "ml-research/two-gpus" in line)
    assert two.endswith(f": 3 node(s), 24 device(s), 12 at once [snapshot {east}]")


def test_unsatisfiable_template_is_an_error_at_its_selector(tmp_path: Path) -> None:
    west = snapshot(tmp_path, "a100-node.yaml", cluster="gpu-west")
    result = fleetctl("validate", str(EXAMPLE), "--inventory", str(west), env={"NO_COLOR": "1"})
    assert result.returncode == 1
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"{EXAMPLE}/teams/ml-research/h100-gpu.yaml:17:21 claim-unsatisfiable ")
    assert first.endswith("[cluster gpu-west]")
    assert "hint: productName = 'NVIDIA A100-SXM4-80GB' (8)" in result.stdout
    assert "ResourceClaimTemplate/ml-research/h100-gpu (" in result.stdout
    assert "h100-gpu.yaml): UNSATISFIABLE" in result.stdout


def test_json_carries_the_satisfaction_table(tmp_path: Path) -> None:
    west = snapshot(tmp_path, "a100-node.yaml", "mig-node.yaml", cluster="gpu-west")
    document = json.loads(fleetctl("validate", str(EXAMPLE), "--inventory", str(west), "-o", "json").stdout)
    rows = {row["object"]: row for row in document["satisfaction"] if row["cluster"] == "gpu-west"}
    assert rows["ResourceClaimTemplate/ml-research/h100-gpu"]["nodes"] == 1
    assert rows["ResourceClaimTemplate/ml-research/single-gpu"] | {"file": ""} == {
        "cluster": "gpu-west",
        "object": "ResourceClaimTemplate/ml-research/single-gpu",
        "file": "",
        "line": 2,
        "nodes": 2,
        "devices": 9,
        "capacity": 9,
        "undecidedNodes": 0,
        "source": f"snapshot {west}",
        "now": None,  # only with --context
    }


@pytest.mark.parametrize("cluster", ["", "gpu-north"])
def test_snapshot_for_an_unknown_cluster_is_a_usage_error(tmp_path: Path, cluster: str) -> None:
    anonymous = snapshot(tmp_path, "a100-node.yaml", cluster=cluster)
    result = fleetctl("validate", str(EXAMPLE), "--inventory", str(anonymous))
    assert result.returncode == 2
    assert "which cluster is the inventory" in result.stderr
    assert "pass --cluster (known clusters: gpu-east, gpu-west)" in result.stderr


def test_cluster_option_names_the_snapshots_cluster(tmp_path: Path) -> None:
    anonymous = snapshot(tmp_path, "a100-node.yaml", cluster="")
    result = fleetctl("validate", str(EXAMPLE), "--inventory", str(anonymous), "--cluster", "gpu-west")
    assert result.returncode == 1
    assert "claim-unsatisfiable" in result.stdout


def test_unreadable_snapshot_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Something\n")
    result = fleetctl("validate", str(EXAMPLE), "--inventory", str(bad))
    assert result.returncode == 2
    assert "not an InventorySnapshot" in result.stderr


def test_a_removed_attribute_is_reported_once(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    (repo / "teams" / "ml-research" / "t.yaml").write_bytes(
        template(request="selectors:\n- cel:\n    expression: device.attributes['gpu.nvidia.com'].index == 0")
    )
    east = snapshot(tmp_path, "h100-node.yaml", cluster="gpu-east")
    result = fleetctl("validate", str(repo), "--inventory", str(east), "-o", "json")
    rules = [f["rule"] for f in json.loads(result.stdout)["findings"] if f["file"].endswith("t.yaml")]
    assert rules == ["cel-removed-attribute"]  # not also the inventory's cel-unknown-attribute
