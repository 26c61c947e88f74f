"""What ``fleetctl import`` reads from a cluster set up by hand, in one place.

The mapping (``fleet.engine.imports.mappings``) is a pure function of this
record, so it is tested without a cluster and the benchmark can time the two
halves apart. Reading takes one list per kind, helm's release record (chart,
version and the values the user supplied, never the chart's defaults), the
served API versions and the DRA feature gates as ``fleet.engine.probes`` sees
them (a dry-run per gate: nothing is stored).

A cluster without ``resource.k8s.io/v1`` has nothing fleet could manage: that is
refused before anything else is read, with the version that serves it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

from fleet import helm, kube
from fleet.engine import probes
from fleet.errors import FleetError
from fleet.policy import featuregates

DRA_API = "resource.k8s.io/v1"


@dataclass(frozen=True)
class HelmRelease:
    """The GPU Operator's release as helm records it."""

    name: str
    namespace: str
    chart: str
    version: str
    status: str
    values: dict[str, Any]
    """Only what the user supplied (``helm get values``)."""


@dataclass
class Rights:
    """Who may do what in the cluster: the RBAC objects the take-over's owners are read from."""

    roles: list[dict[str, Any]] = field(default_factory=list)
    role_bindings: list[dict[str, Any]] = field(default_factory=list)
    cluster_roles: list[dict[str, Any]] = field(default_factory=list)
    """Their rules, for the RoleBindings that bind a ClusterRole in a namespace (``owners``)."""


@dataclass
class Live:
    """One cluster as read for the import."""

    context: str
    minor: int
    features: featuregates.ClusterFeatures
    nodes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    device_classes: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    rights: Rights = field(default_factory=Rights)
    quotas: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    """Deployments and Pods: no fleet repository declares them; one IMPORT.md row counts them."""
    others: list[dict[str, Any]] = field(default_factory=list)
    """Objects of DRA kinds a repository does not declare as such (DeviceTaintRules, under every version
    served): those of the API fleet's maintenance uses become GPUMaintenances (``imports.maintenances``),
    the rest are listed in IMPORT.md."""
    operator: HelmRelease | None = None
    helm_problem: str = ""
    """Why helm's record could not be read ("" when it was, or there was no helm to ask)."""


KINDS = {
    "nodes": ("v1", "Node"),
    "slices": (DRA_API, "ResourceSlice"),
    "namespaces": ("v1", "Namespace"),
    "device_classes": (DRA_API, "DeviceClass"),
    "templates": (DRA_API, "ResourceClaimTemplate"),
    "claims": (DRA_API, "ResourceClaim"),
    "roles": ("rbac.authorization.k8s.io/v1", "Role"),
    "role_bindings": ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    "cluster_roles": ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    "quotas": ("v1", "ResourceQuota"),
}

WORKLOADS = (("apps/v1", "Deployment"), ("v1", "Pod"))
"""Read into ``Live.workloads``: what people run on the claims, counted in one row."""


UNDECLARED = ("DeviceTaintRule",)
"""DRA kinds a fleet repository does not declare as such: read into ``Live.others``."""


async def require_dra(client: kube.Client) -> set[tuple[str, str]]:
    """The served (apiVersion, kind) pairs; FleetError when ``resource.k8s.io/v1`` is not served."""
    found = {(k.api_version, k.kind) for k in await client.discover()}
    served = {v for v, _ in found}
    if DRA_API not in served:
        version = await client.version()
        older = sorted(v for v in served if v.startswith("resource.k8s.io/"))
        seen = f"it serves {', '.join(older)}" if older else "it serves no resource.k8s.io API"
        raise FleetError(
            f"the cluster does not serve the DRA API {DRA_API} ({seen}; Kubernetes "
            f"{version.get('gitVersion', '?')}); nothing was imported",
            where=f"context {client.context}",
            hint="fleet manages resource.k8s.io/v1, served from Kubernetes 1.34 on: upgrade the control plane, "
            "or pass the --context of a cluster that serves it",
        )
    return found


async def read(*, client: kube.Client, h: helm.Helm | None, release: str, namespace: str) -> Live:
    """Everything the import maps, read from the cluster behind ``client`` (and helm, when given)."""
    served = await require_dra(client)
    version = await client.version()
    minor = featuregates.minor_of(f"{version.get('major', '1')}.{version.get('minor', '0')}")
    default = featuregates.ClusterFeatures(cluster="", file="", minor=minor, enabled=featuregates.effective(minor, {}))
    live = Live(context=client.context, minor=minor, features=default)
    lists: dict[str, list[dict[str, Any]]] = {}

    async def one(attr: str, api_version: str, kind_name: str) -> None:
        kind = await client.kind(api_version=api_version, kind=kind_name)
        lists[attr] = list((await client.list(kind)).items)

    async def workloads(api_version: str, kind_name: str) -> None:
        kind = await client.kind(api_version=api_version, kind=kind_name)
        live.workloads += (await client.list(kind)).items

    async def features() -> None:
        live.features = await probes.observe(client, declared=default)

    async with anyio.create_task_group() as tg:
        for attr, (api_version, kind_name) in KINDS.items():
            tg.start_soon(one, attr, api_version, kind_name)
        tg.start_soon(features)
        for api_version, kind_name in WORKLOADS:
            tg.start_soon(workloads, api_version, kind_name)
        for api_version, kind_name in sorted(served):
            if kind_name in UNDECLARED and api_version.startswith("resource.k8s.io/"):
                tg.start_soon(_others, live, client, api_version, kind_name)
        if h is not None:
            tg.start_soon(_operator, live, h, release, namespace)
    for attr, items in lists.items():
        setattr(live.rights if hasattr(live.rights, attr) else live, attr, items)
    return live


async def _others(live: Live, client: kube.Client, api_version: str, kind_name: str) -> None:
    live.others += await client.list_if_served(api_version=api_version, kind=kind_name)


async def _operator(live: Live, h: helm.Helm, release: str, namespace: str) -> None:
    try:
        found = await h.release(name=release, namespace=namespace)
        if found is None:
            return
        values = await h.values(name=release, namespace=namespace)
    except helm.HelmError as err:
        live.helm_problem = f"helm could not read release {namespace}/{release}: {err.what}"
        return
    name = found.chart_name
    live.operator = HelmRelease(
        name=found.name,
        namespace=found.namespace,
        chart=name,
        version=found.chart_version(name),
        status=found.status,
        values=values,
    )


__all__ = ["DRA_API", "KINDS", "UNDECLARED", "WORKLOADS", "HelmRelease", "Live", "read", "require_dra"]
