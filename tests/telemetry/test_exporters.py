"""With the collector down, OTLP export costs one warning and a bounded queue, then recovers.

The real OTLP/HTTP exporter sends to a loopback port where nothing listens (every
connection refused), then to a small HTTP server that answers as a collector does.
"""

from __future__ import annotations

import http.server
import logging
import threading
import tracemalloc
from collections.abc import Callable, Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from fleet.errors import FleetError
from fleet.sandbox import processes
from fleet.telemetry import exporters, tracing
from tests import waits

QUEUE = 256


def batch_processor(provider: TracerProvider) -> BatchSpanProcessor:
    found = [p for p in provider._active_span_processor._span_processors if isinstance(p, BatchSpanProcessor)]
    assert len(found) == 1
    return found[0]


@pytest.fixture()
def otlp(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], TracerProvider]:
    """A provider exporting to ``endpoint`` as the controller's does (the endpoint alone turns OTLP on)."""
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3")  # room for one retry: its line names the error
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", str(QUEUE))
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "64")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")

    def build(endpoint: str) -> TracerProvider:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        provider = tracing.build()
        assert provider is not None
        return provider

    return build


class Collector(http.server.BaseHTTPRequestHandler):
    """Answers each export as an OTLP/HTTP collector does: 200 with an empty response message."""

    received = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def collector() -> Iterator[tuple[int, type[Collector]]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], Collector
    finally:
        server.shutdown()
        server.server_close()


def test_a_collector_down_is_one_warning_and_the_queue_stays_bounded(
    otlp: Callable[[str], TracerProvider], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    endpoint = f"http://127.0.0.1:{processes.free_port()}"
    provider = otlp(endpoint)
    processor = batch_processor(provider)
    guarded = processor.span_exporter
    assert isinstance(guarded, exporters.Guarded)
    queue = processor._batch_processor._queue
    tracer = provider.get_tracer("test")
    tracemalloc.start()
    try:
        peak, held = 0, []
        for wave in range(10):
            for i in range(500):
                with tracer.start_as_current_span("apply object", attributes={tracing.NAME: f"claim-{wave}-{i}"}):
                    pass
                peak = max(peak, len(queue))
            held.append(tracemalloc.get_traced_memory()[0])
        waits.wait_for(lambda: guarded.dropped >= 2 * 64, within=60, what="batches tried and dropped")
    finally:
        tracemalloc.stop()
        guarded.abort()  # what is still queued fails at once instead of retrying for 3 s a batch
        provider.shutdown()
    assert peak <= QUEUE
    grown = held[-1] - held[1]
    assert grown < 3 * 2**20, f"memory grew by {grown / 2**20:.1f} MiB over 4,000 spans, {QUEUE} of them queued at most"
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in said] == ["fleet.telemetry.exporters"], [r.getMessage() for r in said]
    message = said[0].getMessage()
    assert f"{endpoint}/v1/traces" in message and "fleet goes on" in message
    assert "Connection refused" in message or "connection" in message.lower(), message
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry") and r.levelno >= logging.WARNING]


def test_an_outage_is_said_once_and_its_end_once(
    otlp: Callable[[str], TracerProvider],
    collector: tuple[int, type[Collector]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    port, handler = collector
    provider = otlp(f"http://127.0.0.1:{processes.free_port()}")
    guarded = batch_processor(provider).span_exporter
    assert isinstance(guarded, exporters.Guarded)
    tracer = provider.get_tracer("test")
    try:
        for _ in range(3):
            with tracer.start_as_current_span("reconcile"):
                pass
            provider.force_flush()
        assert guarded.failing and guarded.dropped == 3
        guarded.inner.shutdown()
        guarded.inner = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")  # the collector is back
        with tracer.start_as_current_span("reconcile"):
            pass
        provider.force_flush()
    finally:
        provider.shutdown()
    assert not guarded.failing and handler.received == 1 and guarded.outages == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "fleet.telemetry.exporters"]
    assert len(lines) == 2 and "cannot export" in lines[0], lines
    assert "again; 3 span(s) were dropped meanwhile" in lines[1], lines


def test_a_grpc_protocol_is_refused_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(FleetError, match="OTLP/HTTP") as caught:
        tracing.build()
    assert "4318" in caught.value.hint


def test_the_endpoint_is_shown_without_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://user:secret@collector.example:4318/")
    assert tracing.endpoint() == "https://collector.example:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://jaeger:4318/custom")
    assert tracing.endpoint() == "http://jaeger:4318/custom"
