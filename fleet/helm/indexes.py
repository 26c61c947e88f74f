"""A chart's digest without starting helm: what the repository's ``index.yaml`` says about it.

Knowing that nothing changed must not cost helm processes (each ``helm`` start costs CPU,
and the controller asks on every reconcile). A chart version is identified by its
digest: a Helm repository lists it in ``index.yaml`` (``entries.<name>[].digest``, the sha256
of the ``.tgz``), a local ``.tgz`` is its own bytes and a chart folder its files. ``IndexCache``
keeps each repository's index with its validators (``ETag``, ``Last-Modified``), so asking
again is a conditional GET that the repository answers ``304 Not Modified``. OCI references
have no index: their digest is unknown here (None), and callers then ask helm as before.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import yaml

from fleet.helm.releases import ChartRef
from fleet.lrus import LRU


@dataclass
class _Index:
    etag: str = ""
    modified: str = ""
    digests: dict[str, str] = field(default_factory=dict)
    """``name@version`` → digest."""


LIMIT = 16
"""Repositories remembered: a fleet uses one or two; a URL changed by each commit must not pile up."""


@dataclass
class IndexCache:
    """Repository indexes read so far, by URL (kept by a process that asks again and again)."""

    indexes: LRU[str, _Index] = field(default_factory=lambda: LRU(LIMIT))


async def digest(chart: ChartRef, *, cache: IndexCache, timeout: float = 10.0) -> str | None:  # noqa: ASYNC109
    """The chart's digest, or None when it cannot be known without helm (OCI, an unreadable index)."""
    if chart.kind == "oci":
        return None
    if chart.kind == "path":
        return await anyio.to_thread.run_sync(_path_digest, Path(chart.repository))
    url = chart.repository.rstrip("/") + "/index.yaml"
    known = cache.indexes.get(url)
    headers = {}
    if known is not None and known.etag:
        headers["If-None-Match"] = known.etag
    if known is not None and known.modified:
        headers["If-Modified-Since"] = known.modified
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=True) as http:
            response = await http.get(url, headers=headers)
    except httpx.HTTPError:
        return None
    if response.status_code == 304 and known is not None:
        return known.digests.get(f"{chart.name}@{chart.version}")
    if response.status_code != 200:
        return None
    try:
        digests = await anyio.to_thread.run_sync(_digests, response.content)
    except yaml.YAMLError:
        return None
    cache.indexes[url] = _Index(
        etag=response.headers.get("ETag", ""), modified=response.headers.get("Last-Modified", ""), digests=digests
    )
    return digests.get(f"{chart.name}@{chart.version}")


def _digests(body: bytes) -> dict[str, str]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    index: Any = yaml.load(body, Loader=loader) or {}
    out: dict[str, str] = {}
    for name, versions in (index.get("entries") or {}).items():
        for entry in versions or ():
            if isinstance(entry, dict) and entry.get("digest"):
                out[f"{name}@{entry.get('version')}"] = str(entry["digest"])
    return out


def _path_digest(path: Path) -> str | None:
    h = hashlib.sha256()
    if path.is_file():
        h.update(path.read_bytes())
        return h.hexdigest()
    if not path.is_dir():
        return None
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(file.relative_to(path)).encode() + b"\0")
        h.update(file.read_bytes())
    return h.hexdigest()


__all__ = ["IndexCache", "digest"]
