"""A LoadCache: an unchanged repository is not validated or planned again; a changed file is."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fleet.engine.ownership import ADOPT, APPLIED
from fleet.engine.pipelines import Checked, LoadCache, check_and_plan, load_plan
from fleet.manifests import Limits, load_revision, read_tree
from fleet.policy import validate
from fleet.source import GitSource
from tests.apply.repos import Repo
from tests.source.gitservers import Upstream


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
    assert (cache.parsed.hits, cache.parsed.misses) == (0, files + 1), "only the changed file was parsed again"
    assert len(cache.parsed) == files, "its old entry went at once"


def test_a_warm_load_after_each_edit_equals_a_cold_one(tmp_path: Path) -> None:
    """Per-manifest memos (render, structure and tenancy findings) never hide a cross-file change:
    after each edit, the cached load answers exactly what a fresh process answers."""
    repo = Repo(root=tmp_path / "repo")
    repo.team("ml", namespaces=["ml", "ml-b"], group="ml-research", quota=4)
    repo.claim_template("ml", "a", count=1)
    repo.claim_template("ml", "b", count=2)
    cache = LoadCache()

    def same() -> Checked:
        root = repo.write()
        warm = check_and_plan(root, cluster=repo.cluster, cache=cache)
        cold = check_and_plan(root, cluster=repo.cluster)
        assert warm.findings == cold.findings
        assert warm.plan == cold.plan
        return warm

    first = same()
    assert first.plan is not None and not first.findings
    kept = [m for parsed in cache.parsed.entries.values() for m in parsed[0]]
    assert kept and all(m.positions.released for m in kept), "a checked load keeps no position maps"

    repo.teams["ml"].quota = 2  # only team.yaml changes: the unchanged claims now overrun it
    assert {f.rule for f in same().findings} == {"team-quota"}

    repo.teams["ml"].quota = 4
    repo.teams["ml"].namespaces = [repo.ns("other")]  # the claims' namespaces are no longer the team's
    assert {f.rule for f in same().findings} == {"team-namespace"}

    repo.teams["ml"].namespaces = [repo.ns("ml"), repo.ns("ml-b")]
    back = same()
    assert back.plan is not None and not back.findings

    repo.device_class = False  # the DeviceClass file goes: the unchanged claims name a missing class
    assert {f.rule for f in same().findings} >= {"unknown-device-class"}


def test_instructions_are_read_once_and_never_hashed(tmp_path: Path) -> None:
    """The adopt annotation asks fleet to adopt; it is not content: the memoised render keeps the
    request for every later plan, and the applied hash is that of the object without it."""
    repo = Repo(root=tmp_path / "repo")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "adopted", count=1, adopt=True)
    repo.claim_template("ml", "plain", count=1)
    root = repo.write()
    cache = LoadCache()
    plans = [check_and_plan(root, cluster=repo.cluster, revision=r, cache=cache).plan for r in ("", "", "b")]
    for plan in plans:
        assert plan is not None
        by_name = {d.ref.name: d for d in plan.objects if d.ref.kind == "ResourceClaimTemplate"}
        assert by_name["adopted"].adopt and not by_name["plain"].adopt
        annotations = by_name["adopted"].obj["metadata"]["annotations"]
        assert ADOPT not in annotations
    repo.claim_template("ml", "adopted", count=1)  # the same object without the instruction
    without = check_and_plan(repo.write(), cluster=repo.cluster, revision="b").plan
    assert without is not None
    hashes = [
        {d.ref.name: d.obj["metadata"]["annotations"][APPLIED] for d in p.objects if d.ref.name == "adopted"}
        for p in (plans[2], without)
    ]
    assert hashes[0] == hashes[1]


def test_a_valid_repository_is_checked_without_making_positions(tmp_path: Path) -> None:
    """Positions are read only to place a finding: loading and checking a valid revision makes none
    (parsing records only each document's root), and a finding still gets its line."""
    repo = Repo(root=tmp_path / "repo")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.claim_template("ml", "a", count=1)
    root = repo.write()
    files, problems = read_tree(root, limits=Limits())
    revision = load_revision(files, findings=tuple(problems))
    assert not [f for f in validate(revision, clusters=[repo.cluster]).findings if f.severity == "error"]
    assert all(m.positions.released for m in revision.manifests)

    repo.claim_template("ml", "a", count=9)  # over the quota of 4
    checked = check_and_plan(repo.write(), cluster=repo.cluster)
    over = [f for f in checked.findings if f.rule == "team-quota" and f.location.file.endswith("a.yaml")]
    assert over and all(f.location.line > 1 for f in over), checked.findings


@pytest.mark.anyio
async def test_a_commit_read_from_what_git_says_changed_equals_a_whole_read(tmp_path: Path) -> None:
    """The controller reads only the files a commit changed (``Checkout.changed``): after every commit
    of a random sequence (edits, additions, deletions, a file over the size cap, a symlink), the
    warm check equals a cold one, and only a tree git cannot vouch for is walked again."""
    upstream = Upstream(tmp_path / "upstream")
    repo = Repo(root=tmp_path / "repo")
    repo.team("ml", namespaces=["ml", "ml-b"], group="ml-research", quota=64)
    for i in range(12):
        repo.claim_template("ml", f"c{i}", count=1)

    def publish(extra: dict[str, str | bytes | None] | None = None) -> None:
        root = repo.write()
        files: dict[str, str | bytes | None] = {f"fleet/{k}": v for k, v in read_tree(root, limits=Limits())[0].items()}
        known = {p.relative_to(upstream.work).as_posix() for p in (upstream.work / "fleet").rglob("*.yaml")}
        files |= {p: None for p in known if p not in files and not (upstream.work / p).is_symlink()}
        upstream.commit(files | (extra or {}))

    src = GitSource(url=upstream.url, ref="main", path="fleet", cache_dir=tmp_path / "cache", timeout=30.0)
    cache = LoadCache()
    rng = random.Random(31)
    publish()
    script = ["edit", "add", "delete", "quota", "delete", "big", "edit", "link", "edit", "unlink", "add", "delete"]
    vouched_before = False
    for step, action in enumerate([*script, "edit", ""]):
        checkout = await src.sync()
        whole, changed = cache.whole_reads, cache.changed_reads
        warm = check_and_plan(
            checkout.path, cluster=repo.cluster, revision=checkout.revision, cache=cache, changed=checkout.changed
        )
        cold = check_and_plan(checkout.path, cluster=repo.cluster, revision=checkout.revision)
        assert (warm.findings, warm.plan) == (cold.findings, cold.plan), f"step {step}"
        # A symlink or a file over the cap: a whole read (with its findings), and the next one too.
        cap = Limits().max_file_bytes
        vouched = not any(p.is_symlink() or p.stat().st_size > cap for p in checkout.path.rglob("*"))
        if vouched and vouched_before:
            assert (cache.whole_reads, cache.changed_reads) == (whole, changed + 1), f"step {step}: read whole"
        else:
            assert cache.whole_reads == whole + 1, f"step {step}: a tree git cannot vouch for is read whole"
        vouched_before = vouched
        names = sorted(k.split("/", 1)[1] for k in repo.claims if k.startswith("ml/"))
        extra: dict[str, str | bytes | None] = {}
        if action == "link":
            (upstream.work / "fleet" / "linked.yaml").symlink_to("teams/ml/c1.yaml")
        elif action == "unlink":
            extra = {"fleet/linked.yaml": None}
        elif action == "big":
            extra = {"fleet/teams/ml/huge.yaml": "a: " + "x" * (Limits().max_file_bytes + 10) + "\n"}
        elif action == "quota":
            repo.teams["ml"].quota = 1  # a Team's file: the claims overrun it
        elif action == "delete":
            del repo.claims[f"ml/{rng.choice(names)}"]
        elif action == "add":
            repo.claim_template("ml", f"n{step}", count=1)
        elif action == "edit":
            repo.teams["ml"].quota = 64
            repo.claim_template("ml", rng.choice(names), count=rng.choice([1, 2]))
        if action:
            publish(extra)
    assert cache.changed_reads >= 7, "most commits were read from what git said changed"
