"""What the controller tells ``kubectl``: the ``FleetSync`` object's status, and the writer of it and its Events.

One cluster-scoped ``FleetSync`` per cluster (``fleetsyncs.fleet.gpufleet.dev``,
installed by ``overlays/base``), named after the cluster. Its status is a *view* of
the controller's ``Report`` — the newest checkout, its validation findings, the last
ChangeSet — built by the pure ``status`` function, so it is tested without a cluster.
Its lists (drift, conflicts, waiting, disruptive, frozen, operator, maintenances) are ``sections``;
the Events a run records are ``events``.

Conditions follow kstatus, so ``kubectl wait --for=condition=Ready fleetsync/<c>``
and Argo CD / Flux health checks work unchanged:

| condition | True when |
|---|---|
| ``Ready`` | the newest revision is applied completely and nothing failed |
| ``Reconciling`` | a reconcile is running (or the newest revision is not applied yet) |
| ``Stalled`` | the newest revision cannot be applied as it is (it does not validate) |

A stuck node in a driver upgrade leaves ``Ready`` alone (``events`` says why).

Each condition carries ``observedGeneration``; ``lastTransitionTime`` changes only when
its status does. Status is written through the ``status`` subresource by server-side
apply carrying the ``resourceVersion`` last read, so a stale writer (a replica that
lost the Lease) gets a Conflict instead of overwriting a newer status.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fleet.controller.sections import (
    MAX_LISTED,
    changes_of,
    conflicts_of,
    disruptive_of,
    drift_of,
    operator_of,
    waiting_of,
    waiting_summary,
)
from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.kube import Client, Conflict, KubeError, NotFound
from fleet.manifests.findings import Finding
from fleet.views.fleetsyncs import API_VERSION, KIND, ref
from fleet.views.maintenances import Maintenance

logger = logging.getLogger(__name__)

FIELD_MANAGER = "fleet-controller"
EVENT_NAMESPACE = "default"
"""Events about cluster-scoped objects live in ``default``, as kubectl looks for them."""


@dataclass
class Spec:
    """The FleetSync's spec: what the controller follows (``--repo``, ``--ref``, ``--path``)."""

    repository: str = ""
    ref: str = ""
    path: str = ""


@dataclass
class SourceState:
    """Whether the last git fetch brought the newest commit, and why not."""

    reachable: bool = True
    error: str = ""
    reason: str = ""
    """``SourceError.reason`` of the last failed fetch (``unreachable``, ``too-large``...)."""


@dataclass
class Drift:
    """What status keeps of drift beyond the last run: its repairs of the last hour and the objects left alone."""

    repairs: list[dict[str, Any]] = field(default_factory=list)
    """``sections.drift_of`` rows with their time, newest first: ``sections.keep_repairs``."""
    frozen: list[dict[str, str]] = field(default_factory=list)
    """Objects fleet leaves alone (``sections.frozen_of``), as the last run found them."""


@dataclass
class Report:
    """Everything the controller knows that status shows; filled by the reconciler."""

    cluster: str
    attempted: str = ""
    """Revision of the newest checkout, valid or not."""
    applied: str = ""
    """Revision last applied completely."""
    enforced: str = ""
    """Revision being enforced now (the last good one when the newest does not validate)."""
    source: SourceState = field(default_factory=SourceState)
    findings: tuple[Finding, ...] = ()
    changes: ChangeSet | None = None
    error: str = ""
    reconciling: bool = False
    trace_id: str = ""
    last_reconcile: str = ""
    operator: Change | None = None
    """The operator release's entry from the last run that reached the operator stage (None: not declared)."""
    drift: Drift = field(default_factory=Drift)
    rollout: dict[str, Any] | None = None
    """``status.rollout`` (``rollouts.status``): the cluster's wave and what it waits for; None: in no wave."""
    maintenances: tuple[Maintenance, ...] = ()
    """The cluster's GPUMaintenances as the last run left them (``sections.maintenances_of``)."""


def last_error(report: Report) -> str:
    """Why the last reconcile failed: its error, else the first object that failed ("" if none)."""
    failed = [e for e in (report.changes.entries if report.changes else ()) if e.failed]
    return report.error or (f"{failed[0].ref}: {failed[0].error}" if failed else "")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        and report.source.reachable
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
            run = changes.runs.get(stage)
            if run is not None:
                row["seconds"] = round(run.seconds, 3)
                if run.gate:
                    row["gate"] = run.gate
                    row["gateSeconds"] = round(run.gate_seconds, 3)
                    row["healthy"] = bool(run.healthy)
            stages.append(row)
    failed = [e for e in (changes.entries if changes else ()) if e.failed]
    drift = [d for d in drift_of(changes) if d["action"] != "repaired"] + report.drift.repairs
    conflicts = conflicts_of(changes)
    disruptive = disruptive_of(changes)
    changed = changes_of(changes)
    invalid = is_stalled(report)
    ready = is_ready(report)
    if invalid:
        ready_reason, ready_message = "ValidationFailed", f"revision {report.attempted[:12]} does not validate"
    elif not report.source.reachable:
        ready_reason = SOURCE_REASONS.get(report.source.reason, "SourceUnreachable")
        ready_message = report.source.error
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
        if report.drift.frozen:
            ready_message += f" ({len(report.drift.frozen)} object(s) frozen, left alone: see status.frozen)"
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
        "sourceReachable": report.source.reachable,
        "sourceError": report.source.error,
        "sourceReason": report.source.reason,
        "stages": stages,
        "findings": [
            {"location": str(f.location), "rule": f.rule, "message": f.message} for f in report.findings[:MAX_LISTED]
        ],
        "findingCount": len(report.findings),
        "drift": drift[:MAX_LISTED],
        "driftCount": len(drift),
        "conflicts": conflicts[:MAX_LISTED],
        "conflictCount": len(conflicts),
        "frozen": report.drift.frozen[:MAX_LISTED],
        "frozenCount": len(report.drift.frozen),
        "waiting": waiting_of(changes)[:MAX_LISTED],
        "waitingCount": len(changes.waiting) if changes is not None else 0,
        "disruptive": disruptive[:MAX_LISTED],
        "disruptiveCount": len(disruptive),
        "changes": changed[:MAX_LISTED],
        "changeCount": len(changed),
        "maintenances": [m.document(listed=MAX_LISTED) for m in report.maintenances[:MAX_LISTED]],
        "maintenanceCount": len(report.maintenances),
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


@dataclass
class Writer:
    """Writes one cluster's FleetSync status and Events; remembers the last object it read."""

    client: Client
    cluster: str
    spec: Spec = field(default_factory=Spec)
    current: dict[str, Any] | None = None
    written: dict[str, Any] = field(default_factory=dict)

    async def ensure(self) -> dict[str, Any]:
        """Create (or update) the FleetSync object's spec; returns the live object."""
        spec = self.spec
        body = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": self.cluster},
            "spec": {"repository": spec.repository, "ref": spec.ref, "path": spec.path},
        }
        self.current = await self.client.apply(body, field_manager=FIELD_MANAGER, force=True)
        return self.current

    async def refresh(self) -> dict[str, Any] | None:
        """Read the FleetSync afresh (its annotations: an emergency); the last object read when that fails."""
        with contextlib.suppress(KubeError):
            self.current = await self.client.get(ref(self.cluster))
        return self.current

    async def write(self, report: Report) -> None:
        """Write the status for ``report`` if it changed; a stale read is re-read once, never forced."""
        for attempt in range(2):
            if self.current is None or attempt:
                try:
                    self.current = await self.client.get(ref(self.cluster))
                except NotFound:
                    self.current = await self.ensure()
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


def _same(new: dict[str, Any], old: dict[str, Any]) -> bool:
    def strip(s: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in s.items() if k not in ("lastReconcileTime", "traceID")}

    return strip(new) == strip(old)


__all__ = [
    "API_VERSION",
    "KIND",
    "Drift",
    "Report",
    "SourceState",
    "Spec",
    "Writer",
    "is_ready",
    "is_stalled",
    "last_error",
    "now",
    "ref",
    "status",
]
