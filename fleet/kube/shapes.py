"""Identical parts of live objects, kept once: what lets 10,000 or 100,000 listed or watched objects fit in less.

Objects fleet applies from one template differ in their names, uids and a few
annotations; their field-ownership records (``managedFields[].fieldsV1``, a tree of
small dicts), their labels and usually their ``spec`` are equal. Decoded from JSON,
each object has its own copy of them. ``Shapes.share(obj)`` replaces each of those
parts by an equal one it has seen before (recognised by the hash of its JSON as orjson
writes it, and then compared, so a hash collision only costs the sharing). orjson, because
the key is made three times per object, and orjson is the cheapest of it, ``repr`` and
``json.dumps``.

Sharing pays most where objects are alike (``bench/run controller``'s synthetic fleet: one
template shape in 50 teams). Read-only kinds (ResourceSlices) are not
shared: each slice's spec is its own, and replaced ones would only fill the table.

The controller's watch cache shares what it holds (``fleet.controller.caches``), and the
engine's live listing what it lists (``fleet.engine.listings``): at 100,000 listed
templates the decoded listing is the largest part of a run's memory. Sharing is safe
because live objects are never changed in place: every reader copies before it changes
anything. The table is cleared when it reaches ``limit`` entries, so shapes that are gone
do not accumulate over months; objects keep what they already share.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import orjson


class Shapes:
    """Equal subtrees of watched objects, by the hash of their JSON."""

    def __init__(self, *, limit: int = 20_000) -> None:
        self.limit = limit
        self.table: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self.table)

    def renew(self, objects: Iterable[dict[str, Any]]) -> None:
        """Forget every shape, then learn the ones ``objects`` hold: the table keeps what is live.

        Shapes of objects that changed or went stay in the table until it is renewed (a commit
        that relabels a template leaves its old labels behind); the controller renews it once per
        resync from what its watch cache holds, so its size follows the cluster, not the churn."""
        self.table = {}
        for obj in objects:
            self.share(obj)

    def share(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj``, changed in place: its ``spec``, labels and managedFields' field sets are the shared copies."""
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            for entry in meta.get("managedFields") or ():
                if isinstance(entry, dict) and isinstance(entry.get("fieldsV1"), dict):
                    entry["fieldsV1"] = self._one(entry["fieldsV1"])
            if isinstance(meta.get("labels"), dict):
                meta["labels"] = self._one(meta["labels"])
        if isinstance(obj.get("spec"), dict):
            obj["spec"] = self._one(obj["spec"])
        return obj

    def _one(self, value: dict[str, Any]) -> dict[str, Any]:
        try:
            key = hash(orjson.dumps(value))
        except orjson.JSONEncodeError:  # an integer beyond 64 bits: rare, and still shareable
            key = hash(repr(value))
        found = self.table.get(key)
        if found is not None and found == value:
            return found  # type: ignore[no-any-return]
        if found is None:
            if len(self.table) >= self.limit:
                self.table.clear()
            self.table[key] = value
        return value


def intern_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj``, changed in place: the strings of its metadata that repeat from object to object are
    one string each (``sys.intern``): apiVersion and kind, namespace, creation time, annotation values
    of up to 64 characters (the revision, the team) and every managedFields entry's manager,
    operation, apiVersion and time. These repeat from object to object in what a process keeps (the controller's
    watch cache), after ``Shapes`` shared their parts; names, uids and
    resourceVersions, which do not repeat, are left alone."""
    intern = sys.intern
    for key in ("apiVersion", "kind"):
        value = obj.get(key)
        if type(value) is str:
            obj[key] = intern(value)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    for key in ("namespace", "creationTimestamp"):
        value = meta.get(key)
        if type(value) is str:
            meta[key] = intern(value)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for key, value in annotations.items():
            if type(value) is str and len(value) <= 64:
                annotations[key] = intern(value)
    for entry in meta.get("managedFields") or ():
        if isinstance(entry, dict):
            for key, value in entry.items():
                if type(value) is str:
                    entry[key] = intern(value)
    return obj


__all__ = ["Shapes", "intern_metadata"]
