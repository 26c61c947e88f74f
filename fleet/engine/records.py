"""Recording a run in the cluster's ledger: progress while a run writes, the whole record at its end.

The ledger (``fleet.engine.ledgers``) is how a later run, in this process or another,
knows what fleet applied (what it may prune) and where a killed run stopped. Progress is
saved before a stage's first write (the objects it is about to create become fleet's) and
after its gate passes; ``record`` ends a run with every declared object and the revision
marked complete. Both are shielded: an interrupt never leaves the record half-written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import anyio

from fleet.engine import drains, ledgers, plans, stages
from fleet.engine.changesets import Change
from fleet.kube import Client


async def record(
    *,
    client: Client,
    ledger: ledgers.Ledger,
    revision: str,
    declared: Iterable[plans.Desired],
    origin: Callable[[str], ledgers.Origin],
    changed: bool,
    resumed: bool,
    waiting: Mapping[str, str],
    uncordon: Sequence[Change] = (),
    cordoned: int = 0,
) -> list[Change]:
    """The record step: the ``declared`` objects, and what was not pruned, as the ledger; the run complete.

    ``origin`` says how fleet came to hold a newly recorded key; ``changed`` whether the run wrote
    anything; ``waiting`` the held changes' start times; ``uncordon`` the decided entries that give
    drained nodes back (``drains.uncordons``: the others stay cordoned); ``cordoned`` how many nodes
    this run cordoned. Returns the uncordons' results."""
    kept: dict[str, ledgers.Entry] = {}
    for d in declared:
        entry = ledger.entries.get(d.ref.key)
        if entry is None or entry.api_version != d.ref.api_version:
            entry = ledgers.Entry(d.ref.api_version, origin(d.ref.key))
        kept[d.ref.key] = entry
    for key, entry in ledger.entries.items():
        kept.setdefault(key, entry)  # not pruned (prune off, kept, failed): still ours to prune later
    ledger.entries = kept
    before = ledger.progress
    drained = before.drained
    given: list[Change] = []
    if uncordon:
        # Every stage's gate passed: the changes applied are healthy, their drained nodes go back.
        with anyio.CancelScope(shield=True):
            drained, given = await drains.uncordon(client, drained=drained, entries=uncordon)
    ledger.progress = ledgers.Progress(
        revision=revision,
        done=[s.name for s in stages.STAGES],
        complete=True,
        waiting=dict(waiting),
        drained=drained,
    )
    if not ledger.exists and not ledger.entries:
        return given
    # A new revision with nothing to do changes only the progress record: keep the old one
    # rather than write for nothing.
    progress = (
        ledger.index is None
        or resumed
        or changed
        or (before.waiting, before.drained) != (ledger.progress.waiting, ledger.progress.drained)
        or cordoned > 0  # saved as incomplete when it cordoned
    )
    with anyio.CancelScope(shield=True):
        await ledgers.save(client=client, ledger=ledger, progress=progress)
    return given


async def save_progress(*, client: Client, ledger: ledgers.Ledger, revision: str) -> None:
    """Save the ledger with ``revision``'s progress so far (the run not complete)."""
    ledger.progress.revision = revision
    ledger.progress.complete = False
    with anyio.CancelScope(shield=True):
        await ledgers.save(client=client, ledger=ledger, progress=True)


__all__ = ["record", "save_progress"]
