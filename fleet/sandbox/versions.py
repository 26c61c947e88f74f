"""The versions of every binary the sandbox runs: the one place to change them.

This module imports nothing, so build tooling can read it before fleet's own
dependencies are installed (``tools/ktestenv/gomod.py`` runs it with runpy).
"""

KUBERNETES = "v1.36.3"
KWOK = "v0.8.0"
HELM = "v3.21.4"
GO_DIRECTIVE = "1.26.0"
GITEA = "v1.27.3"
GITEA_TAGS = "sqlite sqlite_unlock_notify"
"""Gitea's build tags: SQLite (pure Go) without the ``bindata`` tag, so it reads its templates and
locales from its source copy (``STATIC_ROOT_PATH``)."""

__all__ = ["GITEA", "GITEA_TAGS", "GO_DIRECTIVE", "HELM", "KUBERNETES", "KWOK"]
