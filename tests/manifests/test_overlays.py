"""Overlays: base → matching overlays in name order, locations kept from base or overlay."""

from __future__ import annotations

import pytest

from fleet.errors import FleetError
from fleet.manifests import Positions, kinds, load_revision, merge, resolve
from fleet.manifests.locations import Location
from tests.manifests.repos import example_files, yaml


def overlay(name: str, selector: str, body: str) -> bytes:
    return yaml(f"""
        apiVersion: fleet.gpufleet.dev/v1alpha1
        kind: Overlay
        metadata: {{name: {name}}}
        spec:
          clusters: {selector}
    """) + yaml(body).removeprefix(b"spec:\n")


def test_example_views_per_cluster() -> None:
    revision = load_revision(example_files())
    east = resolve(revision, cluster="gpu-east")
    west = resolve(revision, cluster="gpu-west")
    assert east.overlays == ("gpu-east",) and west.overlays == ("gpu-west",)
    assert sorted(p.name for p in east.pools) == ["a100", "h100", "h200"]
    assert sorted(p.name for p in west.pools) == ["a100-mig", "h100"]
    assert sorted(t.name for t in west.teams) == ["ml-research"]
    assert {c.namespace for c in west.claims} == {"ml-research"}
    assert len(east.device_classes) == 3
    nodes = {v.name: next(p for p in v.pools if p.name == "h100").model for v in (east, west)}
    assert isinstance(nodes["gpu-east"], kinds.GPUNodePool) and nodes["gpu-east"].spec.nodes == 16
    assert isinstance(nodes["gpu-west"], kinds.GPUNodePool) and nodes["gpu-west"].spec.nodes == 2
    assert west.operator is not None and west.operator.data["spec"]["values"]["dcgmExporter"] == {"enabled": False}
    assert west.operator.data["spec"]["values"]["gpuCluster"] == {"deployCR": True}
    assert east.findings == () and west.findings == ()


def test_patched_fields_point_at_the_overlay_and_the_rest_at_the_base() -> None:
    east = resolve(load_revision(example_files()), cluster="gpu-east")
    h100 = next(p for p in east.pools if p.name == "h100")
    assert h100.positions.at(("spec", "nodes")).file == "overlays/gpu-east/overlay.yaml"
    assert h100.positions.at(("spec", "gpu", "count")).file == "pools/h100.yaml"


def test_overlays_apply_in_name_order() -> None:
    files = example_files()
    files["overlays/b/overlay.yaml"] = overlay(
        "b",
        "{names: [gpu-west]}",
        """
        spec:
          patches:
          - target: {apiVersion: fleet.gpufleet.dev/v1alpha1, kind: GPUNodePool, name: h100}
            patch: {spec: {nodes: 7}}
    """,
    )
    files["overlays/a/overlay.yaml"] = overlay(
        "a",
        "{names: [gpu-west]}",
        """
        spec:
          patches:
          - target: {apiVersion: fleet.gpufleet.dev/v1alpha1, kind: GPUNodePool, name: h100}
            patch: {spec: {nodes: 5}}
    """,
    )
    view = resolve(load_revision(files), cluster="gpu-west")
    assert view.overlays == ("a", "b", "gpu-west")
    h100 = next(p for p in view.pools if p.name == "h100")
    assert isinstance(h100.model, kinds.GPUNodePool) and h100.model.spec.nodes == 2


def test_invalid_value_from_an_overlay_is_reported_at_the_overlay_line() -> None:
    files = example_files()
    files["overlays/gpu-west/overlay.yaml"] = overlay(
        "gpu-west",
        "{names: [gpu-west]}",
        """
        spec:
          patches:
          - target: {apiVersion: fleet.gpufleet.dev/v1alpha1, kind: GPUNodePool, name: h100}
            patch:
              spec:
                nodes: -1
    """,
    )
    view = resolve(load_revision(files), cluster="gpu-west")
    [finding] = view.findings
    assert finding.rule == "schema"
    assert str(finding.location) == "overlays/gpu-west/overlay.yaml:10:9"
    assert finding.cluster == "gpu-west"
    assert "after overlay gpu-west" in finding.message
    h100 = next(p for p in view.pools if p.name == "h100")
    assert isinstance(h100.model, kinds.GPUNodePool) and h100.model.spec.nodes == 4  # base kept


def test_missing_target_and_identity_changes_are_findings() -> None:
    files = example_files()
    files["overlays/gpu-west/overlay.yaml"] = overlay(
        "gpu-west",
        "{names: [gpu-west]}",
        """
        spec:
          patches:
          - target: {apiVersion: fleet.gpufleet.dev/v1alpha1, kind: GPUNodePool, name: h1000}
            patch: {spec: {nodes: 1}}
          - target: {apiVersion: fleet.gpufleet.dev/v1alpha1, kind: GPUNodePool, name: h100}
            patch: {metadata: {name: other}}
    """,
    )
    view = resolve(load_revision(files), cluster="gpu-west")
    assert [(f.rule, f.location.line) for f in view.findings] == [
        ("overlay-target", 7),
        ("overlay-patch", 10),
    ]


def test_unknown_cluster_is_an_error_listing_known_ones() -> None:
    with pytest.raises(FleetError, match="no Cluster named 'nope'") as info:
        resolve(load_revision(example_files()), cluster="nope")
    assert info.value.hint == "known clusters: gpu-east, gpu-west"


def test_merge_patch_follows_rfc7386() -> None:
    root = Positions(root=Location("base.yaml", 1, 1))
    patch_root = Positions(root=Location("o.yaml", 1, 1))
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    patch = {"a": "z", "c": {"f": None}, "l": [3], "n": {"x": 1}}
    result, _ = merge(target=target, patch=patch, positions=root, patch_positions=patch_root)
    assert result == {"a": "z", "c": {"d": "e"}, "l": [3], "n": {"x": 1}}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    replaced, _ = merge(target={"a": 1}, patch=["x"], positions=root, patch_positions=patch_root)
    assert replaced == ["x"]
