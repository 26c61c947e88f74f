"""What the controller tells ``kubectl``: the ``FleetSync`` object's status, and Events on it.

One cluster-scoped ``FleetSync`` per cluster (``fleetsyncs.fleet.gpufleet.dev``,
installed by ``overlays/base``), named after the cluster. Its status is a *view* of
the controller's ``Report`` — the newest checkout, its validation findings, the last
ChangeSet — built by the pure ``status`` function, so it is tested without a cluster.

Conditions follow kstatus, so ``kubectl wait --for=condition=Ready fleetsync/<c>``
and Argo CD / Flux health checks work unchanged:

| condition | True when |
|---|---|
| ``Ready`` | the newest revision is applied completely and nothing failed |
| ``Reconciling`` | a reconcile is running (or the newest revision is not applied yet) |
| ``Stalled`` | the newest revision cannot be applied as it is (it does not validate) |

``status.operator`` is the GPU Operator release as the last run of the operator stage saw it
(``operator_of``): release, chart version deployed, what the run did (created, configured,
unchanged, skipped, refused or failed, with the error) and ``driverUpgrade``, one item per GPU
node carrying ``nvidia.com/gpu-driver-upgrade-state``: its state, since when (the label's
managedFields time), whether it is stuck (longer than the Fleet's ``driverStateTimeout`` in
that state) and, when stuck, its recent Events. It comes from the data the operator stage
carries on the release's Change (``Change.operator``), the same object ``fleetctl diff`` and
``apply`` print, and it keeps the last seen value while a run stops before that stage.

A stuck node does **not** make the FleetSync not Ready. ``Ready`` answers one question for
``kubectl wait`` and the Argo CD / Flux health checks: is the newest revision of git applied
completely? A node stuck in a driver upgrade is the GPU Operator's rollout waiting on a
drain, a job or a failed driver pod on that node; fleet wrote nothing wrong and re-applying
would change nothing, so flipping Ready (or Stalled, which means "this revision can never be
applied") would page the wrong owner and block pipelines that wait on fleet. The one
exception is already in the engine: right after fleet installs or upgrades the operator, the
readiness gate counts a stuck node as not ready, so *that* revision is not applied until it
passes. Otherwise the stuck node is shown in ``status.operator.driverUpgrade`` (``stuck:
true``, with its Events), counted in ``status.operator.stuckCount`` (the ``Stuck`` printer
column of ``kubectl get fsync -o wide``) and announced by one Warning Event
``DriverUpgradeStuck`` per node and state (``stuck_events``), not one per reconcile.

``status.disruptive`` lists the last run's changes that disrupt GPU work (``fleet.engine.disruptions``):
each object, why, the nodes it touches and the allocated claims it affects; ``disruptiveCount`` counts
them.

``status.drift`` lists the drift the last reconcile found (reported, ignored) and the repairs of
the last hour (at most ``MAX_REPAIRS``, each with its time, the manager that had changed the object
and every field before and after): the reconcile that a repair's own write triggers finds nothing
to do, and its status must not make the repair vanish. ``status.frozen`` lists the objects fleet
leaves alone (``fleet.engine.drifts``), with who froze them and since when. Each repair is also a
``DriftRepaired`` Event, never de-duplicated; reported drift is one ``Drift`` Warning per object;
ignored drift is listed and announces nothing.

Each condition carries ``observedGeneration``; ``lastTransitionTime`` changes only when
its status does. Status is written through the ``status`` subresource by server-side
apply carrying the ``resourceVersion`` last read, so a stale writer (a replica that
lost the Lease) gets a Conflict instead of overwriting a newer status.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.engine.drifts import Freeze
from fleet.kube import Client, Conflict, KubeError, NotFound, Ref, timestamps
from fleet.manifests.findings import Finding

logger = logging.getLogger(__name__)

GROUP = "fleet.gpufleet.dev"
API_VERSION = f"{GROUP}/v1alpha1"
KIND = "FleetSync"
FIELD_MANAGER = "fleet-controller"
EVENT_NAMESPACE = "default"
"""Events about cluster-scoped objects live in ``default``, as kubectl looks for them."""
MAX_LISTED = 50


@dataclass
class Report:
    """Everything the controller knows that status shows; filled by the reconciler."""

    cluster: str
    repository: str = ""
    ref: str = ""
    path: str = ""
    attempted: str = ""
    """Revision of the newest checkout, valid or not."""
    applied: str = ""
    """Revision last applied completely."""
    enforced: str = ""
    """Revision being enforced now (the last good one when the newest does not validate)."""
    source_reachable: bool = True
    source_error: str = ""
    source_reason: str = ""
    """``SourceError.reason`` of the last failed fetch (``unreachable``, ``too-large``...)."""
    findings: tuple[Finding, ...] = ()
    changes: ChangeSet | None = None
    error: str = ""
    reconciling: bool = False
    trace_id: str = ""
    last_reconcile: str = ""
    operator: Change | None = None
    """The operator release's entry from the last run that reached the operator stage (None: not declared)."""
    repairs: list[dict[str, Any]] = field(default_factory=list)
    """Recent repairs (``drift_of`` rows with their time), newest first: ``keep_repairs``."""
    frozen: list[dict[str, str]] = field(default_factory=list)
    """Objects fleet leaves alone (``frozen_of``), as the last run found them."""
    rollout: dict[str, Any] | None = None
    """``status.rollout`` (``rollouts.status``): the cluster's wave and what it waits for; None: in no wave."""


EMERGENCY = "fleet.gpufleet.dev/emergency"
"""The FleetSync annotation whose value (why) lets disruptive changes skip the maintenance window."""


def annotated_by(obj: dict[str, Any], annotation: str) -> str:
    """The field manager that set ``annotation`` on ``obj`` and when (``kubectl-annotate at …``), from managedFields."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or ():
        annotations = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:annotations") or {}
        if f"f:{annotation}" in annotations:
            return f"{entry.get('manager', '?')} at {entry.get('time', '?')}"
    return ""


def waiting_of(changes: ChangeSet | None) -> list[dict[str, Any]]:
    """``status.waiting``: the disruptive changes held back, what each would do and what it waits for."""
    rows = []
    for entry in changes.waiting if changes is not None else ():
        wait = entry.waiting
        assert wait is not None
        rows.append(
            {
                "kind": entry.ref.kind,
                "namespace": entry.ref.namespace,
                "name": entry.ref.name,
                "action": str(entry.intended or ""),
                "disruption": entry.disruption.reason if entry.disruption is not None else "",
                "waitsFor": wait.on,
                "reason": wait.reason,
                "until": wait.until.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if wait.until else "",
                "overdue": wait.overdue,
            }
        )
    return rows


def waiting_summary(changes: ChangeSet | None) -> str:
    """``2 disruptive change(s) wait for the maintenance window (opens …)``; "" when none waits."""
    held = changes.waiting if changes is not None else []
    if not held:
        return ""
    first = held[0].waiting
    assert first is not None
    overdue = sum(1 for e in held if e.waiting is not None and e.waiting.overdue)
    late = f"; {overdue} overdue" if overdue else ""
    return f"{len(held)} disruptive change(s) wait: {held[0].ref} {first}{late}"


def last_error(report: Report) -> str:
    """Why the last reconcile failed: its error, else the first object that failed ("" if none)."""
    failed = [e for e in (report.changes.entries if report.changes else ()) if e.failed]
    return report.error or (f"{failed[0].ref}: {failed[0].error}" if failed else "")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def repaired(entry: Change) -> bool:
    """Whether ``entry`` is drift fleet put back (written, not failed)."""
    return entry.drift and entry.action in (Action.CREATED, Action.CONFIGURED) and not entry.failed


def drift_of(changes: ChangeSet | None, *, at: str = "") -> list[dict[str, Any]]:
    """The drifted objects of a ChangeSet: what changed in the cluster and what was done about it.

    A repair also names the manager(s) that had changed the object, and per field the value
    before and after (``Change.repairs``); ``at`` stamps repairs with when they were made."""
    out: list[dict[str, Any]] = []
    for entry in changes.entries if changes else ():
        if not entry.drift:
            continue
        fixed = repaired(entry)
        row: dict[str, Any] = {
            "kind": entry.ref.kind,
            "namespace": entry.ref.namespace,
            "name": entry.ref.name,
            "stage": entry.stage,
            "action": "repaired" if fixed else ("reported" if entry.action == Action.SKIPPED else "ignored"),
            "reason": entry.reason or entry.error or "changed in the cluster",
        }
        if fixed:
            row["manager"] = manager_of(entry)
            row["fields"] = [
                {"field": r.field, "manager": r.manager, "before": r.before, "after": r.after} for r in entry.repairs
            ]
            if at:
                row["time"] = at
        out.append(row)
    return out


def manager_of(entry: Change) -> str:
    """Who had changed a repaired object: its repairs' managers, else the conflicts' ("" unknown)."""
    found = {r.manager for r in entry.repairs if r.manager} or {c.manager for c in entry.conflicts if c.manager}
    return ",".join(sorted(found))


MAX_REPAIRS = 20
REPAIR_MEMORY = datetime.timedelta(hours=1)
"""How long status keeps a repair in ``drift[]``: the reconcile that a repair's own write triggers
finds nothing to do, and its status must not make the repair vanish at once."""


def keep_repairs(rows: list[dict[str, Any]], *, now: datetime.datetime) -> list[dict[str, Any]]:
    """The repairs status keeps: newest first, at most ``MAX_REPAIRS``, none older than ``REPAIR_MEMORY``."""
    kept = []
    for row in rows:
        when = timestamps.parse(row.get("time"))
        if when is not None and now - when <= REPAIR_MEMORY:
            kept.append(row)
    return kept[:MAX_REPAIRS]


def frozen_of(found: list[tuple[Ref, Freeze]]) -> list[dict[str, str]]:
    """``status.frozen``: the objects fleet leaves alone, with who froze them and since when."""
    return [
        {
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
            "mode": f.mode,
            "by": f.by,
            "since": f.since,
            "source": f.source,
        }
        for ref, f in found
    ]


def _stamp(when: datetime.datetime | None) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else ""


def operator_of(change: Change | None) -> dict[str, Any] | None:
    """``status.operator`` for the operator release's entry (None: no release to report)."""
    if change is None:
        return None
    seen = change.operator
    if change.refused:
        action = "refused"
    elif change.failed:
        action = "failed"
    else:
        action = str(change.action)
    nodes: list[dict[str, Any]] = []
    stuck = 0
    for d in seen.drivers if seen is not None else ():
        is_stuck = seen is not None and d.stuck(now=seen.checked, limit=seen.limit)
        stuck += is_stuck
        item: dict[str, Any] = {"node": d.node, "state": d.state, "since": _stamp(d.since), "stuck": is_stuck}
        if is_stuck:
            item["events"] = list(d.events)
        nodes.append(item)
    out: dict[str, Any] = {
        "release": f"{change.ref.namespace}/{change.ref.name}",
        "version": seen.version if seen else "",
        "action": action,
        "error": change.error[:1000],
        "driverStateTimeout": int(seen.limit) if seen else 0,
        "driverUpgrade": nodes[:MAX_LISTED],
        "stuckCount": stuck,
    }
    if seen is not None and seen.remedied:
        out["remediation"] = seen.remedied[:1000]
    return out


def stuck_events(
    change: Change | None, *, already: set[tuple[str, str]]
) -> tuple[list[tuple[str, str, bool]], set[tuple[str, str]]]:
    """Warning Events ``DriverUpgradeStuck`` for nodes newly stuck, and the (node, state) pairs stuck now.

    ``already`` holds the pairs announced before: a node stuck in one state gets one Event,
    however many reconciles see it; it gets another only if it leaves that state and is
    stuck again (in another state, or in the same one later).
    """
    seen = change.operator if change else None
    if seen is None:
        return [], set()
    out: list[tuple[str, str, bool]] = []
    now_stuck: set[tuple[str, str]] = set()
    for d in seen.stuck():
        key = (d.node, d.state)
        now_stuck.add(key)
        if key in already:
            continue
        events = f"; its events: {' | '.join(d.events)}" if d.events else "; no recent events on the node"
        out.append(
            (
                "DriverUpgradeStuck",
                f"Node {d.node} has been in driver-upgrade state {d.state} for {d.minutes(now=seen.checked)} min "
                f"(more than driverStateTimeout {int(seen.limit)}s){events}. "
                f"Look at what the GPU Operator's upgrade waits for: kubectl describe node {d.node} "
                "(drain, PodDisruptionBudgets, jobs still running, the driver pod's logs)",
                True,
            )
        )
    return out, now_stuck


def conflicts_of(changes: ChangeSet | None) -> list[dict[str, str]]:
    """Fields fleet did not write because another field manager owns them, one row per field."""
    out: list[dict[str, str]] = []
    for entry in changes.entries if changes else ():
        if not entry.failed:
            continue
        for c in entry.conflicts:
            out.append(
                {
                    "kind": entry.ref.kind,
                    "namespace": entry.ref.namespace,
                    "name": entry.ref.name,
                    "field": c.field,
                    "manager": c.manager,
                }
            )
    return out


def disruptive_of(changes: ChangeSet | None) -> list[dict[str, Any]]:
    """``status.disruptive``: the last run's entries that disrupt GPU work (``Change.disruption``),
    with why, the nodes and the allocated claims (each list cut at ``MAX_LISTED``)."""
    out: list[dict[str, Any]] = []
    for entry in changes.disruptive if changes else ():
        found = entry.disruption
        assert found is not None
        out.append(
            {
                "kind": entry.ref.kind,
                "namespace": entry.ref.namespace,
                "name": entry.ref.name,
                "stage": entry.stage,
                "action": str(entry.action),
                "reason": found.reason[:1000],
                "nodes": sorted(found.nodes)[:MAX_LISTED],
                "nodeCount": len(found.nodes),
                "claims": list(found.claims[:MAX_LISTED]),
                "claimCount": len(found.claims),
            }
        )
    return out


SOURCE_REASONS = {
    "too-large": "SourceTooLarge",
    "unauthorized": "SourceUnauthorized",
    "ref-not-found": "SourceRefNotFound",
    "path-not-found": "SourcePathNotFound",
}
"""Ready's reason per ``SourceError.reason``; anything else is ``SourceUnreachable``."""


def is_ready(report: Report) -> bool:
    """The ``Ready`` condition: the newest revision applied completely, nothing failed, the source reachable."""
    failed = any(e.failed for e in (report.changes.entries if report.changes else ()))
    return (
        not is_stalled(report)
        and not report.error
        and not failed
        and report.source_reachable
        and bool(report.applied)
        and report.applied == report.attempted
    )


def is_stalled(report: Report) -> bool:
    """The ``Stalled`` condition: the newest revision does not validate, so it can never be applied as it is."""
    return bool(report.findings)


def status(report: Report, *, generation: int, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The FleetSync status for ``report`` (pure; ``previous`` keeps condition transition times)."""
    changes = report.changes
    stages: list[dict[str, Any]] = []
    if changes is not None:
        failed_in = Counter(e.stage for e in changes.entries if e.failed)  # one pass, not one per stage
        for stage, counts in changes.summary().items():
            row: dict[str, Any] = {"name": stage}
            row.update({str(a): counts.get(str(a), 0) for a in Action})
            row["failed"] = failed_in[stage]
            stages.append(row)
    failed = [e for e in (changes.entries if changes else ()) if e.failed]
    drift = [d for d in drift_of(changes) if d["action"] != "repaired"] + report.repairs
    conflicts = conflicts_of(changes)
    disruptive = disruptive_of(changes)
    invalid = is_stalled(report)
    ready = is_ready(report)
    if invalid:
        ready_reason, ready_message = "ValidationFailed", f"revision {report.attempted[:12]} does not validate"
    elif not report.source_reachable:
        ready_reason = SOURCE_REASONS.get(report.source_reason, "SourceUnreachable")
        ready_message = report.source_error
        if report.enforced:
            ready_message += f" (revision {report.enforced[:12]} stays enforced)"
    elif conflicts and not report.error:
        ready_reason = "Conflict"
        first = conflicts[0]
        obj = f"{first['kind']} {first['namespace'] + '/' if first['namespace'] else ''}{first['name']}"
        ready_message = (
            f"{len(conflicts)} field(s) owned by other field managers were not overwritten: "
            f"{obj} {first['field']} (owned by {first['manager']}); resolve it with that manager, or let fleet "
            'take it (fleet.gpufleet.dev/take-ownership: "true" on the manifest, or --force-conflicts)'
        )
    elif report.error or failed:
        ready_reason = "ReconcileFailed"
        ready_message = report.error or f"{len(failed)} object(s) failed: {failed[0].ref}: {failed[0].error}"
    elif ready and changes is not None and changes.waiting:
        ready_reason = "Waiting"
        ready_message = f"revision {report.applied[:12]} applied but for {waiting_summary(changes)}"
    elif ready:
        ready_reason, ready_message = "Applied", f"revision {report.applied[:12]} applied"
        if report.frozen:
            ready_message += f" ({len(report.frozen)} object(s) frozen, left alone: see status.frozen)"
    else:
        ready_reason, ready_message = "Progressing", f"applying revision {report.attempted[:12]}"
    reconciling = report.reconciling or (not ready and not invalid and not report.error and not failed)
    conditions = [
        _condition("Ready", ready, ready_reason, ready_message, generation, previous),
        _condition(
            "Reconciling",
            reconciling,
            "Progressing" if reconciling else "Idle",
            f"reconciling revision {report.attempted[:12]}" if reconciling else "",
            generation,
            previous,
        ),
        _condition(
            "Stalled",
            invalid,
            "ValidationFailed" if invalid else "Healthy",
            ready_message if invalid else "",
            generation,
            previous,
        ),
    ]
    body: dict[str, Any] = {
        "observedGeneration": generation,
        "lastAttemptedRevision": report.attempted,
        "lastAppliedRevision": report.applied,
        "enforcedRevision": report.enforced,
        "sourceReachable": report.source_reachable,
        "sourceError": report.source_error,
        "sourceReason": report.source_reason,
        "stages": stages,
        "findings": [
            {"location": str(f.location), "rule": f.rule, "message": f.message} for f in report.findings[:MAX_LISTED]
        ],
        "findingCount": len(report.findings),
        "drift": drift[:MAX_LISTED],
        "driftCount": len(drift),
        "conflicts": conflicts[:MAX_LISTED],
        "conflictCount": len(conflicts),
        "frozen": report.frozen[:MAX_LISTED],
        "frozenCount": len(report.frozen),
        "waiting": waiting_of(changes)[:MAX_LISTED],
        "waitingCount": len(changes.waiting) if changes is not None else 0,
        "disruptive": disruptive[:MAX_LISTED],
        "disruptiveCount": len(disruptive),
        "lastError": last_error(report),
        "traceID": report.trace_id,
        "lastReconcileTime": report.last_reconcile,
        "conditions": conditions,
    }
    operator = operator_of(report.operator)
    if operator is not None:
        body["operator"] = operator
    if report.rollout is not None:
        body["rollout"] = report.rollout
    return body


def _condition(
    kind: str, value: bool, reason: str, message: str, generation: int, previous: dict[str, Any] | None
) -> dict[str, Any]:
    text = "True" if value else "False"
    before = next((c for c in (previous or {}).get("conditions") or () if c.get("type") == kind), None)
    since = before["lastTransitionTime"] if before and before.get("status") == text else now()
    return {
        "type": kind,
        "status": text,
        "reason": reason,
        "message": message[:1000],
        "observedGeneration": generation,
        "lastTransitionTime": since,
    }


def ref(cluster: str) -> Ref:
    return Ref(api_version=API_VERSION, kind=KIND, namespace="", name=cluster)


@dataclass
class Writer:
    """Writes one cluster's FleetSync status and Events; remembers the last object it read."""

    client: Client
    cluster: str
    current: dict[str, Any] | None = None
    written: dict[str, Any] = field(default_factory=dict)

    async def ensure(self, *, report: Report) -> dict[str, Any]:
        """Create (or update) the FleetSync object's spec; returns the live object."""
        body = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": self.cluster},
            "spec": {"repository": report.repository, "ref": report.ref, "path": report.path},
        }
        self.current = await self.client.apply(body, field_manager=FIELD_MANAGER, force=True)
        return self.current

    async def write(self, report: Report) -> None:
        """Write the status for ``report`` if it changed; a stale read is re-read once, never forced."""
        for attempt in range(2):
            if self.current is None or attempt:
                try:
                    self.current = await self.client.get(ref(self.cluster))
                except NotFound:
                    self.current = await self.ensure(report=report)
            meta = self.current.get("metadata") or {}
            previous = self.current.get("status") or {}
            body = status(report, generation=int(meta.get("generation") or 1), previous=previous)
            if _same(body, previous):
                return
            patch = {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "metadata": {"name": self.cluster, "resourceVersion": meta.get("resourceVersion")},
                "status": body,
            }
            try:
                self.current = await self.client.apply(
                    patch, field_manager=FIELD_MANAGER, force=True, subresource="status"
                )
                self.written = body
                return
            except Conflict:
                continue

    async def event(self, *, reason: str, message: str, warning: bool = False) -> bool:
        """An Event on the FleetSync object; False when it was not recorded (best effort: a failed
        Event never fails a reconcile)."""
        involved = self.current or {}
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{self.cluster}.{uuid.uuid4().hex[:16]}", "namespace": EVENT_NAMESPACE},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": self.cluster,
                "uid": (involved.get("metadata") or {}).get("uid", ""),
            },
            "reason": reason,
            "message": message[:1000],
            "type": "Warning" if warning else "Normal",
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "reportingInstance": FIELD_MANAGER,
            "firstTimestamp": stamp[:19] + "Z",
            "lastTimestamp": stamp[:19] + "Z",
            "eventTime": stamp,
            "action": reason,
            "count": 1,
        }
        try:
            await self.client.request(
                "POST", f"/api/v1/namespaces/{EVENT_NAMESPACE}/events", verb="create", body=body, where="Event"
            )
        except KubeError as err:
            logger.warning("could not record Event %s: %s", reason, err)
            return False
        return True


def events_for(
    changes: ChangeSet, *, already: set[tuple[str, str, str, str]] | None = None
) -> list[tuple[str, str, bool]]:
    """(reason, message, warning) Events for a ChangeSet: applied, pruned, failed, drift.

    ``already`` holds (kind, namespace, name, action) of drift and conflicts (action ``conflict``)
    announced before: not again (a conflict is retried with backoff until someone resolves it).
    """
    out: list[tuple[str, str, bool]] = []
    counts = Counter(str(e.action) for e in changes.entries if not e.failed and not e.drift)
    written = counts.get("created", 0) + counts.get("configured", 0)
    if written:
        out.append(
            ("Applied", f"revision {changes.revision[:12]}: {_counts(counts, ('created', 'configured'))}", False)
        )
    if counts.get("deleted"):
        out.append(("Pruned", f"revision {changes.revision[:12]}: {counts['deleted']} deleted", False))
    for entry in changes.entries:
        if entry.failed and entry.conflicts:
            if already and (entry.ref.kind, entry.ref.namespace, entry.ref.name, "conflict") in already:
                continue
            fields = ", ".join(str(c) for c in entry.conflicts)
            out.append(("Conflict", f"{entry.ref}: not overwritten, other field managers own {fields}", True))
        elif entry.failed:
            out.append(("Failed", f"{entry.ref}: {entry.error.splitlines()[0]}", True))
    for entry in changes.entries:
        if entry.operator is not None and entry.operator.remedied:
            out.append(("HelmReleaseRemediated", f"{entry.ref}: {entry.operator.remedied}", True))
        if entry.drift and repaired(entry):
            out.append(("DriftRepaired", repair_message(entry), False))  # every repair: never de-duplicated
    for d in drift_of(changes):
        if d["action"] in ("repaired", "ignored"):  # ignore is silent: status lists it, no Warning
            continue
        if already and (d["kind"], d["namespace"], d["name"], d["action"]) in already:
            continue
        obj = f"{d['kind']} {d['namespace'] + '/' if d['namespace'] else ''}{d['name']}"
        out.append(("Drift", f"{obj}: {d['reason']} ({d['action']})", True))
    return out


def repair_message(entry: Change) -> str:
    """A ``DriftRepaired`` Event's message: the object, who had changed it, each field before and after."""
    if entry.action == Action.CREATED:
        return f"{entry.ref}: re-created from git ({entry.reason or 'deleted in the cluster'})"
    if not entry.repairs:
        return f"{entry.ref}: put back to git's content ({entry.reason or 'changed in the cluster'})"
    by = manager_of(entry) or "an unknown manager"
    fields = "; ".join(
        f"{r.field}: {r.before} -> {r.after}"
        + (f" (changed by {r.manager or 'an unknown manager'})" if r.manager != by else "")
        for r in entry.repairs
    )
    return f"{entry.ref}: put back to git's values, changed by {by}: {fields}"


def _counts(counts: Counter[str], keys: tuple[str, ...]) -> str:
    return ", ".join(f"{counts[k]} {k}" for k in keys if counts.get(k))


def _same(new: dict[str, Any], old: dict[str, Any]) -> bool:
    def strip(s: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in s.items() if k not in ("lastReconcileTime", "traceID")}

    return strip(new) == strip(old)


__all__ = [
    "API_VERSION",
    "EMERGENCY",
    "KIND",
    "Report",
    "Writer",
    "annotated_by",
    "conflicts_of",
    "drift_of",
    "events_for",
    "frozen_of",
    "is_ready",
    "is_stalled",
    "keep_repairs",
    "last_error",
    "manager_of",
    "operator_of",
    "ref",
    "repair_message",
    "repaired",
    "status",
    "stuck_events",
    "waiting_of",
    "waiting_summary",
]
