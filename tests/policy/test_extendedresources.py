"""DeviceClasses serving an extended resource: one class per name and cluster, and a name the API takes."""

from __future__ import annotations

from fleet.manifests import Finding, load_revision
from fleet.policy import check, extendedresources
from tests.manifests.repos import example_files, only

RULE = extendedresources.RULE


def findings_with(changes: dict[str, bytes]) -> list[Finding]:
    return check(load_revision(example_files() | changes))


def mig_class(extended: str) -> bytes:
    text = example_files()["deviceclasses/mig.nvidia.com.yaml"]
    return text + f"  extendedResourceName: {extended}\n".encode()


def test_two_classes_with_one_extended_resource_name_are_refused_naming_both() -> None:
    finding = only(findings_with({"deviceclasses/mig.nvidia.com.yaml": mig_class("nvidia.com/gpu")}), RULE)
    assert (finding.location.file, finding.location.line) == ("deviceclasses/mig.nvidia.com.yaml", 14)
    assert finding.message == (
        "DeviceClass 'mig.nvidia.com' serves extended resource 'nvidia.com/gpu', as DeviceClass 'gpu.nvidia.com' "
        "does (deviceclasses/gpu.nvidia.com.yaml:17:3): the class created later would silently take every pod "
        "asking for nvidia.com/gpu"
    )
    assert finding.object == "DeviceClass/mig.nvidia.com"


def test_distinct_names_and_an_overlay_that_removes_the_clash_are_fine() -> None:
    assert [
        f for f in findings_with({"deviceclasses/mig.nvidia.com.yaml": mig_class("nvidia.com/mig")}) if f.rule == RULE
    ] == []


def test_the_clash_is_per_cluster() -> None:
    """An overlay giving gpu-west's mig class the same name clashes on gpu-west alone."""
    overlay = example_files()["overlays/gpu-west/overlay.yaml"]
    patch = (
        b"  - target: {apiVersion: resource.k8s.io/v1, kind: DeviceClass, name: mig.nvidia.com}\n"
        b"    patch: {spec: {extendedResourceName: nvidia.com/gpu}}\n"
    )
    assert b"patches:\n" in overlay
    found = findings_with({"overlays/gpu-west/overlay.yaml": overlay.replace(b"patches:\n", b"patches:\n" + patch)})
    finding = only(found, RULE)
    assert finding.cluster == "gpu-west"


def test_names_the_api_server_refuses() -> None:
    for name, why in (
        ("gpu", "it needs a domain"),
        ("example.kubernetes.io/gpu", "kubernetes.io"),
        ("requests.nvidia.com/gpu", "requests."),
        ("nvidia.com/g/pu", "qualified name"),
    ):
        finding = only(findings_with({"deviceclasses/mig.nvidia.com.yaml": mig_class(name)}), RULE)
        assert why in finding.message, (name, finding.message)
    assert extendedresources.problem("nvidia.com/mig-1g.12gb") == ""
