"""One row per cluster, read from its ``FleetSync``: what ``fleetctl status --all`` and the console show.

fleet-controller keeps one cluster-scoped ``FleetSync`` per cluster (``fleet.controller.statuses``
writes it). ``row_of`` turns one into a ``Row`` (pure), ``read_all`` reads every cluster's at once
through its own kubeconfig context, a cluster that cannot be read being a row saying why.
``state`` folds the Ready condition into the four states people scan for: Ready, Progressing,
Waiting (applied but for held changes) and Failed (Unknown when there is nothing to read). A row
carries the cluster's GPU maintenances as the FleetSync lists them (``fleet.views.maintenances``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import anyio

from fleet import kube
from fleet.errors import FleetError
from fleet.kube import Ref
from fleet.views import maintenances

GROUP = "fleet.gpufleet.dev"
API_VERSION = f"{GROUP}/v1alpha1"
KIND = "FleetSync"

State = Literal["Ready", "Progressing", "Waiting", "Failed", "Unknown"]
FAILED_REASONS = frozenset(
    {"ValidationFailed", "ReconcileFailed", "Conflict", "Unreachable", "NoFleetSync", "OperatorRefused"}
)
"""Ready reasons that need a person: the rest of a not-Ready cluster is still making progress."""


def ref(cluster: str) -> Ref:
    """The FleetSync of ``cluster``."""
    return Ref(api_version=API_VERSION, kind=KIND, namespace="", name=cluster)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition of type ``kind`` in ``obj``'s status ({} when absent)."""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return {}


@dataclass(frozen=True)
class Held:
    """A disruptive change held back: what it is, what it waits for and until when."""

    kind: str
    namespace: str
    name: str
    waits_for: str
    reason: str
    until: str
    """When the wait ends (a window opens, a deadline passes), RFC 3339; "" when open-ended."""


@dataclass(frozen=True)
class Row:
    """One cluster's line of ``status --all`` (``-o json`` prints these, in camelCase)."""

    cluster: str
    context: str
    reachable: bool = True
    error: str = ""
    """Why the cluster could not be read (unreachable, no such context, no FleetSync)."""
    revision: str = ""
    ready: str = "Unknown"
    reason: str = ""
    message: str = ""
    drift: int = 0
    conflicts: int = 0
    frozen: int | None = None
    """Objects frozen by the drift annotation; None when the controller does not report them."""
    operator_version: str = ""
    stuck_nodes: int = 0
    waiting: int = 0
    """Disruptive changes held back for a window or running jobs."""
    waits_for: str = ""
    """What the first of them waits for (``the maintenance window (opens …)``)."""
    wave: int = 0
    """The cluster's rollout wave, counted from 1; 0: in no wave."""
    wave_waits_for: str = ""
    """What the wave waits for (``wave 1 baking until …``); "": the earlier waves let the revision go."""
    wanted: str = ""
    """The revision the controller last attempted: the one it wants applied."""
    applied_at: str = ""
    """When the controller last reconciled (RFC 3339)."""
    trace_id: str = ""
    held: tuple[Held, ...] = field(default=())
    """The held changes the FleetSync lists (the first ``MAX_LISTED`` of ``waiting``)."""
    maintenances: tuple[maintenances.Maintenance, ...] = field(default=())
    """The GPU maintenances the FleetSync lists (``status.maintenances``)."""

    @property
    def state(self) -> State:
        """Ready, Progressing, Waiting or Failed: the Ready condition as people scan for it; Unknown when
        the FleetSync could not be read (none yet, or the viewer may not read it)."""
        if self.reason in ("Forbidden", "NoStatus"):
            return "Unknown"
        if self.ready == "True":
            return "Waiting" if self.waiting or self.reason == "Waiting" else "Ready"
        if not self.reachable or self.reason in FAILED_REASONS or self.reason.endswith("Unreachable"):
            return "Failed"
        return "Progressing"

    def document(self) -> dict[str, Any]:
        camel = {
            "operator_version": "operatorVersion",
            "stuck_nodes": "stuckNodes",
            "waits_for": "waitsFor",
            "wave_waits_for": "waveWaitsFor",
            "applied_at": "appliedAt",
            "trace_id": "traceID",
        }
        out = {camel.get(k, k): v for k, v in asdict(self).items() if k not in ("held", "maintenances")}
        out["held"] = [{camel.get(k, k): v for k, v in asdict(h).items()} for h in self.held]
        out["maintenances"] = [m.document(listed=max(len(m.devices), len(m.pods))) for m in self.maintenances]
        out["state"] = self.state
        return out


def row_of(cluster: str, context: str, obj: dict[str, Any] | None) -> Row:
    """The row for ``cluster``'s FleetSync ``obj`` (None: there is none) (pure)."""
    if obj is None:
        return Row(
            cluster=cluster,
            context=context,
            reason="NoFleetSync",
            error=f"no FleetSync {cluster} in context {context}: is fleet-controller running for this cluster?",
        )
    status = obj.get("status") or {}
    ready = condition(obj, "Ready")
    frozen = status.get("frozenCount")
    if frozen is None and isinstance(status.get("frozen"), list):
        frozen = len(status["frozen"])
    operator = status.get("operator") or {}
    rollout = status.get("rollout") or {}
    held = tuple(
        Held(
            kind=str(w.get("kind") or ""),
            namespace=str(w.get("namespace") or ""),
            name=str(w.get("name") or ""),
            waits_for=str(w.get("waitsFor") or ""),
            reason=str(w.get("reason") or ""),
            until=str(w.get("until") or ""),
        )
        for w in status.get("waiting") or ()
    )
    return Row(
        cluster=cluster,
        context=context,
        revision=str(status.get("lastAppliedRevision") or ""),
        ready=str(ready.get("status") or "Unknown"),
        reason=str(ready.get("reason") or ("" if ready else "NoStatus")),
        message=str(ready.get("message") or ""),
        drift=int(status.get("driftCount") or 0),
        conflicts=int(status.get("conflictCount") or 0),
        frozen=int(frozen) if frozen is not None else None,
        operator_version=str(operator.get("version") or ""),
        stuck_nodes=int(operator.get("stuckCount") or 0),
        waiting=int(status.get("waitingCount") or 0),
        waits_for=held[0].reason if held else "",
        wave=int(rollout.get("wave") or 0),
        wave_waits_for=str(rollout.get("waitsFor") or ""),
        wanted=str(status.get("lastAttemptedRevision") or ""),
        applied_at=str(status.get("lastReconcileTime") or ""),
        trace_id=str(status.get("traceID") or ""),
        held=held,
        maintenances=tuple(maintenances.from_status(status.get("maintenances") or ())),
    )


def forbidden(cluster: str, context: str) -> Row:
    """The row of a cluster whose FleetSync the viewer may not read."""
    return Row(
        cluster,
        context,
        reason="Forbidden",
        error=f"you may not read this cluster's FleetSync (get fleetsyncs.{GROUP} {cluster})",
    )


def unreachable(cluster: str, context: str, why: str) -> Row:
    """The row of a cluster that could not be read."""
    return Row(cluster, context, False, why, reason="Unreachable")


async def read_all(
    clusters: list[tuple[str, str]],
    *,
    kubeconfig: str | None,
    timeout: float,  # noqa: ASYNC109 - per request
) -> list[Row]:
    """Every cluster's row, read at once; a cluster that cannot be read is a row saying why."""
    rows: dict[str, Row] = {}

    async def one(cluster: str, context: str) -> None:
        try:
            with anyio.fail_after(timeout * 2):
                client = await kube.connect(kubeconfig=kubeconfig, context=context, timeout=timeout)
                try:
                    try:
                        obj: dict[str, Any] | None = await client.get(ref(cluster))
                    except kube.NotFound:
                        obj = None
                finally:
                    with anyio.CancelScope(shield=True):
                        await client.close()
        except TimeoutError:
            rows[cluster] = unreachable(cluster, context, f"no answer within {timeout * 2:g}s")
        except FleetError as err:
            rows[cluster] = unreachable(cluster, context, str(err).splitlines()[0])
        else:
            rows[cluster] = row_of(cluster, context, obj)

    async with anyio.create_task_group() as tg:
        for cluster, context in clusters:
            tg.start_soon(one, cluster, context)
    return [rows[c] for c, _ in clusters]


__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "Held",
    "Row",
    "State",
    "condition",
    "forbidden",
    "read_all",
    "ref",
    "row_of",
    "unreachable",
]
