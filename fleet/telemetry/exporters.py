"""OTLP export that a collector outage cannot flood the log with or grow memory through.

With the collector down, OpenTelemetry's HTTP exporter logs a warning for every retry of every
batch and an error when it gives up on the batch, and the batch processor warns each time its
queue overflows (at most once per 20 s). A controller runs for months, and a collector that is
down for an hour would write thousands of lines that all say the same thing.

``Guarded`` wraps the exporter: it turns an outage into one WARNING (the endpoint, the first
reason, and that the controller goes on), and the first export that succeeds again into one
INFO line with the number of spans lost meanwhile. The exporter's own retry and give-up lines
are kept out of the log while an export runs (``Muffle``). A queue that overflows while
exports succeed (spans end faster than they go) is said once per process, with the setting
that sizes it; while the collector is down, overflowing is part of the outage already said.

Memory stays bounded by the batch processor's own queue (``OTEL_BSP_MAX_QUEUE_SIZE``, 2048
spans by default): a full queue drops the oldest span, and a failed batch is dropped, never
queued again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

logger = logging.getLogger(__name__)

EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.common.http",
)
"""Where the HTTP exporter logs each retry and each batch it gives up on."""
PROCESSOR_LOGGER = "opentelemetry.sdk._shared_internal"
"""Where the batch processor logs ``Queue full, dropping span.``"""


class Muffle(logging.Filter):
    """Keeps the exporter's records out of the log while ``Guarded`` exports; tells why it failed."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    def begin(self) -> None:
        self._local.active, self._local.seen = True, []

    def end(self) -> str:
        """Stop muffling; the most telling message seen since ``begin`` ("" if none): a retry's
        names the error (connection refused, a 503), the final one only that it gave up."""
        self._local.active = False
        seen: list[str] = getattr(self._local, "seen", [])
        retry = next((m for m in seen if m.startswith("Transient error")), "")
        error = retry.removeprefix("Transient error ").partition(" encountered while exporting")[0]
        return error or next(iter(seen), "")

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(self._local, "active", False):
            return True
        if len(self._local.seen) < 8:
            self._local.seen.append(record.getMessage())
        return False


class Overflow(logging.Filter):
    """Takes the batch processor's "Queue full" warnings out of the log; ``Guarded`` says it once."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = threading.Event()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not str(record.msg).startswith("Queue full"):
            return True
        self.seen.set()
        return False


class Guarded(SpanExporter):
    """A ``SpanExporter`` around ``inner`` that logs an outage once and never raises."""

    def __init__(self, inner: SpanExporter, *, endpoint: str) -> None:
        self.inner = inner
        self.closed = False
        self._aborted = False
        self.endpoint = endpoint
        self.failing = False
        self.dropped = 0
        """Spans in batches that could not be exported (since the process started)."""
        self.outages = 0
        self._lost = 0
        self._muffle = Muffle()
        self._overflow = Overflow()
        self._overflow_said = False
        for name in EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(self._muffle)
        logging.getLogger(PROCESSOR_LOGGER).addFilter(self._overflow)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.closed:
            return SpanExportResult.FAILURE
        self._muffle.begin()
        try:
            result = self.inner.export(spans)
            why = self._muffle.end()
        except Exception as err:  # an exporter bug must not end the batch processor's thread
            why = self._muffle.end() or f"{type(err).__name__}: {err}"
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self._recovered()
            self._overflowed()
        else:
            self._overflow.seen.clear()  # a queue that fills while the collector is down: the outage's warning
            self._failed(len(spans), why=why or "the collector refused the batch")
        return result

    def _failed(self, count: int, *, why: str) -> None:
        self.dropped += count
        self._lost += count
        if self.failing:
            return
        self.failing = True
        self.outages += 1
        logger.warning(
            "traces: cannot export spans to %s (%s); they are dropped until it answers, and fleet goes on "
            "(said once per outage; check OTEL_EXPORTER_OTLP_ENDPOINT and the collector)",
            self.endpoint,
            why.splitlines()[0][:300],
        )

    def _overflowed(self) -> None:
        """A queue that overflowed while exports succeed: spans end faster than they go. Said once."""
        if self._overflow_said or not self._overflow.seen.is_set():
            return
        self._overflow_said = True
        logger.warning(
            "traces: spans end faster than they are exported to %s; the oldest queued are dropped "
            "(raise OTEL_BSP_MAX_QUEUE_SIZE or OTEL_BSP_MAX_EXPORT_BATCH_SIZE; said once)",
            self.endpoint,
        )

    def _recovered(self) -> None:
        if not self.failing:
            return
        self.failing = False
        logger.info("traces: exporting to %s again; %d span(s) were dropped meanwhile", self.endpoint, self._lost)
        self._lost = 0

    def abort(self) -> None:
        """Shut the exporter down now: a retry waiting out its backoff gives up at once."""
        if self._aborted:
            return
        self._aborted = True
        self._muffle.begin()  # "Shutdown in progress, aborting retry" says nothing new
        try:
            self.inner.shutdown()
        finally:
            self._muffle.end()

    def shutdown(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.abort()
        for name in EXPORTER_LOGGERS:
            logging.getLogger(name).removeFilter(self._muffle)
        logging.getLogger(PROCESSOR_LOGGER).removeFilter(self._overflow)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


__all__ = ["EXPORTER_LOGGERS", "PROCESSOR_LOGGER", "Guarded"]
