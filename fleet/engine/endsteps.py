"""A run's last two steps, for ``applies.Sync``: prune, then record.

``prune`` proposes what the ledger holds and the revision no longer declares (skipped without
``--prune``, refused where ``prunes.Pruner.blocked`` says so), classes, holds and drains it as
any disruptive change, decides each deletion (``proposals.decide_deletion``: as the team whose
folder declared it) and, in an apply, deletes what was decided ``write``. ``record`` gives back
the nodes drained for changes that no longer wait (decided ``uncordon`` entries) and writes the
ledger (``records``).
"""

from __future__ import annotations

from fleet.engine import drains, maintenancesteps, proposals, prunes, records, stages
from fleet.engine.syncstate import Kinds, Run


async def prune(sync: Run) -> None:
    """The prune step: what the ledger holds and the revision no longer declares is proposed (skipped
    without ``--prune``, refused where the guard says so), classed, held and decided, then deleted."""
    desired_keys = {d.ref.key for d in sync.plan.objects}
    desired_keys |= {d.ref.key for d in sync.desired(stages.by_name("pools"))}
    desired_keys |= {d.ref.key for d in await maintenancesteps.desired(sync)}
    found = prunes.leftovers(ledger=sync.found.ledger, desired_keys=desired_keys, live=sync.found.live)
    pruner = prunes.Pruner(
        client=sync.client,
        ledger=sync.found.ledger,
        live=sync.found.live,
        namespaced=Kinds(sync.client),
        concurrency=sync.options.concurrency,
        sent=sync.meter.sent,
    )
    found = await pruner.propose(found, prune=sync.options.prune)
    # A disruptive deletion waits as a disruptive write does, and drains as one.
    found = [sync.wait(c) for c in await sync.classify(found)]
    live, identities = sync.found.live, sync.found.identities
    found = [proposals.decide_deletion(c, live=live.get(c.ref.key), identities=identities) for c in found]
    sync.changes.entries.extend(found)
    await sync.drain(found)
    if sync.options.dry_run:
        return
    sync.meter.start("prune", sum(c.verdict == "write" for c in found))
    sync.changes.settle(await pruner.prune(found))


async def record(sync: Run) -> None:
    """The record step: the nodes drained for changes that no longer wait go back (decided ``uncordon``
    entries), then the ledger records the run complete."""
    managed, ledger = sync.managed, sync.found.ledger
    keep = managed.drains.kept if managed.drains is not None else set()
    given_back = drains.uncordons(drained=ledger.progress.drained, keep=keep)
    sync.changes.entries.extend(given_back)
    if sync.options.dry_run:
        return
    given = await records.record(
        client=sync.client,
        ledger=ledger,
        revision=sync.plan.revision,
        declared=[*sync.plan.objects, *sync.desired(stages.by_name("pools")), *await maintenancesteps.desired(sync)],
        origin=sync.origin,
        changed=bool(sync.changes.changed),
        resumed=sync.found.resumed,
        waiting=managed.waiting_since,
        uncordon=given_back,
        cordoned=managed.drains.cordoned if managed.drains is not None else 0,
    )
    sync.changes.settle(zip(given_back, given, strict=True))


__all__ = ["prune", "record"]
