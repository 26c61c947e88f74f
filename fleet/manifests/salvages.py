"""An object that fails its schema, cut down until it validates, so the other rules still run.

A pull request with a typo in one field and a selector that does not compile
should get both findings in one CI run, not one per push. So an object whose
schema fails is not dropped: its schema findings are reported as they are,
and a *salvaged* copy of its data is validated again and checked by every
other rule (namespaces, classes, quota, CEL, satisfiability):

* an unknown field with a close allowed name that is not set (``devicClassName``)
  is read under that name: the rest of the request is still checked;
* any other unknown field, or a value the schema refuses (``count: "2"``), is
  dropped (its default stands in, if it has one);
* a missing required field drops the innermost list entry that holds it (the
  request, the selector), so nothing is checked that the author did not write.

When that does not converge in a few rounds, or would drop the object's own
identity, the object is left unchecked as before. A salvaged manifest is
marked (``Manifest.salvaged``): it only feeds findings — its revision has
schema errors, so it is never rendered or applied.
"""

from __future__ import annotations

import copy
import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from fleet.manifests.bases import Model
from fleet.manifests.locations import Path, Positions
from fleet.manifests.validations import allowed_fields

ROUNDS = 5
_IDENTITY: tuple[Path, ...] = (("apiVersion",), ("kind",), ("metadata",), ("metadata", "name"))


Edit = tuple[str, Path, Any, Any]
"""("rename", parent, old key, new key), ("delete", path, None, None), ("drop", list path, indexes, None)
or ("nest", parent, keys, new key): the keys moved under a new mapping (v1beta1 → v1 ``exactly``)."""


def salvage(
    data: dict[str, Any], *, model: type[Model], error: ValidationError, positions: Positions
) -> tuple[Model, dict[str, Any], Positions] | None:
    """(model, data, positions of the data's paths) of ``data`` cut down until it validates, or None."""
    current = copy.deepcopy(data)
    edits: list[Edit] = []
    for _ in range(ROUNDS):
        errors = sorted(error.errors(include_url=False), key=lambda e: _ORDER.get(e["type"], 1))
        for item in errors:
            loc: Path = tuple(p for p in item["loc"] if p != "[key]")
            if not _repair(current, loc=loc, kind=item["type"], model=model, edits=edits):
                return None
        _compact(current, path=(), edits=edits)  # dropped entries are only marked during a round, so indices hold
        try:
            validated = model.model_validate(current)
        except ValidationError as again:
            error = again
            continue
        return validated, current, moved(positions, edits=edits)
    return None


_ORDER = {"extra_forbidden": 0, "missing": 2}


def moved(positions: Positions, *, edits: list[Edit]) -> Positions:
    """``positions`` with every path as it is after ``edits`` (dropped paths left out)."""
    nodes = {new: loc for new, loc in ((_path_after(p, edits), loc) for p, loc in positions.nodes.items()) if new}
    scalars = {new: sc for new, sc in ((_path_after(p, edits), sc) for p, sc in positions.scalars.items()) if new}
    return Positions(root=positions.root, nodes=nodes, scalars=scalars)


def _path_after(path: Path, edits: list[Edit]) -> Path | None:
    for action, where, first, second in edits:
        size = len(where)
        if len(path) <= size or path[:size] != where:
            continue
        head = path[size]
        if action == "rename" and head == first:
            path = (*where, second, *path[size + 1 :])
        elif action == "drop" and isinstance(head, int):
            if head in first:
                return None
            path = (*where, head - sum(1 for index in first if index < head), *path[size + 1 :])
        elif action == "delete" and head == first:
            return None
        elif action == "nest" and head in first:
            path = (*where, second, *path[size:])
    return path


def _repair(data: dict[str, Any], *, loc: Path, kind: str, model: type[BaseModel], edits: list[Edit]) -> bool:
    if not loc or loc[:1] in _IDENTITY[:2] or loc[:2] in _IDENTITY[2:]:
        return False
    if any(isinstance(_get(data, loc[:cut]), _Missing) for cut in range(1, len(loc))):
        return True  # already dropped with an enclosing entry this round
    parent = _get(data, loc[:-1])
    key = loc[-1]
    if kind == "missing" and isinstance(parent, dict) and key in parent:
        return True  # a misspelt field was just read under this name
    if kind == "extra_forbidden" and isinstance(parent, dict) and key in parent:
        allowed = allowed_fields(model, loc[:-1])
        close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
        value = parent.pop(key)
        if close and close[0] not in parent:
            parent[close[0]] = value
            edits.append(("rename", loc[:-1], key, close[0]))
        else:
            edits.append(("delete", loc[:-1], key, None))
        return True
    if kind != "missing" and isinstance(parent, dict) and key in parent:
        del parent[key]  # its default stands in; a required field is reported missing next round
        edits.append(("delete", loc[:-1], key, None))
        return True
    if kind != "missing" and isinstance(parent, list) and isinstance(key, int) and key < len(parent):
        parent[key] = _MISSING_ENTRY
        return True
    return _drop_entry(data, loc=loc)


def _drop_entry(data: dict[str, Any], *, loc: Path) -> bool:
    """Drop the innermost list entry on ``loc`` (False if there is none)."""
    for cut in range(len(loc) - 1, 0, -1):
        index = loc[cut]
        container = _get(data, loc[:cut])
        if isinstance(index, int) and isinstance(container, list) and index < len(container):
            container[index] = _MISSING_ENTRY
            return True
    return False


class _Missing:
    pass


_MISSING = _Missing()
_MISSING_ENTRY = _Missing()


def _get(data: Any, path: Path) -> Any:
    for part in path:
        found = (isinstance(data, dict) and part in data) or (
            isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        )
        if not found:
            return _MISSING
        data = data[part]
    return data


def _compact(data: Any, *, path: Path, edits: list[Edit]) -> None:
    """Remove the entries marked as dropped (recording which, for the positions)."""
    if isinstance(data, dict):
        for key, value in data.items():
            _compact(value, path=(*path, key), edits=edits)
    elif isinstance(data, list):
        dropped = frozenset(index for index, item in enumerate(data) if item is _MISSING_ENTRY)
        if dropped:
            data[:] = [item for item in data if item is not _MISSING_ENTRY]
            edits.append(("drop", path, dropped, None))
        for index, item in enumerate(data):
            _compact(item, path=(*path, index), edits=edits)


__all__ = ["ROUNDS", "Edit", "moved", "salvage"]
