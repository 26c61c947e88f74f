"""The controller's metrics: its own registry, and ChangeSets as the source of the object counters."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from fleet.controller.metrics import Metrics
from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.kube import Ref


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
    first.reconcile_duration.labels(result="success").observe(1.5)
    first.fetch_duration.observe(0.2)
    first.fetch_errors.labels(reason="unreachable").inc()
    first.last_success.set(1_700_000_000)
    first.queue_depth.set(3)
    first.loop_lag.set(0.01)
    first.leader.set(1)
    first.webhook_requests.labels(result="accepted").inc()
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
