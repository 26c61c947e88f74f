"""A cluster's ResourceSlices as the scheduler sees them: with the DeviceTaintRules' taints.

``live_slices`` is how ``fleetctl inventory``, ``explain`` and ``validate --context`` read the devices:
the slices, and the DeviceTaintRules of the first API version the cluster serves, merged
(``fleet.inventory.taintrules``): a GPU under maintenance shows its taint, and a claim kept off it
is explained by it. ``scheduled`` is the same merge of objects already read (the console's snapshot).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleet import kube
from fleet.inventory import taintrules


async def rules(client: kube.Client) -> list[dict[str, Any]]:
    """The live DeviceTaintRules, of the newest version served ([] where none is)."""
    for version in taintrules.RULE_VERSIONS:
        found = await client.list_if_served(api_version=version, kind="DeviceTaintRule")
        if found:
            return [dict(r) for r in found]
    return []


def scheduled(slices: Sequence[Mapping[str, Any]], rules: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``slices``, each device carrying the taints the DeviceTaintRules ``rules`` put on it (pure)."""
    return taintrules.tainted(slices, rules)


async def live_slices(client: kube.Client) -> list[dict[str, Any]]:
    """The ResourceSlices, each device carrying the taints DeviceTaintRules put on it."""
    kind = await client.kind(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    slices = [dict(item) for item in (await client.list(kind)).items]
    return scheduled(slices, await rules(client))


__all__ = ["live_slices", "rules", "scheduled"]
