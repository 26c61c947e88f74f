"""OTEL_TRACES_EXPORTER is honoured (the SDK only does it in auto-instrumentation), an OTLP
endpoint alone turns OTLP on, and spans take the cluster, revision and stage from their parent."""

from __future__ import annotations

import io

import pytest
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.telemetry import exporters, tracing


def test_none_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert tracing.build() is None


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
def test_an_otlp_endpoint_alone_turns_otlp_on(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    monkeypatch.setenv(variable, "http://127.0.0.1:4318/v1/traces")
    provider = tracing.build()
    assert provider is not None
    processors = provider._active_span_processor._span_processors
    assert isinstance(processors[-1], BatchSpanProcessor)
    provider.shutdown()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert tracing.build() is None, "OTEL_TRACES_EXPORTER still decides"


def test_console_from_the_environment_prints_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "fleet-test")
    out = io.StringIO()
    provider = tracing.build(stream=out)
    assert provider is not None
    with provider.get_tracer("t").start_as_current_span("apply stage", attributes={tracing.STAGE: "classes"}):
        pass
    text = out.getvalue()
    assert '"name": "apply stage"' in text and '"fleet.stage": "classes"' in text and "fleet-test" in text


def test_sdk_disabled_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert tracing.build(exporter="console") is None


def test_otlp_exporter_is_configured_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    provider = tracing.build(exporter="otlp")
    assert provider is not None
    processors = provider._active_span_processor._span_processors
    assert [type(p).__name__ for p in processors] == ["Inherit", "BatchSpanProcessor"]
    assert isinstance(processors[1], BatchSpanProcessor)
    assert isinstance(processors[1].span_exporter, exporters.Guarded)
    provider.shutdown()


def test_spans_take_cluster_revision_and_stage_from_their_parent() -> None:
    spans = InMemorySpanExporter()
    provider = tracing.build(exporter="none", extra=spans)
    assert provider is not None
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("reconcile", attributes={tracing.CLUSTER: "gpu-east"}) as root:
        root.set_attribute(tracing.REVISION, "abc")
        with (
            tracer.start_as_current_span("apply stage", attributes={tracing.STAGE: "claims"}),
            tracer.start_as_current_span("apply object", attributes={tracing.KIND: "ResourceClaimTemplate"}),
            tracer.start_as_current_span("run helm", attributes={tracing.STAGE: "own"}),
        ):
            pass
    got = {s.name: dict(s.attributes or {}) for s in spans.get_finished_spans()}
    assert got["apply object"] == {
        tracing.KIND: "ResourceClaimTemplate",
        tracing.CLUSTER: "gpu-east",
        tracing.REVISION: "abc",
        tracing.STAGE: "claims",
    }
    assert got["run helm"][tracing.STAGE] == "own", "a span's own value wins"
    assert tracing.STAGE not in got["reconcile"]
