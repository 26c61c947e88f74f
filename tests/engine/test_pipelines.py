"""The pipeline names a plan by its content's revision id."""

from __future__ import annotations

import shutil
from pathlib import Path

from fleet.engine.pipelines import load_plan
from fleet.manifests import Limits, read_tree
from fleet.source import checkouts

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"


def test_plan_revision_outside_git_is_the_content_id(tmp_path: Path) -> None:
    repo = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, repo)  # outside any git work tree
    files, _ = read_tree(repo, limits=Limits())
    assert load_plan(repo, cluster="gpu-east").revision == f"content-{checkouts.content_hash(files)}"
