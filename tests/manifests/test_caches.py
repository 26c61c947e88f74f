"""Parsing once per content: a ParseCache gives the same Revision, re-parsing only changed files."""

from __future__ import annotations

from fleet.manifests import ParseCache, load_revision


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
