"""The Revision page's HTML from a pull-request comment (``fleet.console.markdowns``), as pure functions.

The comment's own markup (``<details>``, ``<summary>``, ``<b>``, ``<code>``, ``<sub>``, ``<br>``,
tables, fenced diffs) survives; anything a commit could put in it (a script, a style, an event
handler, a ``javascript:`` link) reaches the page as text or not at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.console import markdowns
from fleet.engine import Action, Change, ChangeSet
from fleet.kube import Ref
from fleet.manifests import Finding, Location
from fleet.views import comments, revisions

HOSTILE = '<script>alert("x")</script>'


@pytest.mark.parametrize(
    ("given", "absent"),
    [
        ("<script>alert(1)</script>", "<script"),
        ("<style>body{display:none}</style>", "<style"),
        ('<img src="x" onerror="alert(1)">', "<img"),
        ('<a href="/ok" onclick="alert(1)">ok</a>', "onclick"),
        ('<a href="javascript:alert(1)">x</a>', "javascript:"),
        ('<a href="&#106;avascript:alert(1)">x</a>', "avascript:"),
        ('<a href="//evil.example/">x</a>', "evil.example"),
        ('<a href="/\\evil.example/">x</a>', "evil.example"),
        ('<a href="\\\\evil.example/">x</a>', "evil.example"),
        ('<details ontoggle="alert(1)"><summary>s</summary>b</details>', "ontoggle"),
        ("<iframe src=/x></iframe>", "<iframe"),
        ('<td style="background:url(x)">', "style"),
        ("<!-- comment --><p>x</p>", "comment"),
    ],
)
def test_what_a_commit_could_inject_does_not_survive(given: str, absent: str) -> None:
    assert absent not in markdowns.sanitise(given)


def test_the_comments_own_markup_survives() -> None:
    kept = markdowns.sanitise(
        '<details><summary><b>created</b> <code>v1/ConfigMap a/b</code></summary><pre><code class="language-diff">'
        '+x</code></pre></details><p><sub>revision</sub> a<br>b <a href="https://example.com/x">l</a></p>'
    )
    assert kept == (
        '<details><summary><b>created</b> <code>v1/ConfigMap a/b</code></summary><pre><code class="language-diff">'
        '+x</code></pre></details><p><sub>revision</sub> a<br>b <a href="https://example.com/x" '
        'rel="nofollow noopener noreferrer">l</a></p>'
    )


def test_unknown_tags_keep_their_text_escaped_and_the_output_is_balanced() -> None:
    assert markdowns.sanitise("<p><blink>hi &lt;b&gt;</p>") == "<p>hi &lt;b&gt;</p>"
    assert markdowns.sanitise("<details><summary>open") == "<details><summary>open</summary></details>"
    assert markdowns.sanitise("<b>x</i></b>") == "<b>x</b>"


def test_table_alignment_becomes_a_class_the_csp_allows() -> None:
    page = markdowns.to_html(comments.table(["stage", "created"], right=1) + comments.row(["a", "1"]))
    assert '<th class="align-right">created</th>' in page and "style" not in page


def test_a_comment_with_hostile_text_shows_it_as_text() -> None:
    """A YAML string and a finding message holding a script: both read as text on the page."""
    ref = Ref("v1", "ConfigMap", "team-a", "notes")
    after = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "notes"}, "data": {"x": HOSTILE}}
    entry = Change(ref=ref, action=Action.CREATED, stage="teams", after=after)
    finding = Finding(Location("teams/a.yaml", 1, 1), "hostile", f"a message with {HOSTILE}", severity="warning")
    section = comments.Section(
        f"## {comments.inline('east')}\n\n",
        [
            comments.counts_part(ChangeSet("east", "r1", [entry])),
            *comments.objects_part(ChangeSet("east", "r1", [entry])),
            *comments.findings_part([finding], repo=Path("repo")),
        ],
    )
    text = revisions.comment([section], clusters=["east"], codes=[1])
    page = markdowns.to_html(text)
    assert "<script" not in page
    assert page.count("&lt;script&gt;") == 2, "the diff's line and the finding's message, as text"
    assert "<details><summary><b>created</b> <code>v1/ConfigMap team-a/notes</code></summary>" in page
    assert "<h2>east</h2>" in page
