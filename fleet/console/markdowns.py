"""A pull-request comment as HTML for a console page: rendered as GitHub would, then sanitised.

The Revision page shows ``fleetctl diff -o markdown`` itself, so it must render the raw HTML that
comment carries: ``<details>``/``<summary>`` around each object's diff, ``<b>`` and ``<code>`` in
the summary, ``<sub>`` under a heading, ``<br>`` in a finding. markdown-it-py (CommonMark with
tables, as ``tests/markdowns.py`` reads the comment back) renders it with HTML on; the result is
then parsed and written out again keeping only the tags and attributes of ``TAGS``: whatever
a commit puts in a name, a message or YAML (``<script>``, ``<style>``, ``onclick=``, a
``javascript:`` link) reaches the page as text or not at all. The comment escapes such text
already (``fleet.views.comments``); this is the second wall, and the one that does not depend
on every part of the comment getting its escaping right.

Nothing is passed through: the output is rebuilt from the parser's events, every text escaped,
every kept attribute re-quoted. Table alignment, which markdown-it writes as a ``style``
attribute the console's Content-Security-Policy would refuse, becomes a class.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from markdown_it import MarkdownIt
from markupsafe import Markup

TAGS = frozenset(
    {
        "a", "b", "blockquote", "br", "code", "del", "details", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
        "i", "li", "ol", "p", "pre", "s", "strong", "sub", "summary", "sup", "table", "tbody", "td", "th",
        "thead", "tr", "ul",
    }
)  # fmt: skip
"""The tags a page may hold: those markdown-it writes, and the few the comment writes itself."""
VOID = frozenset({"br", "hr"})
DROPPED = frozenset({"script", "style", "template", "iframe", "object", "noscript", "textarea", "title", "xmp"})
"""Tags whose content is dropped with them (code or markup, not text a person reads)."""
LINKS = re.compile(r"^(https?://|#|/(?![/\\])|[^:/?#\\]+(?:[/?#]|$))", re.IGNORECASE)
"""Link targets kept: http(s), a fragment, a path; no ``javascript:``, ``data:`` or other scheme."""
ALIGN = re.compile(r"^text-align:(left|right|center)$")
_LANGUAGE = re.compile(r"^language-[A-Za-z0-9_+-]{1,40}$")


def renderer() -> MarkdownIt:
    """CommonMark with tables and raw HTML, as GitHub renders a comment (the HTML is sanitised after)."""
    return MarkdownIt("commonmark", {"html": True}).enable("table")


def to_html(text: str, *, md: MarkdownIt | None = None) -> Markup:
    """``text`` (markdown) as HTML safe to put in a page."""
    return Markup(sanitise((md or renderer()).render(text)))


def sanitise(fragment: str) -> str:
    """``fragment`` with only ``TAGS`` and their allowed attributes; everything else is text or dropped."""
    cleaner = _Cleaner()
    cleaner.feed(fragment)
    cleaner.close()
    return cleaner.result()


class _Cleaner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.open: list[str] = []
        self.skipping: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skipping:
            if tag == self.skipping[-1]:
                self.skipping.append(tag)
            return
        if tag in DROPPED:
            self.skipping.append(tag)
            return
        if tag not in TAGS:
            return
        kept = _attributes(tag, attrs)
        self.out.append(f"<{tag}{kept}>")
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID and not self.skipping:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if self.skipping:
            if tag == self.skipping[-1]:
                self.skipping.pop()
            return
        if tag not in self.open:
            return
        while self.open:  # close what was left open inside it: the output stays balanced
            last = self.open.pop()
            self.out.append(f"</{last}>")
            if last == tag:
                break

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.out.append(html.escape(data, quote=False))

    def result(self) -> str:
        return "".join(self.out) + "".join(f"</{tag}>" for tag in reversed(self.open))


def _attributes(tag: str, attrs: list[tuple[str, str | None]]) -> str:
    kept: list[tuple[str, str]] = []
    for name, value in attrs:
        value = (value or "").strip()
        if tag == "a" and name == "href" and LINKS.match(value):
            kept.append(("href", value))
        elif tag in ("td", "th") and name == "style" and (align := ALIGN.match(value.replace(" ", "").rstrip(";"))):
            kept.append(("class", f"align-{align.group(1)}"))
        elif tag == "code" and name == "class" and _LANGUAGE.match(value):
            kept.append(("class", value))
        elif tag == "ol" and name == "start" and value.isdigit():
            kept.append(("start", value))
        elif tag == "details" and name == "open":
            kept.append(("open", ""))
    if tag == "a" and kept:
        kept.append(("rel", "nofollow noopener noreferrer"))
    return "".join(f' {n}="{html.escape(v)}"' if v else f" {n}" for n, v in kept)


__all__ = ["TAGS", "renderer", "sanitise", "to_html"]
