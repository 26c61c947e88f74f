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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet import helm
from fleet.engine import (
    adoptions,
    blockers,
    decisions,
    diffs,
    disruptions,
    drains,
    drifts,
    healths,
    holds,
    impersonations,
    ledgers,
    listings,
    memories,
    normalizations,
    operators,
    ownership,
    plans,
    prunes,
    records,
    stages,
    waits,
    writes,
)
from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.errors import FleetError
from fleet.kube import Client, Kind, KubeError, Ref
from fleet.telemetry import tracing


@dataclass(frozen=True)
class Options:
    """How one run goes. Each front door (``fleetctl``'s ``pipelines.run_options``, the controller's
    ``settings.engine_options``, ``fleetctl import``) makes it once from its flags or settings; everything
    after derives from it with ``dataclasses.replace``, so no option is dropped on the way."""

    prune: bool = False
    dry_run: bool = False
    force_conflicts: bool = False
    allow_empty: bool = False
    concurrency: int = 16
    health_timeout: float = 120.0
    ignore_managers: tuple[str, ...] = ()
    helm: helm.Settings | None = None
    """How to run helm for the operator stage; None: the stage reports the release as skipped."""
    impersonation: impersonations.Mode = "optional"
    """As whom a team's objects are written (``fleet.engine.impersonations``; ``--team-impersonation``)."""
    emergency: str = ""
    """Why this revision's disruptive changes may skip the rollout waves and the maintenance window (a
    ``Fleet-Emergency:`` trailer, ``--emergency``, the FleetSync's annotation); they still wait for running jobs."""
    reported: waits.Reported | None = None
    """The earlier rollout waves' commit statuses for the plan's revision, as the controller read them
    from the git host; None: waves are not checked (``fleetctl``: a person applying by hand)."""
    handover: Mapping[str, ledgers.Origin] = field(default_factory=dict)
    """``Ref.key`` → origin: live objects ``fleetctl import`` hands to fleet. They are taken over
    without a conflict, and the ledger records the origin given here (``created``: pruning deletes)."""

    def previewed(self) -> Options:
        """These options for ``engine.diff``: every stage dry-run, deletions shown, an empty plan previewed;
        every other option as given (a preview under other options would show another run)."""
        return dataclasses.replace(self, prune=True, dry_run=True, allow_empty=True)


@dataclass
class Sync:
    client: Client
    plan: plans.Plan
    options: Options = field(default_factory=Options)
    changes: ChangeSet = field(init=False)
    ledger: ledgers.Ledger = field(init=False)
    prefetched: listings.Prefetched | None = None
    """Live objects listed while the plan was being computed (``listings.prefetch``), if any."""
    memory: memories.Memory | None = None
    """What earlier runs of this process left (the controller keeps one): a no-op re-derives nothing
    and starts no helm. The driver sweeps it after the run."""
    reader: healths.Reader | None = None
    """Where health gates read live objects (default: the client, by listing; the controller: its watch cache)."""
    live: listings.LiveIndex = field(init=False, default_factory=dict)
    steps: list[str] = field(init=False, default_factory=list)
    progress: Callable[[str, int, int], None] | None = None
    """Told ``(step, objects written, objects to write)`` as a step writes: for progress bars."""
    unavailable: KubeError | None = field(init=False, default=None)
    """The first failure of the API server itself (no answer, 5xx, 429) that ended a stage, if any:
    the later stages send nothing either."""
    resumed: bool = field(init=False, default=False)
    """The ledger's progress says the last run did not finish."""
    stopped: bool = field(init=False, default=False)
    _writing: tuple[str, int, int] = field(init=False, default=("", 0, 0))
    _skip: set[str] = field(init=False, default_factory=set)
    _namespaced: list[Kind] | None = field(init=False, default=None)
    _refused: dict[str, Change] = field(init=False, default_factory=dict)
    """Objects fleet may not write (not its own, not to be adopted; Nodes two pools select), by key."""
    _operator_run: operators.Stage | None = field(init=False, default=None)
    """The operator stage, prepared (chart fetched and rendered) before the first write."""
    _live_freezes: dict[str, drifts.Freeze] = field(init=False, default_factory=dict)
    """The live objects a person froze, by key (``drifts.live_freezes`` of what ``start`` listed)."""
    drains: drains.Drains | None = field(init=False, default=None)
    """The nodes this run drains for held changes (``spec.disruption.policy: drain``), once one needs it."""
    reads: disruptions.Reads | None = field(init=False, default=None)
    """What classing this run's changes read (claims, slices), read once for every stage and the prune."""
    waiting_since: dict[str, str] = field(init=False, default_factory=dict)
    """``Ref.key`` → when its disruptive change began waiting for jobs (ISO 8601): the ledger keeps it."""
    identities: impersonations.Identities = field(init=False, default_factory=impersonations.Identities)
    """As whom each team's objects are written this run (decided in ``start``)."""

    def __post_init__(self) -> None:
        self.changes = ChangeSet(cluster=self.plan.cluster, revision=self.plan.revision)

    async def start(self) -> None:
        """Read the ledger and the live objects; refuse an empty plan unless allowed."""
        if self.plan.empty and not (self.options.allow_empty or self.plan.allow_empty):
            raise FleetError(
                "the revision declares no object for this cluster; applying it would prune everything",
                where=f"cluster {self.plan.cluster}",
                hint="pass --allow-empty (or set spec.allowEmpty: true in fleet.yaml) if that is really intended",
            )
        with tracing.tracer().start_as_current_span("read ledger") as span:
            self.ledger = await ledgers.load(client=self.client, cluster=self.plan.cluster)
            progress = self.ledger.progress
            self.resumed = not progress.complete
            if progress.revision == self.plan.revision and not progress.complete:
                self._skip = set(progress.done)
            else:
                progress.done = []  # stages done for another revision say nothing about this one
            # Where this run picks up: a killed run left ``complete: false`` and the stages it finished.
            span.set_attributes(
                {
                    tracing.REVISION: self.plan.revision,
                    "fleet.ledger.entries": len(self.ledger.entries),
                    "fleet.resumed": self.resumed,
                    "fleet.resumed.revision": progress.revision,
                    "fleet.resumed.done": sorted(self._skip),
                    "fleet.emergency": self.options.emergency,
                }
            )
        kinds = {(d.ref.api_version, d.ref.kind) for d in self.plan.objects}
        kinds |= {(e.api_version, k.split("/", 2)[1]) for k, e in self.ledger.entries.items()}
        if self.plan.pools:
            kinds.add(("v1", "Node"))
        with tracing.tracer().start_as_current_span("read live"):
            done = self.prefetched.kinds if self.prefetched else set()
            self.live = await listings.live_index(client=self.client, kinds=kinds - done)
            if self.prefetched:
                self.live.update(self.prefetched.live)
        self._live_freezes = drifts.live_freezes(self.live)
        self.steps = [s.name for s in stages.STAGES] + ["prune", "record"]
        refused = adoptions.conflicts(
            desired=self.plan.objects,
            live=self.live,
            ledger=self.ledger.entries,
            cluster=self.plan.cluster,
            handover=self.options.handover,
        )
        refused += adoptions.overlaps(pools=self.plan.pools, nodes=self._nodes())
        refused += self._team_operator()
        self.identities = impersonations.resolve(plan=self.plan, live=self.live, mode=self.options.impersonation)
        teams = [*self.plan.objects, *self.desired(stages.by_name("pools"))]
        refused += impersonations.unaccounted(self.identities, desired=teams)
        if not refused and not self.options.dry_run:
            # Before the first write: what the API server refuses to a team stops the whole revision.
            # (A diff dry-runs every changed object as its team anyway, and reports each refusal.)
            # Where this run's tenancy stage creates or restores the team's rights, the question
            # waits for the start of the object's own stage.
            refused += await impersonations.refusals(
                client=self.client,
                identities=self.identities,
                desired=[d for d in teams if not self.identities.deferred(d.team, d.ref.namespace) and self._new(d)],
                concurrency=self.options.concurrency,
            )
        self._refused = {c.ref.key: self._decided_refusal(c) for c in refused}
        if refused and not self.options.dry_run:
            self.changes.entries.extend(refused)  # before any write: nothing is applied in part
            self.stopped = True
        elif self.plan.operator is not None and self.options.helm is not None and not self.options.dry_run:
            # The chart is fetched and rendered before any stage writes: a chart that cannot be
            # read or refuses the values stops the run here (ChartRefused), not after stage 1.
            self._operator_run = self._operator_stage(self.options.helm)
            await self._operator_run.prepare()

    @property
    def done(self) -> bool:
        return self.stopped or not self.steps

    async def step(self) -> None:
        """Do the next step: one stage, prune, or record."""
        name = self.steps.pop(0)
        if name == "prune":
            await self._prune()
        elif name == "record":
            if not self.options.dry_run:
                await records.record(
                    client=self.client,
                    ledger=self.ledger,
                    revision=self.plan.revision,
                    declared=[*self.plan.objects, *self.desired(stages.by_name("pools"))],
                    origin=self.origin,
                    changed=bool(self.changes.changed),
                    resumed=self.resumed,
                    waiting=self.waiting_since,
                    keep=self.drains.kept if self.drains is not None else (),
                    cordoned=self.drains.cordoned if self.drains is not None else 0,
                )
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
        return [o for k, o in self.live.items() if k.startswith("/Node/")]

    def _adopting(self, d: plans.Desired) -> plans.Desired:
        """``d``, forced when fleet adopts it now: the repository said to take its fields over."""
        if d.force or d.ref.key in self.ledger.entries or d.ref.key not in self.live:
            return d
        return dataclasses.replace(d, force=True)

    def _new(self, d: plans.Desired) -> bool:
        """A team object this revision changes (not live with this content): the refusal check's subjects."""
        live = self.live.get(d.ref.key)
        return bool(d.team) and (live is None or normalizations.annotation(live, ownership.APPLIED) != d.applied)

    def _freeze(self, d: plans.Desired) -> drifts.Freeze | None:
        """A person's freeze on the live object (it wins), else the manifest's drift annotation."""
        found = self._live_freezes.get(d.ref.key)
        if found is None and d.freeze:
            found = drifts.Freeze(mode=d.freeze, by="git", source=d.source)
        return found

    def frozen(self) -> list[tuple[Ref, drifts.Freeze]]:
        """Every object fleet leaves alone now: declared ones frozen live or in git, and ledger
        objects no longer declared that a person froze (not pruned). From the listing ``start`` read."""
        out: dict[str, tuple[Ref, drifts.Freeze]] = {}
        for d in self.plan.objects:
            found = self._freeze(d)
            if found is not None:
                out[d.ref.key] = (d.ref, found)
        for key, entry in self.ledger.entries.items():
            live_freeze = self._live_freezes.get(key) if key not in out else None
            if live_freeze is not None:
                out[key] = (Ref.from_key(key, version=entry.api_version.rpartition("/")[2]), live_freeze)
        return [out[k] for k in sorted(out)]

    def _describe_repair(self, change: Change, d: plans.Desired) -> None:
        """What a repair puts back: per declared field, who had changed it, before and after."""
        change.repairs = drifts.repairs(
            live=self.live.get(d.ref.key),
            after=change.after,
            leaves=d.leaves,
            conflicts=[(c.manager, c.field) for c in change.conflicts],
        )

    def wait(self, change: Change) -> None:
        """Hold ``change`` back when it is disruptive and the waves, the window or the jobs say so (``waits``)."""
        if change.disruption is None or change.failed:
            return
        if change.action not in (Action.CREATED, Action.CONFIGURED, Action.DELETED):
            return
        key = change.ref.key
        earlier = self.ledger.progress.waiting.get(key)
        found = waits.decide(
            change.disruption,
            rules=self.plan.rules,
            now=datetime.datetime.now(datetime.UTC),
            emergency=self.options.emergency,
            since=datetime.datetime.fromisoformat(earlier) if earlier else None,
            reported=self.options.reported,
        )
        if found is None:
            return
        if found.since is not None:
            self.waiting_since[key] = found.since.isoformat()
        change.hold(found)

    async def drain(self, changes: list[Change]) -> None:
        """Under ``drain``: one step of draining for each of ``changes`` held for its claims (``drains.step``).
        Every step that holds changes calls it: an object stage, the operator release, the prune."""
        if self.plan.rules.policy != "drain" or self.options.dry_run or not drains.held(changes):
            return
        claims = await self.classing_reads().objects(disruptions.CLAIM)
        if self.drains is None:
            self.drains = drains.Drains(
                client=self.client,
                max_unavailable=self.plan.rules.max_unavailable,
                drained=self.ledger.progress.drained,
                occupied=drains.occupied(claims),
                # Not a method of this Sync: the Drains it keeps must not hold it in a cycle.
                save=functools.partial(
                    records.save_progress, client=self.client, ledger=self.ledger, revision=self.plan.revision
                ),
            )
        await drains.step(self.drains, changes, claims=claims)

    def classing_reads(self) -> disruptions.Reads:
        """Where classification reads: the reader, else what the run listed, else the client; one
        ``Reads`` per run, so each kind is read once for every stage and the prune."""
        if self.reads is None:
            complete = frozenset(self.prefetched.kinds) if self.prefetched is not None else frozenset()
            self.reads = disruptions.Reads(client=self.client, reader=self.reader, live=self.live, complete=complete)
        return self.reads

    async def classify(self, changes: list[Change]) -> None:
        """``disruptions.classify`` for a step of this run (a stage's diff, the prune's deletions)."""
        await disruptions.classify(changes, reads=self.classing_reads())

    def _blocks(self, change: Change) -> bool:
        """Whether a failed entry stops the run after its stage (later stages depend on earlier ones).

        A field conflict on an object that exists does not: the object is there for its
        dependents, only a field someone else owns keeps another value (reported, not taken)."""
        if not change.failed:
            return False
        return not (change.conflicts and change.ref.key in self.live)

    async def _stage(self, stage: stages.Stage) -> None:
        tracer = tracing.tracer()
        with tracer.start_as_current_span("apply stage", attributes={tracing.STAGE: stage.name}) as span:
            desired = self.desired(stage)
            if stage.name in self._skip:
                span.set_attribute("fleet.skipped", "done before the restart")
                return
            if stage.gate == stages.Gate.OPERATOR_READY:
                await self._operator()
                return
            refused = [self._refused[d.ref.key] for d in desired if d.ref.key in self._refused]
            desired = [self._adopting(d) for d in desired if d.ref.key not in self._refused]
            if not self.options.dry_run and (self.identities.pending or self.identities.restoring):
                # Teams whose rights this run set up or restored: they exist now; ask before the stage writes.
                late = await impersonations.refusals(
                    client=self.client,
                    identities=self.identities,
                    desired=[d for d in desired if self.identities.deferred(d.team, d.ref.namespace) and self._new(d)],
                    concurrency=self.options.concurrency,
                )
                if late:
                    self.changes.entries.extend(refused + [self._decided_refusal(c) for c in late])
                    self.stopped = True
                    return
            freezes = [self._freeze(d) for d in desired]
            # A frozen object is diffed under its freeze's policy: never forced, drift reported or ignored.
            desired = [
                d if f is None else dataclasses.replace(d, drift=f.mode) for d, f in zip(desired, freezes, strict=True)
            ]
            with tracer.start_as_current_span("diff", attributes={tracing.STAGE: stage.name}) as diffed:
                found = await diffs.diff_objects(
                    settled=self.memory.settled if self.memory is not None else None,
                    client=self.client,
                    identities=self.identities,
                    desired=desired,
                    live=self.live,
                    concurrency=self.options.concurrency,
                    ignore_managers=self.options.ignore_managers,
                    force=self.options.force_conflicts,
                    preview=self.options.dry_run,
                    handover=self.options.handover,
                )
                # Where a resumed run picks up inside a stage: what is already in place, what is left.
                diffed.set_attributes(
                    {
                        "fleet.unchanged": sum(c.action == Action.UNCHANGED for c in found),
                        "fleet.writes": sum(c.action in (Action.CREATED, Action.CONFIGURED) for c in found),
                    }
                )
            for change, d, freeze in zip(found, desired, freezes, strict=True):
                if change.action == Action.CREATED and self._deleted_outside(d.ref.key):
                    change.drift = True
                    change.reason = "deleted in the cluster" + (f"; {change.reason}" if change.reason else "")
                change.frozen = freeze
                if freeze is not None and freeze.live:
                    holds.hold(change, freeze)
                else:
                    holds.apply_policy(change, d.drift)
                if change.drift and change.action in (Action.CREATED, Action.CONFIGURED) and not change.failed:
                    self._describe_repair(change, d)
                if change.replace:
                    writes.guard_replace(change, origin=self.origin(d.ref.key), live=self.live.get(d.ref.key))
            await self.classify(found)
            for change in found:
                self.wait(change)
            await self.drain(found)
            # The one decision per change: every step below reads it, none decides again.
            for change, d in zip(found, desired, strict=True):
                user, as_fleet = (
                    ("", "")  # nothing is sent: as whom does not arise (and 10,000 of them cost)
                    if change.action == Action.UNCHANGED
                    else impersonations.as_whom(self.identities, d, preview=self.options.dry_run)
                )
                change.decision = decisions.decide(
                    action=change.action,
                    error=change.error,
                    wait=change.waiting,
                    disruption=change.disruption,
                    user=user,
                    as_fleet=as_fleet,
                    obj=d.body,  # the render without the revision annotation: no copy per object
                )
            self.changes.entries.extend(found)
            self.changes.entries.extend(refused)
            todo = [
                (c, d)
                for c, d in zip(found, desired, strict=True)
                if c.decision is not None and c.decision.verdict == "write"
            ]
            span.set_attribute("fleet.writes", len(todo))
            if any(self._blocks(c) for c in found) and not self.options.dry_run:
                self.stopped = True  # a preview goes on: it shows every stage, failures and refusals included
                return
            if self.options.dry_run or not (todo or stage.gate in _ALWAYS_CHECKED):
                return
            new = {
                d.ref.key: ledgers.Entry(d.ref.api_version, self.origin(d.ref.key))
                for c, d in todo
                if d.ref.key not in self.ledger.entries
            }
            if new:
                self.ledger.entries.update(new)
                await self.save_progress()
            self.start_writing(stage.name, len(todo))
            # One stage's writer, not kept: it holds a callback into this Sync (no cycle outlives the stage).
            writer = writes.Writer(
                client=self.client,
                live=self.live,
                pools=self.plan.pools,
                concurrency=self.options.concurrency,
                force=self.options.force_conflicts,
                timeout=self.options.health_timeout,
                sent=self.written,
                unavailable=self.unavailable,
            )
            applied: dict[str, dict[str, Any]] = {}
            # Kinds in the stage's order, one wave each: a RoleBinding is created only after its
            # Role exists (for a non-admin applier the API server resolves the Role to check escalation).
            for kind in stage.kinds:
                applied |= await writer.write_all([(c, d) for c, d in todo if d.ref.kind == kind])
            applied |= await writer.write_all([(c, d) for c, d in todo if d.ref.kind not in stage.kinds])
            self.unavailable = writer.unavailable
            if any(c.failed for c, _ in todo):
                self.stopped = True
                return
            try:
                with tracer.start_as_current_span("wait health", attributes={tracing.STAGE: stage.name}):
                    await healths.wait(
                        client=self.client,
                        stage=stage,
                        written=[d.ref for _, d in todo],
                        plan=self.plan,
                        timeout=self.options.health_timeout,
                        applied=applied,
                        reader=self.reader,
                        expected=decisions.expected(c.decision for c, _ in todo),
                    )
            except healths.HealthTimeout:
                self.stopped = True
                raise
            if todo:
                self.ledger.progress.done.append(stage.name)
                await self.save_progress()

    async def _prune(self) -> None:
        """The prune step: what the ledger holds and the revision no longer declares is classed, held
        or decided, then deleted (``--prune``), or previewed with why each would be refused."""
        desired_keys = {d.ref.key for d in self.plan.objects}
        desired_keys |= {d.ref.key for d in self.desired(stages.by_name("pools"))}
        found = prunes.leftovers(ledger=self.ledger, desired_keys=desired_keys, live=self.live)
        dry_run = self.options.dry_run
        if self.options.prune or dry_run:  # what this prune deletes (a diff shows it as deleted)
            await self.classify(found)
            for change in found:
                self.wait(change)  # a disruptive deletion waits as a disruptive write does, and drains as one
            await self.drain(found)
        pruner = prunes.Pruner(
            client=self.client,
            ledger=self.ledger,
            live=self.live,
            identities=self.identities,
            namespaced=self.namespaced_kinds,
            concurrency=self.options.concurrency,
            sent=self.written,
        )
        if not self.options.prune or dry_run:
            await pruner.preview(found, dry_run=dry_run)
            self._decide_deletions(found)
            self.changes.entries.extend(found)
            return
        self._decide_deletions(found)
        self.start_writing("prune", sum(c.action == Action.DELETED for c in found))
        await pruner.prune(found, record=self.changes.entries.extend)

    def _decide_deletions(self, found: list[Change]) -> None:
        """The decision of each deletion: as whom (the team whose folder declared the object, from the
        live object's team label and source; ``impersonations.origin``), held, refused or sent."""
        for change in found:
            team = impersonations.origin(self.live.get(change.ref.key) or {})
            change.decision = decisions.decide(
                action=change.action,
                error=change.error,
                wait=change.waiting,
                disruption=change.disruption,
                user=self.identities.user_of(team),
            )

    async def _operator(self) -> None:
        """The operator stage: the GPU Operator Helm release (``fleet.engine.operators``), then its gate."""
        settings = self.options.helm
        if settings is None:
            if self.plan.operator is not None:
                op = self.plan.operator
                self.changes.entries.append(
                    Change(
                        ref=operators.release_ref(release=op.release, namespace=op.namespace),
                        stage="operator",
                        action=Action.SKIPPED,
                        reason="no helm binary configured (fleetctl --helm, $FLEET_HELM)",
                        _decision=decisions.Decision(verdict="leave"),
                    )
                )
            return
        run = self._operator_run or self._operator_stage(settings)
        try:
            found = await run.run()
        except operators.OperatorRefused:
            self.stopped = True
            raise
        for change in found:  # what the stage refused or left before the release's own decision
            if change.decision is None:
                change.decision = decisions.decide(action=change.action, error=change.error)
        self.changes.entries.extend(found)
        await self.drain(run.changes)
        if any(c.failed for c in run.changes) and not self.options.dry_run:
            self.stopped = True
            return
        if run.changed:
            with tracing.tracer().start_as_current_span("wait health", attributes={tracing.STAGE: "operator"}):
                try:
                    await operators.wait_ready(client=self.client, plan=self.plan, timeout=self.options.health_timeout)
                except healths.HealthTimeout:
                    self.stopped = True
                    raise

    def _operator_stage(self, settings: helm.Settings) -> operators.Stage:
        return operators.Stage(
            client=self.client,
            h=helm.Helm(settings),
            plan=self.plan,
            dry_run=self.options.dry_run,
            prune=self.options.prune,
            timeout=self.options.health_timeout,
            remembered=self.memory.operator_noops if self.memory is not None else None,
            hold=self._decide_release,
        )

    def release(self) -> None:
        """Let go of the run's helpers that hold a method of this Sync (the operator stage's hold), so
        the Sync is freed when its run ends without waiting for the cyclic collector."""
        self._operator_run = None

    def _decided_refusal(self, change: Change) -> Change:
        """A refusal made before anything is written (not fleet's object, the API server refuses the team):
        decided ``refuse`` there and then."""
        change.decision = decisions.decide(action=change.action, error=change.error)
        return change

    def _decide_release(self, change: Change) -> None:
        """The operator release's one decision, before helm runs: held as a disruptive write is, else
        sent (helm runs with the controller's identity; a team's GPUOperator never gets here)."""
        self.wait(change)
        change.decision = decisions.decide(
            action=change.action, error=change.error, wait=change.waiting, disruption=change.disruption
        )

    def _team_operator(self) -> list[Change]:
        """A GPUOperator in a team's folder: refused, as the team could not install a cluster-wide release."""
        op = self.plan.operator
        if op is None or not op.team:
            return []
        return [
            Change.refusal(
                operators.release_ref(release=op.release, namespace=op.namespace),
                stage="operator",
                error=(
                    f"declared at {op.source}, in team {op.team!r}'s folder: fleet writes a team's files only "
                    "as the team, and a team may not install the cluster-wide GPU Operator release. fleet "
                    "applies nothing of this revision while this stands.\n  hint: move the GPUOperator to "
                    "operator/ (the platform team's)"
                ),
            )
        ]

    def _deleted_outside(self, key: str) -> bool:
        """Recorded by a complete run, now missing: someone deleted it (not a crash before its create)."""
        return key in self.ledger.entries and key not in self.live and not self.resumed

    def start_writing(self, step: str, total: int) -> None:
        self._writing = (step, 0, total)
        if self.progress is not None and total:
            self.progress(step, 0, total)

    def written(self) -> None:
        step, done, total = self._writing
        self._writing = (step, done + 1, total)
        if self.progress is not None:
            self.progress(step, done + 1, total)

    async def namespaced_kinds(self) -> list[Kind]:
        """The namespaced kinds to list before deleting a namespace: discovered once per run."""
        if self._namespaced is None:
            self._namespaced = await blockers.namespaced_kinds(client=self.client)
        return self._namespaced

    def origin(self, key: str) -> ledgers.Origin:
        return adoptions.origin(key, ledger=self.ledger.entries, live_before=self.live, handover=self.options.handover)

    async def save_progress(self) -> None:
        await records.save_progress(client=self.client, ledger=self.ledger, revision=self.plan.revision)


_ALWAYS_CHECKED = (stages.Gate.CLASSES_PUBLISHED, stages.Gate.POOLS_APPLIED)
"""Gates about live state fleet does not write (nodes, slices): checked even when nothing changed."""


__all__ = ["Options", "Sync"]
