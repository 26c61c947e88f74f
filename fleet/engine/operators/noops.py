"""An unchanged operator release recognised without starting helm.

Finding that the release is already as declared takes helm three to four processes (``helm
list``, its labels, ``helm get values``), about half a second of CPU, on every reconcile. A
process that reconciles again and again (the controller) keeps ``Noops``: once a run has seen
the release deployed with the declared chart and values, it notes the key of what was
declared — the chart's repository, name, version and digest (``fleet.helm.indexes``), the
values, and the cluster's capabilities (``capabilities.Capabilities.key``) — with the release
record helm wrote for it (the Secret ``sh.helm.release.v1.<release>.v<revision>``: its uid and
resourceVersion).

The next run with the same key reads that Secret and asks for the next revision's: if the
record is unchanged, still ``deployed``, and no later revision exists, the release is
unchanged — two GETs, no helm. Anything else misses and the stage asks helm as before: a hand
``helm upgrade`` or rollback (a new revision, the old record ``superseded``), a chart re-pushed
under the same version (another digest), other values or capabilities, an OCI chart (no
digest known).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from fleet import helm
from fleet.engine.operators import capabilities
from fleet.engine.plans import OperatorRelease
from fleet.helm import indexes
from fleet.kube import Client, KubeError, NotFound, Ref
from fleet.lrus import LRU


@dataclass(frozen=True)
class Deployed:
    """The release record that was deployed with the declared chart and values (``key``)."""

    key: str
    revision: int
    uid: str
    resource_version: str


LIMIT = 16
"""Releases remembered: a cluster declares one operator; a renamed release must not leave its old one forever."""


@dataclass
class Noops:
    """What a reconciling process remembers between runs: release records by (namespace, release)."""

    indexes: indexes.IndexCache = field(default_factory=indexes.IndexCache)
    deployed: LRU[tuple[str, str], Deployed] = field(default_factory=lambda: LRU(LIMIT))


def record_name(release: str, revision: int) -> str:
    return f"sh.helm.release.v1.{release}.v{revision}"


async def key(*, client: Client, desired: OperatorRelease, noops: Noops) -> str | None:
    """The key of what is declared, or None when the chart's digest cannot be known without helm."""
    chart = helm.ChartRef(repository=desired.repository, name=desired.chart, version=desired.version)
    digest = await indexes.digest(chart, cache=noops.indexes)
    if digest is None:
        return None
    caps = await capabilities.from_cluster(client)
    text = json.dumps(
        [desired.release, desired.namespace, str(chart), digest, desired.values, caps.key], sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()


async def _record(client: Client, *, namespace: str, name: str) -> dict[str, str] | None:
    try:
        secret = await client.get(Ref(api_version="v1", kind="Secret", namespace=namespace, name=name))
    except NotFound:
        return None
    meta = secret.get("metadata") or {}
    labels = meta.get("labels") or {}
    return {
        "uid": str(meta.get("uid", "")),
        "rv": str(meta.get("resourceVersion", "")),
        "status": labels.get("status", ""),
    }


async def unchanged(*, client: Client, desired: OperatorRelease, noops: Noops, key: str) -> bool:
    """The release is still the deployed record noted for ``key`` (and nothing came after it)."""
    noted = noops.deployed.get((desired.namespace, desired.release))
    if noted is None or noted.key != key:
        return False
    try:
        now = await _record(client, namespace=desired.namespace, name=record_name(desired.release, noted.revision))
        if now is None or (now["uid"], now["rv"], now["status"]) != (noted.uid, noted.resource_version, "deployed"):
            return False
        after = record_name(desired.release, noted.revision + 1)
        return await _record(client, namespace=desired.namespace, name=after) is None
    except KubeError:  # the records cannot be read here (RBAC): helm is asked instead
        return False


async def remember(*, client: Client, desired: OperatorRelease, noops: Noops, key: str, revision: int) -> None:
    """Note that revision ``revision`` is the deployed release for ``key``."""
    try:
        now = await _record(client, namespace=desired.namespace, name=record_name(desired.release, revision))
    except KubeError:
        now = None
    if now is None or now["status"] != "deployed":
        noops.deployed.pop((desired.namespace, desired.release), None)
        return
    noops.deployed[(desired.namespace, desired.release)] = Deployed(
        key=key, revision=revision, uid=now["uid"], resource_version=now["rv"]
    )


__all__ = ["Deployed", "Noops", "key", "record_name", "remember", "unchanged"]
