"""The versions of every binary the sandbox runs, and of the chart it serves: the one place to change them.

This module imports nothing, so build tooling can read it before fleet's own
dependencies are installed (``tools/ktestenv/gomod.py`` runs it with runpy), and so can
``fleet.builds`` (``--version``: what fleet is tested with) without loading the sandbox.
"""

KUBERNETES = "v1.37.2"
"""The sandbox's Kubernetes release unless ``FLEET_KUBERNETES`` or ``--kubernetes`` selects another."""
KUBERNETES_RELEASES = {"1.34": "v1.34.4", "1.35": "v1.35.4", "1.36": "v1.36.3", "1.37": "v1.37.2"}
"""The selectable releases, one per minor, oldest first. ``tools/ktestenv/go.mod`` pins the default's
module graph, ``go<minor>.mod`` (``go1.34.mod``) each other's; ``tools/ktestenv/gomod.py`` writes them."""
KWOK = "v0.8.0"
HELM = "v3.21.4"
JAEGER = "v1.75.0"
"""Jaeger v2 (``cmd/jaeger``), the trace backend of the tracing tests; ``tools/jaeger/go.mod`` pins the same."""
GO_DIRECTIVE = "1.26.0"
GPU_OPERATOR = "v26.7.0"
"""NVIDIA/gpu-operator's tag vendored in tests/data/gpu-operator (its chart and manifests)."""

GITEA = "v1.27.3"
GITEA_TAGS = "sqlite sqlite_unlock_notify"
"""Gitea's build tags: SQLite (pure Go) without the ``bindata`` tag, so it reads its templates and
locales from its source copy (``STATIC_ROOT_PATH``)."""

__all__ = [
    "GITEA",
    "GITEA_TAGS",
    "GO_DIRECTIVE",
    "GPU_OPERATOR",
    "HELM",
    "JAEGER",
    "KUBERNETES",
    "KUBERNETES_RELEASES",
    "KWOK",
]
