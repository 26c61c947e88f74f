"""Bounds on what the loader accepts, so hostile input cannot exhaust it.

A pull request is untrusted input that CI (and the controller) parses.
Each limit turns a resource blow-up into a finding: a file over the size cap
is not read, a YAML alias "bomb" (a few lines whose expansion is billions of
nodes) is refused by counting the expanded size on the composed node graph
before anything is expanded, and nesting depth is capped so recursion stays
bounded. The defaults are far above any real fleet repository.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Loader bounds; pass your own for tests or tighter CI."""

    max_file_bytes: int = 1024 * 1024
    max_files: int = 20_000
    max_nodes: int = 100_000
    max_aliases: int = 100
    max_depth: int = 64


__all__ = ["Limits"]
