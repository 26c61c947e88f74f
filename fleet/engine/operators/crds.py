"""The chart's CRDs, which fleet applies itself before helm runs.

Helm installs a chart's ``crds/`` only on first install and never upgrades them, so the
API server would prune the new fields of an upgraded operator. fleet server-side-applies
them (field manager ``fleet``) and waits until each is Established. Before that, a new
CRD that drops a property stored objects use is refused, naming the field and the
objects: the pure schema walk below finds the dropped paths, ``dropped`` asks the
cluster who uses them.
"""

from __future__ import annotations

from typing import Any

import anyio

from fleet.engine.operators.guards import Problem
from fleet.engine.operators.releases import OperatorRefused, condition
from fleet.kube import Client


def schema_paths(crd: dict[str, Any]) -> dict[str, set[str]]:
    """Per served version, every property path its schema declares (``spec.draDriver.logLevel``)."""
    out: dict[str, set[str]] = {}
    for version in (crd.get("spec") or {}).get("versions") or ():
        schema = ((version.get("schema") or {}).get("openAPIV3Schema")) or {}
        paths: set[str] = set()
        _walk(schema, "", paths)
        out[version["name"]] = paths
    return out


def _walk(node: dict[str, Any], prefix: str, out: set[str]) -> None:
    if node.get("x-kubernetes-preserve-unknown-fields"):
        out.add(prefix + "*")
    for key, child in (node.get("properties") or {}).items():
        path = f"{prefix}{key}"
        out.add(path)
        if isinstance(child, dict):
            _walk(child, path + ".", out)
            sub = child.get("items")
            if isinstance(sub, dict):
                _walk(sub, path + "[].", out)


def dropped_fields(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[str]]:
    """Per version both CRDs serve, the property paths the old schema has and the new one loses."""
    before, after = schema_paths(old), schema_paths(new)
    out: dict[str, list[str]] = {}
    for version, paths in before.items():
        if version not in after:
            continue
        kept = after[version]
        gone = sorted(p for p in paths if p not in kept and not _covered(p, kept))
        if gone:
            out[version] = gone
    return out


def _covered(path: str, kept: set[str]) -> bool:
    parts = path.split(".")
    return any(".".join(parts[:i]) + ".*" in kept for i in range(1, len(parts)))


def uses(obj: dict[str, Any], path: str) -> bool:
    node: Any = obj
    for part in path.split("."):
        if part.endswith("[]"):
            part = part[:-2]
            node = node.get(part) if isinstance(node, dict) else None
            return isinstance(node, list) and bool(node)
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


async def live_crds(client: Client) -> dict[str, dict[str, Any]]:
    """Every CRD the cluster has, by name."""
    found = await client.list_if_served(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    return {c["metadata"]["name"]: c for c in found}


async def dropped(client: Client, chart_crds: list[dict[str, Any]], live: dict[str, dict[str, Any]]) -> list[Problem]:
    """A refusal per field a chart CRD drops while stored objects still set it."""
    out = []
    for crd in chart_crds:
        old = live.get(crd["metadata"]["name"])
        if old is None:
            continue
        for version, paths in dropped_fields(old, crd).items():
            group = crd["spec"]["group"]
            objects = await client.list_if_served(api_version=f"{group}/{version}", kind=crd["spec"]["names"]["kind"])
            for path in paths:
                users = sorted(
                    "/".join(filter(None, (o["metadata"].get("namespace"), o["metadata"]["name"])))
                    for o in objects
                    if uses(o, path)
                )
                if users:
                    out.append(
                        (
                            f"the chart's CRD {crd['metadata']['name']} drops field {path} ({version}), which "
                            f"stored objects use: {', '.join(users[:10])}",
                            "remove the field from those objects first, or keep the chart version that has it",
                        )
                    )
    return out


async def apply(client: Client, crds: list[dict[str, Any]], *, timeout: float, where: str) -> None:  # noqa: ASYNC109
    """Server-side apply the chart's CRDs and wait until every one is Established (``timeout`` seconds)."""
    for crd in crds:
        await client.apply(crd, field_manager="fleet", force=True)
    names = {c["metadata"]["name"] for c in crds}
    pending: set[str] = set(names)
    with anyio.move_on_after(timeout):
        while pending:
            live = await client.list_if_served(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
            pending = {
                c["metadata"]["name"]
                for c in live
                if c["metadata"]["name"] in names and not condition(c, "Established")
            } | (names - {c["metadata"]["name"] for c in live})
            if pending:
                await anyio.sleep(0.2)
    if pending:
        raise OperatorRefused(
            f"the chart's CRDs are not Established after {timeout:g}s: {', '.join(sorted(pending))}",
            where=where,
            hint="kubectl describe crd NAME; helm was not run",
        )
    await client.discover()  # the new kinds (GPUCluster...) are now served


__all__ = ["apply", "dropped", "dropped_fields", "live_crds", "schema_paths", "uses"]
