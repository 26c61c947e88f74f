"""JSON merge patch (RFC 7386) that also moves source locations.

An overlay replaces parts of a base object; afterwards every field must
still point at the line that produced it — the overlay's line for what the
patch set, the base line for the rest — so that a bad value introduced by
an overlay is reported in the overlay file. ``merge`` returns the patched
data and the patched :class:`Positions` together.
"""

from __future__ import annotations

import copy
from typing import Any

from fleet.manifests.locations import Path, Positions


def merge(
    *, target: Any, patch: Any, positions: Positions, patch_positions: Positions, prefix: Path = ()
) -> tuple[Any, Positions]:
    """Apply ``patch`` (located by ``patch_positions``, rooted at the patch) at ``prefix``.

    ``target`` is the value at ``prefix`` of the object ``positions`` locates.
    """
    moved: list[Path] = []
    result = _merge(target, patch, path=(), moved=moved)
    for path in moved:
        positions = positions.replaced(prefix=prefix + path, other=patch_positions.under(path))
    return result, positions


def _merge(target: Any, patch: Any, *, path: Path, moved: list[Path]) -> Any:
    if not isinstance(patch, dict):
        moved.append(path)
        return copy.deepcopy(patch)
    if isinstance(target, dict):
        result = dict(target)
    else:
        moved.append(path)
        result = {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value, path=(*path, key), moved=moved)
    return result


__all__ = ["merge"]
