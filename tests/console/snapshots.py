"""Snapshots of a cluster for the console's pure tests, made of the real captures in tests/data.

The H100 node's slice as NVIDIA's driver publishes it (``resourceslices/h100-node.yaml``) and the
real H100 run's slice and claim (``real-gpu/``), plus two teams' namespaces, quotas and a claim of
each: what a page draws from, without a cluster.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import yaml

from fleet.console import sources
from fleet.engine.ownership import TEAM_LABEL
from fleet.views import fleetsyncs
from tests import paths

SLICE = yaml.safe_load((paths.DATA / "resourceslices" / "h100-node.yaml").read_text())
REAL_SLICES = json.loads((paths.REAL_GPU / "resourceslices.json").read_text())["items"]
REAL_CLAIMS = json.loads((paths.REAL_GPU / "resourceclaims.json").read_text())["items"]


def namespace(name: str, team: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {TEAM_LABEL: team}}}


def claim(ns: str, name: str, *, device: str = "", pool: str = "dgx-h100-01", pod: str = "") -> dict[str, Any]:
    """A claim of ``ns``, allocated ``device`` of ``pool`` when given, reserved for ``pod``."""
    status: dict[str, Any] = {}
    if device:
        results = [{"driver": "gpu.nvidia.com", "pool": pool, "device": device, "request": "gpu"}]
        status["allocation"] = {"devices": {"results": results}}
    if pod:
        status["reservedFor"] = [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": status,
    }


def quota(ns: str, *, used: int, hard: int) -> dict[str, Any]:
    key = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "fleet-devices", "namespace": ns},
        "status": {"hard": {key: str(hard)}, "used": {key: str(used)}},
    }


def fleetsync(cluster: str, **status: Any) -> dict[str, Any]:
    body = {
        "lastAppliedRevision": "a" * 40,
        "lastAttemptedRevision": "a" * 40,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Applied", "message": "revision applied"}],
        **status,
    }
    return {"apiVersion": fleetsyncs.API_VERSION, "kind": "FleetSync", "metadata": {"name": cluster}, "status": body}


def snapshot(
    cluster: str = "gpu-east",
    *,
    objects: Mapping[sources.KindKey, Sequence[Mapping[str, Any]]] | None = None,
    missing: Mapping[sources.KindKey, str] | None = None,
    status: Mapping[str, Any] | None = None,
    version: str = "1",
) -> sources.Snapshot:
    """A snapshot of ``cluster``: by default the H100 node, teams ``inference`` and ``ml-research``
    with one allocated claim each (gpu-0 for inference's pod ``server``, gpu-1 for ml-research's
    ``trainer``), their quotas, and a Ready FleetSync."""
    default: dict[sources.KindKey, list[Mapping[str, Any]]] = {
        sources.SLICES: [copy.deepcopy(SLICE)],
        sources.CLAIMS: [
            claim("inference", "server-gpu", device="gpu-0", pod="server"),
            claim("ml-research", "trainer-gpu", device="gpu-1", pod="trainer"),
        ],
        sources.NAMESPACES: [namespace("inference", "inference"), namespace("ml-research", "ml-research")],
        sources.QUOTAS: [quota("inference", used=1, hard=8), quota("ml-research", used=1, hard=16)],
        sources.TEMPLATES: [],
        sources.CLASSES: [],
        sources.NODES: [],
        sources.PODS: [],
        sources.EVENTS: [],
    }
    default.update({k: list(v) for k, v in (objects or {}).items()})
    for key in missing or {}:
        default.pop(key, None)
    obj = fleetsync(cluster, **(status or {}))
    return sources.Snapshot(
        cluster=cluster,
        context=cluster,
        row=fleetsyncs.row_of(cluster, cluster, obj),
        fleetsync=obj,
        objects=default,
        missing=dict(missing or {}),
        version=version,
    )


class Fixed:
    """A ``sources.Source`` of fixed snapshots (the pure tests' stand-in for a cluster)."""

    def __init__(self, *snapshots: sources.Snapshot) -> None:
        self.snapshots = {s.cluster: s for s in snapshots}

    def clusters(self) -> list[tuple[str, str]]:
        return [(c, s.context) for c, s in self.snapshots.items()]

    async def snapshot(self, cluster: str) -> sources.Snapshot:
        if cluster not in self.snapshots:
            raise sources.UnknownCluster(f"no cluster {cluster!r} in this console")
        return self.snapshots[cluster]

    async def row(self, cluster: str) -> fleetsyncs.Row:
        return (await self.snapshot(cluster)).row

    async def changed(self, cluster: str, since: str) -> str:
        """A fixed snapshot never changes: this returns only when it differs from ``since`` already."""
        if self.snapshots[cluster].version == since:
            await anyio.sleep_forever()
        return self.snapshots[cluster].version
