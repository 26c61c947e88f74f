"""The reconcile engine: plan, diff, apply (staged, health-gated, resumable), prune.

Cut like gitops-engine and Flux's ssa package, one concept per module. Every step of a run
proposes, decides, then executes (docs/engine.md, "proposal → decide → execute → verify"):
``fleetctl diff`` is the same run without the execution.

The plan:

- ``plans``          the desired objects (``Plan``) as data, without the repository's models
- ``renders``        pure: a resolved ClusterView → its ``Plan``
- ``pipelines``      checkout → validate → plan, and connecting: shared by the CLI and the controller
- ``increments``     a commit's validation and plan, made from the last one's
- ``plancaches``     plans kept on disk between processes, keyed by code, files, cluster and revision
- ``stages``         the stage table (kinds, health gate, prune order)
- ``ownership``      labels/annotations that mark what fleet owns and what to keep
- ``preflights``     the DRA guide's prerequisite checks against a live cluster
- ``probes``         the feature gates a live cluster keeps, seen rather than declared

The run (``Sync``) and its steps:

- ``options``        ``Options``: every option a front door sets (the drift policy included)
- ``applies``        ``Sync``: the step-wise run (start, one step at a time)
- ``syncstate``      the run's state, one small dataclass per concern, and ``Run`` for the step modules
- ``objectsteps``    an object stage: propose, decide, execute, verify
- ``operatorsteps``  the operator stage: the release (or its uninstall) decided as every change is
- ``maintenancesteps`` the maintenance stage's rules, expanded once per run from the live devices
- ``endsteps``       the prune and record steps
- ``drives``         the one driver of a ``Sync`` (CLI, controller, tests), with hooks
- ``memories``       what a reconciling process keeps between runs, bounded, with its sizes
- ``writers``        one writer per cluster: the Lease a writer holds while it writes

Proposing (what a step finds):

- ``listings``       live objects, one paginated list per kind (started while the repository loads)
- ``normalizations`` pure: comparable objects, and when no dry-run is needed
- ``diffs``          server-side-apply dry-run diff against the listed live objects
- ``deletions``      what pruning would delete (ledger entries no longer declared), or why not
- ``adoptions``      pure: existing objects fleet may not take over, pools overlapping on a live Node
- ``blockers``       what forbids a deletion: claims in use, what others put in a namespace
- ``holds``          pure: what a drift policy or a freeze makes of a diffed Change
- ``drifts``         freezes on live objects, and what a drift repair puts back
- ``disruptions``    pure: which changes disrupt GPU work (claims, nodes, slices), and the reads it needs
- ``waits``          pure: what holds a disruptive change back (waves, windows, running jobs)
- ``maintenances``   pure: GPUMaintenances → DeviceTaintRules, each at its staged effect
- ``evictions``      pure: what a maintenance's step disrupts, from the rule's status and the claims
- ``drivers``        the GPU nodes' driver-upgrade states, carried on the operator release's Change
- ``operators``      the GPU Operator's Helm release: observe, guards, CRDs, upgrade, removal

Deciding:

- ``impersonations`` the one identity rule: as whom a team's objects are dry-run, written and deleted
- ``proposals``      pure: a step's proposal → one ``Decision`` per change, the same for diff and apply
- ``decisions``      ``Decision``: verdict, verb, as whom, force, wait, what the gates verify

Executing (only ``write`` decisions) and verifying:

- ``writes``         sending one object: apply, replace, a pool's Node from a fresh read
- ``nodes``          pool metadata written to a Node from a fresh read, resourceVersion-conditional
- ``prunes``         deleting what is no longer declared, behind one guard the proposal asks
- ``drains``         cordon, evict, uncordon: proposed, decided and executed as changes
- ``workers``        bounded concurrency without a task per item
- ``healths``        the gates between stages
- ``records``        saving the ledger: progress while writing, the whole record at the end
- ``ledgers``        what fleet applied, recorded in the cluster (the Ledger), created or adopted
- ``changesets``     the result of every run
- ``previews``       a Change as a unified YAML diff

And ``imports``: ``fleetctl import``, a cluster set up by hand turned into a fleet repository.

    plan = renders.plan(view, revision=sha)
    async with writers.lock(client=client, cluster=plan.cluster):
        changes = await reconcile(client=client, plan=plan, options=Options(prune=True))
"""

from __future__ import annotations

from fleet.engine.applies import Sync
from fleet.engine.changesets import Action, Change, ChangeSet, FieldConflict
from fleet.engine.drives import Hooks, Outcome, drive
from fleet.engine.healths import HealthTimeout
from fleet.engine.listings import Prefetched
from fleet.engine.memories import Memory
from fleet.engine.options import Options
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
