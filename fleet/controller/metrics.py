"""The controller's Prometheus metrics: one explicit registry, created by the controller.

prometheus-client rather than the OpenTelemetry metrics SDK: its Prometheus exporter
(``opentelemetry-exporter-prometheus``) is still a pre-release that itself wraps
prometheus-client, and renames units and labels on the way out. Traces stay with
OpenTelemetry (``fleet.telemetry``); metrics are scraped, so the scrape format's own
library is the shortest path.

Nothing is registered globally: ``Metrics()`` makes its own ``CollectorRegistry``
(``metrics.registry``), which ``/metrics`` (``servers``) renders, and tests make as
many as they like. Names follow Prometheus conventions (``_seconds``, ``_total``).

| metric | type | labels |
|---|---|---|
| ``fleet_reconcile_duration_seconds`` | histogram | ``result`` (success, failed, invalid...) |
| ``fleet_objects_total`` | counter | ``stage``, ``action`` (created, configured, deleted...) |
| ``fleet_drift_detected_total`` | counter | ``stage`` |
| ``fleet_drift_repaired_total`` | counter | ``stage``, ``manager`` (who had changed it; ``unknown``) |
| ``fleet_objects_frozen`` | gauge | (``fleet.gpufleet.dev/drift`` on the live object or in git) |
| ``fleet_changes_waiting`` | gauge | ``waits_for`` (``wave``, ``window``, ``preview``, ``claims``): changes held back |
| ``fleet_last_successful_sync_timestamp_seconds`` | gauge | |
| ``fleet_git_fetch_duration_seconds`` | histogram | |
| ``fleet_git_fetch_errors_total`` | counter | ``reason`` (``SourceError.reason``) |
| ``fleet_queue_depth`` | gauge | |
| ``fleet_loop_lag_seconds`` | gauge | |
| ``fleet_leader`` | gauge (0/1) | |
| ``fleet_gc_frozen_objects`` | gauge | (``heaps``: long-lived objects the cyclic collector skips) |
| ``fleet_webhook_requests_total`` | counter | ``result`` (``webhooks.Verdict.result``) |
| ``fleet_commit_status_posts_total`` | counter | ``result`` (posted, unchanged, dropped, ``HostError.reason``) |
| ``fleet_cache_entries`` | gauge | ``cache`` (each long-lived cache the controller keeps; read at scrape time) |
| ``fleet_ready`` | gauge (0/1) | ``cluster`` (the FleetSync's ``Ready``) |
| ``fleet_stalled`` | gauge (0/1) | ``cluster`` (the FleetSync's ``Stalled``) |
| ``fleet_source_reachable`` | gauge (0/1) | ``cluster`` (the FleetSync's ``sourceReachable``) |
| ``fleet_helm_remediations_total`` | counter | (GPU Operator installs/upgrades ``spec.remediation`` acted on) |
| ``fleet_build_info`` | gauge (always 1) | ``version``, ``revision`` (``fleet.builds``) |
| ``fleet_maintenance_devices`` | gauge | ``cluster``, ``maintenance``, ``effect`` (a GPUMaintenance's devices) |
| ``fleet_maintenance_pods_waited`` | gauge | ``cluster``, ``maintenance`` (the pods on its devices) |
| ``fleet_maintenance_overdue`` | gauge (0/1) | ``cluster``, ``maintenance`` (waiting past the disruption deadline) |

``record_changeset`` turns an engine ChangeSet into the object, drift and helm remediation
counters, so metrics are a view of ChangeSets, not a second bookkeeping. ``record_report``
sets the three status gauges from the controller's ``statuses.Report`` with the same
functions the FleetSync status uses (``is_ready``, ``is_stalled``), each time the status is
written: they are what ``kubectl get fleetsync`` shows, as numbers an alert can wait on. Only
a replica that has reconciled (the leader) has them; the alerts in ``overlays/monitoring``
also ask ``fleet_leader`` so a deposed leader's last values do not count. ``record_maintenances``
sets the GPUMaintenances' gauges from the status's ``maintenances`` (``fleet.views.maintenances``)
and removes a maintenance's series once it is gone. The controller's ``lag`` task keeps
``fleet_loop_lag_seconds`` current. The git
source does not know about metrics (it is an adapter below the controller): the
controller times ``source.sync()`` with ``fetch_duration`` and counts a
``SourceError`` by its ``reason`` in ``fetch_errors``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from fleet import builds
from fleet.controller import sections, statuses
from fleet.engine.changesets import Action, ChangeSet
from fleet.engine.maintenances import EFFECTS
from fleet.views.maintenances import Maintenance

_WRITTEN = frozenset({Action.CREATED, Action.CONFIGURED, Action.DELETED})
_DURATIONS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


@dataclass
class Stats:
    """Counters of one controller that tests and benchmarks read (plain numbers, no registry)."""

    reconciles: int = 0
    finished: int = 0
    """Reconciles that returned (``reconciles - finished`` is the one running now, if any)."""
    fetches: int = 0
    fetch_errors: int = 0
    plans: int = 0
    loop_lag: float = 0.0
    max_loop_lag: float = 0.0
    last_reasons: tuple[str, ...] = ()
    gc_frozen: int = 0
    """Objects out of the collector's sight (``heaps``) at the last sweep."""


class ReconcileMetrics:
    """What reconciles did: their durations, the objects written, drift, held changes."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.reconcile_duration = Histogram(
            "fleet_reconcile_duration_seconds",
            "Duration of one reconcile, by result.",
            ["result"],
            buckets=_DURATIONS,
            registry=r,
        )
        self.objects = Counter(
            "fleet_objects_total",
            "Objects applied or pruned, by stage and action (unchanged ones are not counted).",
            ["stage", "action"],
            registry=r,
        )
        self.drift = Counter(
            "fleet_drift_detected_total",
            "Objects found drifted from git (changed in the cluster), by stage.",
            ["stage"],
            registry=r,
        )
        self.repaired = Counter(
            "fleet_drift_repaired_total",
            "Drifted objects put back to git's content under enforce, by stage and the manager that had changed them.",
            ["stage", "manager"],
            registry=r,
        )
        self.frozen = Gauge(
            "fleet_objects_frozen",
            "Objects fleet leaves alone: frozen on the live object or in git (fleet.gpufleet.dev/drift).",
            registry=r,
        )
        self.waiting = Gauge(
            "fleet_changes_waiting",
            "Disruptive changes held back: for an earlier rollout wave, the maintenance window or running jobs.",
            ["waits_for"],
            registry=r,
        )
        for on in ("wave", "window", "preview", "claims"):
            self.waiting.labels(waits_for=on).set(0)
        self.last_success = Gauge(
            "fleet_last_successful_sync_timestamp_seconds",
            "Unix time of the last reconcile that applied a revision completely.",
            registry=r,
        )
        self.helm_remediations = Counter(
            "fleet_helm_remediations_total",
            "Failed helm installs or upgrades of the GPU Operator that spec.remediation acted on "
            "(rolled back, uninstalled, retried), and releases recovered from pending-*.",
            registry=r,
        )


class GitMetrics:
    """What the controller exchanged with the git host: fetches, webhooks, commit statuses."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.fetch_duration = Histogram(
            "fleet_git_fetch_duration_seconds",
            "Duration of one git fetch and checkout.",
            buckets=_DURATIONS,
            registry=r,
        )
        self.fetch_errors = Counter(
            "fleet_git_fetch_errors_total",
            "Failed git fetches, by reason.",
            ["reason"],
            registry=r,
        )
        self.webhook_requests = Counter(
            "fleet_webhook_requests_total",
            "Webhook requests, by result (accepted, ignored, unauthorized, replayed, too-large...).",
            ["result"],
            registry=r,
        )
        self.commit_status_posts = Counter(
            "fleet_commit_status_posts_total",
            "Commit statuses handed to the git host, by result (posted, unchanged, dropped, or an attempt's "
            "error: rate-limited, unreachable, unauthorized, forbidden, not-found, invalid, error).",
            ["result"],
            registry=r,
        )


class LoopMetrics:
    """The loop itself: the queue, the lag of its timers, the Lease, the collector."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.queue_depth = Gauge("fleet_queue_depth", "Items waiting in the work queue.", registry=r)
        self.loop_lag = Gauge(
            "fleet_loop_lag_seconds",
            "How late the event loop ran a timer last time it was measured.",
            registry=r,
        )
        self.leader = Gauge("fleet_leader", "1 while this replica holds the leader Lease, else 0.", registry=r)
        self.gc_frozen = Gauge(
            "fleet_gc_frozen_objects",
            "Long-lived objects moved out of the cyclic collector's sight (fleet.controller.heaps).",
            registry=r,
        )


class StatusMetrics:
    """The FleetSync's conditions as numbers an alert can wait on (``record_report``)."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.ready = Gauge(
            "fleet_ready",
            "1 while the FleetSync is Ready (the newest revision applied completely), else 0.",
            ["cluster"],
            registry=r,
        )
        self.stalled = Gauge(
            "fleet_stalled",
            "1 while the FleetSync is Stalled (the newest revision does not validate), else 0.",
            ["cluster"],
            registry=r,
        )
        self.source_reachable = Gauge(
            "fleet_source_reachable",
            "1 while the git source answers (the last fetch succeeded), else 0.",
            ["cluster"],
            registry=r,
        )


class MaintenanceMetrics:
    """Each GPUMaintenance of the cluster: its devices per effect, the pods on them, and whether its next step
    has waited for them past the Cluster's ``spec.disruption.deadline`` (``record_maintenances``)."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.devices = Gauge(
            "fleet_maintenance_devices",
            "Devices a GPUMaintenance takes out of service, by the effect of their DeviceTaintRule.",
            ["cluster", "maintenance", "effect"],
            registry=r,
        )
        self.pods = Gauge(
            "fleet_maintenance_pods_waited",
            "Pods on a GPUMaintenance's devices (the claims allocated there are reserved for them).",
            ["cluster", "maintenance"],
            registry=r,
        )
        self.overdue = Gauge(
            "fleet_maintenance_overdue",
            "1 while a GPUMaintenance's next step has waited for the pods on its devices past the disruption deadline.",
            ["cluster", "maintenance"],
            registry=r,
        )
        self.shown: set[tuple[str, str]] = set()
        """(cluster, maintenance) of the series set: those of a maintenance gone are removed."""

    def record(self, cluster: str, found: tuple[Maintenance, ...]) -> None:
        now = {(cluster, m.name) for m in found}
        for gone in self.shown - now:
            for effect in EFFECTS:
                self.devices.remove(*gone, effect)
            self.pods.remove(*gone)
            self.overdue.remove(*gone)
        for m in found:
            for effect, count in m.counts().items():
                self.devices.labels(cluster=cluster, maintenance=m.name, effect=effect).set(count)
            self.pods.labels(cluster=cluster, maintenance=m.name).set(m.pod_count)
            self.overdue.labels(cluster=cluster, maintenance=m.name).set(int(bool(m.waiting and m.waiting.overdue)))
        self.shown = now


class Metrics:
    """Every instrument of one controller, in its own registry, grouped by the concern that sets it."""

    def __init__(self, *, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.reconciles = ReconcileMetrics(r)
        self.git = GitMetrics(r)
        self.loop = LoopMetrics(r)
        self.status = StatusMetrics(r)
        self.maintenance = MaintenanceMetrics(r)
        build = builds.current()
        Info("fleet_build", "The version and git commit of this fleet-controller.", registry=r).info(
            {"version": build.version, "revision": build.revision}
        )

    def watch_caches(self, sizes: Callable[[], dict[str, int]]) -> None:
        """Export ``fleet_cache_entries{cache}`` from ``sizes()``, asked at each scrape (nothing to keep current)."""
        self.registry.register(_CacheSizes(sizes))

    def record_changeset(self, changeset: ChangeSet) -> None:
        """Count the written entries of a ChangeSet (created, configured, deleted; failures are not counted),
        drift, and the operator release's remediations."""
        counts = self.reconciles
        for entry in changeset.entries:
            if entry.drift:
                counts.drift.labels(stage=entry.stage).inc()
                if entry.action in (Action.CREATED, Action.CONFIGURED) and not entry.failed:
                    counts.repaired.labels(stage=entry.stage, manager=sections.manager_of(entry) or "unknown").inc()
            if not entry.failed and entry.action in _WRITTEN:
                counts.objects.labels(stage=entry.stage, action=str(entry.action)).inc()
            if entry.operator is not None and entry.operator.remedied:
                counts.helm_remediations.inc()
        held = collections.Counter(e.held.on for e in changeset.waiting if e.held is not None)
        for on in ("wave", "window", "preview", "claims"):
            counts.waiting.labels(waits_for=on).set(held[on])

    def record_report(self, report: statuses.Report) -> None:
        """Set ``fleet_ready``, ``fleet_stalled`` and ``fleet_source_reachable`` from what the status shows."""
        cluster = report.cluster
        self.status.ready.labels(cluster=cluster).set(1 if statuses.is_ready(report) else 0)
        self.status.stalled.labels(cluster=cluster).set(1 if statuses.is_stalled(report) else 0)
        self.status.source_reachable.labels(cluster=cluster).set(1 if report.source.reachable else 0)

    def record_maintenances(self, report: statuses.Report) -> None:
        """Set the ``fleet_maintenance_*`` gauges from what the status shows."""
        self.maintenance.record(report.cluster, report.maintenances)

    def render(self, *, accept: str = "") -> tuple[bytes, str]:
        """The exposition for an ``Accept`` header (Prometheus text, or OpenMetrics if asked): body, content type."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type


class _CacheSizes(Collector):
    def __init__(self, sizes: Callable[[], dict[str, int]]) -> None:
        self.sizes = sizes

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "fleet_cache_entries", "Entries in each long-lived cache of the controller.", labels=["cache"]
        )
        for name, size in sorted(self.sizes().items()):
            family.add_metric([name], size)
        yield family


__all__ = [
    "GitMetrics",
    "LoopMetrics",
    "MaintenanceMetrics",
    "Metrics",
    "ReconcileMetrics",
    "Stats",
    "StatusMetrics",
]
