"""How fleet marks what it owns, and how an object can opt out of pruning.

Ownership is recorded twice, on purpose. Every object fleet applies carries the
label ``app.kubernetes.io/managed-by: fleet`` and the cluster label, so ``kubectl get
-l`` finds them; and the per-cluster ledger (``fleet.engine.ledgers``) lists
them, so pruning never relies on a label somebody else could copy onto their own
object. Pruning deletes only what is in the ledger *and* still labelled, and
never an object annotated ``fleet.gpufleet.dev/prune: disabled``.

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


__all__ = [
    "APPLIED",
    "CLUSTER_LABEL",
    "DOMAIN",
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
    "TEAM_LABEL",
    "fingerprinted",
    "kept",
    "managed",
    "stamp",
]
