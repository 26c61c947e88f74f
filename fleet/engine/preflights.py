"""Preflight: the DRA guide's "Prerequisites and preflight checks", run against a live cluster.

The guide asks an operator to run ``kubectl version``, ``kubectl api-resources
--api-group=resource.k8s.io``, ``kubectl get clusterpolicy``, ``kubectl get nodes -l
feature.node.kubernetes.io/pci-10de.present=true`` and to read the ResourceSlices by
eye. Each of those is one ``Check`` here, with the evidence and the fix:

| check | passes when |
|---|---|
| ``kubernetes-version`` | the server is Kubernetes 1.34.2 or later |
| ``dra-api`` | ``resource.k8s.io/v1`` serves deviceclasses, resourceclaims, resourceclaimtemplates, resourceslices |
| ``no-clusterpolicy`` | no ClusterPolicy exists (the GPUCluster path is a fresh installation) |
| ``no-dra-driver-release`` | no separate ``dra-driver-nvidia-gpu`` Helm release runs beside the operator's |
| ``gpu-nodes`` | GPU nodes exist (the pools' selectors, else the NFD label) and are Ready |
| ``driver-version`` | driver 580 or later: the operator's (below), else every GPU node's published one |
| ``pool-inventory`` | every pool's nodes publish its model and GPU count |

When the operator manages the driver (``driver.nvidiaDriverCRD.enabled``), ``driver-version``
is about the version it will install (values ``driver.version``, else the chart's default): the
nodes' current drivers are about to be replaced.

The last two need the driver running; ``BEFORE_INSTALL`` are the checks the operator stage
runs before it installs or upgrades the operator (a cluster without the driver yet cannot
publish slices). The separate-driver check reads Helm's release records (``helm list``); the
operator stage asks the same ``dra_release_problem`` about the releases it has already listed,
so ``fleetctl preflight`` and ``apply`` refuse the same release with the same hint. The checks
only read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fleet import helm
from fleet.engine import healths
from fleet.engine.plans import OperatorRelease, Plan
from fleet.kube import Client

MIN_KUBERNETES = (1, 34, 2)
MIN_DRIVER = 580
DRA_RESOURCES = ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices")
NFD_GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"
DRIVER = "gpu.nvidia.com"
ALL = (
    "kubernetes-version",
    "dra-api",
    "no-clusterpolicy",
    "no-dra-driver-release",
    "gpu-nodes",
    "driver-version",
    "pool-inventory",
)
BEFORE_INSTALL = ("kubernetes-version", "dra-api", "no-clusterpolicy", "gpu-nodes")
DRA_DRIVER_CHARTS = ("dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu")
"""The standalone DRA driver chart (renamed from nvidia-dra-driver-gpu): never beside the operator."""


def dra_release_problem(releases: Iterable[helm.Release], *, desired: OperatorRelease | None) -> tuple[str, str] | None:
    """(reason, fix) for a standalone DRA driver release (any but ``desired`` itself), else None.

    The guide: do not install a separate ``dra-driver-nvidia-gpu`` release beside the managed
    workflow; the operator manages the DRA driver through GPUCluster gpu-cluster.
    """
    own = (desired.release, desired.namespace) if desired is not None else None
    for r in releases:
        if r.chart_name in DRA_DRIVER_CHARTS and (r.name, r.namespace) != own:
            return (
                f"a separate DRA driver release {r.namespace}/{r.name} ({r.chart}) runs beside the operator; "
                "the guide forbids it: the operator manages the DRA driver through GPUCluster gpu-cluster",
                f"uninstall it first (helm uninstall {r.name} -n {r.namespace}), after stopping the pods that use "
                "its claims",
            )
    return None


def operator_manages_driver(values: dict[str, Any]) -> bool:
    """The operator installs the driver itself (an NVIDIADriver CR): ``driver.nvidiaDriverCRD.enabled``."""
    driver = values.get("driver") or {}
    return driver.get("enabled", True) is not False and (driver.get("nvidiaDriverCRD") or {}).get("enabled") is True


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    hint: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"check": self.name, "ok": self.ok, "detail": self.detail, "hint": self.hint}


def _version(text: str) -> tuple[int, int, int]:
    found = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", text)
    return (int(found[1]), int(found[2]), int(found[3])) if found else (0, 0, 0)


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def run(
    *, client: Client, plan: Plan | None = None, only: tuple[str, ...] = ALL, h: helm.Helm | None = None
) -> list[Check]:
    """The checks named in ``only``, in the guide's order; ``h`` reads Helm's releases and the chart."""
    out: list[Check] = []
    if "kubernetes-version" in only:
        info = await client.version()
        git = str(info.get("gitVersion", ""))
        ok = _version(git) >= MIN_KUBERNETES
        out.append(
            Check(
                "kubernetes-version",
                ok,
                f"server {git}",
                "" if ok else "upgrade the control plane to Kubernetes 1.34.2 or later (resource.k8s.io/v1)",
            )
        )
    kinds = await client.discover()
    if "dra-api" in only:
        served = {k.plural for k in kinds if k.group == "resource.k8s.io" and k.version == "v1"}
        missing = [r for r in DRA_RESOURCES if r not in served]
        out.append(
            Check(
                "dra-api",
                not missing,
                f"resource.k8s.io/v1 serves {', '.join(r for r in DRA_RESOURCES if r in served) or 'nothing'}"
                + (f"; missing {', '.join(missing)}" if missing else ""),
                "" if not missing else "enable the resource.k8s.io/v1 API (--runtime-config) on Kubernetes >= 1.34",
            )
        )
    if "no-clusterpolicy" in only:
        policies = await client.list_if_served(api_version="nvidia.com/v1", kind="ClusterPolicy")
        names = sorted(p["metadata"]["name"] for p in policies)
        out.append(
            Check(
                "no-clusterpolicy",
                not names,
                f"ClusterPolicy {', '.join(names)} exists" if names else "no ClusterPolicy",
                ""
                if not names
                else "the GPUCluster path is a new installation: do not convert in place; use a cluster "
                "without a ClusterPolicy, or remove it and its device-plugin workloads first "
                "(kubectl get clusterpolicy)",
            )
        )
    if "no-dra-driver-release" in only:
        out.append(await _dra_releases(h, plan))
    nodes = await client.list_if_served(api_version="v1", kind="Node")
    gpu_nodes = _gpu_nodes(nodes, plan)
    if "gpu-nodes" in only:
        not_ready = sorted(n["metadata"]["name"] for n in gpu_nodes if not _ready(n))
        how = "the pools' node selectors" if plan and plan.pools else f"label {NFD_GPU_LABEL}=true"
        ok = bool(gpu_nodes) and not not_ready
        detail = f"{len(gpu_nodes)} GPU nodes by {how}"
        if not_ready:
            detail += f"; not Ready: {', '.join(not_ready[:10])}"
        out.append(
            Check(
                "gpu-nodes",
                ok,
                detail,
                ""
                if ok
                else (
                    "check the pools' nodeSelector and the node labels (kubectl get nodes --show-labels), "
                    "and why nodes are not Ready (kubectl describe node)"
                ),
            )
        )
    if "driver-version" in only or "pool-inventory" in only:
        slices = await client.list_if_served(api_version="resource.k8s.io/v1", kind="ResourceSlice")
        if "driver-version" in only:
            managed = plan is not None and plan.operator is not None and operator_manages_driver(plan.operator.values)
            if managed and plan is not None and plan.operator is not None:
                out.append(await _operator_driver(h, plan.operator))
            else:
                out.append(_driver_versions(gpu_nodes, slices))
        if "pool-inventory" in only and plan is not None and plan.pools:
            problems = await pool_inventory_problems(client=client, plan=plan)
            out.append(
                Check(
                    "pool-inventory",
                    not problems,
                    "; ".join(problems[:10]) or f"{len(plan.pools)} pools match the published slices",
                    ""
                    if not problems
                    else "check the kubelet plugin runs on those nodes "
                    "(kubectl get pods -n gpu-operator -o wide) and the pools' gpu.productName/count",
                )
            )
    return out


async def pool_inventory_problems(*, client: Client, plan: Plan) -> list[str]:
    """Pool nodes whose ResourceSlices lack the pool's model or GPU count: the classes gate's own check
    (``healths.slice_problems``) over a fresh list, the one place the operator stage and preflight ask it."""
    if not plan.pools:
        return []
    nodes = {n["metadata"]["name"]: n for n in await client.list_if_served(api_version="v1", kind="Node")}
    slices = {
        s["metadata"]["name"]: s
        for s in await client.list_if_served(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    }
    return healths.slice_problems(plan, nodes=nodes, slices=slices)


def _gpu_nodes(nodes: list[dict[str, Any]], plan: Plan | None) -> list[dict[str, Any]]:
    if plan is not None and plan.pools:
        return [n for n in nodes if any(p.matches(n) for p in plan.pools)]
    return [n for n in nodes if ((n.get("metadata") or {}).get("labels") or {}).get(NFD_GPU_LABEL) == "true"]


def _driver_versions(gpu_nodes: list[dict[str, Any]], slices: list[dict[str, Any]]) -> Check:
    versions: dict[str, set[str]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") != DRIVER or not spec.get("nodeName"):
            continue
        for device in spec.get("devices") or ():
            v = ((device.get("attributes") or {}).get("driverVersion") or {}).get("version")
            if v:
                versions.setdefault(spec["nodeName"], set()).add(v)
    old, unknown = [], []
    for node in gpu_nodes:
        name = node["metadata"]["name"]
        found = versions.get(name)
        if not found:
            unknown.append(name)
        elif min(_version(v) for v in found)[0] < MIN_DRIVER:
            old.append(f"{name} ({', '.join(sorted(found))})")
    problems = ([f"driver < {MIN_DRIVER}: {', '.join(sorted(old)[:10])}"] if old else []) + (
        [f"no driverVersion published: {', '.join(sorted(unknown)[:10])}"] if unknown else []
    )
    ok = not problems and bool(gpu_nodes)
    return Check(
        "driver-version",
        ok,
        "; ".join(problems)
        or (f"{len(gpu_nodes)} GPU nodes publish driver >= {MIN_DRIVER}" if gpu_nodes else "no GPU nodes"),
        ""
        if ok
        else f"install NVIDIA driver {MIN_DRIVER} or later on those nodes (or let the operator manage it: "
        "installPath gpuCluster), and check the kubelet plugin publishes their slices",
    )


async def _dra_releases(h: helm.Helm | None, plan: Plan | None) -> Check:
    desired = plan.operator if plan is not None else None
    if h is None:
        return Check(
            "no-dra-driver-release",
            True,
            "not checked: no helm binary to read the release records",
            "pass --helm PATH (or set $FLEET_HELM) to check for a separate dra-driver-nvidia-gpu release",
        )
    try:
        releases = await h.releases()
    except helm.HelmError as err:
        return Check("no-dra-driver-release", False, f"cannot list Helm releases: {err.what}", err.hint)
    problem = dra_release_problem(releases, desired=desired)
    if problem is None:
        return Check("no-dra-driver-release", True, f"no {DRA_DRIVER_CHARTS[0]} release ({len(releases)} releases)")
    reason, fix = problem
    return Check("no-dra-driver-release", False, reason, fix)


async def _operator_driver(h: helm.Helm | None, desired: OperatorRelease) -> Check:
    """driver-version when the operator installs the driver: the version it will install, not the nodes'."""
    given = ((desired.values.get("driver") or {}).get("version")) or None
    source = f"values driver.version of {desired.source or 'the GPUOperator'}"
    if given is None:
        chart = helm.ChartRef(repository=desired.repository, name=desired.chart, version=desired.version)
        source = f"the default of chart {desired.chart} {desired.version}"
        if h is None:
            return Check(
                "driver-version",
                False,
                f"the operator installs the driver (driver.nvidiaDriverCRD.enabled); its version is {source}, "
                "not read: no helm binary",
                "pass --helm PATH (or set $FLEET_HELM), or set values driver.version explicitly",
            )
        try:
            given = ((await h.show_values(chart)).get("driver") or {}).get("version")
        except helm.HelmError as err:
            return Check(
                "driver-version",
                False,
                f"the operator installs the driver (driver.nvidiaDriverCRD.enabled); cannot read {source}: {err.what}",
                "check spec.chart can be reached, or set values driver.version explicitly",
            )
    version = str(given or "")
    ok = _version(version)[0] >= MIN_DRIVER
    return Check(
        "driver-version",
        ok,
        f"the operator installs driver {version or 'unset'} ({source}; driver.nvidiaDriverCRD.enabled): "
        "the nodes' current drivers are replaced",
        ""
        if ok
        else f"set values driver.version to {MIN_DRIVER} or later (the DRA guide needs driver >= {MIN_DRIVER})",
    )


def table(checks: list[Check]) -> str:
    rows = [("CHECK", "RESULT", "DETAIL / HINT")]
    for c in checks:
        rows.append((c.name, "ok" if c.ok else "FAIL", c.detail))
        if c.hint:
            rows.append(("", "", f"hint: {c.hint}"))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    return "\n".join(f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}".rstrip() for r in rows) + "\n"


__all__ = [
    "ALL",
    "BEFORE_INSTALL",
    "DRA_DRIVER_CHARTS",
    "Check",
    "dra_release_problem",
    "operator_manages_driver",
    "pool_inventory_problems",
    "run",
    "table",
]
