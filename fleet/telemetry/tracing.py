"""OpenTelemetry set-up: one trace per run, configured by the standard ``OTEL_*`` variables.

The SDK only reads ``OTEL_TRACES_EXPORTER`` in its auto-instrumentation entry point,
not when a program sets itself up, so ``setup`` maps it here: ``otlp`` (HTTP/protobuf,
``OTEL_EXPORTER_OTLP_ENDPOINT`` etc. read by the exporter, batched), ``console``
(printed as each span ends) or ``none``. Unset, it is ``otlp`` when an OTLP endpoint is set
(``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``..._TRACES_ENDPOINT``: pointing fleet at a collector is
enough) and ``none`` otherwise. ``fleetctl --trace`` forces ``console``. Only the HTTP exporter
is installed (the gRPC one would add grpcio to the image), so a ``grpc`` protocol is refused
rather than sent to a gRPC port as HTTP. Service name and resource attributes come from
``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (read by ``Resource.create``).

Span names are ``verb object`` (``apply stage``, ``apply object``, ``wait health``...)
with identifiers in attributes, never in names, so traces aggregate. Spans take the
cluster, revision and stage from their parent (``fleet.telemetry.processors``), and a
collector that is down costs one warning, not one per batch (``fleet.telemetry.exporters``).
"""

from __future__ import annotations

import os
import sys
import threading
import urllib.parse
from typing import TYPE_CHECKING, TextIO

from opentelemetry import trace

from fleet.errors import FleetError

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

    ``exporter`` overrides ``OTEL_TRACES_EXPORTER`` (see above for its default); ``extra``
    adds an exporter (tests use an in-memory one).
    """
    provider = build(exporter=exporter, stream=stream, extra=extra)
    if provider is not None:
        trace.set_tracer_provider(provider)
    return provider


def build(
    *, exporter: str | None = None, stream: TextIO | None = None, extra: SpanExporter | None = None
) -> TracerProvider | None:
    """The provider ``setup`` would install, from the arguments and ``OTEL_*``; not installed.

    FleetError when ``OTEL_EXPORTER_OTLP_PROTOCOL`` asks for a protocol fleet does not send.
    """
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    choices = set(_choice(exporter).split(","))
    if choices <= {"none"} and extra is None:
        return None
    if "otlp" in choices:
        _check_protocol()
    # The SDK is imported only when spans are recorded (psutil included): with tracing
    # off the API's no-op tracer serves, and a command starts that much sooner.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

    from fleet.telemetry import processors

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "fleet")}))
    provider.add_span_processor(processors.Inherit())
    if "console" in choices:
        out = stream or sys.stderr
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
    if "otlp" in choices:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        from fleet.telemetry import exporters

        guarded = exporters.Guarded(OTLPSpanExporter(), endpoint=endpoint())
        provider.add_span_processor(BatchSpanProcessor(guarded))
    if extra is not None:
        provider.add_span_processor(SimpleSpanProcessor(extra))
    return provider


def _choice(exporter: str | None) -> str:
    named = exporter or os.environ.get("OTEL_TRACES_EXPORTER")
    if named:
        return named.strip().lower()
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return "otlp"
    return "none"


def _check_protocol() -> None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(name, "").strip()
        if value:
            if value != "http/protobuf":
                raise FleetError(
                    f"{name}={value}: fleet exports traces over OTLP/HTTP (protobuf) only",
                    where="the OTEL_* environment",
                    hint="set it to http/protobuf (or unset it) and point OTEL_EXPORTER_OTLP_ENDPOINT "
                    "at the collector's OTLP/HTTP port, 4318 by default",
                )
            return


def endpoint() -> str:
    """Where spans go, as the HTTP exporter resolves it, with any user:password taken out."""
    url = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if not url:
        base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
        url = base.rstrip("/") + "/v1/traces"
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def close(provider: TracerProvider | None, *, timeout: float = 5.0) -> None:
    """Export what is queued and stop, within ``timeout`` seconds (a pod's grace period is short).

    The SDK's own shutdown waits up to 30 s per processor (with the collector down, an export
    retries for ``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s): here it runs in a daemon thread that the
    process waits for only ``timeout`` seconds. The exit handler the SDK registered then finds
    the provider shut down and returns at once.
    """
    if provider is None:
        return
    done = threading.Thread(target=provider.shutdown, name="fleet-traces-close", daemon=True)
    done.start()
    done.join(timeout)


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
    "close",
    "endpoint",
    "setup",
    "tracer",
]
