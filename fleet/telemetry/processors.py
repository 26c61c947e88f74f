"""Span attributes a child takes from its parent: the cluster, the revision and the stage.

A trace is read span by span (Jaeger's search, a span's detail pane), so each span that
writes something must say for which cluster, revision and stage, not only its root. The
code that opens a span knows the object it writes, not always which run it belongs to
(``apply object`` knows its kind and name, ``run helm`` its command). ``Inherit`` copies
these three attributes from the parent span when the child did not set them, as the span
starts: set once on ``reconcile`` (cluster, revision) and ``apply stage`` (stage), they
reach every span below.
"""

from __future__ import annotations

from opentelemetry import context, trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from fleet.telemetry import tracing

INHERITED = (tracing.CLUSTER, tracing.REVISION, tracing.STAGE)


class Inherit(SpanProcessor):
    def on_start(self, span: Span, parent_context: context.Context | None = None) -> None:
        parent = trace.get_current_span(parent_context)
        if not isinstance(parent, ReadableSpan) or not parent.attributes:
            return
        own = span.attributes or {}
        for key in INHERITED:
            if key not in own and key in parent.attributes:
                span.set_attribute(key, parent.attributes[key])


__all__ = ["INHERITED", "Inherit"]
