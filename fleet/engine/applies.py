"""Applying a Plan: stage by stage, only what drifted, health-gated, resumable, pruned last.

``Sync`` is a step-wise state machine in the manner of gitops-engine's
``SyncContext``: ``start`` reads the ledger and the live cluster once, then every
``step`` does exactly one thing (one stage, then prune, then record) and returns,
so a caller can observe, trace or stop between steps. Progress is recorded in the
cluster's ledger (``ledgers.Progress``) as soon as a step writes; a run
killed at any point and started again for the same revision skips the stages
already done, and re-diffs the rest (objects applied before the kill are now
unchanged, so they are not written again).

Within a stage, objects are diffed (``diffs.diff_objects``) and only created or
configured ones are applied, with bounded concurrency. A no-op run therefore makes
no write request at all, not even to the ledger. A failed object stops the run
after its stage: later stages depend on earlier ones. A field conflict on an object
that exists fails its entry (naming the other field manager) but does not stop the
run: the object is there for what depends on it. When a request fails because
of the server rather than the object (no answer, 5xx or 429 after every retry of
the client), the objects of the stage not yet sent are skipped: each would spend the
client's whole retry budget on a server that is down (a restart of kube-apiserver
mid-apply made 300 objects send 425 requests in 10 s), and the caller retries the
run with its own backoff.

Before anything is written, ``start`` refuses the whole run when the plan wants an
object that exists but is not fleet's and may not be adopted, or when two pools
select the same live Node (``adoptions``): a refused apply writes nothing, and
``diff`` lists the conflicts with the rest of the preview.

Pruning deletes ledger objects the plan no longer declares, in reverse stage
order, with the live ``uid`` as precondition (a recreated object of the same name
is never deleted by mistake). Objects fleet adopted, and pool Nodes, are released
(fleet gives back its labels, annotations and fields), never deleted. Every Node
write, applying a pool or releasing it, is computed from a fresh read and carries
its resourceVersion (``fleet.engine.nodes``), so a taint somebody else added or
removed meanwhile stays so. A namespace is deleted only while it holds nothing
fleet did not put there, and a ResourceClaim in use is never deleted nor replaced
(``blockers``); such an entry fails, and pruning stops after its stage. An empty
plan is refused unless allowed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import anyio
import anyio.lowlevel

from fleet import helm
from fleet.engine import (
    adoptions,
    blockers,
    deletions,
    diffs,
    drifts,
    healths,
    ledgers,
    listings,
    nodes,
    operators,
    ownership,
    plans,
    stages,
    workers,
)
from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.errors import FleetError
from fleet.kube import Client, Kind, KubeError, NotFound, Ref
from fleet.kube.errors import UNAVAILABLE
from fleet.telemetry import tracing


@dataclass(frozen=True)
class Options:
    prune: bool = False
    dry_run: bool = False
    force_conflicts: bool = False
    allow_empty: bool = False
    concurrency: int = 16
    health_timeout: float = 120.0
    ignore_managers: tuple[str, ...] = ()
    helm: helm.Settings | None = None
    """How to run helm for the operator stage; None: the stage reports the release as skipped."""


@dataclass
class Sync:
    client: Client
    plan: plans.Plan
    options: Options = field(default_factory=Options)
    changes: ChangeSet = field(init=False)
    ledger: ledgers.Ledger = field(init=False)
    prefetched: listings.Prefetched | None = None
    """Live objects listed while the plan was being computed (``listings.prefetch``), if any."""
    settled: diffs.Settled | None = None
    """The no-dry-run answers of earlier runs (a process that reconciles repeatedly keeps one)."""
    operator_noops: operators.Noops | None = None
    """The operator release records of earlier runs (the controller keeps one): a no-op starts no helm."""
    reader: healths.Reader | None = None
    """Where health gates read live objects (default: the client, by listing; the controller: its watch cache)."""
    live: listings.LiveIndex = field(init=False, default_factory=dict)
    steps: list[str] = field(init=False, default_factory=list)
    progress: Callable[[str, int, int], None] | None = None
    """Told ``(step, objects written, objects to write)`` as a step writes: for progress bars."""
    unavailable: KubeError | None = None
    """The first failure of the API server itself (no answer, 5xx, 429) that ended a stage, if any."""
    _writing: tuple[str, int, int] = field(init=False, default=("", 0, 0))
    _applied: dict[str, dict[str, Any]] = field(init=False, default_factory=dict)
    """What the API server returned to this stage's writes (by key): the exist gate's evidence."""
    _skip: set[str] = field(init=False, default_factory=set)
    _stopped: bool = field(init=False, default=False)
    _resumed: bool = field(init=False, default=False)
    _not_pruned: set[str] = field(init=False, default_factory=set)
    _namespaced: list[Kind] | None = field(init=False, default=None)
    _refused: dict[str, Change] = field(init=False, default_factory=dict)
    """Objects fleet may not write (not its own, not to be adopted; Nodes two pools select), by key."""
    _operator_run: operators.Stage | None = field(init=False, default=None)
    """The operator stage, prepared (chart fetched and rendered) before the first write."""

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
            self._resumed = not progress.complete
            if progress.revision == self.plan.revision and not progress.complete:
                self._skip = set(progress.done)
            else:
                progress.done = []  # stages done for another revision say nothing about this one
            # Where this run picks up: a killed run left ``complete: false`` and the stages it finished.
            span.set_attributes(
                {
                    tracing.REVISION: self.plan.revision,
                    "fleet.ledger.entries": len(self.ledger.entries),
                    "fleet.resumed": self._resumed,
                    "fleet.resumed.revision": progress.revision,
                    "fleet.resumed.done": sorted(self._skip),
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
        self.steps = [s.name for s in stages.STAGES] + ["prune", "record"]
        refused = adoptions.conflicts(
            desired=self.plan.objects, live=self.live, ledger=self.ledger.entries, cluster=self.plan.cluster
        )
        refused += adoptions.overlaps(pools=self.plan.pools, nodes=self._nodes())
        self._refused = {c.ref.key: c for c in refused}
        if refused and not self.options.dry_run:
            self.changes.entries.extend(refused)  # before any write: nothing is applied in part
            self._stopped = True
        elif self.plan.operator is not None and self.options.helm is not None and not self.options.dry_run:
            # The chart is fetched and rendered before any stage writes: a chart that cannot be
            # read or refuses the values stops the run here (ChartRefused), not after stage 1.
            self._operator_run = self._operator_stage(self.options.helm)
            await self._operator_run.prepare()

    @property
    def done(self) -> bool:
        return self._stopped or not self.steps

    async def step(self) -> None:
        """Do the next step: one stage, prune, or record."""
        name = self.steps.pop(0)
        if name == "prune":
            await self._prune()
        elif name == "record":
            await self._record()
        else:
            await self._stage(stages.by_name(name))

    async def run(self) -> ChangeSet:
        await self.start()
        while not self.done:
            await self.step()
        return self.changes

    # -- steps ------------------------------------------------------------------------------

    def desired(self, stage: stages.Stage) -> list[plans.Desired]:
        if stage.name == "pools":
            return plans.pool_objects(self.plan.pools, nodes=self._nodes())
        return self.plan.in_stage(stage)

    def _nodes(self) -> list[dict[str, Any]]:
        return [o for k, o in self.live.items() if k.startswith("/Node/")]

    def _adopting(self, d: plans.Desired) -> plans.Desired:
        """``d``, forced when fleet adopts it now: the repository said to take its fields over."""
        if d.force or d.ref.key in self.ledger.entries or d.ref.key not in self.live:
            return d
        return dataclasses.replace(d, force=True)

    def _freeze(self, d: plans.Desired) -> drifts.Freeze | None:
        """A person's freeze on the live object (it wins), else the manifest's drift annotation."""
        found = drifts.live_freeze(self.live.get(d.ref.key))
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
            live_freeze = drifts.live_freeze(self.live.get(key)) if key not in out else None
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

    def _blocks(self, change: Change) -> bool:
        """Whether a failed entry stops the run after its stage (later stages depend on earlier ones).

        A field conflict on an object that exists does not: the object is there for its
        dependents, only a field someone else owns keeps another value (reported, not taken)."""
        if not change.failed:
            return False
        return not (change.conflicts and change.ref.key in self.live)

    def _origin(self, key: str) -> ledgers.Origin:
        return adoptions.origin(key, ledger=self.ledger.entries, live_before=self.live)

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
            freezes = [self._freeze(d) for d in desired]
            # A frozen object is diffed under its freeze's policy: never forced, drift reported or ignored.
            desired = [
                d if f is None else dataclasses.replace(d, drift=f.mode) for d, f in zip(desired, freezes, strict=True)
            ]
            with tracer.start_as_current_span("diff", attributes={tracing.STAGE: stage.name}) as diffed:
                found = await diffs.diff_objects(
                    settled=self.settled,
                    client=self.client,
                    desired=desired,
                    live=self.live,
                    concurrency=self.options.concurrency,
                    ignore_managers=self.options.ignore_managers,
                    force=self.options.force_conflicts,
                    preview=self.options.dry_run,
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
                    change.reason = "deleted in the cluster"
                change.frozen = freeze
                if freeze is not None and freeze.live:
                    _hold(change, freeze)
                else:
                    _apply_drift_policy(change, d.drift)
                if change.drift and change.action in (Action.CREATED, Action.CONFIGURED) and not change.failed:
                    self._describe_repair(change, d)
                if change.replace:
                    self._guard_replace(change)
            self.changes.entries.extend(found)
            self.changes.entries.extend(refused)
            todo = [
                (c, d)
                for c, d in zip(found, desired, strict=True)
                if c.action in (Action.CREATED, Action.CONFIGURED) and not c.failed
            ]
            span.set_attribute("fleet.writes", len(todo))
            if any(self._blocks(c) for c in found) and not self.options.dry_run:
                self._stopped = True  # a preview goes on: it shows every stage, failures and refusals included
                return
            if self.options.dry_run or not (todo or stage.gate in _ALWAYS_CHECKED):
                return
            new = {
                d.ref.key: ledgers.Entry(d.ref.api_version, self._origin(d.ref.key))
                for c, d in todo
                if d.ref.key not in self.ledger.entries
            }
            if new:
                self.ledger.entries.update(new)
                await self._save_progress()
            self._applied = {}
            self._start_writing(stage.name, len(todo))
            # Kinds in the stage's order, one wave each: a RoleBinding is created only after its
            # Role exists (for a non-admin applier the API server resolves the Role to check escalation).
            for kind in stage.kinds:
                await self._apply_all([(c, d) for c, d in todo if d.ref.kind == kind])
            await self._apply_all([(c, d) for c, d in todo if d.ref.kind not in stage.kinds])
            if any(c.failed for c, _ in todo):
                self._stopped = True
                return
            try:
                with tracer.start_as_current_span("wait health", attributes={tracing.STAGE: stage.name}):
                    await healths.wait(
                        client=self.client,
                        stage=stage,
                        written=[d.ref for _, d in todo],
                        plan=self.plan,
                        timeout=self.options.health_timeout,
                        applied=self._applied,
                        reader=self.reader,
                    )
            except healths.HealthTimeout:
                self._stopped = True
                raise
            finally:
                self._applied = {}
            if todo:
                self.ledger.progress.done.append(stage.name)
                await self._save_progress()

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
                    )
                )
            return
        run = self._operator_run or self._operator_stage(settings)
        try:
            self.changes.entries.extend(await run.run())
        except operators.OperatorRefused:
            self._stopped = True
            raise
        if any(c.failed for c in run.changes) and not self.options.dry_run:
            self._stopped = True
            return
        if run.changed:
            with tracing.tracer().start_as_current_span("wait health", attributes={tracing.STAGE: "operator"}):
                try:
                    await operators.wait_ready(client=self.client, plan=self.plan, timeout=self.options.health_timeout)
                except healths.HealthTimeout:
                    self._stopped = True
                    raise

    def _operator_stage(self, settings: helm.Settings) -> operators.Stage:
        return operators.Stage(
            client=self.client,
            h=helm.Helm(settings),
            plan=self.plan,
            dry_run=self.options.dry_run,
            prune=self.options.prune,
            timeout=self.options.health_timeout,
            remembered=self.operator_noops,
        )

    def _deleted_outside(self, key: str) -> bool:
        """Recorded by a complete run, now missing: someone deleted it (not a crash before its create)."""
        return key in self.ledger.entries and key not in self.live and not self._resumed

    async def _apply_all(self, todo: list[tuple[Change, plans.Desired]]) -> None:
        tracer = tracing.tracer()

        async def one(item: tuple[Change, plans.Desired]) -> None:
            change, d = item
            if self.unavailable is not None:
                change.action = Action.SKIPPED
                change.reason = f"not sent: the API server is unavailable ({self.unavailable.what})"
                self._written()
                return
            attrs = _attrs(d.ref, change.action)
            attrs[tracing.FIELD_MANAGER] = d.field_manager
            with tracer.start_as_current_span("apply object", attributes=attrs) as span:
                started = time.monotonic()
                # Shielded: a cancelled run (SIGTERM, lost leadership) finishes the object in
                # flight rather than leave a replace half done; objects not started are not started.
                await anyio.lowlevel.checkpoint()
                try:
                    with anyio.CancelScope(shield=True):
                        await self._write(change, d)
                except KubeError as err:
                    change.error = str(err)
                    span.set_attribute("error.type", type(err).__name__)
                    if isinstance(err, UNAVAILABLE) and self.unavailable is None:
                        self.unavailable = err
                change.duration = time.monotonic() - started
                self._written()

        await workers.for_each(todo, one, concurrency=self.options.concurrency)

    async def _write(self, change: Change, d: plans.Desired) -> None:
        """Apply one object (a replace deletes it first, as ``_free`` allows); Nodes from a fresh read."""
        if change.replace:
            preconditions = await self._free(change, self.live.get(d.ref.key))
            if preconditions is None:
                return
            with contextlib.suppress(NotFound):
                await self.client.delete(
                    d.ref,
                    uid=preconditions.uid,
                    resource_version=preconditions.resource_version,
                    propagation="Foreground",
                )
            await self._gone(d.ref)
        if d.ref.kind == "Node":
            written = await nodes.write(client=self.client, ref=d.ref, body=self._pool_body)
            if written is None:
                change.reason = "no pool selects this Node any more (it changed since it was read)"
            else:
                self._applied[d.ref.key] = healths.gate_view(written)
        else:
            answer = await self.client.apply(
                d.obj, field_manager=d.field_manager, force=self.options.force_conflicts or d.force or change.forced
            )
            self._applied[d.ref.key] = healths.gate_view(answer)

    def _pool_body(self, node: dict[str, Any]) -> dict[str, Any] | None:
        """What the pools apply to ``node`` as just read (None once no pool matches it)."""
        found = plans.pool_objects(self.plan.pools, nodes=[node])
        return found[0].obj if found else None

    def _guard_replace(self, change: Change) -> None:
        """A replace deletes the object: refuse it for what fleet did not create, and for claims in use."""
        if self._origin(change.ref.key) == ledgers.ADOPTED:
            change.refused = True
            change.error = (
                f"immutable fields differ, and fleet adopted this object rather than created it: replacing it "
                f"would delete it\n  hint: change the repository back, or delete {change.ref} yourself"
            )
        elif change.ref.kind == "ResourceClaim":
            users = blockers.claim_users(self.live.get(change.ref.key) or {})
            if users:
                change.refused = True
                change.error = blockers.claim_in_use(change.ref, users)

    async def _free(self, change: Change, live: dict[str, Any] | None) -> _Preconditions | None:
        """The preconditions of a delete fleet may make; None (and the entry failed) for a claim in use.

        Always the uid fleet listed: an object recreated since by someone else is never deleted.
        A ResourceClaim is read again first, and deleted only as that read found it (its
        resourceVersion): a claim reserved in between fails the delete (409) instead of being
        deleted from under its new pod.
        """
        if change.ref.kind != "ResourceClaim":
            return _Preconditions(uid=_uid(live))
        try:
            fresh = await self.client.get(change.ref)
        except NotFound:
            return _Preconditions(uid=_uid(live))
        users = blockers.claim_users(fresh)
        if users:
            change.refused = True
            change.error = blockers.claim_in_use(change.ref, users)
            return None
        return _Preconditions(uid=_uid(live), resource_version=(fresh.get("metadata") or {}).get("resourceVersion"))

    async def _gone(self, ref: Ref) -> None:
        """Wait (bounded by the health timeout) until a replaced object is really deleted."""
        with anyio.move_on_after(self.options.health_timeout):
            while True:
                try:
                    await self.client.get(ref)
                except NotFound:
                    return
                await anyio.sleep(0.2)

    async def _prune(self) -> None:
        desired_keys = {d.ref.key for d in self.plan.objects}
        desired_keys |= {d.ref.key for d in self.desired(stages.by_name("pools"))}
        stage_of = {kind: s.name for s in stages.STAGES for kind in s.kinds}
        found = deletions.planned(
            ledger=self.ledger.entries, desired_keys=desired_keys, live=self.live, stage_of=stage_of
        )
        order = {s.name: i for i, s in enumerate(stages.prune_order())}
        found.sort(key=lambda c: (order.get(c.stage, 0), c.ref))
        gone = [k for k in self.ledger.entries if k not in desired_keys and k not in self.live]
        for key in gone:
            self.ledger.entries.pop(key)  # deleted outside fleet: only the record was left
        if not self.options.prune or self.options.dry_run:
            for change in found:
                if not self.options.dry_run and change.action == Action.DELETED:
                    change.action = Action.SKIPPED
                    change.reason = "no longer declared; not pruned (--prune not given)"
                elif change.action == Action.DELETED and (not change.release or change.ref.kind == "Node"):
                    await self._preview_block(change, found)
            self.changes.entries.extend(found)
            return
        with tracing.tracer().start_as_current_span("prune") as span:
            span.set_attribute("fleet.deletions", sum(c.action == Action.DELETED for c in found))
            self._not_pruned = {c.ref.key for c in found if c.action != Action.DELETED}

            async def delete(change: Change) -> None:
                await self._delete(change)
                self._written()

            self._start_writing("prune", sum(c.action == Action.DELETED for c in found))

            # One stage at a time, in prune order (claims before the classes they name, namespaces
            # last); within a stage, deletes run concurrently. A failure stops pruning after its stage.
            failed = ""
            for stage in stages.prune_order():
                here = [c for c in found if (c.stage or "claims") == stage.name]
                self.changes.entries.extend(here)
                deleting = [c for c in here if c.action == Action.DELETED]
                if failed:
                    for change in deleting:
                        change.action = Action.SKIPPED
                        change.reason = f"not pruned: pruning stage {failed} failed"
                    continue
                await workers.for_each(deleting, delete, concurrency=self.options.concurrency)
                if any(c.failed for c in deleting):
                    failed = stage.name

    def _start_writing(self, step: str, total: int) -> None:
        self._writing = (step, 0, total)
        if self.progress is not None and total:
            self.progress(step, 0, total)

    def _written(self) -> None:
        step, done, total = self._writing
        self._writing = (step, done + 1, total)
        if self.progress is not None:
            self.progress(step, done + 1, total)

    async def _kinds(self) -> list[Kind]:
        """The namespaced kinds to list before deleting a namespace: discovered once per run."""
        if self._namespaced is None:
            self._namespaced = await blockers.namespaced_kinds(client=self.client)
        return self._namespaced

    async def _preview_block(self, change: Change, found: list[Change]) -> None:
        """In a dry-run, what would refuse this deletion, from the live objects already read."""
        if change.ref.kind == "ResourceClaim":
            users = blockers.claim_users(self.live.get(change.ref.key) or {})
            if users:
                change.refused = True
                change.error = blockers.claim_in_use(change.ref, users)
        elif change.ref.kind == "Node":
            blocked = await operators.pool_node_blocked(self.client, node=change.ref.name)
            if blocked:
                change.refused = True
                change.error = blocked
        elif change.ref.kind == "Namespace":
            pruned = {c.ref.key for c in found if c.action == Action.DELETED and not c.release}
            others = await blockers.foreign_objects(
                client=self.client, namespace=change.ref.name, kinds=await self._kinds(), ours=pruned
            )
            if others:
                change.refused = True
                change.error = blockers.namespace_not_empty(change.ref.name, others)

    async def _delete(self, change: Change) -> None:
        started = time.monotonic()
        live = self.live.get(change.ref.key)
        with tracing.tracer().start_as_current_span("apply object", attributes=_attrs(change.ref, change.action)):
            try:
                if change.release and change.ref.kind == "Node":
                    blocked = await operators.pool_node_blocked(self.client, node=change.ref.name)
                    if blocked:
                        change.refused = True
                        change.error = blocked
                    else:
                        ref = change.ref
                        await nodes.write(client=self.client, ref=ref, body=lambda node: plans.release(ref, live=node))
                        self.ledger.entries.pop(change.ref.key, None)
                elif change.release:
                    current = await self.client.get(change.ref)
                    if _uid(current) == _uid(live):  # else someone recreated it since: not the object fleet adopted
                        await self.client.patch(
                            change.ref, ownership.release_patch(current), field_manager=ownership.MANAGER
                        )
                    self.ledger.entries.pop(change.ref.key, None)
                elif change.ref.kind == "Namespace":
                    ours = set(self.ledger.entries) - self._not_pruned
                    others = await blockers.foreign_objects(
                        client=self.client, namespace=change.ref.name, kinds=await self._kinds(), ours=ours
                    )
                    if others:
                        change.refused = True
                        change.error = blockers.namespace_not_empty(change.ref.name, others)
                    else:
                        await self.client.delete(change.ref, uid=_uid(live))
                        self.ledger.entries.pop(change.ref.key, None)
                else:
                    preconditions = await self._free(change, live)
                    if preconditions is not None:
                        await self.client.delete(
                            change.ref, uid=preconditions.uid, resource_version=preconditions.resource_version
                        )
                        self.ledger.entries.pop(change.ref.key, None)
            except NotFound:
                self.ledger.entries.pop(change.ref.key, None)
            except KubeError as err:
                change.error = str(err)
        change.duration = time.monotonic() - started

    async def _record(self) -> None:
        if self.options.dry_run:
            return
        declared = [*self.plan.objects, *self.desired(stages.by_name("pools"))]
        recorded = self.ledger.entries
        kept: dict[str, ledgers.Entry] = {}
        for d in declared:
            entry = recorded.get(d.ref.key)
            if entry is None or entry.api_version != d.ref.api_version:
                entry = ledgers.Entry(d.ref.api_version, self._origin(d.ref.key))
            kept[d.ref.key] = entry
        for key, entry in self.ledger.entries.items():
            kept.setdefault(key, entry)  # not pruned (prune off, kept, failed): still ours to prune later
        self.ledger.entries = kept
        self.ledger.progress = ledgers.Progress(
            revision=self.plan.revision, done=[s.name for s in stages.STAGES], complete=True
        )
        if not self.ledger.exists and not self.ledger.entries:
            return
        # A new revision with nothing to do changes only the progress record: keep the old one
        # rather than write for nothing.
        progress = self.ledger.index is None or self._resumed or bool(self.changes.changed)
        with anyio.CancelScope(shield=True):  # an interrupt never leaves the record half-written
            await ledgers.save(client=self.client, ledger=self.ledger, progress=progress)

    async def _save_progress(self) -> None:
        self.ledger.progress.revision = self.plan.revision
        self.ledger.progress.complete = False
        with anyio.CancelScope(shield=True):  # an interrupt never leaves the record half-written
            await ledgers.save(client=self.client, ledger=self.ledger, progress=True)


class _Preconditions(NamedTuple):
    """What a delete must find: the uid fleet listed, and for a claim the resourceVersion found free."""

    uid: str | None
    resource_version: str | None = None


def _uid(obj: dict[str, Any] | None) -> str | None:
    uid = ((obj or {}).get("metadata") or {}).get("uid")
    return str(uid) if uid else None


def _apply_drift_policy(change: Change, policy: str) -> None:
    """Cluster-side drift under ``report`` is reported, under ``ignore`` hidden; git changes always apply."""
    if not change.drift or policy == "enforce":
        return
    owners = sorted({c.manager for c in change.conflicts if c.manager})
    by = f" ({change.error.splitlines()[0]})" if change.error else (f" by {', '.join(owners)}" if owners else "")
    change.error = ""  # a conflict over drift is what the policy is about, not a failure
    change.conflicts = ()  # the policy does not re-apply, so nothing is taken from anyone
    what = "deleted in the cluster" if change.action == Action.CREATED else "changed in the cluster"
    if policy == "report":
        change.action = Action.SKIPPED
        change.reason = f"{what}{by}; drift policy report: reported, not re-applied"
    else:
        change.action = Action.UNCHANGED
        change.reason = f"{what}; drift policy ignore"


def _hold(change: Change, freeze: drifts.Freeze) -> None:
    """A live freeze: nothing is written to the object, drift or git change; ``report`` says what differs."""
    if change.action not in (Action.CREATED, Action.CONFIGURED) and not change.failed and not change.drift:
        return
    owners = sorted({c.manager for c in change.conflicts if c.manager})
    what = ("changed in the cluster" + (f" by {', '.join(owners)}" if owners else "")) if change.drift else ""
    what = what or ("deleted in the cluster" if change.action == Action.CREATED else "differs from git")
    change.error = ""
    change.conflicts = ()
    change.forced = False
    change.replace = False  # nothing is deleted either
    if freeze.mode == "report":
        change.action = Action.SKIPPED
        change.reason = f"{what}; {freeze.describe()}: not applied"
    else:
        change.action = Action.UNCHANGED
        change.reason = f"{what}; {freeze.describe()}"
        change.drift = False  # ignore: left alone without reporting


_ALWAYS_CHECKED = (stages.Gate.CLASSES_PUBLISHED, stages.Gate.POOLS_APPLIED)
"""Gates about live state fleet does not write (nodes, slices): checked even when nothing changed."""


def _attrs(ref: Ref, action: Action) -> dict[str, Any]:
    return {
        tracing.KIND: ref.kind,
        tracing.NAMESPACE: ref.namespace,
        tracing.NAME: ref.name,
        tracing.ACTION: str(action),
    }


__all__ = ["Options", "Sync"]
