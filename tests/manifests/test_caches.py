"""Reading and parsing once per content: the same files and Revision, re-reading and re-parsing only changes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from fleet.manifests import Limits, ParseCache, TreeCache, load_revision, read_tree


def _template(name: str, count: int = 1) -> bytes:
    return (
        f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: {name}\n"
        f"spec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly:\n"
        f"          deviceClassName: gpu.example.com\n          count: {count}\n"
    ).encode()


FILES = {
    "teams/a/one.yaml": _template("one"),
    "teams/a/two.yaml": _template("two"),
    "teams/b/one.yaml": _template("one"),  # same bytes, other team: its own entry
    "teams/b/bad.yaml": b"kind: [unclosed\n",
}


def test_second_load_parses_nothing_and_equals_the_first() -> None:
    cache = ParseCache()
    first = load_revision(FILES, cache=cache)
    assert (cache.hits, cache.misses) == (0, 4)
    second = load_revision(FILES, cache=cache)
    assert (cache.hits, cache.misses) == (4, 4)
    assert second == first == load_revision(FILES)
    assert [m.team for m in second.manifests if m.name == "one"] == ["a", "b"]
    assert any(f.rule == "yaml-syntax" for f in second.findings), "findings are cached with the file"


def test_a_changed_file_is_parsed_again_and_a_removed_one_forgotten() -> None:
    cache = ParseCache()
    load_revision(FILES, cache=cache)
    changed = {**FILES, "teams/a/two.yaml": _template("two", count=2)}
    del changed["teams/b/bad.yaml"]
    revision = load_revision(changed, cache=cache)
    assert cache.misses == 4 + 1
    assert revision == load_revision(changed)
    assert len(cache.entries) == 3, "the old two.yaml and bad.yaml are swept"


def test_released_positions_are_made_again_the_same_from_the_bytes() -> None:
    """A long-lived cache drops its position maps; a finding placed afterwards gets the same line."""
    content = b"---\n# a comment\n---\n" + _template("one") + b"---\n" + _template("two")
    files = {"teams/a/two-docs.yaml": content}
    cache = ParseCache()
    manifests = load_revision(files, cache=cache).manifests
    before = [(dict(m.positions.nodes), dict(m.positions.scalars)) for m in manifests]
    cache.release()
    assert all(m.positions.released for m in manifests)
    count = ("spec", "spec", "devices", "requests", 0, "exactly", "count")
    assert manifests[1].positions.at(count).line == 28  # the file's last line
    assert [(dict(m.positions.nodes), dict(m.positions.scalars)) for m in manifests] == before
    assert manifests == load_revision(files).manifests


def test_released_models_are_validated_again_equal_and_salvaged_ones_stay() -> None:
    """A long-lived cache drops the models it can make again from ``data``; read again, each is equal."""
    from tests.manifests.repos import example_files

    files = {**example_files(), "teams/a/bad.yaml": _template("bad").replace(b"count: 1", b'count: "1"')}
    cache = ParseCache()
    manifests = load_revision(files, cache=cache).manifests
    models = [m.model for m in manifests]
    salvaged = [m for m in manifests if m.salvaged]
    assert salvaged and sum(model is not None for model in models) > 20
    for m in manifests:
        if m.kind == "ResourceClaimTemplate":
            assert m.memo.setdefault("requests", ["kept with the model"])
    cache.release()
    releasable = [model is not None and not m.salvaged for m, model in zip(manifests, models, strict=True)]
    assert [m.released for m in manifests] == releasable
    assert all("requests" not in m.memo for m in manifests if m.released)
    assert [m.model for m in manifests] == models  # validated again from data
    assert not any(m.released for m in manifests)
    assert all(m.model is model for m, model in zip(manifests, models, strict=True) if m.salvaged)
    assert manifests == load_revision(files).manifests


def _read_once(directory: Path) -> TreeCache:
    """a.yaml, b.yaml and c.yaml written an hour ago (outside the racy window) and read once."""
    old = time.time() - 3600
    directory.mkdir(exist_ok=True)
    for name in ("a", "b", "c"):
        (directory / f"{name}.yaml").write_bytes(_template(name))
        os.utime(directory / f"{name}.yaml", (old, old))
    cache = TreeCache()
    cache.begin(now=time.time())
    read_tree(directory, limits=Limits(), cache=cache)
    assert (cache.reads, cache.reused) == (3, 0)
    return cache


def test_tree_cache_reuses_unchanged_files_and_rereads_changed_or_racy_ones(tmp_path: Path) -> None:
    cache = _read_once(tmp_path)

    (tmp_path / "b.yaml").write_bytes(_template("b", count=2))  # changed now: a new mtime
    (tmp_path / "c.yaml").unlink()
    cache.begin(now=time.time())
    second, _ = read_tree(tmp_path, limits=Limits(), cache=cache)
    assert (cache.reads, cache.reused) == (4, 1), "a.yaml reused, b.yaml read again"
    assert second == {"a.yaml": _template("a"), "b.yaml": _template("b", count=2)}

    # b.yaml's mtime is within the racy window of when it was read: a same-size write in the
    # same clock tick would be invisible, so it is read again however equal its stat looks.
    cache.begin(now=time.time())
    read_tree(tmp_path, limits=Limits(), cache=cache)
    assert (cache.reads, cache.reused) == (5, 2)


def test_tree_cache_follows_files_into_a_renamed_checkout_and_forgets_them_after_its_generations(
    tmp_path: Path,
) -> None:
    # The git source recycles a checkout: the directory is renamed to the new revision and only
    # the files that differ are rewritten; the others keep their inode and stat.
    first = tmp_path / "aaaa"
    cache = _read_once(first)
    second = first.rename(tmp_path / "bbbb")
    (second / "b.yaml").unlink()
    (second / "b.yaml").write_bytes(_template("b", count=2))
    cache.begin(now=time.time())
    files, _ = read_tree(second, limits=Limits(), cache=cache)
    assert (cache.reads, cache.reused) == (4, 2), "a.yaml and c.yaml reused under the new path"
    assert files == {"a.yaml": _template("a"), "b.yaml": _template("b", count=2), "c.yaml": _template("c")}

    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / "x.yaml").write_bytes(_template("x"))
    for _ in range(TreeCache.GENERATIONS):
        cache.begin(now=time.time())
        read_tree(elsewhere, limits=Limits(), cache=cache)
    assert len(cache.files) == 1, "the renamed checkout's files were not read for GENERATIONS reads: forgotten"


def test_tree_cache_without_begin_reuses_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_bytes(_template("a"))
    cache = TreeCache()
    read_tree(tmp_path, limits=Limits(), cache=cache)
    read_tree(tmp_path, limits=Limits(), cache=cache)
    assert cache.reused == 0
