"""Reading a pull-request comment back as GitHub does: markdown-it-py, CommonMark with HTML and tables.

Tests of ``-o markdown`` look at the parsed structure (headings, tables, list items, ``<details>``
blocks, fenced diffs), so text that a parser reads differently from what was meant fails them.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.token import Token


def parse(text: str) -> list[Token]:
    return MarkdownIt("commonmark").enable("table").parse(text)


def headings(tokens: list[Token], level: int) -> list[str]:
    tag = f"h{level}"
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == tag]


def sections(tokens: list[Token]) -> dict[str, list[Token]]:
    """The tokens under each ``##`` heading (a cluster), by its text."""
    found: dict[str, list[Token]] = {}
    current: list[Token] | None = None
    for i, t in enumerate(tokens):
        if t.type == "heading_open" and t.tag == "h2":
            current = found.setdefault(tokens[i + 1].content, [])
        elif current is not None:
            current.append(t)
    return found


def tables(tokens: list[Token]) -> list[list[list[str]]]:
    """Each table as rows of cell texts (header row first)."""
    out: list[list[list[str]]] = []
    for i, t in enumerate(tokens):
        if t.type == "table_open":
            rows: list[list[str]] = []
            for u in tokens[i:]:
                if u.type == "tr_open":
                    rows.append([])
                elif u.type == "inline" and rows:
                    rows[-1].append(u.content)
                elif u.type == "table_close":
                    break
            out.append(rows)
    return out


def items(tokens: list[Token]) -> list[str]:
    """The text of each list item."""
    return [tokens[i + 2].content for i, t in enumerate(tokens) if t.type == "list_item_open"]


def details(tokens: list[Token]) -> list[tuple[str, Token | None]]:
    """Each ``<details>`` block: its opening HTML and the fenced block inside it (None if none).

    Asserts that every block is closed before the next opens (balanced, never nested)."""
    found: list[tuple[str, Token | None]] = []
    inside = False
    for t in tokens:
        if t.type != "html_block" and not (inside and t.type == "fence"):
            continue
        if t.type == "fence":
            opening, fence = found[-1]
            assert fence is None, "one fenced block per <details>"
            found[-1] = (opening, t)
        elif t.content.startswith("<details>"):
            assert not inside, "a <details> opened inside another"
            inside = True
            found.append((t.content, None))
        elif t.content.startswith("</details>"):
            assert inside, "a </details> without its <details>"
            inside = False
    assert not inside, "a <details> left open"
    return found


def paragraphs(tokens: list[Token]) -> list[str]:
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "paragraph_open"]
