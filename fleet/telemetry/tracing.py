"""OpenTelemetry set-up: one trace per run, configured by the standard ``OTEL_*`` variables.

The SDK only reads ``OTEL_TRACES_EXPORTER`` in its auto-instrumentation entry point,
not when a program sets itself up, so ``setup`` maps it here: ``otlp`` (HTTP/protobuf,
``OTEL_EXPORTER_OTLP_ENDPOINT`` etc. read by the exporter, batched), ``console``
(printed as each span ends) or ``none``. ``fleetctl --trace`` forces ``console``.
Service name and resource attributes come from ``OTEL_SERVICE_NAME`` /
``OTEL_RESOURCE_ATTRIBUTES`` (read by ``Resource.create``).

Span names are ``verb object`` (``apply stage``, ``apply object``, ``wait health``...)
with identifiers in attributes, never in names, so traces aggregate.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, TextIO

from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

CLUSTER = "k8s.cluster.name"
NAMESPACE = "k8s.namespace.name"
REVISION = "vcs.ref.head.revision"
KIND = "fleet.object.kind"
NAME = "fleet.object.name"
ACTION = "fleet.action"
STAGE = "fleet.stage"
FIELD_MANAGER = "fleet.field_manager"
DRY_RUN = "fleet.dry_run"


def setup(
    *, exporter: str | None = None, stream: TextIO | None = None, extra: SpanExporter | None = None
) -> TracerProvider | None:
    """Install the global tracer provider (once per process); None when tracing is off.

    ``exporter`` overrides ``OTEL_TRACES_EXPORTER`` (default ``none``); ``extra``
    adds an exporter (tests use an in-memory one).
    """
    provider = build(exporter=exporter, stream=stream, extra=extra)
    if provider is not None:
        trace.set_tracer_provider(provider)
    return provider


def build(
    *, exporter: str | None = None, stream: TextIO | None = None, extra: SpanExporter | None = None
) -> TracerProvider | None:
    """The provider ``setup`` would install, from the arguments and ``OTEL_*``; not installed."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    choice = (exporter or os.environ.get("OTEL_TRACES_EXPORTER") or "none").strip().lower()
    if choice == "none" and extra is None:
        return None
    # The SDK is imported only when spans are recorded (psutil included): with tracing
    # off the API's no-op tracer serves, and a command starts that much sooner.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "fleet")}))
    if "console" in choice.split(","):
        out = stream or sys.stderr
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
    if "otlp" in choice.split(","):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if extra is not None:
        provider.add_span_processor(SimpleSpanProcessor(extra))
    return provider


def tracer() -> trace.Tracer:
    return trace.get_tracer("fleet")


__all__ = [
    "ACTION",
    "CLUSTER",
    "DRY_RUN",
    "FIELD_MANAGER",
    "KIND",
    "NAME",
    "NAMESPACE",
    "REVISION",
    "STAGE",
    "build",
    "setup",
    "tracer",
]
