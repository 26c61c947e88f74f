"""What a GitSource fetched, read back from its real (shallow) cache repository without writing it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from fleet.source import GitSource, SourceError, histories, revision_id, sources
from fleet.source.errors import RefNotFound
from fleet.source.worktrees import resolve
from tests.source.gitservers import Upstream, git

pytestmark = pytest.mark.anyio


def source(upstream: Upstream, cache_dir: Path) -> GitSource:
    return GitSource(url=upstream.url, ref="main", path="fleet", cache_dir=cache_dir, timeout=30.0)


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def state(directory: Path) -> str:
    """A digest of every file's name and bytes: what 'not written' means."""
    digest = hashlib.sha256()
    for p in sorted(directory.rglob("*")):
        if p.is_file():
            digest.update(str(p.relative_to(directory)).encode() + b"\0" + p.read_bytes())
    return digest.hexdigest()


async def test_the_history_is_every_fetched_commit_of_the_ref_though_each_fetch_is_shallow(
    upstream: Upstream, cache_dir: Path
) -> None:
    src = source(upstream, cache_dir)
    first = (await src.sync()).revision
    upstream.commit({"fleet/fleet.yaml": "kind: Fleet\n# 2\n"}, message="second\n\nbody")
    upstream.commit({"fleet/fleet.yaml": "kind: Fleet\n# 3\n"}, message="third")  # never fetched alone
    third = (await src.sync()).revision
    shallow = git("--git-dir", str(src.repository), "log", "--format=%H", sources.TARGET, cwd=cache_dir)
    assert shallow.split() == [third], "git's own walk stops at the shallow tip"

    found = histories.history(src.repository, ref=sources.TARGET, limit=20)
    assert [c.sha for c in found] == [third], "the middle commit was never fetched: the walk stops"
    assert found[0].subject == "third" and found[0].date.startswith("20")

    upstream.commit({"fleet/fleet.yaml": "kind: Fleet\n# 4\n"}, message="fourth")
    fourth = (await src.sync()).revision
    found = histories.history(src.repository, ref=sources.TARGET, limit=20)
    assert [c.sha for c in found] == [fourth, third]
    assert histories.history(src.repository, ref=sources.TARGET, limit=1) == found[:1]
    assert first not in [c.sha for c in found]
    assert histories.history(cache_dir / "none.git", ref=sources.TARGET, limit=20) == [], "before the first fetch"


async def test_a_borrowed_checkout_is_the_commit_and_leaves_the_cache_as_it_was(
    upstream: Upstream, cache_dir: Path
) -> None:
    src = source(upstream, cache_dir)
    first = (await src.sync()).revision
    upstream.commit({"fleet/fleet.yaml": "kind: Fleet\n# 2\n", "fleet/link": "x"}, message="second")
    second = (await src.sync()).revision
    before = state(src.repository)
    with histories.borrowed(src.repository, second, path="fleet") as (folder, parent):
        assert parent == first
        assert tree(folder) == {"fleet.yaml": "kind: Fleet\n# 2\n", "link": "x"}
        files = {name: (folder / name).read_bytes() for name in ("fleet.yaml", "link")}
        assert revision_id(folder, files=files, loadable=lambda _: True) == second, "HEAD is the commit"
        kept = folder
    assert not kept.exists()
    with histories.borrowed(src.repository, first, path="fleet") as (folder, parent):
        assert parent is None, "the first fetch's parent is not in the cache"
        assert tree(folder) == {"fleet.yaml": "kind: Fleet\n"}
    assert state(src.repository) == before, "nothing was written in the cache repository"
    assert resolve(src.repository, second[:10]) == second
    with pytest.raises(RefNotFound):
        resolve(src.repository, "0" * 40)
    with pytest.raises(SourceError), histories.borrowed(src.repository, second, path="elsewhere"):
        pass
