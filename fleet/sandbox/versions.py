"""The versions of every binary the sandbox runs: the one place to change them.

This module imports nothing, so build tooling can read it before fleet's own
dependencies are installed (``tools/ktestenv/gomod.py`` runs it with runpy).
"""

KUBERNETES = "v1.36.3"
KWOK = "v0.8.0"
HELM = "v3.21.4"
JAEGER = "v1.75.0"
"""Jaeger v2 (``cmd/jaeger``), the trace backend of the tracing tests; ``tools/jaeger/go.mod`` pins the same."""
GO_DIRECTIVE = "1.26.0"

__all__ = ["GO_DIRECTIVE", "HELM", "JAEGER", "KUBERNETES", "KWOK"]
