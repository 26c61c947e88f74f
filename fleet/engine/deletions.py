"""What pruning would delete: ledger entries the revision no longer declares.

fleet deletes only what it created. An entry of the Ledger that the plan no longer
declares comes out as a deletion only while its live object still carries fleet's
label and is not annotated to be kept; otherwise it is skipped, with the reason,
so a reviewer sees why fleet leaves it alone. Pool Nodes are never deleted: their
"deletion" gives back the labels and taints fleet-pools set. Pure: the live
objects are those already listed for the diff.
"""

from __future__ import annotations

from fleet.engine import normalizations, ownership
from fleet.engine.changesets import Action, Change
from fleet.engine.listings import LiveIndex
from fleet.kube import Ref


def planned(
    *, ledger: dict[str, str], desired_keys: set[str], live: LiveIndex, stage_of: dict[str, str]
) -> list[Change]:
    """Ledger entries (key → apiVersion) no longer desired: deleted, or skipped with the reason."""
    out: list[Change] = []
    for key, api_version in sorted(ledger.items()):
        if key in desired_keys:
            continue
        ref = Ref.from_key(key, version=api_version.rpartition("/")[2])
        current = live.get(key)
        stage = stage_of.get(ref.kind, "")
        if current is None:
            continue  # already gone: only the ledger remains
        if ref.kind == "Node":
            out.append(
                Change(
                    ref=ref,
                    stage=stage,
                    action=Action.DELETED,
                    before=normalizations.normalise(current),
                    reason="pool labels and taints released (the Node stays)",
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


__all__ = ["planned"]
