"""Bad YAML input: each a finding with file:line:col, nothing else affected, bounded work."""

from __future__ import annotations

import itertools
import math
import tracemalloc

from fleet.manifests import Limits, load_revision, scalars
from fleet.manifests.yamls import parse
from tests.manifests.repos import only, rules, yaml

GOOD = yaml("""
    apiVersion: fleet.gpufleet.dev/v1alpha1
    kind: Cluster
    metadata: {name: gpu-east}
    spec: {kubernetesVersion: "1.36"}
""")


def test_invalid_yaml_is_located_and_other_files_still_load() -> None:
    revision = load_revision({"clusters/bad.yaml": b"kind: Cluster\nmetadata: [a,\n", "clusters/ok.yaml": GOOD})
    finding = only(revision.findings, "yaml-syntax")
    assert finding.location.file == "clusters/bad.yaml"
    assert finding.location.line == 3
    assert [m.name for m in revision.manifests] == ["gpu-east"]


def test_duplicate_keys_are_refused_naming_both_lines() -> None:
    revision = load_revision(
        {
            "a.yaml": yaml("""
        apiVersion: fleet.gpufleet.dev/v1alpha1
        kind: Cluster
        kind: Fleet
    """)
        }
    )
    finding = only(revision.findings, "yaml-duplicate-key")
    assert (finding.location.line, finding.location.col) == (3, 1)
    assert "first at line 2" in finding.message
    assert revision.manifests == ()


def test_alias_bomb_is_refused_before_expansion() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    bomb = ("\n".join(lines) + "\n").encode()  # 9**9 ≈ 387 million strings when expanded
    tracemalloc.start()
    docs, findings = parse(file="bomb.yaml", content=bomb, limits=Limits())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert docs == []
    assert rules(findings) == ["yaml-limit"]
    assert "alias" in findings[0].message
    assert peak < 5 * 1024 * 1024


def test_many_aliases_are_refused() -> None:
    text = "a: &x 1\nb: [" + ",".join(["*x"] * 101) + "]\n"
    _, findings = parse(file="f.yaml", content=text.encode(), limits=Limits())
    assert rules(findings) == ["yaml-limit"]
    assert "100 YAML aliases" in findings[0].message


def test_few_aliases_are_expanded() -> None:
    docs, findings = parse(file="f.yaml", content=b"a: &x {k: v}\nb: *x\n", limits=Limits())
    assert findings == []
    assert docs[0].data == {"a": {"k": "v"}, "b": {"k": "v"}}


def test_recursive_alias_is_refused() -> None:
    _, findings = parse(file="f.yaml", content=b"a: &x [1, *x]\n", limits=Limits())
    assert rules(findings) in (["yaml-limit"], ["yaml-syntax"])


def test_deep_nesting_is_refused() -> None:
    _, findings = parse(file="f.yaml", content=("[" * 100 + "]" * 100).encode(), limits=Limits())
    assert rules(findings) == ["yaml-limit"]


def test_file_over_size_cap_is_not_parsed() -> None:
    revision = load_revision({"big.yaml": b"# " + b"x" * 2000 + b"\n"}, limits=Limits(max_file_bytes=1000))
    finding = only(revision.findings, "file-too-large")
    assert "2003 bytes" in finding.message


def test_non_utf8_file_points_at_the_bad_byte() -> None:
    revision = load_revision({"latin1.yaml": b"a: 1\nname: caf\xe9\n"})
    finding = only(revision.findings, "yaml-encoding")
    assert (finding.location.line, finding.location.col) == (2, 10)
    assert "0xe9" in finding.message


def test_merge_keys_are_refused() -> None:
    _, findings = parse(file="f.yaml", content=b"a: &x {k: v}\nb:\n  <<: *x\n", limits=Limits())
    assert rules(findings) == ["yaml-syntax"]
    assert "merge keys" in findings[0].message


def test_yaml11_ambiguous_scalars_are_flagged() -> None:
    docs, findings = parse(
        file="f.yaml", content=b"a: yes\nb: Off\nc: 0644\nd: '0644'\ne: \"no\"\nf: 10\n", limits=Limits()
    )
    assert [(f.rule, f.location.line) for f in findings] == [
        ("yaml-ambiguous", 1),
        ("yaml-ambiguous", 2),
        ("yaml-ambiguous", 3),
    ]
    assert docs[0].data["a"] == "yes"


def test_unquoted_dates_stay_strings_and_are_flagged() -> None:
    docs, findings = parse(file="f.yaml", content=b"a: 2026-01-02\n", limits=Limits())
    assert docs[0].data == {"a": "2026-01-02"}
    assert rules(findings) == ["yaml-ambiguous"]


def test_every_field_has_its_line_and_column() -> None:
    docs, _ = parse(
        file="f.yaml",
        content=yaml("""
        spec:
          devices:
            requests:
            - name: gpu
              exactly:
                count: 2
    """),
        limits=Limits(),
    )
    positions = docs[0].positions
    assert str(positions.at(("spec", "devices", "requests", 0, "exactly", "count"))) == "f.yaml:6:9"
    assert str(positions.at(("spec", "devices", "requests", 0, "exactly"))) == "f.yaml:5:7"
    assert str(positions.at(("spec", "devices", "requests", 0, "exactly", "missing"))) == "f.yaml:5:7"


def test_block_scalar_positions_map_lines_inside_the_string() -> None:
    docs, _ = parse(
        file="f.yaml",
        content=yaml("""
        cel:
          expression: |
            device.driver == 'x'
            && device.foo
    """),
        limits=Limits(),
    )
    scalar = docs[0].positions.scalars[("cel", "expression")]
    assert str(scalar.locate(line=2, col=4)) == "f.yaml:4:8"
    docs, _ = parse(file="f.yaml", content=b'cel: {expression: "device.foo"}\n', limits=Limits())
    scalar = docs[0].positions.scalars[("cel", "expression")]
    assert str(scalar.locate(line=1, col=8)) == "f.yaml:1:27"


def test_multi_document_files_load_every_document() -> None:
    revision = load_revision({"c.yaml": GOOD + b"---\n" + GOOD.replace(b"gpu-east", b"gpu-west")})
    assert [m.name for m in revision.manifests] == ["gpu-east", "gpu-west"]
    assert [m.location.line for m in revision.manifests] == [1, 6]


def test_control_characters_are_located() -> None:
    _, findings = parse(file="f.yaml", content=b"a: 1\nb: x\x00y\n", limits=Limits())
    assert [(f.rule, str(f.location)) for f in findings] == [("yaml-encoding", "f.yaml:2:5")]
    assert "control characters" in findings[0].message


def test_empty_documents_are_skipped() -> None:
    revision = load_revision({"c.yaml": b"---\n---\n" + GOOD + b"---\n"})
    assert revision.findings == ()
    assert [m.name for m in revision.manifests] == ["gpu-east"]


def test_scalars_resolve_by_the_core_schema_and_the_shortcut_skips_only_strings() -> None:
    """``resolve_scalar`` tries the number patterns only for scalars starting with a digit, a sign
    or a dot: every other scalar (not null or bool) must be a string by those patterns too."""
    cases = {"3": 3, "-7": -7, "+1": 1, "0o17": 15, "0x1F": 31, "1.5": 1.5, ".5": 0.5, "1e3": 1000.0}
    cases |= {"~": None, "null": None, "True": True, "false": False, "yes": "yes", "gpu": "gpu", "x1": "x1"}
    for text, value in cases.items():
        assert scalars.resolve_scalar(text) == value and type(scalars.resolve_scalar(text)) is type(value), text
    assert scalars.resolve_scalar("-.inf") == -math.inf and math.isnan(scalars.resolve_scalar(".NaN"))
    patterns = (scalars._INT, scalars._OCTAL, scalars._HEX, scalars._FLOAT, scalars._INF)
    alphabet = "0159+-.eExXoOiInNaAfF_:gz "
    for text in ("".join(p) for n in (1, 2, 3, 4) for p in itertools.product(alphabet, repeat=n)):
        if text[0] not in scalars._NUMBER_START:
            assert not any(p.match(text) for p in patterns) and text not in scalars._NAN, text


def test_keys_and_short_values_are_one_string_across_files() -> None:
    """Parsed manifests share their keys and short values (the controller keeps 10,000 of them)."""
    text = "kind: ResourceClaimTemplate\nmetadata:\n  namespace: team-a\n  note: '{long}'\n"
    long = "x" * 100
    first = parse(file="a.yaml", content=text.format(long=long).encode(), limits=Limits())[0][0].data
    second = parse(file="b.yaml", content=text.format(long=long).encode(), limits=Limits())[0][0].data
    assert first == second
    assert [k for k in first] == ["kind", "metadata"]
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert first["kind"] is second["kind"]
    assert first["metadata"]["namespace"] is second["metadata"]["namespace"]
    assert next(iter(first["metadata"])) is next(iter(second["metadata"]))
    assert first["metadata"]["note"] == long  # longer values (unique, mostly) are not interned
