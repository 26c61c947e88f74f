"""Tracing for fleet: ``setup`` from ``OTEL_*`` (or ``--trace``), attribute names, the tracer.

See ``fleet.telemetry.tracing`` for why the exporter choice is mapped by hand.
"""

from __future__ import annotations

from fleet.telemetry.tracing import (
    ACTION,
    CLUSTER,
    DRY_RUN,
    FIELD_MANAGER,
    KIND,
    NAME,
    NAMESPACE,
    REVISION,
    STAGE,
    setup,
    tracer,
)

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
    "setup",
    "tracer",
]
