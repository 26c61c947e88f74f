"""Inventory snapshots: the ResourceSlices of a cluster, saved for ``fleetctl validate --inventory``.

CI has no cluster. ``fleetctl inventory -o yaml`` writes what the cluster
publishes and the validator reads it back; both go through the same
``Inventory.from_slices``, so a snapshot answers exactly as the live cluster
would. The file keeps the slices as the API returned them (minus
``managedFields`` and other server bookkeeping), so it also diffs well in git.

Text in, text out: reading and writing files is the caller's job (pure layer).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from fleet.inventory import limits
from fleet.inventory.inventories import Inventory, InventoryError

API_VERSION = "fleet.gpufleet.dev/v1alpha1"
KIND = "InventorySnapshot"
_KEEP_METADATA = ("name", "generateName", "ownerReferences")


def _slim(item: Mapping[str, Any]) -> dict[str, Any]:
    metadata = item.get("metadata") or {}
    return {
        "apiVersion": item.get("apiVersion", "resource.k8s.io/v1"),
        "kind": "ResourceSlice",
        "metadata": {k: metadata[k] for k in _KEEP_METADATA if k in metadata},
        "spec": item.get("spec") or {},
    }


def snapshot(*, slices: Iterable[Mapping[str, Any]], cluster: str = "") -> dict[str, Any]:
    items = sorted((_slim(s) for s in slices), key=lambda s: str(s["metadata"].get("name", "")))
    return {"apiVersion": API_VERSION, "kind": KIND, "cluster": cluster, "resourceSlices": items}


def dump(document: Mapping[str, Any]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.width = 4096
    out = io.StringIO()
    yaml.dump(dict(document), out)
    return out.getvalue()


def load(text: str, *, where: str = "inventory snapshot") -> tuple[Inventory, str]:
    """(inventory, cluster name) from a snapshot file's text."""
    try:
        document = YAML(typ="safe", pure=True).load(text)
    except YAMLError as err:
        raise InventoryError(f"not valid YAML: {err}", where=where) from err
    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise InventoryError(
            f"not an {KIND} (kind: {KIND}, apiVersion: {API_VERSION})",
            where=where,
            hint="write one with: fleetctl inventory --context CTX -o yaml > FILE",
        )
    slices = document.get("resourceSlices", [])
    if not isinstance(slices, list):
        raise InventoryError("resourceSlices must be a list", where=where)
    return Inventory.from_slices(slices), str(document.get("cluster") or "")


def problems(text: str) -> list[tuple[int, int, limits.Problem]]:
    """(line, column, problem) for every slice of the snapshot the API or the scheduler would refuse.

    Checked on the plain data first; only a snapshot with problems is read again with
    positions (ruamel's round-trip loader is several times slower), so a clean file costs
    one pass over its slices.
    """
    try:
        document = YAML(typ="safe", pure=True).load(text)
    except YAMLError:
        return []
    slices = document.get("resourceSlices") if isinstance(document, dict) else None
    if not isinstance(slices, list):
        return []
    found = limits.problems(slices)
    if not found:
        return []
    located = YAML(typ="rt").load(text)["resourceSlices"]
    out = []
    for problem in found:
        node: Any = located[problem.slice]
        line, column = node.lc.line, node.lc.col
        for step in problem.path:
            try:
                child = node[step]
            except (KeyError, IndexError, TypeError):
                break
            position = node.lc.key(step) if isinstance(step, str) else node.lc.item(step)
            line, column = position[0], position[1]
            node = child
        out.append((line + 1, column + 1, problem))
    return out


__all__ = ["API_VERSION", "KIND", "dump", "load", "problems", "snapshot"]
