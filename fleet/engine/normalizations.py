"""Making two versions of an object comparable, and knowing when no dry-run is needed.

The server adds bookkeeping to every object (``managedFields``, ``resourceVersion``,
``uid``, timestamps, ``status``...). Comparing a server-side-apply dry-run with the
live object only means something once both lose those fields: what remains is
what fleet's apply would change. Fields owned by other managers can be dropped too
(``ignore_managers``), for fields a controller legitimately owns. Secret values are
replaced by a short hash, so a diff shows *that* a value changed, never the value.

``unchanged_without_dry_run`` is the shortcut that makes a no-op reconcile cheap.
A server-side apply of ``desired`` by manager M changes nothing when (1) every
field of ``desired`` already has that value live and (2) M owns exactly the fields
``desired`` sets: SSA sets the applied fields (already equal) and removes fields M
owned but no longer applies (there are none). Both are checked on the listed live
object, so the common case costs no request at all. Server-side defaults inside
lists (a ResourceClaimTemplate's ``allocationMode``) defeat (1); for those the
``applied`` hash fleet stamps on every object stands in: if the live object carries
the hash of exactly this desired content and fleet still owns exactly the desired
fields, nobody changed them since (a change by another writer moves ownership). Anything this test cannot
prove (server-side defaulting or normalisation such as ``"1000m"`` → ``"1"``, list
merges) falls back to the dry-run; the shortcut may only ever say "unchanged"
when it is certain.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Iterable
from typing import Any

import orjson

from fleet.cel import quantities
from fleet.engine import ownership

Path = tuple[str, ...]

VOLATILE_METADATA = (
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
VOLATILE_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", "deployment.kubernetes.io/revision")
IDENTITY: frozenset[Path] = frozenset({("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")})


def normalise(obj: dict[str, Any] | None, *, ignore_managers: Iterable[str] = ()) -> dict[str, Any] | None:
    """A copy without server bookkeeping, status, Secret values or fields of ``ignore_managers``."""
    if obj is None:
        return None
    out = copy.deepcopy(obj)
    ignored = owned_leaves(obj, managers=set(ignore_managers)) if ignore_managers else set()
    meta = out.get("metadata") or {}
    for key in VOLATILE_METADATA:
        meta.pop(key, None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for key in VOLATILE_ANNOTATIONS:
            annotations.pop(key, None)
        if not annotations:
            meta.pop("annotations")
    out.pop("status", None)
    for path in ignored:
        _drop(out, path)
    if out.get("kind") == "Secret" and out.get("apiVersion") == "v1":
        for section in ("data", "stringData"):
            if isinstance(out.get(section), dict):
                out[section] = {k: _mask(v) for k, v in out[section].items()}
    return out


def unchanged_without_dry_run(
    desired: dict[str, Any], live: dict[str, Any], *, manager: str, wanted: set[Path] | frozenset[Path] | None = None
) -> bool:
    """True only if applying ``desired`` as ``manager`` certainly leaves ``live`` as it is.

    ``wanted``: ``desired_leaves(desired)`` when the caller already has it."""
    wanted = desired_leaves(desired) if wanted is None else wanted
    owned = owned_leaves(live, managers={manager}, operation="Apply")
    # Every desired leaf lies in a field the manager owns, and every owned field is desired
    # (an atomic struct or list such as RoleBinding.roleRef is one owned leaf over several).
    if wanted != owned and not (
        all(any(w[: len(o)] == o for o in owned) for w in wanted)
        and all(any(w[: len(o)] == o for w in wanted) for o in owned)
    ):
        return False
    if annotation(desired, ownership.APPLIED) and annotation(desired, ownership.APPLIED) == annotation(
        live, ownership.APPLIED
    ):
        # Same content as the last apply, and nobody else changed a field we own
        # (changing it would have moved its ownership): live is that apply's result.
        # Every value outside lists must still be there as desired (quantities in the
        # server's spelling): a writer using fleet's own manager name keeps ownership,
        # and a doubt costs only a dry-run.
        return same_outside_lists(desired, live)
    if not subset(desired, live):
        return False
    return all(value_at(desired, o) == value_at(live, o) for o in owned - wanted)


def first_apply_changes(desired: dict[str, Any], live: dict[str, Any], *, manager: str) -> bool:
    """True only if applying ``desired`` as ``manager`` certainly changes ``live`` and removes nothing.

    ``manager`` owns no field of ``live`` yet, so the apply removes no field (SSA removes only
    fields their manager owned and no longer sets), and a label or annotation ``desired`` sets
    is not live with that value, so the apply changes the object: a dry-run could only answer
    "configured". What the engine uses it for: taking over what ``fleetctl import`` just read."""
    meta = live.get("metadata") or _EMPTY
    if any(entry.get("manager") == manager for entry in meta.get("managedFields") or ()):
        return False
    wanted = desired.get("metadata") or _EMPTY
    for section in ("labels", "annotations"):
        have = meta.get(section) or _EMPTY
        if any(have.get(key) != value for key, value in (wanted.get(section) or _EMPTY).items()):
            return True
    return False


_EMPTY: dict[str, Any] = {}


def _same_value(desired: Any, live: Any) -> bool:
    """Equal, or one Kubernetes quantity in two spellings (the server stores ``1000000`` as ``1M``)."""
    if desired == live:
        return True
    if isinstance(desired, (str, int)) and not isinstance(desired, bool) and isinstance(live, str):
        text = str(desired)
        if quantities.is_quantity(text) and quantities.is_quantity(live):
            return quantities.parse_quantity(text).compare(quantities.parse_quantity(live)) == 0
    return False


def same_outside_lists(desired: Any, live: Any, path: Path = ()) -> bool:
    """Every leaf of ``desired`` (``desired_leaves``) has its value in ``live`` at the same path
    (``_same_value``: quantities in either spelling; a missing step is None, as ``value_at``),
    except leaves that are lists (their items may carry server defaults: compared by the hash).

    One walk over both trees: the same answer as comparing ``value_at`` of each leaf path, without
    walking from the root for every leaf (a no-op over 100,000 objects asks it of every one)."""
    if not (isinstance(desired, dict) and desired):
        return isinstance(desired, list) or path in IDENTITY or _same_value(desired, live)
    if not isinstance(live, dict):
        live = _EMPTY
    for key, value in desired.items():
        there = live.get(key)
        if isinstance(value, dict) and value:
            if not same_outside_lists(value, there, (*path, key)):
                return False
        elif value == there or isinstance(value, list) or (*path, key) in IDENTITY:
            continue  # equal (most leaves: decided without a call), in a list, or the identity
        elif not _same_value(value, there):
            return False
    return True


def annotation(obj: dict[str, Any], key: str) -> str:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(key) or "")


def value_at(obj: Any, path: Path) -> Any:
    """The value at ``path`` of nested mappings, None where a step is missing or not a mapping."""
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def subset(desired: Any, live: Any) -> bool:
    """Every field of ``desired`` has the same value in ``live`` (lists compared whole)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(k in live and subset(v, live[k]) for k, v in desired.items())
    return bool(desired == live)


def desired_leaves(obj: dict[str, Any]) -> set[Path]:
    """The field paths an apply of ``obj`` sets: scalars, lists and empty maps, identity excluded."""
    leaves: set[Path] = set()

    def walk(node: dict[str, Any], path: Path) -> None:  # a non-empty map: one call per map, not per leaf
        for key, value in node.items():
            at = (*path, key)
            if isinstance(value, dict) and value:
                walk(value, at)
            elif at not in IDENTITY:
                leaves.add(at)

    if isinstance(obj, dict) and obj:
        walk(obj, ())
    else:
        leaves.add(())
    return leaves


def owned_leaves(live: dict[str, Any], *, managers: set[str], operation: str | None = None) -> set[Path]:
    """Leaf field paths ``managers`` own in ``live.metadata.managedFields`` (lists as one leaf)."""
    leaves: set[Path] = set()
    for entry in (live.get("metadata") or {}).get("managedFields") or ():
        if entry.get("manager") not in managers or (operation and entry.get("operation") != operation):
            continue
        if entry.get("subresource"):
            continue
        leaves |= _leaves_of(orjson.dumps(entry.get("fieldsV1") or {}))
    return leaves


@functools.lru_cache(maxsize=1024)
def _leaves_of(fields_v1: bytes) -> frozenset[Path]:
    """The leaves of one ``fieldsV1`` (as JSON). Objects of one kind written by one manager share a
    handful of shapes, so a no-op over 10,000 objects walks each shape once (a pure memo)."""
    leaves: set[Path] = set()
    _fields(json.loads(fields_v1), (), leaves)
    return frozenset(leaves)


def _fields(node: dict[str, Any], path: Path, leaves: set[Path]) -> None:
    children = {k: v for k, v in node.items() if k.startswith("f:")}
    if path and (not children or any(k[:2] in ("k:", "v:", "i:") for k in node)):
        leaves.add(path)  # a scalar, an empty map, or a list (its items count as the list)
        return
    for key, value in children.items():
        _fields(value if isinstance(value, dict) else {}, (*path, key[2:]), leaves)


def _drop(obj: dict[str, Any], path: Path) -> None:
    node: Any = obj
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)


def _mask(value: Any) -> str:
    digest = hashlib.sha256(str(value).encode()).hexdigest()[:12]
    return f"*** (sha256 {digest})"


__all__ = [
    "annotation",
    "desired_leaves",
    "first_apply_changes",
    "normalise",
    "owned_leaves",
    "same_outside_lists",
    "subset",
    "unchanged_without_dry_run",
]
