"""The pull-request comment's layout (``fleet.views.comments``): the cap, escaping, fences, fairness.

Pure: ChangeSets and findings are made here; ``tests/apply/test_markdown.py`` and
``tests/validate/test_markdown.py`` run the commands.
"""

from __future__ import annotations

from pathlib import Path

from fleet.engine import Action, Change, ChangeSet
from fleet.kube import Ref
from fleet.manifests import Finding, Location
from fleet.policy.reviews import ClaimFit
from fleet.views import comments
from tests.markdowns import details, headings, items, paragraphs, parse, tables


def change(i: int, *, action: Action = Action.CONFIGURED, size: int = 100) -> Change:
    ref = Ref(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate", namespace="ml", name=f"t-{i:04d}")
    before = {"metadata": {"name": ref.name, "annotations": {"note": "a" * size}}}
    after = {"metadata": {"name": ref.name, "annotations": {"note": "b" * size}}}
    return Change(
        ref=ref, stage="claims", action=action, before=None if action == Action.CREATED else before, after=after
    )


def section(name: str, changes: ChangeSet, findings: list[Finding] = ()) -> comments.Section:  # type: ignore[assignment]
    return comments.Section(
        f"## {name}\n\n",
        [
            comments.counts_part(changes),
            *comments.objects_part(changes),
            *comments.findings_part(findings, repo=Path("repo")),
        ],
    )


def test_a_huge_diff_is_cut_between_blocks_and_what_is_left_out_is_counted() -> None:
    entries = [change(i, size=2000) for i in range(60)] + [
        change(i, action=Action.CREATED, size=2000) for i in range(60, 100)
    ]
    text = comments.render(comments.DIFF_MARKER, "title", [section("east", ChangeSet("east", "r1", entries))])
    assert len(text) <= comments.LIMIT
    tokens = parse(text)
    blocks = details(tokens)
    assert 10 < len(blocks) < 100
    shown_created = sum("<b>created</b>" in opening for opening, _ in blocks)
    expected = f"… {100 - len(blocks)} more objects changed ({60 - len(blocks) + shown_created} configured, "
    expected += f"{40 - shown_created} created) not shown"
    assert expected in paragraphs(tokens)
    uncut = comments.render(
        comments.DIFF_MARKER, "title", [section("east", ChangeSet("east", "r1", entries))], limit=10**7
    )
    assert len(details(parse(uncut))) == 100 and "not shown" not in uncut


def test_findings_get_space_before_diffs_and_every_cluster_gets_its_share() -> None:
    findings = [Finding(Location("teams/a.yaml", i + 1, 3), "team-quota", f"finding {i}") for i in range(5)]
    east = ChangeSet("east", "r1", [change(i, size=5000) for i in range(40)])
    west = ChangeSet("west", "r1", [change(i, size=5000) for i in range(40)])
    text = comments.render("<!-- m -->", "t", [section("east", east, findings), section("west", west, findings)])
    tokens = parse(text)
    assert headings(tokens, 2) == ["east", "west"]
    assert len([i for i in items(tokens) if "**team-quota**" in i]) == 10, "every finding of both clusters"
    assert "`teams/a.yaml:5:3`" in items(tokens)[4], "outside git: relative to the fleet's folder"
    per_cluster = text.split("## west")
    assert abs(len(details(parse(per_cluster[0]))) - len(details(parse(per_cluster[1])))) <= 1


def test_clusters_that_cannot_fit_at_all_are_left_out_whole() -> None:
    many = [section(f"c{i:03d}", ChangeSet(f"c{i:03d}", "r", [change(0)]), []) for i in range(400)]
    for s in many:
        s.parts.insert(0, "x" * 400 + "\n\n")  # fixed text of every cluster: 400 clusters cannot fit
    text = comments.render(comments.DIFF_MARKER, "t", many)
    assert len(text) <= comments.LIMIT
    shown = headings(parse(text), 2)
    assert 0 < len(shown) < 400
    assert f"… {400 - len(shown)} more cluster(s) not shown" in text


def test_repository_text_is_escaped_for_where_it_goes() -> None:
    assert comments.inline("a *b* <script> | c_d `e`") == r"a \*b\* \<script\> \| c\_d \`e\`"
    for text in ("x ` y", "`x`", "a``b"):
        (inline,) = [t for t in parse(comments.code(text)) if t.type == "inline"]
        assert [(c.type, c.content) for c in inline.children or []] == [("code_inline", text)]
    body = "```\nnot a fence end\n````\n"
    block = comments.fenced(body, info="diff")
    (fence,) = [t for t in parse(block) if t.type == "fence"]
    assert fence.content == body and fence.info == "diff"
    evil = Ref(api_version="v1", kind="ConfigMap", namespace="ns", name="</summary></details><b>x")
    entry = Change(ref=evil, stage="claims", action=Action.CREATED, after={"a": 1})
    (one,) = details(parse(comments.render("m", "t", [section("s", ChangeSet("s", "r", [entry]))])))
    assert "&lt;/summary&gt;&lt;/details&gt;" in one[0]


def test_the_limit_holds_in_utf16_units_with_astral_characters() -> None:
    """A browser counts 🚀 as two characters: the cap is measured so, never over GitHub's limit."""
    findings = [Finding(Location("teams/a.yaml", i + 1, 1), "schema", "🚀" * 200) for i in range(400)]
    text = comments.render(comments.VALIDATE_MARKER, "t", [section("east", ChangeSet("east", "r", []), findings)])
    assert comments.size(text) <= comments.LIMIT < 2 * len(text)
    assert "more findings (" in text


def test_a_pipe_in_a_file_name_stays_in_its_table_cell() -> None:
    claim = ClaimFit("ResourceClaimTemplate/ml/a", Location("teams/ml/a|b.yaml", 2, 1), "added", (), False)
    text = comments.render(
        "m", "t", [comments.Section("## c\n\n", comments.claims_part([claim], repo=Path("r"), base=None))]
    )
    (claims,) = tables(parse(text))
    assert claims[1][:3] == ["`ResourceClaimTemplate/ml/a`", "added", "`teams/ml/a|b.yaml:2`"], "one cell, unescaped"
    assert len(claims[1]) == len(claims[0])


def test_the_comment_lists_what_is_disruptive_and_why_and_marks_its_diff() -> None:
    from fleet.engine import Action, Change, ChangeSet
    from fleet.engine.disruptions import Disruption
    from fleet.kube import Ref

    klass = Ref(api_version="resource.k8s.io/v1", kind="DeviceClass", namespace="", name="gpu.example.com")
    template = Ref(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate", namespace="ml", name="one")
    body = {"metadata": {"name": "x"}, "spec": {"a": 1}}
    changes = ChangeSet(
        cluster="c",
        revision="r",
        entries=[
            Change(
                ref=klass,
                stage="classes",
                action=Action.CONFIGURED,
                before=body,
                after={**body, "spec": {"a": 2}},
                disruption=Disruption(reason="tightens the selectors", nodes=frozenset({"n1"}), claims=("ml/held",)),
            ),
            Change(
                ref=template, stage="claims", action=Action.CONFIGURED, before=body, after={**body, "spec": {"a": 3}}
            ),
        ],
    )
    text = comments.render(comments.DIFF_MARKER, "t", [comments.Section("## c\n\n", comments.objects_part(changes))])
    section = text[text.index("### Disruptive") :]
    assert "`DeviceClass gpu.example.com` tightens the selectors; nodes: n1; claims: ml/held" in section
    assert "ResourceClaimTemplate" not in section.split("\n\n###")[0], "the safe template is not listed"
    assert "⚠️ disruptive <code>resource.k8s.io/v1/DeviceClass gpu.example.com</code>" in text
