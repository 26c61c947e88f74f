"""An object that fails its schema is still checked by every other rule: one run reports everything."""

from __future__ import annotations

from fleet.manifests import load_revision
from fleet.policy import check
from tests.manifests.repos import example_files, yaml

BROKEN = yaml("""
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaimTemplate
    metadata:
      name: broken
      namespace: inference
      colour: blue
    spec:
      spec:
        devices:
          requests:
          - name: gpu
            exactly:
              devicClassName: vfio.gpu.nvidia.com
              count: "2"
              selectors:
              - cel:
                  expression: "device.capacity['gpu.nvidia.com'].memory > 40"
          - name: other
            exactly:
              count: 1
          - name: third
            exactly:
              deviceClassName: gpu.nvidia.com
              adminAccess: true
""")


def findings() -> list[tuple[int, int, str]]:
    files = example_files()
    files["teams/ml-research/broken.yaml"] = BROKEN
    found = check(load_revision(files))
    return [(f.location.line, f.location.col, f.rule) for f in found if f.location.file.endswith("broken.yaml")]


def test_every_independent_finding_of_the_file_in_one_run() -> None:
    found = findings()
    assert (6, 3, "schema") in found  # metadata.colour
    assert (13, 11, "schema") in found  # devicClassName, read as deviceClassName for the other rules
    assert (14, 11, "schema") in found  # count: "2"
    assert (17, 69, "cel") in found  # Quantity > int, at the operator
    assert BROKEN.decode().splitlines()[16][68] == ">"
    assert (5, 3, "team-namespace") in found  # ml-research writes into inference
    assert (13, 11, "team-device-class") in found  # vfio.gpu.nvidia.com is not ml-research's
    assert (24, 11, "team-admin-access") in found  # the third request, though the second was dropped
    assert [rule for _, _, rule in found].count("schema") == 4  # the request without a class: missing field


def test_a_salvaged_object_is_never_planned() -> None:
    files = example_files()
    files["teams/ml-research/broken.yaml"] = BROKEN
    revision = load_revision(files)
    broken = next(m for m in revision.manifests if m.name == "broken")
    assert broken.salvaged
    assert [r["name"] for r in broken.data["spec"]["spec"]["devices"]["requests"]] == ["gpu", "third"]
    assert any(f.severity == "error" and f.rule == "schema" for f in revision.findings)


def test_an_old_dra_version_is_checked_in_its_v1_shape_too() -> None:
    files = example_files()
    files["teams/ml-research/old.yaml"] = yaml("""
        apiVersion: resource.k8s.io/v1beta1
        kind: ResourceClaimTemplate
        metadata:
          name: old
          namespace: inference
        spec:
          spec:
            devices:
              requests:
              - name: gpu
                deviceClassName: gpu.nvidia.com
                selectors:
                - cel:
                    expression: "device.capacity['gpu.nvidia.com'].memory > 40"
    """)
    found = check(load_revision(files))
    mine = sorted((f.location.line, f.location.col, f.rule) for f in found if f.location.file.endswith("old.yaml"))
    assert mine == [(1, 1, "deprecated-api"), (5, 3, "team-namespace"), (14, 67, "cel")]
