"""A revision's trace: from the ``git fetch`` that found it until it is applied or refused.

Every reconcile of the newest revision until it is applied or refused (one retried after a
failure too) is a child of the fetch's span, so the trace tells what happened to the commit;
FleetSync ``status.traceID`` names it. Any other reconcile (a resync, a drift repair) is a trace
of its own whose root links (Jaeger: ``FOLLOWS_FROM``) to the fetch of the revision last concluded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry import context, trace


@dataclass
class Journey:
    current: tuple[str, trace.SpanContext] | None = None
    """The newest revision and the ``git fetch`` span that found it, until the revision is applied
    or refused: every reconcile meanwhile continues that trace."""
    last: trace.SpanContext | None = None
    """The ``git fetch`` span of the last revision applied or refused: other reconciles link to it."""

    def found(self, checkout: Any) -> None:
        """A new revision was fetched: its trace starts at the fetch (a source that does not trace has none)."""
        span = getattr(checkout, "fetched_in", None)
        self.current = (checkout.revision, span) if span is not None and span.is_valid else None

    def parent(self) -> tuple[context.Context, list[trace.Link], str]:
        """The context a reconcile's span starts in, its links, and the trace id status names ("": keep it)."""
        if self.current is not None:
            span = self.current[1]
            parent = trace.set_span_in_context(trace.NonRecordingSpan(span), context.Context())
            return parent, [], f"{span.trace_id:032x}"
        return context.Context(), [trace.Link(self.last)] if self.last else [], ""

    def conclude(self, revision: str) -> None:
        """``revision`` was applied or refused: its trace ends, later reconciles link to it."""
        if self.current is not None and self.current[0] == revision:
            self.last, self.current = self.current[1], None


__all__ = ["Journey"]
