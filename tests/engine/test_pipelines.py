"""The pipeline names a plan by its content's revision id."""

from __future__ import annotations

import gc
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

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


def test_the_collector_is_paused_then_what_was_made_is_frozen() -> None:
    """A CLI run keeps everything it loads: no automatic collection re-scans it, and once the pause
    ends it is out of the collector's sight (the next young collection would scan it all)."""
    assert gc.isenabled()
    before = gc.get_freeze_count()
    try:
        with pipelines.collector_paused():
            assert not gc.isenabled()
            made = [[i] for i in range(1_000)]  # tracked containers
        assert gc.isenabled()
        assert gc.get_freeze_count() >= before + len(made)
        assert not any(obj is made for obj in gc.get_objects())  # frozen: no generation holds it
    finally:
        gc.unfreeze()


def test_the_collector_resumes_when_the_last_pause_ends_and_only_if_it_ran() -> None:
    """Nested and concurrent pauses (fleetctl apply loads in a worker thread) are counted."""
    first, second = pipelines.collector_paused(), pipelines.collector_paused()
    entered, leave = threading.Event(), threading.Event()

    def other_thread() -> None:
        with second:
            entered.set()
            leave.wait(10)

    try:
        with first:
            worker = threading.Thread(target=other_thread)
            worker.start()
            assert entered.wait(10)
        assert not gc.isenabled()  # the other thread still loads
        leave.set()
        worker.join(10)
        assert gc.isenabled()
        gc.disable()  # someone turned it off: a pause leaves it off
        with pipelines.collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        leave.set()
        gc.enable()
        gc.unfreeze()


def test_fleetctl_validate_loads_without_a_collection(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from fleet.manifests import revisions
    from fleetctl import cli

    collections: list[int] = []
    loading: list[bool] = []
    real = revisions.load_revision

    def counted(*args: Any, **kwargs: Any) -> Any:
        loading.append(True)
        try:
            return real(*args, **kwargs)
        finally:
            loading.pop()

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and loading:
            collections.append(info["generation"])

    monkeypatch.setattr(revisions, "load_revision", counted)
    gc.callbacks.append(callback)
    try:
        # tiny thresholds: without the pause, loading the example would collect hundreds of times
        monkeypatch.setattr(pipelines, "tune_gc", lambda: gc.set_threshold(10, 1, 1))
        threshold = gc.get_threshold()
        assert cli.run(["validate", str(EXAMPLE), "-o", "json"]) == 0
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*threshold)
        gc.unfreeze()
    capsys.readouterr()
    assert collections == []
    assert gc.isenabled()


def test_plan_and_list_pauses_the_collector_for_planning_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A listed page's response stays in a reference cycle until a collection: listing under the
    pause held 90 MiB more at 100,000 objects. The planning alone is paused (here the listing
    follows it, as above ``OVERLAP_MAX_FILES``; overlapped, the two share the pause's time)."""
    import anyio

    from fleet.engine import listings

    seen: dict[str, bool] = {}
    real_load_plan = pipelines.load_plan

    def load_plan(*args: Any, **kwargs: Any) -> Any:
        seen["planning"] = gc.isenabled()
        return real_load_plan(*args, **kwargs)

    async def prefetch(*, client: Any, also: Any = ()) -> str:
        seen["listing"] = gc.isenabled()
        return "listed"

    monkeypatch.setattr(pipelines, "load_plan", load_plan)
    monkeypatch.setattr(listings, "prefetch", prefetch)
    monkeypatch.setattr(pipelines, "OVERLAP_MAX_FILES", 0)
    try:
        plan, listed = anyio.run(
            lambda: pipelines.plan_and_list(EXAMPLE, cluster="gpu-east", client=None, pause_collector=True)  # type: ignore[arg-type]
        )
    finally:
        gc.unfreeze()
    assert listed == "listed" and plan.objects
    assert seen == {"planning": False, "listing": True}
    assert gc.isenabled()


class Lister:
    """A client that lists nothing and remembers which kinds it was asked for."""

    def __init__(self) -> None:
        self.kinds: set[tuple[str, str]] = set()

    async def list_if_served(self, *, api_version: str, kind: str, each: Any = None) -> list[dict[str, Any]]:
        self.kinds.add((api_version, kind))
        return []


@pytest.mark.parametrize("folder", ["maintenance", "clusters/gpu-east/maintenance", ""])
def test_a_revision_with_a_maintenance_folder_lists_the_claims_and_slices_while_it_is_planned(
    tmp_path: Path, folder: str
) -> None:
    """The maintenance stage expands over the ResourceSlices and classes over the ResourceClaims:
    listed with the rest, overlapping the planning, instead of after it (4 pages of claims at 4,000)."""
    import anyio

    from fleet.engine import listings

    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    if folder:
        (repo / folder).mkdir(parents=True)
    client = Lister()
    _, listed = anyio.run(lambda: pipelines.plan_and_list(repo, cluster="gpu-east", client=client))  # type: ignore[arg-type]
    assert listings.staged_kinds() <= client.kinds == listed.kinds
    assert (listed.kinds >= listings.MAINTENANCE_READS) == bool(folder)
    # Another cluster's folder says nothing of this one's maintenances.
    assert pipelines.maintained(repo, cluster="gpu-west") == (folder == "maintenance")
