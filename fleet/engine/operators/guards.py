"""The guards: why fleet refuses to install, upgrade, downgrade or remove the operator as declared.

Each guard answers ``(reason, fix)`` or None, so the stage turns every refusal into one
entry (or ``OperatorRefused``) the same way. The pure ones (versions, values, other
releases, CRD owners) are tested as functions; the ones that read the cluster
(ClusterPolicies, claims holding the driver's devices) read it and nothing else. The
separate-DRA-driver guard is preflight's own check (``preflights.dra_release_problem``), so
``fleetctl preflight`` and the stage refuse the same release with the same hint.
"""

from __future__ import annotations

import re
from typing import Any

from fleet.engine.operators.releases import CLUSTERPOLICY_API, DRIVER
from fleet.engine.plans import OperatorRelease
from fleet.engine.preflights import dra_release_problem
from fleet.kube import Client

Problem = tuple[str, str]
"""(reason, fix)."""


def parse_version(text: str) -> tuple[int, int, int]:
    found = re.match(r"^v?([0-9]+)\.([0-9]+)\.([0-9]+)", text)
    if not found:
        return (0, 0, 0)
    major, minor, patch = (int(x) for x in found.groups())
    return (major, minor, patch)


def version_problem(desired: OperatorRelease, *, running: str | None) -> Problem | None:
    """(reason, fix) when going from ``running`` to the declared version needs an explicit allowance."""
    if running is None:
        return None
    old, new = parse_version(running), parse_version(desired.version)
    if new < old and not desired.allow_downgrade:
        return (
            f"{desired.version} is older than the running {running}: a downgrade",
            "set spec.upgrade.allowDowngrade: true if you mean it (after checking the chart's downgrade notes), "
            "or declare a version >= " + running,
        )
    if new[0] > old[0] and not desired.allow_major:
        return (
            f"{running} → {desired.version} crosses a major version",
            "read the operator's upgrade notes, then set spec.upgrade.allowMajor: true for this upgrade",
        )
    return None


def values_problem(values: dict[str, Any]) -> Problem | None:
    cp = (values.get("clusterPolicy") or {}).get("deployCR")
    gc = (values.get("gpuCluster") or {}).get("deployCR")
    if cp is True and gc is True:
        return (
            "values set both clusterPolicy.deployCR and gpuCluster.deployCR to true: the device-plugin and DRA "
            "allocation paths would both run",
            "set clusterPolicy.deployCR: false (the GPUCluster path, as in the DRA guide)",
        )
    return None


def crd_owner_problems(
    chart_crds: list[dict[str, Any]], live: dict[str, dict[str, Any]], *, desired: OperatorRelease
) -> list[Problem]:
    out = []
    for crd in chart_crds:
        name = crd["metadata"]["name"]
        found = live.get(name)
        if found is None:
            continue
        annotations = (found.get("metadata") or {}).get("annotations") or {}
        owner = annotations.get("meta.helm.sh/release-name")
        owner_ns = annotations.get("meta.helm.sh/release-namespace", "")
        if owner and (owner, owner_ns) != (desired.release, desired.namespace):
            out.append(
                (
                    f"CRD {name} belongs to Helm release {owner_ns}/{owner}; the operator chart ships its own "
                    "(the schemas differ)",
                    f"remove release {owner_ns}/{owner} (or its CRD) before installing the operator",
                )
            )
    return out


async def clusterpolicy_problem(client: Client, *, desired: OperatorRelease) -> Problem | None:
    policies = await client.list_if_served(api_version=CLUSTERPOLICY_API, kind="ClusterPolicy")
    if not policies:
        return None
    names = ", ".join(sorted(p["metadata"]["name"] for p in policies))
    return (
        f"ClusterPolicy {names} exists and installPath {desired.install_path} uses GPUCluster: the guide's "
        "GPUCluster path is a new installation, not an in-place conversion, and both allocation paths must "
        "never run together",
        "install on a cluster without a ClusterPolicy (or remove the ClusterPolicy and its device-plugin "
        "workloads first: kubectl get clusterpolicy)",
    )


async def allocated_claims(client: Client, *, node: str | None = None) -> list[str]:
    """``namespace/name (pods A, B)`` for every ResourceClaim allocated devices of the NVIDIA driver
    (on ``node`` only, when given: the driver publishes one pool per node, named after it)."""
    out = []
    for claim in await client.list_if_served(api_version="resource.k8s.io/v1", kind="ResourceClaim"):
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or ()
        if not any(r.get("driver") == DRIVER and (node is None or r.get("pool") == node) for r in results):
            continue
        meta = claim["metadata"]
        pods = [r.get("name") for r in status.get("reservedFor") or () if r.get("resource", "pods") == "pods"]
        held = f" (pods {', '.join(sorted(pods))})" if pods else " (allocated, no pod yet)"
        out.append(f"{meta.get('namespace')}/{meta['name']}{held}")
    return sorted(out)


def claims_block(claims: list[str], *, what: str) -> Problem:
    shown = ", ".join(claims[:20]) + (f", ... and {len(claims) - 20} more" if len(claims) > 20 else "")
    return (
        f"{what} the operator is blocked while ResourceClaims hold the driver's GPUs: {shown}",
        "delete the GPU workloads and their claims first and wait until the devices are unprepared "
        "(the guide's clean-up order), then run again",
    )


async def pool_node_blocked(client: Client, *, node: str) -> str:
    """Why a pool may not give ``node`` back yet: claims hold its GPUs ("" when free)."""
    claims = await allocated_claims(client, node=node)
    if not claims:
        return ""
    reason, fix = claims_block(claims, what=f"removing pool node {node} from its pool")
    return f"{reason}\n  hint: {fix}"


__all__ = [
    "Problem",
    "allocated_claims",
    "claims_block",
    "clusterpolicy_problem",
    "crd_owner_problems",
    "dra_release_problem",
    "parse_version",
    "pool_node_blocked",
    "values_problem",
    "version_problem",
]
