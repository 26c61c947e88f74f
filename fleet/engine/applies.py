"""Applying a Plan: stage by stage, only what drifted, health-gated, resumable, pruned last.

``Sync`` is a step-wise state machine in the manner of gitops-engine's
``SyncContext``: ``start`` reads the ledger and the live cluster once, then every
``step`` does exactly one thing (one stage, then prune, then record) and returns,
so a caller can observe, trace or stop between steps. One driver runs the steps for
every caller (``fleet.engine.drives``). Progress is recorded in the cluster's ledger
(``ledgers.Progress``) as soon as a step writes; a run killed at any point and started
again for the same revision skips the stages already done, and re-diffs the rest
(objects applied before the kill are now unchanged, so they are not written again).

The verbs live one per module, as in Flux's ssa package: this module holds the run's
state and the apply of one stage (diff, then write what differs, then the stage's
health gate); ``writes`` sends one object (apply, replace, a Node from a fresh read);
``prunes`` deletes what is no longer declared; ``records`` saves the ledger.

Within a stage, objects are diffed (``diffs.diff_objects``) and only created or
configured ones are applied, with bounded concurrency. A no-op run therefore makes
no write request at all, not even to the ledger. A failed object stops the run
after its stage: later stages depend on earlier ones. A field conflict on an object
that exists fails its entry (naming the other field manager) but does not stop the
run: the object is there for what depends on it. When a request fails because of
the server rather than the object (no answer, 5xx or 429 after every retry of the
client), the objects of the stage not yet sent are skipped: each would spend the
client's whole retry budget on a server that is down, and the caller retries the
run with its own backoff.

Every step proposes, decides, then executes: what the step found (``proposals``: the
diff, holds, refusals, classing, waits, identities) becomes one ``Decision`` per change, and
the executors (``writes``, ``prunes``, the operator's helm, ``drains``) take only decisions.
``fleetctl diff`` is the same run that stops before executing (``Options.dry_run``), so what
it shows is what the apply does.

Before anything is written, ``start`` refuses the whole run when the plan wants an
object that exists but is not fleet's and may not be adopted, or when two pools
select the same live Node (``adoptions``): a refused apply writes nothing, and
``diff`` lists the conflicts with the rest of the preview. An empty plan is refused
unless allowed.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleet.engine import (
    adoptions,
    disruptions,
    drains,
    drifts,
    endsteps,
    healths,
    impersonations,
    ledgers,
    listings,
    maintenancesteps,
    memories,
    normalizations,
    objectsteps,
    operators,
    operatorsteps,
    ownership,
    plans,
    proposals,
    records,
    stages,
    waits,
)
from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.engine.options import Options
from fleet.engine.syncstate import Found, Managed, Meter
from fleet.errors import FleetError
from fleet.kube import Client, KubeError, Ref
from fleet.telemetry import tracing


@dataclass
class Sync:
    client: Client
    plan: plans.Plan
    options: Options = field(default_factory=Options)
    prefetched: listings.Prefetched | None = None
    """Live objects listed while the plan was being computed (``listings.prefetch``), if any."""
    memory: memories.Memory | None = None
    """What earlier runs of this process left (the controller keeps one): a no-op re-derives nothing
    and starts no helm. The driver sweeps it after the run."""
    reader: healths.Reader | None = None
    """Where health gates read live objects (default: the client, by listing; the controller: its watch cache)."""
    progress: Callable[[str, int, int], None] | None = None
    """Told ``(step, objects written, objects to write)`` as a step writes: for progress bars."""
    changes: ChangeSet = field(init=False)
    steps: list[str] = field(init=False, default_factory=list)
    stopped: bool = field(init=False, default=False)
    unavailable: KubeError | None = field(init=False, default=None)
    """The first failure of the API server itself (no answer, 5xx, 429) that ended a stage, if any:
    the later stages send nothing either."""
    found: Found = field(init=False)
    """What ``start`` read and settled for the run (``syncstate.Found``)."""
    managed: Managed = field(init=False, default_factory=Managed)
    operator: operators.Stage | None = field(init=False, default=None)
    """The operator stage, prepared (chart fetched and rendered) before the first write."""
    meter: Meter = field(init=False)

    def __post_init__(self) -> None:
        self.changes = ChangeSet(cluster=self.plan.cluster, revision=self.plan.revision)
        self.found = Found(ledger=ledgers.Ledger(cluster=self.plan.cluster))
        self.meter = Meter(self.progress)

    @property
    def ledger(self) -> ledgers.Ledger:
        return self.found.ledger

    @property
    def live(self) -> listings.LiveIndex:
        return self.found.live

    async def start(self) -> None:
        """Read the ledger and the live objects; refuse an empty plan unless allowed."""
        if self.plan.empty and not (self.options.allow_empty or self.plan.allow_empty):
            raise FleetError(
                "the revision declares no object for this cluster; applying it would prune everything",
                where=f"cluster {self.plan.cluster}",
                hint="pass --allow-empty (or set spec.allowEmpty: true in fleet.yaml) if that is really intended",
            )
        found = self.found
        with tracing.tracer().start_as_current_span("read ledger") as span:
            found.ledger = await ledgers.load(client=self.client, cluster=self.plan.cluster)
            progress = found.ledger.progress
            found.resumed = not progress.complete
            if progress.revision == self.plan.revision and not progress.complete:
                found.skip = set(progress.done)
            else:
                progress.done = []  # stages done for another revision say nothing about this one
            # Where this run picks up: a killed run left ``complete: false`` and the stages it finished.
            span.set_attributes(
                {
                    tracing.REVISION: self.plan.revision,
                    "fleet.ledger.entries": len(found.ledger.entries),
                    "fleet.resumed": found.resumed,
                    "fleet.resumed.revision": progress.revision,
                    "fleet.resumed.done": sorted(found.skip),
                    "fleet.emergency": self.options.emergency,
                }
            )
        kinds = {(d.ref.api_version, d.ref.kind) for d in self.plan.objects}
        kinds |= {(e.api_version, k.split("/", 2)[1]) for k, e in found.ledger.entries.items()}
        if self.plan.pools:
            kinds.add(("v1", "Node"))
        kinds |= {(m.api_version, maintenancesteps.KIND) for m in self.plan.maintenances if m.api_version}
        with tracing.tracer().start_as_current_span("read live"):
            done = self.prefetched.kinds if self.prefetched else set()
            found.live = await listings.live_index(client=self.client, kinds=kinds - done)
            if self.prefetched:
                found.live.update(self.prefetched.live)
        found.freezes = drifts.live_freezes(found.live)
        self.steps = [s.name for s in stages.STAGES] + ["prune", "record"]
        refused = adoptions.conflicts(
            desired=self.plan.objects,
            live=found.live,
            ledger=found.ledger.entries,
            cluster=self.plan.cluster,
            handover=self.options.handover,
        )
        refused += adoptions.overlaps(pools=self.plan.pools, nodes=self._nodes())
        refused += operatorsteps.team_operator(self)
        found.identities = impersonations.resolve(plan=self.plan, live=found.live, mode=self.options.impersonation)
        teams = [*self.plan.objects, *self.desired(stages.by_name("pools"))]
        refused += impersonations.unaccounted(found.identities, desired=teams)
        if not refused and not self.options.dry_run:
            # Before the first write: what the API server refuses to a team stops the whole revision.
            # (A diff dry-runs every changed object as its team anyway, and reports each refusal.)
            # Where this run's tenancy stage creates or restores the team's rights, the question
            # waits for the start of the object's own stage.
            refused += await impersonations.refusals(
                client=self.client,
                identities=found.identities,
                desired=[d for d in teams if not found.identities.deferred(d.team, d.ref.namespace) and self.new(d)],
                concurrency=self.options.concurrency,
            )
        declared = {d.ref.key: d for d in teams}
        found.refused = {c.ref.key: self.refusal(c, declared.get(c.ref.key)) for c in refused}
        if refused and not self.options.dry_run:
            self.changes.entries.extend(found.refused.values())  # before any write: nothing is applied in part
            self.stopped = True
        elif self.plan.operator is not None and self.options.helm is not None and not self.options.dry_run:
            # The chart is fetched and rendered before any stage writes: a chart that cannot be
            # read or refuses the values stops the run here (ChartRefused), not after stage 1.
            self.operator = operatorsteps.new_stage(self, self.options.helm)
            await self.operator.prepare()

    def refusal(self, change: Change, d: plans.Desired | None) -> Change:
        """A refusal made before anything is written, decided as the object's write would go (its team)."""
        who = impersonations.identity(self.found.identities, d.team, d.ref.namespace) if d else impersonations.FLEET
        return proposals.decide_entry(change, user=who.user)

    @property
    def done(self) -> bool:
        return self.stopped or not self.steps

    async def step(self) -> None:
        """Do the next step: one stage, prune, or record."""
        name = self.steps.pop(0)
        if name == "prune":
            await endsteps.prune(self)
        elif name == "record":
            await endsteps.record(self)
        else:
            await self._stage(stages.by_name(name))

    # -- steps ------------------------------------------------------------------------------

    def desired(self, stage: stages.Stage) -> list[plans.Desired]:
        if stage.name == "pools":
            return list(self._pool_objects)
        return self.plan.in_stage(stage)

    @functools.cached_property
    def _pool_objects(self) -> tuple[plans.Desired, ...]:
        """The pools' Node writes, from the Nodes ``start`` listed: made once per run, read by the refusal
        check, the pools stage, the prune and the record (each write reads its Node afresh)."""
        return tuple(plans.pool_objects(self.plan.pools, nodes=self._nodes()))

    def _nodes(self) -> list[dict[str, Any]]:
        return [o for k, o in self.found.live.items() if k.startswith("/Node/")]

    def _adopting(self, d: plans.Desired) -> plans.Desired:
        """``d``, forced when fleet adopts it now: the repository said to take its fields over."""
        if d.force or d.ref.key in self.found.ledger.entries or d.ref.key not in self.found.live:
            return d
        return dataclasses.replace(d, force=True)

    def new(self, d: plans.Desired) -> bool:
        """A team object this revision changes (not live with this content): the refusal check's subjects."""
        live = self.found.live.get(d.ref.key)
        return bool(d.team) and (live is None or normalizations.annotation(live, ownership.APPLIED) != d.applied)

    def freeze(self, d: plans.Desired) -> drifts.Freeze | None:
        """A person's freeze on the live object (it wins), else the manifest's drift annotation."""
        found = self.found.freezes.get(d.ref.key)
        if found is None and d.freeze:
            found = drifts.Freeze(mode=d.freeze, by="git", source=d.source)
        return found

    def frozen(self) -> list[tuple[Ref, drifts.Freeze]]:
        """Every object fleet leaves alone now: declared ones frozen live or in git, and ledger
        objects no longer declared that a person froze (not pruned). From the listing ``start`` read."""
        out: dict[str, tuple[Ref, drifts.Freeze]] = {}
        for d in self.plan.objects:
            found = self.freeze(d)
            if found is not None:
                out[d.ref.key] = (d.ref, found)
        for key, entry in self.found.ledger.entries.items():
            live_freeze = self.found.freezes.get(key) if key not in out else None
            if live_freeze is not None:
                out[key] = (Ref.from_key(key, version=entry.api_version.rpartition("/")[2]), live_freeze)
        return [out[k] for k in sorted(out)]

    def wait(self, change: Change) -> Change:
        """``change``, held back when it is disruptive and the waves, the window or the jobs say so (``waits``)."""
        if change.disruption is None or change.failed:
            return change
        if change.action not in (Action.CREATED, Action.CONFIGURED, Action.DELETED):
            return change
        key = change.ref.key
        earlier = self.found.ledger.progress.waiting.get(key)
        found = waits.decide(
            change.disruption,
            rules=maintenancesteps.rules_of(self.plan, change),
            now=datetime.datetime.now(datetime.UTC),
            emergency=self.options.emergency,
            since=datetime.datetime.fromisoformat(earlier) if earlier else None,
            reported=self.options.reported,
        )
        if found is None:
            return change
        if found.since is not None:
            self.managed.waiting_since[key] = found.since.isoformat()
        return change.held_for(found)

    async def drain(self, changes: list[Change]) -> None:
        """Under ``drain``: for each of ``changes`` decided ``hold`` for its claims, one drain step, proposed
        and decided as entries of its own (``drains``) and, in an apply, executed. Every step that holds
        changes calls it: an object stage, the operator release, the prune."""
        held = [c for c in drains.held(changes) if maintenancesteps.rules_of(self.plan, c).policy == "drain"]
        if not held:
            return
        claims = await self.classing_reads().objects(disruptions.CLAIM)
        managed = self.managed
        if managed.drains is None:
            ledger = self.found.ledger
            managed.drains = drains.Drains(
                client=self.client,
                max_unavailable=self.plan.rules.max_unavailable,
                drained=ledger.progress.drained,
                occupied=drains.occupied(claims),
                # Not a method of this Sync: the Drains it keeps must not hold it in a cycle.
                save=functools.partial(
                    records.save_progress, client=self.client, ledger=ledger, revision=self.plan.revision
                ),
            )
        by_name = {disruptions.claim_name(c): c for c in claims}
        for change in held:
            assert change.disruption is not None
            affected = [by_name[name] for name in change.disruption.claims if name in by_name]
            planned = await managed.drains.plan(
                key=change.ref.key, stage=change.stage, claims=affected, cordon=change.ref.kind != "DeviceTaintRule"
            )
            decided = drains.entries(planned)
            self.changes.entries.extend(decided)
            if self.options.dry_run:
                outcomes = None
            else:
                executed = await managed.drains.execute(planned, decided)
                self.changes.settle(zip(decided, executed.results, strict=True))
                outcomes = executed.outcomes
            self.changes.settle([(change, change.replaced(reason=f"{change.reason}; {planned.text(outcomes)}"))])

    def classing_reads(self) -> disruptions.Reads:
        """Where classification reads: the reader, else what the run listed, else the client; one
        ``Reads`` per run, so each kind is read once for every stage and the prune."""
        if self.managed.reads is None:
            complete = frozenset(self.prefetched.kinds) if self.prefetched is not None else frozenset()
            self.managed.reads = disruptions.Reads(
                client=self.client, reader=self.reader, live=self.found.live, complete=complete
            )
        return self.managed.reads

    async def classify(self, changes: list[Change]) -> list[Change]:
        """``disruptions.classify`` for a step of this run (a stage's diff, the prune's deletions)."""
        classed = await disruptions.classify(changes, reads=self.classing_reads())
        return await maintenancesteps.classify(self, classed)

    def _blocks(self, change: Change) -> bool:
        """Whether a failed entry stops the run after its stage (later stages depend on earlier ones).

        A field conflict on an object that exists does not: the object is there for its
        dependents, only a field someone else owns keeps another value (reported, not taken)."""
        if not change.failed:
            return False
        return not (change.conflicts and change.ref.key in self.found.live)

    async def _stage(self, stage: stages.Stage) -> None:
        started = time.monotonic()
        try:
            await self._stage_steps(stage)
        finally:
            self.changes.run_of(stage.name).seconds = time.monotonic() - started

    async def _stage_steps(self, stage: stages.Stage) -> None:
        tracer = tracing.tracer()
        with tracer.start_as_current_span("apply stage", attributes={tracing.STAGE: stage.name}) as span:
            if stage.name in self.found.skip:
                span.set_attribute("fleet.skipped", "done before the restart")
                return
            if stage.gate == stages.Gate.OPERATOR_READY:
                await operatorsteps.step(self)
                return
            desired = await maintenancesteps.desired(self) if stage.name == "maintenance" else self.desired(stage)
            refused = [self.found.refused[d.ref.key] for d in desired if d.ref.key in self.found.refused]
            desired = [self._adopting(d) for d in desired if d.ref.key not in self.found.refused]
            if await objectsteps.late_refusals(self, desired, refused):
                return
            found = await objectsteps.propose(self, stage, desired)
            span.set_attribute("fleet.writes", sum(c.decision.verdict == "write" for c in found if c.decision))
            self.changes.entries.extend(found)
            self.changes.entries.extend(refused)
            await self.drain(found)
            if any(self._blocks(c) for c in found) and not self.options.dry_run:
                self.stopped = True  # a preview goes on: it shows every stage, failures and refusals included
                return
            if not self.options.dry_run:
                await objectsteps.execute(self, stage, list(zip(found, desired, strict=True)))

    def release(self) -> None:
        """Let go of the operator stage (its chart and renders) once the run ends."""
        self.operator = None

    def deleted_outside(self, key: str) -> bool:
        """Recorded by a complete run, now missing: someone deleted it (not a crash before its create)."""
        found = self.found
        return key in found.ledger.entries and key not in found.live and not found.resumed

    def origin(self, key: str) -> ledgers.Origin:
        return adoptions.origin(
            key, ledger=self.found.ledger.entries, live_before=self.found.live, handover=self.options.handover
        )

    async def save_progress(self) -> None:
        await records.save_progress(client=self.client, ledger=self.found.ledger, revision=self.plan.revision)


__all__ = ["Options", "Sync"]
