"""What pruning would delete: ledger entries the revision no longer declares.

fleet deletes only what it created. An entry of the Ledger that the plan no longer
declares comes out as a deletion only while its live object still carries fleet's
label and is not annotated to be kept; otherwise it is skipped, with the reason,
so a reviewer sees why fleet leaves it alone; so is one a person froze
(``fleet.engine.drifts``). An entry fleet adopted rather than
created, and a pool Node, comes out as a release: fleet gives back what it set
(labels, annotations, fields), the object stays. Pure: the live objects are those
already listed for the diff.
"""

from __future__ import annotations

from typing import Any

from fleet.engine import drifts, ledgers, normalizations, ownership
from fleet.engine.changesets import Action, Change
from fleet.engine.listings import LiveIndex
from fleet.kube import Ref


def planned(
    *, ledger: dict[str, ledgers.Entry], desired_keys: set[str], live: LiveIndex, stage_of: dict[str, str]
) -> list[Change]:
    """Ledger entries no longer desired: deleted, released (adopted, or a pool Node), or skipped with the reason."""
    out: list[Change] = []
    for key, entry in sorted(ledger.items()):
        if key in desired_keys:
            continue
        ref = Ref.from_key(key, version=entry.api_version.rpartition("/")[2])
        current = live.get(key)
        stage = stage_of.get(ref.kind, "")
        if current is None:
            continue  # already gone: only the ledger remains
        freeze = drifts.live_freeze(current)
        if freeze is not None:
            out.append(Change(ref=ref, stage=stage, action=Action.SKIPPED, reason=f"{freeze.describe()}: not pruned"))
            continue
        if ref.kind == "Node" or (entry.adopted and not ownership.kept(current)):
            what = "pool labels and taints" if ref.kind == "Node" else "adopted: fleet's labels, annotations and fields"
            out.append(
                Change(
                    ref=ref,
                    stage=stage,
                    action=Action.DELETED,
                    release=True,
                    before=normalizations.normalise(current),
                    after=None if ref.kind == "Node" else normalizations.normalise(_released(current)),
                    reason=f"{what} released (the {ref.kind} stays)",
                )
            )
        elif ownership.kept(current):
            out.append(
                Change(
                    ref=ref,
                    stage=stage,
                    action=Action.SKIPPED,
                    reason=f"annotated {ownership.KEEP}={ownership.KEEP_VALUE}",
                )
            )
        elif not ownership.managed(current):
            out.append(
                Change(
                    ref=ref,
                    stage=stage,
                    action=Action.SKIPPED,
                    reason=f"no longer labelled {ownership.MANAGED_BY}={ownership.MANAGER}",
                )
            )
        else:
            out.append(Change(ref=ref, stage=stage, action=Action.DELETED, before=normalizations.normalise(current)))
    return out


def _released(live: dict[str, Any]) -> dict[str, Any]:
    """``live`` as a release leaves it, near enough for a preview: without fleet's labels and annotations."""
    meta = dict(live.get("metadata") or {})
    for name in ("labels", "annotations"):
        kept = {
            k: v
            for k, v in (meta.get(name) or {}).items()
            if not k.startswith(ownership.DOMAIN + "/") or k == ownership.DRIFT
        }
        if name == "labels" and kept.get(ownership.MANAGED_BY) == ownership.MANAGER:
            del kept[ownership.MANAGED_BY]
        meta[name] = kept
    return {**live, "metadata": meta}


__all__ = ["planned"]
