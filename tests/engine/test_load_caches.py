"""A LoadCache: an unchanged repository is not validated or planned again; a changed file is."""

from __future__ import annotations

from pathlib import Path

from fleet.engine.pipelines import LoadCache, load_plan
from tests.apply.repos import Repo


def test_unchanged_repository_returns_the_same_plan(tmp_path: Path) -> None:
    repo = Repo(root=tmp_path / "repo")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one", count=1)
    root = repo.write()
    cache = LoadCache()
    first = load_plan(root, cluster=repo.cluster, cache=cache)
    assert load_plan(root, cluster=repo.cluster, cache=cache) is first
    files = len(cache.parsed.entries)
    assert (cache.parsed.hits, cache.parsed.misses) == (0, files), "the second load did not even parse"

    repo.claim_template("ml", "one", count=2)
    root = repo.write()
    second = load_plan(root, cluster=repo.cluster, cache=cache)
    assert second is not first and second == load_plan(root, cluster=repo.cluster)
    counts = {d.ref.name: d.obj.get("spec") for d in second.objects if d.ref.kind == "ResourceClaimTemplate"}
    assert counts["one"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    assert (cache.parsed.hits, cache.parsed.misses) == (files - 1, files + 1), "only the changed file was parsed again"
