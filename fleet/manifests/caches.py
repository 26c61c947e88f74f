"""Parse each file once per content: what a long-running controller keeps between loads.

The controller re-reads the repository on every poll, webhook and resync, and
almost always nothing (or one file) changed. Parsing with positions and validating
the models is most of what loading costs (about 0.2 ms per template), so a
``ParseCache`` remembers, per file path and content hash, the manifests and findings
that parsing produced, and ``load_revision(..., cache=)`` re-parses only files whose
bytes changed. The path is part of the key because a Manifest knows its file and
team folder; the loader's ``Limits`` are too, since they decide what is refused.

Cached values are shared between revisions, which is safe because nothing changes a
Manifest after loading (models are frozen; overlays and the planner copy ``data``).
Entries not used by the latest load are dropped (``sweep``), so the cache holds one
repository's worth and no more. It is a plain object owned by its caller, never a
module global: ``fleetctl`` runs once and needs none.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fleet.manifests.findings import Finding
from fleet.manifests.limits import Limits

if TYPE_CHECKING:
    from fleet.manifests.revisions import Manifest

Parsed = tuple[tuple["Manifest", ...], tuple[Finding, ...]]
Key = tuple[str, bytes, Limits]


@dataclass
class ParseCache:
    """File (path, content hash, limits) → its parsed manifests and findings."""

    entries: dict[Key, Parsed] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    _used: set[Key] = field(default_factory=set, repr=False)

    @staticmethod
    def key(file: str, content: bytes, limits: Limits) -> Key:
        return (file, hashlib.blake2b(content, digest_size=16).digest(), limits)

    def get(self, key: Key) -> Parsed | None:
        found = self.entries.get(key)
        self._used.add(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(self, key: Key, parsed: Parsed) -> None:
        self.entries[key] = parsed
        self._used.add(key)

    def sweep(self) -> None:
        """Forget every file the last load did not use (removed or changed since)."""
        self.entries = {k: v for k, v in self.entries.items() if k in self._used}
        self._used = set()


__all__ = ["ParseCache"]
