"""Drift's bookkeeping: what a repair overwrote, and which objects people froze.

Under ``enforce`` git wins: a field fleet declares that another field manager changed
(``kubectl edit``, ``kubectl patch``, a controller) is taken back with a forced
server-side apply, and fields fleet does not declare stay as they are (SSA never touches
them). A repair is never silent, so each one is described here as data: per field fleet
put back, the field path as the API server spells it (``.spec.selectors``), the field
manager that had changed it, and the value before and after. The Event, the FleetSync's
``drift[]`` and the ``fleet_drift_repaired_total`` metric are views of it. The manager is
the one the API server named in the conflict, else the one that owns the field in
``managedFields``; a field someone *removed* is owned by nobody, so its manager is
unknown (``""``). Values are JSON, cut to ``MAX_VALUE`` characters; a Secret's values are
never shown.

A person who must hold a hand edit during an incident freezes the live object rather
than racing the controller: ``kubectl annotate <kind> <name> fleet.gpufleet.dev/drift=report``
(or ``=ignore``). fleet then writes nothing to that object — no repair, no git change,
no prune — until the annotation is removed; ``report`` reports what differs, ``ignore``
stays silent. Who set the annotation and when comes from the ``managedFields`` entry that
owns it. fleet never applies that annotation itself (a manifest's copy is an instruction,
stripped before applying), so its own applies never remove a person's freeze. In git the
same annotation is the object's drift policy (``Desired.freeze``): cluster-side changes are
reported or ignored, and commits to the object still apply.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.engine import normalizations, ownership

Path = tuple[str, ...]

FREEZE_MODES = ("report", "ignore")
"""Values of ``ownership.DRIFT`` that freeze an object (``enforce`` is the default, not a freeze)."""
MAX_VALUE = 200
REDACTED = "(redacted)"
ABSENT = "(absent)"
_BOOKKEEPING: frozenset[Path] = frozenset(
    {("metadata", "annotations", ownership.REVISION), ("metadata", "annotations", ownership.APPLIED)}
)


@dataclass(frozen=True)
class FieldRepair:
    """One field fleet put back: who had changed it, and its value before and after (JSON text)."""

    field: str
    manager: str
    before: str
    after: str

    def __str__(self) -> str:
        by = self.manager or "an unknown manager"
        return f"{self.field} (changed by {by}): {self.before} -> {self.after}"


@dataclass(frozen=True)
class Freeze:
    """An object fleet leaves alone: ``mode`` report or ignore, set by whom and since when."""

    mode: str
    by: str
    """The field manager that set the live annotation (``kubectl-annotate``); ``git`` for a manifest's."""
    since: str = ""
    """When the live annotation was written (its managedFields time); empty for git."""
    source: str = ""
    """For a freeze in git: the manifest's file:line."""

    @property
    def live(self) -> bool:
        """Set on the live object (holds every write), not in git (the object's drift policy)."""
        return not self.source

    def describe(self) -> str:
        when = f" at {self.since}" if self.since else ""
        where = f"in git ({self.source})" if self.source else f"by {self.by or 'an unknown manager'}{when}"
        return f"frozen: {ownership.DRIFT}={self.mode} set {where}"


def field_text(path: Path) -> str:
    """A field path as the API server writes it in a conflict (``.spec.selectors``)."""
    return "".join(f".{p}" for p in path)


def repairs(
    *,
    live: dict[str, Any] | None,
    after: dict[str, Any] | None,
    leaves: Iterable[Path],
    conflicts: Iterable[tuple[str, str]] = (),
) -> tuple[FieldRepair, ...]:
    """The declared fields (``leaves``) whose value differs between ``live`` and ``after``.

    ``after`` is what the (forced) apply makes of the object, as the server's dry-run
    answered; ``conflicts`` are (manager, field) pairs from the server's conflict.
    Sorted by field; empty when the object was absent (a re-creation)."""
    if live is None or after is None:
        return ()
    named = [(m, f) for m, f in conflicts if m]
    secret = live.get("kind") == "Secret" and live.get("apiVersion") == "v1"
    out: list[FieldRepair] = []
    for path in sorted(set(leaves) - _BOOKKEEPING):
        was, now = normalizations.value_at(live, path), normalizations.value_at(after, path)
        if was == now:
            continue
        hidden = secret and path[0] in ("data", "stringData")
        out.append(
            FieldRepair(
                field=field_text(path),
                manager=_manager(live, path, named),
                before=REDACTED if hidden and was is not None else _text(was),
                after=REDACTED if hidden and now is not None else _text(now),
            )
        )
    return tuple(out)


def managers(found: Iterable[FieldRepair]) -> tuple[str, ...]:
    """The distinct managers of some repairs, sorted (``""`` for fields whose changer is unknown)."""
    return tuple(sorted({r.manager for r in found}))


def live_freeze(live: dict[str, Any] | None) -> Freeze | None:
    """The freeze a person put on ``live`` (``ownership.DRIFT`` report|ignore), with who and when."""
    if live is None:
        return None
    mode = normalizations.annotation(live, ownership.DRIFT)
    if mode not in FREEZE_MODES:
        return None
    by, since = annotation_writer(live, ownership.DRIFT)
    return Freeze(mode=mode, by=by, since=since)


def live_freezes(live: Mapping[str, dict[str, Any]]) -> dict[str, Freeze]:
    """Every listed object a person froze, by key: one pass that reads only the annotations, so
    a run asks a dict, not each of its objects, whether it is frozen."""
    out: dict[str, Freeze] = {}
    for key, obj in live.items():
        annotations = (obj.get("metadata") or {}).get("annotations")
        if annotations and ownership.DRIFT in annotations:
            found = live_freeze(obj)
            if found is not None:
                out[key] = found
    return out


def annotation_writer(live: dict[str, Any], key: str) -> tuple[str, str]:
    """(manager, time) of the managedFields entry that owns annotation ``key`` ("" when none does)."""
    for entry in (live.get("metadata") or {}).get("managedFields") or ():
        fields = entry.get("fieldsV1") or {}
        annotations = (fields.get("f:metadata") or {}).get("f:annotations") or {}
        if f"f:{key}" in annotations:
            return str(entry.get("manager") or ""), str(entry.get("time") or "")
    return "", ""


def _manager(live: dict[str, Any], path: Path, conflicts: list[tuple[str, str]]) -> str:
    text = field_text(path)
    for manager, field in conflicts:
        if field == text or field.startswith((text + ".", text + "[")) or text.startswith(field + "."):
            return manager
    owners: set[str] = set()
    for entry in (live.get("metadata") or {}).get("managedFields") or ():
        manager = str(entry.get("manager") or "")
        if not manager or manager in ownership.FLEET_MANAGERS or entry.get("subresource"):
            continue
        owned = normalizations.owned_leaves({"metadata": {"managedFields": [entry]}}, managers={manager})
        if any(o[: len(path)] == path or path[: len(o)] == o for o in owned):
            owners.add(manager)
    return ",".join(sorted(owners))


def _text(value: Any) -> str:
    if value is None:
        return ABSENT
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


__all__ = [
    "ABSENT",
    "FREEZE_MODES",
    "MAX_VALUE",
    "REDACTED",
    "FieldRepair",
    "Freeze",
    "annotation_writer",
    "field_text",
    "live_freeze",
    "live_freezes",
    "managers",
    "repairs",
]
