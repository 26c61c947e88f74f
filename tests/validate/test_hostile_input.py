"""Hostile pull requests: the CLI reports each problem, stays within a memory bound, checks the rest."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

from tests.manifests.repos import EXAMPLE, ROOT

MEMORY_CAP = 1024 * 1024 * 1024  # 1 GiB of address space: an expanded alias bomb needs far more


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def test_bomb_symlink_binary_and_huge_files_in_one_pull_request(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    team = repo / "teams" / "ml-research"
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    (team / "bomb.yaml").write_text("\n".join(lines) + "\n")
    (tmp_path / "secret.yaml").write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n")
    os.symlink(tmp_path / "secret.yaml", team / "secret.yaml")
    (team / "binary.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (team / "huge.yaml").write_bytes(b"# " + b"x" * (2 * 1024 * 1024) + b"\n")
    two = team / "two-gpus.yaml"
    two.write_text(two.read_text().replace("namespace: ml-research", "namespace: inference"))
    result = subprocess.run(
        [sys.executable, "-m", "fleetctl", "validate", str(repo), "-o", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        preexec_fn=_cap_memory,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    rules = {(Path(f["file"]).name, f["rule"]) for f in json.loads(result.stdout)["findings"]}
    assert rules == {
        ("bomb.yaml", "yaml-limit"),
        ("secret.yaml", "path-escape"),
        ("binary.yaml", "yaml-encoding"),
        ("huge.yaml", "file-too-large"),
        ("two-gpus.yaml", "team-namespace"),  # the rest of the revision is still checked
    }
