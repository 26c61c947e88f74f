"""Reading a checkout: symlinks out of the repository, oversized files, '..' paths, what the bytes read hold."""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import os
from pathlib import Path

import pytest

from fleet.manifests import Limits, load_revision, read_revision, read_tree, trees
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


def test_a_file_that_grew_since_its_stat_is_read_on_up_to_the_cap() -> None:
    grown = io.BytesIO(b"x" * 100)
    assert trees._read_capped(grown, 10, cap=1000) == b"x" * 100  # the stat said 10 bytes
    over = io.BytesIO(b"x" * 5000)
    assert len(trees._read_capped(over, 10, cap=1000)) == 1001  # one more than the cap: the parser refuses it
    assert trees._read_capped(io.BytesIO(b"abc"), 3, cap=1000) == b"abc"


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def _mapped_bytes() -> int:
    """glibc's bytes in chunks served by mappings of their own (``mallinfo2().hblkhd``)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        pytest.skip("not glibc >= 2.33 (no mallinfo2)")
    mallinfo2.restype = _MallInfo2
    return int(mallinfo2().hblkhd)


def test_small_files_read_hold_about_their_size(tmp_path: Path) -> None:
    """Reading with a cap-sized request left each small file's bytes in a 4 KiB mapping of its own:
    10,000 files of half a kilobyte held 40 MiB in the controller's TreeCache."""
    for i in range(2000):
        (tmp_path / f"t{i}.yaml").write_bytes(b"# a small manifest\n" * 25)
    before = _mapped_bytes()
    files, _ = read_tree(tmp_path, limits=Limits())
    held = _mapped_bytes() - before
    assert len(files) == 2000
    assert held < 1024 * 1024, f"{held} bytes mapped for {sum(map(len, files.values()))} bytes read"
