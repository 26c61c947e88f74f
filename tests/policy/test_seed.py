"""The DRA guide's templates, dropped into a team folder, validate cleanly."""

from __future__ import annotations

from fleet.manifests import load_revision
from fleet.policy import check
from tests.manifests.repos import SEED, example_files, yaml

GUIDE_TEAM = yaml("""
    apiVersion: fleet.gpufleet.dev/v1alpha1
    kind: Team
    metadata:
      name: gpu-example
    spec:
      namespaces: [gpu-example]
      owners:
      - name: gpu-example-admins
      deviceClasses: [gpu.nvidia.com]
      quota:
        gpu.nvidia.com: 8
""")


def test_seed_templates_in_a_team_folder_are_clean() -> None:
    files = example_files()
    files["teams/gpu-example/team.yaml"] = GUIDE_TEAM
    for path in sorted(SEED.glob("*.yaml")):
        documents = path.read_bytes().split(b"\n---\n")  # single-gpu-pod.yaml also holds the Pod
        for index, document in enumerate(documents):
            if b"kind: ResourceClaimTemplate" in document:
                files[f"teams/gpu-example/{path.stem}-{index}.yaml"] = document
    revision = load_revision(files)
    guide = [m.name for m in revision.of_kind("ResourceClaimTemplate") if m.team == "gpu-example"]
    assert sorted(guide) == ["h100-gpu", "large-memory-gpu", "single-gpu", "two-gpus"]
    assert check(revision) == []


def test_seed_workloads_are_not_fleet_objects() -> None:
    files = example_files()
    files["teams/gpu-example/team.yaml"] = GUIDE_TEAM
    files["teams/gpu-example/single-gpu-pod.yaml"] = (SEED / "single-gpu-pod.yaml").read_bytes()
    found = check(load_revision(files))
    assert [(f.rule, f.object) for f in found] == [("team-kind", "Pod/gpu-example/gpu-pod")]
