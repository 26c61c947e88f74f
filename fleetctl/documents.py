"""``-o json`` of ``diff`` and ``apply``: the ChangeSet written one entry at a time.

``json.dumps(changes.to_json(), indent=2)`` built every entry's dict and then the whole text
before writing a byte, on top of everything the run still held. Written entry by entry,
only one entry's dict and text exist at a time. Each value is dumped by orjson (``json.dumps``
with ``indent`` takes the pure-Python encoder) and indented to
its depth; JSON strings hold no raw newline, so indenting after every newline cannot touch a
value. The text is laid out as ``json.dumps(..., indent=2, ensure_ascii=False)`` lays it out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO

import orjson

from fleet.engine import Change, ChangeSet


def write_changes(
    out: TextIO, changes: ChangeSet, *, entry: Callable[[Change], dict[str, Any]] | None = None, **tail: Any
) -> None:
    """Write ``{"cluster", "revision", "entries", **tail}``; ``entry(change)`` adds keys to each entry."""
    out.write("{\n")
    out.write(f'  "cluster": {_indented(changes.cluster, 2)},\n  "revision": {_indented(changes.revision, 2)},\n')
    out.write('  "entries": [')
    for i, change in enumerate(changes.entries):
        item = change.to_json()
        if entry is not None:
            item.update(entry(change))
        out.write(("," if i else "") + "\n    " + _indented(item, 4))
    out.write("\n  ]" if changes.entries else "]")
    for key, value in tail.items():
        out.write(f",\n  {_indented(key, 2)}: {_indented(value, 2)}")
    out.write("\n}\n")


def _indented(value: Any, depth: int) -> str:
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONEncodeError:  # what orjson refuses (an integer beyond 64 bits): the standard encoder
        text = json.dumps(value, indent=2, ensure_ascii=False)
    return text.replace("\n", "\n" + " " * depth)


__all__ = ["write_changes"]
