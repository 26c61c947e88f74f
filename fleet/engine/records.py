"""Recording a run in the cluster's ledger: progress while a run writes, the whole record at its end.

The ledger (``fleet.engine.ledgers``) is how a later run, in this process or another,
knows what fleet applied (what it may prune) and where a killed run stopped. Progress is
saved before a stage's first write (the objects it is about to create become fleet's) and
after its gate passes; ``record`` ends a run with every declared object and the revision
marked complete. Both are shielded: an interrupt never leaves the record half-written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from fleet.engine import drains, ledgers, stages

if TYPE_CHECKING:
    from fleet.engine.applies import Sync


async def record(sync: Sync) -> None:
    """The record step: the declared objects, and what was not pruned, as the ledger; the run complete."""
    if sync.options.dry_run:
        return
    ledger = sync.ledger
    declared = [*sync.plan.objects, *sync.desired(stages.by_name("pools"))]
    kept: dict[str, ledgers.Entry] = {}
    for d in declared:
        entry = ledger.entries.get(d.ref.key)
        if entry is None or entry.api_version != d.ref.api_version:
            entry = ledgers.Entry(d.ref.api_version, sync.origin(d.ref.key))
        kept[d.ref.key] = entry
    for key, entry in ledger.entries.items():
        kept.setdefault(key, entry)  # not pruned (prune off, kept, failed): still ours to prune later
    ledger.entries = kept
    before = ledger.progress
    drained = before.drained
    if drained:
        # Every stage's gate passed: the changes applied are healthy, their drained nodes go back.
        with anyio.CancelScope(shield=True):
            drained = await drains.uncordon(
                sync.client, drained=drained, keep=sync.drains.kept if sync.drains is not None else set()
            )
    ledger.progress = ledgers.Progress(
        revision=sync.plan.revision,
        done=[s.name for s in stages.STAGES],
        complete=True,
        waiting=dict(sync.waiting_since),
        drained=drained,
    )
    if not ledger.exists and not ledger.entries:
        return
    # A new revision with nothing to do changes only the progress record: keep the old one
    # rather than write for nothing.
    progress = (
        ledger.index is None
        or sync.resumed
        or bool(sync.changes.changed)
        or (before.waiting, before.drained) != (ledger.progress.waiting, ledger.progress.drained)
        or (sync.drains is not None and sync.drains.cordoned > 0)  # saved as incomplete when it cordoned
    )
    with anyio.CancelScope(shield=True):
        await ledgers.save(client=sync.client, ledger=ledger, progress=progress)


async def save_progress(sync: Sync) -> None:
    """Save the ledger with this revision's progress so far (the run not complete)."""
    sync.ledger.progress.revision = sync.plan.revision
    sync.ledger.progress.complete = False
    with anyio.CancelScope(shield=True):
        await ledgers.save(client=sync.client, ledger=sync.ledger, progress=True)


__all__ = ["record", "save_progress"]
