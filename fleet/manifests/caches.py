"""Read and parse each file once per content: what a long-running controller keeps between loads.

The controller re-reads the repository on every poll, webhook and resync, and
almost always nothing (or one file) changed. Parsing with positions and validating
the models is most of what loading costs, so a
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

    def __len__(self) -> int:
        return len(self.entries)

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

    def forget(self, key: Key) -> None:
        """Drop one file's entry now (its file changed or went), without a ``sweep``."""
        self.entries.pop(key, None)
        self._used.discard(key)

    def sweep(self) -> None:
        """Forget every file the last load did not use (removed or changed since)."""
        self.entries = {k: v for k, v in self.entries.items() if k in self._used}
        self._used = set()

    def release(self) -> None:
        """Let every cached manifest drop its position maps and its model (``Manifest.release``): once a
        load is validated the maps are read only to place a finding, and are made again from the
        bytes then; a model is read again only when a fleet-wide change checks everything again
        (or its team's files change), and is validated again from the manifest's data then."""
        for manifests, _ in self.entries.values():
            for manifest in manifests:
                manifest.release()


Stamp = tuple[int, int, int, int, int]
"""A file's ``(st_mtime_ns, st_ctime_ns, st_size, st_ino, st_dev)``."""


@dataclass
class TreeCache:
    """A file's identity and stat → the bytes read last time, so an unchanged file is not read again.

    ``read_tree(root, cache=)`` stats every file anyway (for the size cap); when size,
    mtime, ctime, inode and device are what they were, the bytes are reused instead of
    opening and reading the file. As git does with its index ("racy git"), a file whose
    mtime was within ``RACY_SECONDS`` of the moment it was read is read again: a write in
    the same clock tick would not have moved its mtime. Without ``begin`` every file is
    racy, so nothing is reused: a safe default.

    Entries are keyed by the file (device and inode), not by its path: the git source
    checks each revision out into a directory of its own, recycling the oldest one by
    renaming it and rewriting only the files that differ, so an unchanged file comes back
    under another path with the same inode and stat. Entries seen in the last
    ``GENERATIONS`` reads are kept (more than the source's ``keep`` checkouts), so the
    recycled directory's unchanged files are still known when it is read again.
    """

    RACY_SECONDS = 2.0
    GENERATIONS = 8
    files: dict[tuple[int, int], tuple[Stamp, float, bytes, int]] = field(default_factory=dict)
    now: float = 0.0
    """When this read of the tree began (wall clock, seconds): set by the caller with ``begin``,
    since this package reads no clock."""
    generation: int = 0
    reads: int = 0
    reused: int = 0
    linked: bool = False
    """The last read met a symlink: a tree read again only where git says it changed
    (``trees.read_changed``) could miss a change of the link's target."""

    def begin(self, *, now: float) -> None:
        self.now = now
        self.generation += 1

    def get(self, stamp: Stamp) -> bytes | None:
        key = (stamp[4], stamp[3])
        found = self.files.get(key)
        if found is None or found[0] != stamp or stamp[0] / 1e9 > found[1] - self.RACY_SECONDS:
            return None
        self.reused += 1
        self.files[key] = (found[0], found[1], found[2], self.generation)
        return found[2]

    def put(self, stamp: Stamp, content: bytes) -> None:
        self.reads += 1
        self.files[(stamp[4], stamp[3])] = (stamp, self.now, content, self.generation)

    def __len__(self) -> int:
        return len(self.files)

    def sweep(self) -> None:
        """Forget files not seen in the last ``GENERATIONS`` reads (removed, changed, or their checkout gone)."""
        oldest = self.generation - self.GENERATIONS + 1
        self.files = {k: v for k, v in self.files.items() if v[3] >= oldest}


__all__ = ["ParseCache", "TreeCache"]
