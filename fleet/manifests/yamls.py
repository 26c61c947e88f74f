"""YAML files → plain data plus the location of every node, refusing bad input.

Why not ``load``: fleet needs plain dicts for pydantic *and* a position for
every key, and it must refuse hostile input before it costs memory. So a file
is composed to a node graph (aliases stay shared references there, nothing is
expanded yet), the graph is checked — expanded size and alias count (alias
bombs), nesting depth, duplicate keys, merge keys, tags — and only then turned
into plain data while recording each node's mark.

Why libyaml (PyYAML's ``CSafeLoader``) for composing rather than ruamel.yaml:
composing is the whole cost of loading, and ruamel's pure-Python composer is an
order of magnitude slower than libyaml on a large repository, which CI loads on
every push. Only the node graph is used (marks, styles, anchors as
shared nodes), so scalar values are resolved here with the YAML 1.2 core
schema, independent of the library's resolver. ruamel.yaml stays the tool for
round-trip editing. Without libyaml, PyYAML's Python composer is used.

Scalars that YAML 1.1 (kubectl) reads differently are flagged, see
:mod:`fleet.manifests.scalars`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.error import MarkedYAMLError, YAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from fleet.manifests.findings import Finding
from fleet.manifests.limits import Limits
from fleet.manifests.locations import Location, Path, Positions, Scalar
from fleet.manifests.scalars import SUSPECT_START, ambiguity, resolve_scalar

_CORE = "tag:yaml.org,2002:"
_SUSPECT_OR_MERGE = SUSPECT_START | {"<"}
"""First characters of a key that may be a merge key or ambiguous (``_Builder._mapping``)."""
_PLAIN_TAGS = frozenset({_CORE + "str", "!"})


# libyaml's parser and composer with the *base* resolver: no implicit tags, so plain scalars
# stay str-tagged and resolve_scalar applies YAML 1.2; only explicit tags survive (and are refused).
_BaseLoader: Any = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
_DEFAULT_TAGS = {ScalarNode: _CORE + "str", SequenceNode: _CORE + "seq", MappingNode: _CORE + "map"}


class _Loader(_BaseLoader):  # type: ignore[misc]
    """The base resolver's answers without its per-node Python bookkeeping (no path resolvers are
    registered, so descend/ascend do nothing and an untagged node gets its kind's default tag):
    at 10,000 files the composer calls these 350,000 times."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        return _DEFAULT_TAGS[kind]

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None


_INTERNED = 64
"""Keys, and string values up to this length, are interned (``sys.intern``): 10,000 manifests repeat a
few dozen keys and values (kinds, apiVersions, namespaces, class names), and the controller keeps
every parsed manifest; one copy of each instead of one per manifest (docs/benchmarks.md).
Interned strings are freed as any other once nothing refers to them."""

# an alias is "*name" after a blank or a flow indicator; a "*" inside a regex ('^.*h100') is not one
_ALIAS = re.compile(r"(?:^|[\s\[{,:])\*[^\s,\]}]", re.MULTILINE)


@dataclass(frozen=True)
class Document:
    """One YAML document of a file: its plain data and where each node is."""

    file: str
    index: int
    data: Any
    positions: Positions

    @property
    def location(self) -> Location:
        return self.positions.root


class _Refused(Exception):
    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def _refused(where: Location, rule: str, message: str, *, hint: str) -> _Refused:
    return _Refused(Finding(where, rule, message, hint=hint))


def parse(
    *, file: str, content: bytes, limits: Limits, positions: bool = False
) -> tuple[list[Document], list[Finding]]:
    """Parse every document of one file; problems come back as findings.

    A file with a syntax error yields the documents before the error and one
    ``yaml-syntax`` finding; a refused document (too big, too deep,
    duplicate keys...) yields a finding and is skipped.

    Each document's ``positions`` know its root; the maps of every other node are made
    when first read (by parsing the bytes again, recording them), since they are read only
    to place a finding: skipping them makes parsing faster and a large repository's peak
    memory smaller. ``positions=True`` records them now.
    """
    if len(content) > limits.max_file_bytes:
        return [], [_too_large(file=file, size=len(content), limits=limits)]
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        return [], [_not_utf8(file=file, content=content, err=err)]
    documents: list[Document] = []
    findings: list[Finding] = []
    lines = text.splitlines()
    try:
        for index, node in enumerate(yaml.compose_all(text, Loader=_Loader)):
            if node is None or (isinstance(node, ScalarNode) and node.value == "" and not node.style):
                continue  # an empty document (a stray ---)
            try:
                if "*" in text and _ALIAS.search(text):  # without an alias every node is reached once
                    _check_graph(file=file, root=node, limits=limits)
                builder = _Builder(file=file, lines=lines, limits=limits, record=positions)
                data = builder.build(node, path=())
            except _Refused as refused:
                findings.append(refused.finding)
                continue
            findings.extend(builder.findings)
            source = _Reparse(file, content, index, limits)
            located = Positions(_loc(file, node), builder.nodes, builder.scalars, source=source)
            if not positions:
                located.release()
            documents.append(Document(file=file, index=index, data=data, positions=located))
    except MarkedYAMLError as err:
        findings.append(_syntax(file=file, err=err))
    except ReaderError as err:
        before = text[: err.position]
        where = Location(file, before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1)
        findings.append(
            Finding(
                where,
                "yaml-encoding",
                f"invalid YAML: {err.reason}",
                hint="remove control characters; YAML allows printable Unicode only",
            )
        )
    except YAMLError as err:
        findings.append(Finding(Location(file), "yaml-syntax", f"invalid YAML: {err}", hint="fix the YAML syntax"))
    except RecursionError:
        findings.append(
            Finding(
                Location(file),
                "yaml-limit",
                "YAML nesting is too deep to parse",
                hint=f"keep nesting under {limits.max_depth} levels",
            )
        )
    return documents, findings


class _Reparse:
    """Makes the maps of document ``index`` of ``content`` again, as ``parse`` records them
    (``Positions.source``). A small object per document: a repository keeps one per manifest."""

    __slots__ = ("content", "file", "index", "limits")

    def __init__(self, file: str, content: bytes, index: int, limits: Limits) -> None:
        self.file, self.content, self.index, self.limits = file, content, index, limits

    def __call__(self) -> tuple[dict[Path, Location], dict[Path, Scalar]]:
        for document in parse(file=self.file, content=self.content, limits=self.limits, positions=True)[0]:
            if document.index == self.index:
                return dict(document.positions.nodes), dict(document.positions.scalars)
        raise AssertionError(f"{self.file}: document {self.index} parsed before, not now")  # bytes are immutable


def _loc(file: str, node: Node) -> Location:
    mark = node.start_mark
    return _new_location(Location, (file, mark.line + 1, mark.column + 1))  # skips NamedTuple's Python __new__


_new_location = tuple.__new__


def _too_large(*, file: str, size: int, limits: Limits) -> Finding:
    return Finding(
        Location(file),
        "file-too-large",
        f"file is {size} bytes, over the {limits.max_file_bytes}-byte cap",
        hint="split it into smaller files; fleet manifests are small",
    )


def _not_utf8(*, file: str, content: bytes, err: UnicodeDecodeError) -> Finding:
    line = content[: err.start].count(b"\n") + 1
    col = err.start - (content.rfind(b"\n", 0, err.start) + 1) + 1
    return Finding(
        Location(file, line, col),
        "yaml-encoding",
        f"file is not valid UTF-8 (byte 0x{content[err.start]:02x})",
        hint="save the file as UTF-8",
    )


def _syntax(*, file: str, err: MarkedYAMLError) -> Finding:
    mark = err.problem_mark or err.context_mark
    where = Location(file, mark.line + 1, mark.column + 1) if mark else Location(file)
    problem = err.problem or err.context or "invalid YAML"
    duplicate = "duplicate" in str(problem)
    return Finding(
        where,
        "yaml-duplicate-key" if duplicate else "yaml-syntax",
        f"invalid YAML: {problem}",
        hint="fix the YAML syntax (check indentation, quotes and colons)",
    )


def _check_graph(*, file: str, root: Node, limits: Limits) -> None:
    """Refuse alias bombs and recursive aliases without expanding anything.

    The expanded size of a node is 1 plus the expanded sizes of its children,
    memoised by node identity, so a 10-line billion-laughs document costs a
    few dozen steps to measure and is refused.
    """
    sizes: dict[int, int] = {}
    aliases = 0
    # iterative post-order walk over (node, children already pushed); depth is bounded by the builder
    stack: list[tuple[Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            sizes[key] = min(1 + sum(sizes[id(c)] for c in _children(node)), limits.max_nodes + 1)
            continue
        if key in sizes:
            aliases += 1
            if aliases > limits.max_aliases:
                raise _refused(
                    _loc(file, node),
                    "yaml-limit",
                    f"document uses more than {limits.max_aliases} YAML aliases",
                    hint="write the values out instead of repeating anchors (*alias)",
                )
            continue
        if key in on_path:
            raise _refused(
                _loc(file, node),
                "yaml-limit",
                "recursive YAML alias",
                hint="an anchor cannot contain an alias to itself",
            )
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
    if sizes[id(root)] > limits.max_nodes:
        raise _refused(
            _loc(file, root),
            "yaml-limit",
            f"document expands to more than {limits.max_nodes} YAML nodes (alias bomb?)",
            hint="write the document out without nested anchors and aliases",
        )


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


class _Builder:
    """Turns a checked node graph into plain data, recording positions."""

    def __init__(self, *, file: str, lines: list[str], limits: Limits, record: bool = True) -> None:
        self.file = file
        self.limits = limits
        self.lines = lines
        self.record = record
        """Record every node's location (``nodes``, ``scalars``); without it, locations are made
        only for findings."""
        self.nodes: dict[Path, Location] = {}
        self.scalars: dict[Path, Scalar] = {}
        self.findings: list[Finding] = []

    def build(self, node: Node, *, path: Path) -> Any:
        return self._build(node, path if self.record else None, len(path))

    # ``path`` is None when nothing is recorded: no path tuple is made for each node then, only
    # its ``depth`` is counted (the common case: positions are made again only for findings).
    def _build(self, node: Node, path: Path | None, depth: int) -> Any:
        if depth >= self.limits.max_depth:
            raise _refused(
                _loc(self.file, node),
                "yaml-limit",
                f"nesting deeper than {self.limits.max_depth} levels",
                hint="flatten the document",
            )
        if isinstance(node, MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, SequenceNode):
            if node.tag != _CORE + "seq":
                raise _refused(
                    _loc(self.file, node),
                    "yaml-syntax",
                    f"YAML tag {node.tag!r} is not supported",
                    hint="remove the tag",
                )
            items = []
            for index, item in enumerate(node.value):
                at = None
                if path is not None:
                    at = (*path, index)
                    self.nodes[at] = _loc(self.file, item)
                items.append(self._build(item, at, depth + 1))
            return items
        assert isinstance(node, ScalarNode)
        return self._scalar(node, path)

    def _mapping(self, node: MappingNode, path: Path | None, depth: int) -> dict[str, Any]:
        if node.tag != _CORE + "map":
            raise _refused(
                _loc(self.file, node),
                "yaml-syntax",
                f"YAML tag {node.tag!r} is not supported",
                hint="remove the tag; write a plain mapping",
            )
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise _refused(
                    _loc(self.file, key_node),
                    "yaml-syntax",
                    "mapping keys must be plain strings",
                    hint="use a string key",
                )
            key = sys.intern(str(key_node.value))
            if not key_node.style and key and key[0] in _SUSPECT_OR_MERGE:  # decided without a call, mostly
                if key == "<<":
                    raise _refused(
                        _loc(self.file, key_node),
                        "yaml-syntax",
                        "YAML merge keys (<<) are not supported",
                        hint="write the merged fields out; Kubernetes tools disagree on <<",
                    )
                self._lint(key_node)
            if key in result:
                first = next(k for k, _ in node.value if str(k.value) == key)
                raise _refused(
                    _loc(self.file, key_node),
                    "yaml-duplicate-key",
                    f"duplicate key {key!r} (first at line {first.start_mark.line + 1})",
                    hint="keep one of them; Kubernetes would silently use the last",
                )
            at = None
            if path is not None:
                at = (*path, key)
                self.nodes[at] = _loc(self.file, key_node)
            result[key] = self._build(value_node, at, depth + 1)
        return result

    def _scalar(self, node: ScalarNode, path: Path | None) -> Any:
        style = node.style or ""
        text = str(node.value)
        if not style and text and text[0] in SUSPECT_START:
            self._lint(node)
        if node.tag not in _PLAIN_TAGS:
            raise _refused(
                _loc(self.file, node),
                "yaml-syntax",
                f"YAML tag {node.tag!r} is not supported",
                hint="remove the tag; write plain values",
            )
        value = resolve_scalar(text) if not style else text
        if type(value) is str and len(value) <= _INTERNED:
            value = sys.intern(value)
        if path is not None and isinstance(value, str):
            indent = self._block_indent(node) if style in ("|", ">") else 0
            self.scalars[path] = Scalar(start=_loc(self.file, node), style=style, indent=indent)
        return value

    def _block_indent(self, node: ScalarNode) -> int:
        start: int = node.start_mark.line
        for text in self.lines[start + 1 :]:
            if text.strip():
                return len(text) - len(text.lstrip(" ")) + 1
        return int(node.start_mark.column) + 1

    def _lint(self, node: ScalarNode) -> None:
        value = node.value
        if node.style or not value or value[0] not in SUSPECT_START:
            return  # the builder checks the first character before calling; ``parse``'s others may not
        found = ambiguity(str(value))
        if found is not None:
            self.findings.append(Finding(_loc(self.file, node), "yaml-ambiguous", found[0], hint=found[1]))


__all__ = ["Document", "parse"]
