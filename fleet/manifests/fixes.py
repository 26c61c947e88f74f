"""``fleetctl validate --fix``: rewrite what has exactly one right answer, keeping the file as written.

Three kinds of finding have one right answer, so fleet writes it instead of
only describing it:

* ``deprecated-api``: ``resource.k8s.io/v1beta1``, ``v1beta2`` and ``v1alpha3``
  become ``v1``; a v1beta1/v1alpha3 request's own ``deviceClassName``,
  ``selectors``, ``allocationMode``, ``count``, ``adminAccess``,
  ``tolerations`` and ``capacity`` move under ``exactly:`` (v1beta2 already has
  that shape; DeviceClasses did not change);
* ``cel-removed-attribute`` where the driver renamed the attribute:
  ``device.attributes['gpu.nvidia.com'].pcieBusID`` becomes
  ``device.attributes['resource.kubernetes.io'].pciBusID`` (``index``, ``minor``
  and ``parentIndex`` have no single successor and are left to the author);
* ``yaml-ambiguous``: a plain scalar that kubectl (YAML 1.1) reads differently
  is double-quoted, so both read the string fleet validated.

Files go through ruamel.yaml's round trip, so comments, key order, quoting and
block scalars survive; the indentation is the file's own (the style whose
round trip reproduces the file is chosen). A file is only rewritten when
something changed, and a fixed file has nothing left to fix: a second run
changes nothing. Text in, text out: the CLI reads and writes the files.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from fleet.manifests import registry, scalars

_EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")
_FLAT_VERSIONS = frozenset({"resource.k8s.io/v1beta1", "resource.k8s.io/v1alpha3"})
_PCIE_BUS_ID = re.compile(r"""device\.attributes\[(['"])gpu\.nvidia\.com\1\]\.pcieBusID\b""")
_STYLES = ((2, 2, 0), (2, 4, 2), (4, 4, 2), (4, 4, 0), (4, 6, 4), (3, 3, 0))
_PLAIN_TOKEN = re.compile(r"[^\s#,\[\]{}][^#,\[\]{}]*?(?=\s*(?:#|$|,|\]|\}))")


@dataclass(frozen=True)
class Change:
    """One rewrite: where (1-based line of the original file) and what."""

    line: int
    what: str


def fix_text(text: str) -> tuple[str, list[Change]]:
    """The fixed text of one YAML file and what changed (the text itself when nothing did)."""
    yaml = _yaml(_style_of(text))
    try:
        documents = list(yaml.load_all(text))
    except YAMLError:
        return text, []  # not valid YAML: validate reports it, and there is nothing sure to rewrite
    lines = text.splitlines()
    changes: list[Change] = []
    for document in documents:
        changes += _quote_ambiguous(document, lines=lines)  # first: it reads positions that moves would lose
        if isinstance(document, CommentedMap):
            changes += _fix_document(document)
    if not changes:
        return text, []
    out = io.StringIO()
    yaml.explicit_start = text.lstrip().startswith("---")
    yaml.dump_all(documents, out)
    return out.getvalue(), sorted(changes, key=lambda c: c.line)


def _yaml(style: tuple[int, int, int]) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 1 << 16  # never re-wrap long lines (CEL expressions)
    mapping, sequence, offset = style
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def _style_of(text: str) -> tuple[int, int, int]:
    """The indentation style whose round trip reproduces ``text`` (else the closest)."""
    best, best_score = _STYLES[0], -1
    for style in _STYLES:
        yaml = _yaml(style)
        yaml.explicit_start = text.lstrip().startswith("---")
        try:
            out = io.StringIO()
            yaml.dump_all(list(yaml.load_all(text)), out)
        except YAMLError:
            return best
        produced = out.getvalue()
        if produced == text:
            return style
        score = sum(a == b for a, b in zip(produced.splitlines(), text.splitlines(), strict=False))
        if score > best_score:
            best, best_score = style, score
    return best


def _same_style(old: str, new: str) -> str:
    """``new`` written as ``old`` was (quoted, literal block, ...): ruamel keeps the style in the type."""
    return new if type(old) is str else type(old)(new)


def _line(node: Any, key: Any) -> int:
    try:
        return int(node.lc.key(key)[0]) + 1
    except (AttributeError, KeyError, TypeError):
        return 0


def _fix_document(document: CommentedMap) -> list[Change]:
    changes: list[Change] = []
    api_version = document.get("apiVersion")
    deprecated = isinstance(api_version, str) and api_version in registry.DEPRECATED_VERSIONS
    if deprecated and api_version.startswith("resource.k8s.io/"):
        document["apiVersion"] = _same_style(api_version, "resource.k8s.io/v1")
        changes.append(Change(_line(document, "apiVersion"), f"apiVersion {api_version} → resource.k8s.io/v1"))
        if api_version in _FLAT_VERSIONS:
            changes += _move_under_exactly(document)
    changes += _rename_attributes(document)
    return changes


def _requests(document: CommentedMap) -> Any:
    spec = document.get("spec")
    if document.get("kind") == "ResourceClaimTemplate" and isinstance(spec, CommentedMap):
        spec = spec.get("spec")
    devices = spec.get("devices") if isinstance(spec, CommentedMap) else None
    return devices.get("requests") if isinstance(devices, CommentedMap) else None


def _move_under_exactly(document: CommentedMap) -> list[Change]:
    requests = _requests(document)
    if not isinstance(requests, CommentedSeq):
        return []
    changes = []
    for index, request in enumerate(requests):
        if not isinstance(request, CommentedMap) or "exactly" in request or "firstAvailable" in request:
            continue
        moved = [key for key in request if key in _EXACT_FIELDS]
        if not moved:
            continue
        line = _line(request, moved[0])
        position = list(request).index(moved[0])
        exactly = CommentedMap()
        for key in moved:
            exactly[key] = request[key]
            comment = request.ca.items.pop(key, None)
            if comment is not None:
                exactly.ca.items[key] = comment
            del request[key]
        request.insert(position, "exactly", exactly)
        changes.append(Change(line, f"requests[{index}]: {', '.join(moved)} moved under exactly:"))
    return changes


def _rename_attributes(node: Any) -> list[Change]:
    changes: list[Change] = []
    if isinstance(node, CommentedMap):
        for key, value in list(node.items()):
            if key == "expression" and isinstance(value, str) and _PCIE_BUS_ID.search(value):
                fixed = _PCIE_BUS_ID.sub(r"device.attributes[\1resource.kubernetes.io\1].pciBusID", value)
                node[key] = _same_style(value, fixed)
                changes.append(
                    Change(
                        _line(node, key),
                        "gpu.nvidia.com/pcieBusID (removed in driver v25.12) → resource.kubernetes.io/pciBusID",
                    )
                )
            else:
                changes += _rename_attributes(value)
    elif isinstance(node, CommentedSeq):
        for item in node:
            changes += _rename_attributes(item)
    return changes


def _quote_ambiguous(node: Any, *, lines: list[str]) -> list[Change]:
    """Double-quote plain scalars that YAML 1.1 reads differently, taking their text from the file."""
    changes: list[Change] = []
    entries: list[tuple[Any, Any, Any]] = []
    known = (getattr(node, "lc", None) and node.lc.data) or {}
    if isinstance(node, CommentedMap):
        entries = [(key, value, node.lc.value(key) if key in known else None) for key, value in node.items()]
    elif isinstance(node, CommentedSeq):
        entries = [(i, value, node.lc.item(i) if i in known else None) for i, value in enumerate(node)]
    for key, value, where in entries:
        if isinstance(value, CommentedMap | CommentedSeq):
            changes += _quote_ambiguous(value, lines=lines)
            continue
        if where is None or isinstance(value, DoubleQuotedScalarString) or value is None:
            continue
        row, col = where
        if row >= len(lines) or col >= len(lines[row]) or lines[row][col] in "'\"|>&*!":
            continue
        token = _PLAIN_TOKEN.match(lines[row], col)
        if token is None:
            continue
        text = token.group(0).strip()
        if scalars.ambiguity(text) is None:
            continue
        node[key] = DoubleQuotedScalarString(text)
        changes.append(Change(row + 1, f"{text} quoted: YAML 1.1 (kubectl) reads it differently"))
    return changes


__all__ = ["Change", "fix_text"]
