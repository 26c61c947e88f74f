"""How fleet marks what it owns, and how an object can opt out of pruning.

Ownership is recorded twice, on purpose. Every object fleet applies carries the
label ``app.kubernetes.io/managed-by: fleet`` and the cluster label, so ``kubectl get
-l`` finds them; and the per-cluster ledger (``fleet.engine.ledgers``) lists
them, so pruning never relies on a label somebody else could copy onto their own
object. Pruning deletes only what is in the ledger *and* still labelled, and
never an object annotated ``fleet.gpufleet.dev/prune: disabled``.

fleet deletes only what it created. An object that already existed when fleet
first wanted it is someone else's: fleet takes it over only when the repository
says so (the annotation ``fleet.gpufleet.dev/adopt: "true"`` on the manifest, or a
Team's ``spec.adoptNamespaces``), and otherwise refuses, naming who manages it now
(``owners``). The ledger records which objects were created and which adopted;
pruning an adopted object releases it (fleet gives back its fields, labels and
annotations) and never deletes it.

The ``applied`` annotation is a hash of what fleet applied (see ``fingerprinted``). The
``source`` annotation says which file and line declared the object, the
``revision`` annotation the commit that last changed it (not the last commit seen:
re-stamping every object on every commit would rewrite the whole cluster each
time, so the diff ignores a revision-only change).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

DOMAIN = "fleet.gpufleet.dev"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "fleet"
POOL_MANAGER = "fleet-pools"
LEDGER_MANAGER = "fleet-ledger"
CLUSTER_LABEL = f"{DOMAIN}/cluster"
TEAM_LABEL = f"{DOMAIN}/team"
POOL_LABEL = f"{DOMAIN}/pool"
SOURCE = f"{DOMAIN}/source"
REVISION = f"{DOMAIN}/revision"
KEEP = f"{DOMAIN}/prune"
KEEP_VALUE = "disabled"
POOL_TAINTS = f"{DOMAIN}/pool-taints"
APPLIED = f"{DOMAIN}/applied"
ADOPT = f"{DOMAIN}/adopt"
ADOPT_VALUE = "true"
TAKE_OWNERSHIP = f"{DOMAIN}/take-ownership"
"""On a manifest, ``"true"``: fleet applies it with force, taking fields other managers set
(a person's ``kubectl edit``); without it such a field is a conflict reported with its manager."""
DRIFT = f"{DOMAIN}/drift"
"""``report`` or ``ignore``: on a live object, a person's freeze (fleet leaves the object alone until it
is removed; ``fleet.engine.drifts``); on a manifest, the object's drift policy (stripped before applying)."""
HELM_RELEASE = "meta.helm.sh/release-name"
HELM_RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
FLEET_MANAGERS = frozenset({MANAGER, POOL_MANAGER, LEDGER_MANAGER})


def stamp(obj: dict[str, Any], *, cluster: str, revision: str, source: str) -> dict[str, Any]:
    """``obj`` (changed in place) with fleet's ownership labels and source/revision annotations."""
    out = obj
    meta = out.setdefault("metadata", {})
    meta.setdefault("labels", {}).update({MANAGED_BY: MANAGER, CLUSTER_LABEL: cluster})
    annotations = meta.setdefault("annotations", {})
    annotations[SOURCE] = source
    if revision:
        annotations[REVISION] = revision
    return fingerprinted(out)


def with_revision(obj: dict[str, Any], revision: str) -> dict[str, Any]:
    """A copy of a stamped ``obj`` carrying ``revision`` (only the annotations are new: the hash
    leaves the revision out, so it stays valid), annotations in the order ``stamp`` writes them."""
    if not revision:
        return obj
    meta = obj["metadata"]
    annotations = {k: v for k, v in meta["annotations"].items() if k not in (REVISION, APPLIED)}
    annotations[REVISION] = revision
    annotations[APPLIED] = meta["annotations"][APPLIED]
    return {**obj, "metadata": {**meta, "annotations": annotations}}


def fingerprinted(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with the ``applied`` annotation: a hash of everything but that and the revision.

    The live copy keeps the hash of what fleet last applied. Together with the
    field ownership in managedFields it tells the diff, without a dry-run, that the
    live fields fleet owns are exactly what that apply produced (see normalizations).
    """
    annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
    annotations.pop(APPLIED, None)
    revision = annotations.pop(REVISION, None)
    digest = hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    if revision is not None:
        annotations[REVISION] = revision
    annotations[APPLIED] = digest[:20]
    return obj


def managed(live: dict[str, Any]) -> bool:
    """Whether a live object carries fleet's managed-by label."""
    labels = (live.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(MANAGED_BY) == MANAGER)


def kept(live: dict[str, Any]) -> bool:
    """Whether a live object asks never to be pruned."""
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(KEEP) == KEEP_VALUE)


def adoption_requested(obj: dict[str, Any]) -> bool:
    """Whether a manifest asks fleet to adopt the object if it already exists."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(ADOPT) == ADOPT_VALUE)


def drift_requested(obj: dict[str, Any]) -> str:
    """The drift policy a manifest's ``DRIFT`` annotation asks for ("" when it has none)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(DRIFT) or "")


def ownership_requested(obj: dict[str, Any]) -> bool:
    """Whether a manifest asks fleet to take fields other field managers own (``TAKE_OWNERSHIP``)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(TAKE_OWNERSHIP) == ADOPT_VALUE)


def owners(live: dict[str, Any]) -> list[str]:
    """Who manages ``live`` now, other than fleet, as a person would name them.

    Field managers from managedFields (the most telling evidence: who wrote which
    fields), then another tool's ``app.kubernetes.io/managed-by`` label and a Helm
    release annotation. Empty when only fleet (or nobody recorded) manages it.
    """
    meta = live.get("metadata") or {}
    found: dict[str, None] = {}
    for entry in meta.get("managedFields") or ():
        manager = str(entry.get("manager") or "")
        if manager and manager not in FLEET_MANAGERS:
            found.setdefault(f'field manager "{manager}"', None)
    label = ((meta.get("labels") or {}).get(MANAGED_BY)) or ""
    if label and label != MANAGER:
        found.setdefault(f"{MANAGED_BY}={label}", None)
    annotations = meta.get("annotations") or {}
    release = annotations.get(HELM_RELEASE)
    if release:
        where = annotations.get(HELM_RELEASE_NAMESPACE)
        found.setdefault(f"Helm release {where + '/' if where else ''}{release}", None)
    return list(found)


def release_patch(live: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that gives an adopted object back: fleet's marks removed, its field ownership dropped.

    An empty server-side apply would give fields back by *deleting* the values only
    fleet owned, and adopting took fields over (often a whole atomic list, like a
    template's requests): the object would lose content, or the API would refuse an
    immutable change. So fleet removes its labels and annotations and its own
    managedFields entries; the values stay, owned by whoever else owns them. The
    live ``resourceVersion`` makes it a precondition: a stale read fails with 409.
    """
    meta = live.get("metadata") or {}
    labels = {k: None for k, v in (meta.get("labels") or {}).items() if _fleets(k, v)}
    annotations = {k: None for k, v in (meta.get("annotations") or {}).items() if _fleets(k, v)}
    fields = [e for e in meta.get("managedFields") or () if e.get("manager") != MANAGER]
    patch: dict[str, Any] = {"resourceVersion": meta.get("resourceVersion"), "managedFields": fields or [{}]}
    if labels:
        patch["labels"] = labels
    if annotations:
        patch["annotations"] = annotations
    return {"metadata": patch}


def _fleets(key: str, value: object) -> bool:
    """A label or annotation fleet set (a person's freeze, ``DRIFT``, is theirs: never given back)."""
    return (key.startswith(f"{DOMAIN}/") and key != DRIFT) or (key == MANAGED_BY and value == MANAGER)


def marked_for(live: dict[str, Any], *, cluster: str) -> bool:
    """Whether ``live`` carries fleet's labels for ``cluster`` (fleet's own, its ledger line lost)."""
    labels = (live.get("metadata") or {}).get("labels") or {}
    return managed(live) and labels.get(CLUSTER_LABEL) == cluster


__all__ = [
    "ADOPT",
    "ADOPT_VALUE",
    "APPLIED",
    "CLUSTER_LABEL",
    "DOMAIN",
    "DRIFT",
    "FLEET_MANAGERS",
    "HELM_RELEASE",
    "HELM_RELEASE_NAMESPACE",
    "KEEP",
    "KEEP_VALUE",
    "LEDGER_MANAGER",
    "MANAGED_BY",
    "MANAGER",
    "POOL_LABEL",
    "POOL_MANAGER",
    "POOL_TAINTS",
    "REVISION",
    "SOURCE",
    "TAKE_OWNERSHIP",
    "TEAM_LABEL",
    "adoption_requested",
    "drift_requested",
    "fingerprinted",
    "kept",
    "managed",
    "marked_for",
    "owners",
    "release_patch",
    "stamp",
    "with_revision",
]
