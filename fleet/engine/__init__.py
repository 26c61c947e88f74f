"""The reconcile engine: plan, diff, apply (staged, health-gated, resumable), prune.

Cut like gitops-engine and Flux's ssa package, one concept per module:

- ``plans``          the desired objects (``Plan``) as data, without the repository's models
- ``renders``        pure: a resolved ClusterView → its ``Plan``
- ``plancaches``     plans kept on disk between processes, keyed by code, files, cluster and revision
- ``stages``         the stage table (kinds, health gate, prune order)
- ``ownership``      labels/annotations that mark what fleet owns and what to keep
- ``normalizations`` pure: comparable objects, and when no dry-run is needed
- ``listings``       live objects, one paginated list per kind (started while the repository loads)
- ``diffs``          server-side-apply dry-run diff against the listed live objects
- ``deletions``      what pruning would delete (ledger entries no longer declared), or why not
- ``previews``       a Change as a unified YAML diff
- ``healths``        the gates between stages
- ``ledgers``        what fleet applied, recorded in the cluster (the Ledger), created or adopted
- ``adoptions``      pure: existing objects fleet may not take over, pools overlapping on a live Node
- ``impersonations`` as whom a team's objects are written, and what the API server refuses the team
- ``blockers``       what forbids a deletion: claims in use, what others put in a namespace
- ``pipelines``      checkout → validate → plan, and connecting: shared by the CLI and the controller
- ``applies``        ``Sync``: the step-wise run's state, and the apply of one stage
- ``writes``         sending one object: apply, replace, a pool's Node from a fresh read
- ``prunes``         deleting what is no longer declared, behind one guard the preview shares
- ``records``        saving the ledger: progress while writing, the whole record at the end
- ``holds``          pure: what a drift policy or a freeze makes of a diffed Change
- ``drives``         the one driver of a ``Sync`` (CLI, controller, tests), with hooks
- ``memories``       what a reconciling process keeps between runs, bounded, with its sizes
- ``drivers``        the GPU nodes' driver-upgrade states, carried on the operator release's Change
- ``nodes``          pool metadata written to a Node from a fresh read, resourceVersion-conditional
- ``writers``        one writer per cluster: the Lease a writer holds while it writes
- ``changesets``     the result of every run

    plan = renders.plan(view, revision=sha)
    async with writers.lock(client=client, cluster=plan.cluster):
        changes = await reconcile(client=client, plan=plan, options=Options(prune=True))
"""

from __future__ import annotations

from fleet.engine.applies import Options, Sync
from fleet.engine.changesets import Action, Change, ChangeSet, FieldConflict
from fleet.engine.drives import Hooks, Outcome, drive
from fleet.engine.healths import HealthTimeout
from fleet.engine.listings import Prefetched
from fleet.engine.memories import Memory
from fleet.engine.plans import ChangeRules, Desired, Plan, PoolRule
from fleet.engine.stages import STAGES, Gate, Stage
from fleet.kube import Client


async def reconcile(
    *,
    client: Client,
    plan: Plan,
    options: Options,
    prefetched: Prefetched | None = None,
    memory: Memory | None = None,
    hooks: Hooks | None = None,
) -> ChangeSet:
    """Run a whole Sync through the driver and return its ChangeSet; the error that stopped it is raised.

    A process that reconciles again and again passes the live objects its watches keep
    (``prefetched``) and one ``Memory`` for all its runs: a no-op then lists nothing but
    the ledger, re-derives nothing and starts no helm process (docs/engine.md, "No-op fast")."""
    sync = Sync(client=client, plan=plan, options=options, prefetched=prefetched, memory=memory)
    return (await drive(sync, hooks=hooks)).raise_error()


async def diff(
    *, client: Client, plan: Plan, options: Options | None = None, prefetched: Prefetched | None = None
) -> ChangeSet:
    """What ``reconcile`` would do, without writing: every stage dry-run, deletions included."""
    dry = (options or Options()).previewed()
    return (await drive(Sync(client=client, plan=plan, options=dry, prefetched=prefetched))).raise_error()


__all__ = [
    "STAGES",
    "Action",
    "Change",
    "ChangeRules",
    "ChangeSet",
    "Desired",
    "FieldConflict",
    "Gate",
    "HealthTimeout",
    "Hooks",
    "Memory",
    "Options",
    "Outcome",
    "Plan",
    "PoolRule",
    "Prefetched",
    "Stage",
    "Sync",
    "diff",
    "drive",
    "reconcile",
]
