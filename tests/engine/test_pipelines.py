"""The pipeline names a plan by its content's revision id."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from fleet.engine import pipelines, plancaches
from fleet.engine.pipelines import load_plan
from fleet.manifests import Limits, kinds, read_tree
from fleet.source import checkouts

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"


def test_plan_revision_outside_git_is_the_content_id(tmp_path: Path) -> None:
    repo = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, repo)  # outside any git work tree
    files, _ = read_tree(repo, limits=Limits())
    assert load_plan(repo, cluster="gpu-east").revision == f"content-{checkouts.content_hash(files)}"


def test_cluster_context_is_the_clusters_spec_context(tmp_path: Path) -> None:
    """Read from the file alone, without the models (a process taking a stored plan never loads them)."""
    (tmp_path / "clusters").mkdir()
    cluster = tmp_path / "clusters" / "east.yaml"
    head = f"apiVersion: {kinds.API_VERSION}\nkind: Cluster\nmetadata:\n  name: east\n"
    cluster.write_text(head + "spec:\n  kubernetesVersion: '1.36'\n  context: admin@east\n")
    assert pipelines.CLUSTER_API_VERSION == kinds.API_VERSION
    assert pipelines.cluster_context(tmp_path, cluster="east") == "admin@east"
    assert pipelines.cluster_context(tmp_path, cluster="west") is None  # no such file
    for spec in ("spec:\n  kubernetesVersion: '1.36'\n", "spec: [context]\n", "spec:\n  context: 3\n"):
        cluster.write_text(head + spec)
        assert pipelines.cluster_context(tmp_path, cluster="east") is None, spec
    cluster.write_text(head.replace("name: east", "name: west") + "spec:\n  context: admin@west\n")
    assert pipelines.cluster_context(tmp_path, cluster="east") is None  # another cluster's file
    cluster.write_text("key: [unclosed\n")
    assert pipelines.cluster_context(tmp_path, cluster="east") is None  # validation reports it, not this


def test_a_file_name_that_is_not_utf8_is_planned_and_stored(tmp_path: Path) -> None:
    """Names are bytes on Linux: one that is not UTF-8 must not break the revision id or the plan key."""
    repo = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, repo)
    moved = repo / "deviceclasses" / os.fsdecode(b"gpu-\xe9.yaml")
    next((repo / "deviceclasses").glob("*.yaml")).rename(moved)
    store = plancaches.PlanCache(tmp_path / "plans")
    first = load_plan(repo, cluster="gpu-east", store=store)
    assert load_plan(repo, cluster="gpu-east", store=store).revision == first.revision
    assert len(list((tmp_path / "plans").glob("*.plan"))) == 1
