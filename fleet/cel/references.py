"""What a selector reads from ``device``, found from its tokens.

Three users need this and none of them needs a full parse:

* grouping: an inventory of 8,000 GPUs has 8,000 distinct devices (every one has
  its own ``uuid`` and ``pciBusID``), but a selector reading only
  ``productName`` and ``memory`` sees a handful of distinct *projections*; the
  inventory evaluates each projection once. That is only correct if no read is
  missed, so anything not recognised (``device`` passed to ``cel.bind``,
  ``device.attributes[x]`` with a computed domain, ...) widens the projection to
  the whole domain, kind or device — never narrower;
* Kubernetes' "unknown domain is an empty map": cel-cpp has no map with a
  default, so the projection adds an empty map for every domain the selector
  names literally;
* diagnostics: removed attribute names and unknown ``device.<field>`` names are
  reported with their offset in the expression.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re

DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity", "allowMultipleAllocations"})
KINDS = ("attributes", "capacity")

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?
        (?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<number>\d[\w.]*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>&&|\|\||==|!=|<=|>=|\.\?|\[\?|[-+*/%!<>?:.,()\[\]{}])
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclasses.dataclass(frozen=True)
class Token:
    kind: str
    text: str
    offset: int


@dataclasses.dataclass(frozen=True)
class NameUse:
    """``device.<kind>['<domain>'].<name>`` at ``offset`` (of the name) in the expression."""

    kind: str
    domain: str
    name: str
    offset: int
    guarded: bool = False  # inside has(...) or read with .?/[?: a missing name is not an error
    presence_only: bool = False  # exactly has(device.<kind>['d'].name): only presence is observable


@dataclasses.dataclass(frozen=True)
class References:
    """The parts of ``device`` a selector can observe; ``signature`` is hashable."""

    whole_device: bool = False
    whole_kinds: frozenset[str] = frozenset()
    whole_domains: frozenset[tuple[str, str]] = frozenset()
    names: tuple[NameUse, ...] = ()
    unknown_fields: tuple[tuple[str, int], ...] = ()

    @property
    def signature(self) -> tuple[object, ...]:
        return (
            self.whole_device,
            tuple(sorted(self.whole_kinds)),
            tuple(sorted(self.whole_domains)),
            tuple(sorted({(use.kind, use.domain, use.name) for use in self.names})),
        )

    def merged(self, other: References) -> References:
        return References(
            whole_device=self.whole_device or other.whole_device,
            whole_kinds=self.whole_kinds | other.whole_kinds,
            whole_domains=self.whole_domains | other.whole_domains,
            names=self.names + other.names,
            unknown_fields=self.unknown_fields + other.unknown_fields,
        )

    @functools.cached_property
    def plan(self) -> dict[str, tuple[bool, frozenset[str], dict[str, dict[str, bool]]]]:
        """Per kind: (everything?, whole domains, {domain: {name: presence only}}) for projections."""
        plan = {}
        for kind in KINDS:
            everything = self.whole_device or kind in self.whole_kinds
            whole = frozenset(domain for k, domain in self.whole_domains if k == kind)
            wanted: dict[str, dict[str, bool]] = {d: {} for d in self.domains(kind) if d not in whole}
            for use in self.names:
                if use.kind == kind and use.domain not in whole:
                    names = wanted[use.domain]
                    names[use.name] = names.get(use.name, True) and use.presence_only
            plan[kind] = (everything, whole, wanted)
        return plan

    def domains(self, kind: str) -> set[str]:
        """Domains named literally for ``kind`` (they default to an empty map)."""
        found = {domain for k, domain in self.whole_domains if k == kind}
        return found | {use.domain for use in self.names if use.kind == kind}


def tokenize(expression: str) -> list[Token]:
    """The tokens of ``expression`` (a fresh list; compiling one selector asks four times)."""
    return list(_tokens(expression))


@functools.lru_cache(maxsize=1024)
def _tokens(expression: str) -> tuple[Token, ...]:
    tokens = []
    for match in _TOKEN.finditer(expression):
        kind = match.lastgroup or "other"
        if kind != "space":
            tokens.append(Token(kind, match.group(), match.start()))
    return tuple(tokens)


def string_value(token: Token) -> str | None:
    """The value of a plain string literal, or None when it has escapes or a prefix."""
    text = token.text
    if token.kind != "string" or text[0] not in "'\"" or "\\" in text:
        return None
    quote = text[:3] if text[:3] in ("'''", '"""') else text[0]
    return text[len(quote) : -len(quote)]


def find_references(expression: str) -> References:
    tokens = tokenize(expression)
    whole_device = False
    whole_kinds: set[str] = set()
    whole_domains: set[tuple[str, str]] = set()
    names: list[NameUse] = []
    unknown: list[tuple[str, int]] = []

    def at(index: int) -> Token | None:
        return tokens[index] if 0 <= index < len(tokens) else None

    def text(index: int) -> str:
        token = at(index)
        return token.text if token else ""

    for index, token in enumerate(tokens):
        if token.kind != "ident" or token.text != "device" or text(index - 1) in (".", ".?"):
            continue
        field = at(index + 2)
        if text(index + 1) != "." or field is None or field.kind != "ident":
            whole_device = True
            continue
        if field.text not in DEVICE_FIELDS:
            unknown.append((field.text, field.offset))
            continue
        if field.text not in KINDS:
            continue
        kind = field.text
        domain_token = at(index + 4)
        domain = string_value(domain_token) if domain_token else None
        if text(index + 3) != "[" or domain is None or text(index + 5) != "]":
            whole_kinds.add(kind)
            continue
        selector, name_token = text(index + 6), at(index + 7)
        name: str | None = None
        if selector in (".", ".?") and name_token is not None and name_token.kind == "ident":
            name = None if text(index + 8) == "(" else name_token.text
        elif selector in ("[", "[?") and name_token is not None and text(index + 8) == "]":
            name = string_value(name_token)
        if name is None or name_token is None:
            whole_domains.add((kind, domain))
        else:
            in_has = text(index - 1) == "(" and text(index - 2) == "has"
            closes = text(index + 8) == ")" if selector in (".", ".?") else text(index + 9) == ")"
            guarded = selector in (".?", "[?") or in_has
            names.append(NameUse(kind, domain, name, name_token.offset, guarded, in_has and closes))
    return References(
        whole_device=whole_device,
        whole_kinds=frozenset(whole_kinds),
        whole_domains=frozenset(whole_domains),
        names=tuple(names),
        unknown_fields=tuple(unknown),
    )


@dataclasses.dataclass(frozen=True)
class Clause:
    """One operand of a selector's top-level ``&&`` chain."""

    text: str
    offset: int


def split_clauses(expression: str) -> list[Clause]:
    """``a && b && c`` → [a, b, c]; anything with a top-level ``||`` or ``?:`` stays whole."""
    tokens = tokenize(expression)
    depth, cuts = 0, []
    for index, token in enumerate(tokens):
        if token.text in ("(", "[", "[?", "{"):
            depth += 1
        elif token.text in (")", "]", "}"):
            depth -= 1
        elif depth == 0 and token.text in ("||", "?"):
            return [Clause(expression.strip(), len(expression) - len(expression.lstrip()))]
        elif depth == 0 and token.text == "&&":
            cuts.append(index)
    bounds = [0, *(tokens[i].offset for i in cuts), len(expression)]
    clauses = []
    for number, (start, end) in enumerate(itertools.pairwise(bounds)):
        if number:
            start += 2
        piece = expression[start:end]
        stripped = piece.strip()
        clauses.append(Clause(stripped, start + len(piece) - len(piece.lstrip())))
    return clauses


__all__ = ["DEVICE_FIELDS", "Clause", "NameUse", "References", "find_references", "split_clauses", "tokenize"]
