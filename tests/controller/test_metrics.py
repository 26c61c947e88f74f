"""The controller's metrics: its own registry, and ChangeSets as the source of the object counters."""

from __future__ import annotations

import dataclasses
import datetime

from prometheus_client.parser import text_string_to_metric_families

from fleet import builds
from fleet.controller import statuses
from fleet.controller.metrics import Metrics
from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.engine.drivers import ReleaseStatus
from fleet.kube import Ref
from fleet.manifests.findings import Finding
from fleet.manifests.locations import Location


def values(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, _ = metrics.render()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def ref(name: str) -> Ref:
    return Ref(api_version="v1", kind="Namespace", namespace="", name=name)


def test_record_changeset_counts_writes_and_drift() -> None:
    metrics = Metrics()
    changeset = ChangeSet(
        cluster="c",
        revision="abc",
        entries=[
            Change(ref=ref("a"), stage="namespaces", action=Action.CREATED),
            Change(ref=ref("b"), stage="namespaces", action=Action.CONFIGURED, drift=True),
            Change(ref=ref("c"), stage="namespaces", action=Action.UNCHANGED),
            Change(ref=ref("d"), stage="claims", action=Action.DELETED),
            Change(ref=ref("e"), stage="claims", action=Action.CONFIGURED, error="Forbidden"),
            Change(ref=ref("f"), stage="claims", action=Action.SKIPPED, drift=True, reason="warn"),
        ],
    )
    metrics.record_changeset(changeset)
    found = values(metrics)
    assert found[("fleet_objects_total", (("action", "created"), ("stage", "namespaces")))] == 1
    assert found[("fleet_objects_total", (("action", "configured"), ("stage", "namespaces")))] == 1
    assert found[("fleet_objects_total", (("action", "deleted"), ("stage", "claims")))] == 1
    assert ("fleet_objects_total", (("action", "configured"), ("stage", "claims"))) not in found, "failed: not counted"
    assert ("fleet_objects_total", (("action", "unchanged"), ("stage", "namespaces"))) not in found
    assert found[("fleet_drift_detected_total", (("stage", "namespaces"),))] == 1
    assert found[("fleet_drift_detected_total", (("stage", "claims"),))] == 1


def test_every_instrument_is_exposed_and_registries_are_separate() -> None:
    first, second = Metrics(), Metrics()
    first.reconciles.reconcile_duration.labels(result="success").observe(1.5)
    first.git.fetch_duration.observe(0.2)
    first.git.fetch_errors.labels(reason="unreachable").inc()
    first.reconciles.last_success.set(1_700_000_000)
    first.loop.queue_depth.set(3)
    first.loop.loop_lag.set(0.01)
    first.loop.leader.set(1)
    first.git.webhook_requests.labels(result="accepted").inc()
    found = values(first)
    names = {name for name, _ in found}
    assert {
        "fleet_reconcile_duration_seconds_count",
        "fleet_objects_total",
        "fleet_drift_detected_total",
        "fleet_last_successful_sync_timestamp_seconds",
        "fleet_git_fetch_duration_seconds_count",
        "fleet_git_fetch_errors_total",
        "fleet_queue_depth",
        "fleet_loop_lag_seconds",
        "fleet_leader",
        "fleet_webhook_requests_total",
    } - names <= {"fleet_objects_total", "fleet_drift_detected_total"}, "labelled counters appear once used"
    assert found[("fleet_reconcile_duration_seconds_count", (("result", "success"),))] == 1
    assert found[("fleet_git_fetch_errors_total", (("reason", "unreachable"),))] == 1
    assert values(second)[("fleet_leader", ())] == 0


def test_the_status_gauges_follow_the_report_as_the_fleetsync_does() -> None:
    metrics = Metrics()
    assert ("fleet_ready", (("cluster", "c"),)) not in values(metrics), "no opinion before the first status"
    report = statuses.Report(cluster="c", attempted="abc", applied="abc", enforced="abc")
    metrics.record_report(report)
    found = values(metrics)
    assert found[("fleet_ready", (("cluster", "c"),))] == 1
    assert found[("fleet_stalled", (("cluster", "c"),))] == 0
    assert found[("fleet_source_reachable", (("cluster", "c"),))] == 1

    report.attempted = "def"
    report.findings = (Finding(location=Location("fleet.yaml"), rule="schema", message="bad"),)
    report.source.reachable = False
    metrics.record_report(report)
    found = values(metrics)
    assert found[("fleet_ready", (("cluster", "c"),))] == 0
    assert found[("fleet_stalled", (("cluster", "c"),))] == 1
    assert found[("fleet_source_reachable", (("cluster", "c"),))] == 0
    conditions = {c["type"]: c["status"] for c in statuses.status(report, generation=1)["conditions"]}
    assert conditions["Ready"] == "False" and conditions["Stalled"] == "True"


def test_helm_remediations_are_counted_from_the_operator_release_entry() -> None:
    metrics = Metrics()
    assert values(metrics)[("fleet_helm_remediations_total", ())] == 0, "exported before the first one"
    seen = ReleaseStatus(version="v26.7.0", limit=600.0, checked=datetime.datetime.now(datetime.UTC))
    release = Ref(api_version="helm.sh/v3", kind="HelmRelease", namespace="gpu-operator", name="gpu-operator")
    changeset = ChangeSet(
        cluster="c",
        revision="abc",
        entries=[
            Change(ref=release, stage="operator", action=Action.UNCHANGED, operator=seen),
            Change(
                ref=release,
                stage="operator",
                action=Action.CONFIGURED,
                error="upgrade failed",
                operator=dataclasses.replace(seen, remedied="rolled back to revision 1"),
            ),
        ],
    )
    metrics.record_changeset(changeset)
    assert values(metrics)[("fleet_helm_remediations_total", ())] == 1


def test_build_info_names_the_version_and_commit() -> None:
    build = builds.current()
    found = values(Metrics())
    assert found[("fleet_build_info", (("revision", build.revision), ("version", build.version)))] == 1
