"""The versions of every binary the sandbox runs: the one place to change them.

This module imports nothing, so build tooling can read it before fleet's own
dependencies are installed (``tools/ktestenv/gomod.py`` runs it with runpy).
"""

KUBERNETES = "v1.36.3"
KWOK = "v0.8.0"
HELM = "v3.21.4"
GO_DIRECTIVE = "1.26.0"

__all__ = ["GO_DIRECTIVE", "HELM", "KUBERNETES", "KWOK"]
