"""OTEL_TRACES_EXPORTER is honoured (the SDK only does it in auto-instrumentation)."""

from __future__ import annotations

import io

import pytest

from fleet.telemetry import tracing


def test_none_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert tracing.build() is None


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
    assert [type(p).__name__ for p in processors] == ["BatchSpanProcessor"]
    provider.shutdown()
