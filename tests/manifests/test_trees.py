"""Reading a checkout: symlinks out of the repository, oversized files, '..' paths."""

from __future__ import annotations

import os
from pathlib import Path

from fleet.manifests import Limits, load_revision, read_revision, read_tree
from tests.manifests.repos import only

CLUSTER = b"""apiVersion: fleet.gpufleet.dev/v1alpha1
kind: Cluster
metadata: {name: c}
spec: {kubernetesVersion: "1.36"}
"""


def test_symlink_leaving_the_repository_is_refused_and_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret.yaml"
    outside.write_bytes(CLUSTER)
    repo = tmp_path / "repo"
    (repo / "clusters").mkdir(parents=True)
    os.symlink(outside, repo / "clusters" / "c.yaml")
    os.symlink(tmp_path, repo / "up")
    revision = read_revision(repo)
    escapes = sorted(str(f.location) for f in revision.findings if f.rule == "path-escape")
    assert escapes == ["clusters/c.yaml", "up"]
    assert revision.manifests == ()


def test_symlink_inside_the_repository_is_read(tmp_path: Path) -> None:
    (tmp_path / "clusters").mkdir()
    (tmp_path / "real.yaml").write_bytes(CLUSTER)
    os.symlink(tmp_path / "real.yaml", tmp_path / "clusters" / "c.yaml")
    files, findings = read_tree(tmp_path, limits=Limits())
    assert findings == []
    assert sorted(files) == ["clusters/c.yaml", "real.yaml"]


def test_oversized_file_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_bytes(b"#" * 5000)
    (tmp_path / "c.yaml").write_bytes(CLUSTER)
    files, findings = read_tree(tmp_path, limits=Limits(max_file_bytes=4096))
    assert list(files) == ["c.yaml"]
    assert only(findings, "file-too-large").location.file == "big.yaml"


def test_hidden_directories_and_other_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.yaml").write_bytes(b": bad")
    (tmp_path / "README.md").write_bytes(b"# hi")
    (tmp_path / ".pre-commit-config.yaml").write_bytes(b"repos: []\n")
    files, findings = read_tree(tmp_path, limits=Limits())
    assert files == {} and findings == []


def test_paths_with_dotdot_or_absolute_are_refused() -> None:
    revision = load_revision({"../x.yaml": CLUSTER, "/etc/x.yaml": CLUSTER, "teams/a/../../b.yaml": CLUSTER})
    assert sorted(f.location.file for f in revision.findings if f.rule == "path-escape") == [
        "../x.yaml",
        "/etc/x.yaml",
        "teams/a/../../b.yaml",
    ]
    assert revision.manifests == ()
