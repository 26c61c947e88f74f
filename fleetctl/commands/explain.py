"""``fleetctl explain pod|claim NAME -n NS``: why a GPU pod is Pending, by the DRA guide's list.

Reads the pod (or claim), its claims — including the ones Kubernetes generates from a
ResourceClaimTemplate, found through the pod's ``status.resourceClaimStatuses`` — every
claim's allocation, the DeviceClasses, ResourceSlices, Nodes and the pod's events, then
names the first cause that applies (``fleet.inventory.pendings``) with its evidence.
A claim name may be a generated one (``gpu-pod-gpu-x7k2p``). Exit 0 when nothing
blocks (scheduled, or allocated), 1 when a cause is found, 2 on an error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

import anyio

from fleet import kube
from fleet.errors import FleetError
from fleet.inventory import pendings
from fleet.views import teams
from fleet.views.slices import live_slices

OK = ("scheduled", "allocated", "schedulable")


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "explain",
        help="why a pod or claim waits for a GPU (the guide's pending-pod causes, in order, with evidence)",
        description="Walk the DRA guide's causes of a Pending GPU pod and name the one that applies. "
        "Exit 0 nothing blocks, 1 a cause found, 2 error.",
    )
    parser.add_argument("what", choices=("pod", "claim"))
    parser.add_argument("name")
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument("--context", metavar="CTX", help="kubeconfig context (default: the current context)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


async def _list(client: kube.Client, api_version: str, kind: str, **kw: Any) -> list[dict[str, Any]]:
    return (await client.list(await client.kind(api_version=api_version, kind=kind), **kw)).items


async def _get(client: kube.Client, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
    return await client.get(kube.Ref(api_version=api_version, kind=kind, namespace=namespace, name=name))


async def gather(client: kube.Client, *, what: str, name: str, namespace: str) -> pendings.Cause:
    all_claims = await _list(client, "resource.k8s.io/v1", "ResourceClaim")
    in_ns = {c["metadata"]["name"]: c for c in all_claims if c["metadata"].get("namespace") == namespace}
    pod: dict[str, Any] | None = None
    claims: list[Mapping[str, Any]] = []
    where = f"{what} {namespace}/{name}"
    try:
        if what == "pod":
            pod = await _get(client, "v1", "Pod", namespace, name)
        elif name not in in_ns:
            raise kube.NotFound(f"ResourceClaim {name} not found", where=where)
    except kube.NotFound as err:
        raise FleetError(
            f"{what} {name} not found in namespace {namespace}",
            where=client.context,
            hint=f"kubectl get {what}s -n {namespace}",
        ) from err
    if pod is None:
        claims = [in_ns[name]]
        pods = await _list(client, "v1", "Pod", namespace=namespace)
        pod = next((p for p in pods if name in _claim_names(p)), None)
    else:
        templates = await _list(client, "resource.k8s.io/v1", "ResourceClaimTemplate", namespace=namespace)
        claims = list(teams.claims_of(pod, in_ns, {t["metadata"]["name"]: t for t in templates}))
    classes = {c["metadata"]["name"]: c for c in await _list(client, "resource.k8s.io/v1", "DeviceClass")}
    slices = await live_slices(client)
    nodes = await _list(client, "v1", "Node")
    events: list[dict[str, Any]] = []
    if pod is not None:
        events = await _list(
            client,
            "v1",
            "Event",
            namespace=namespace,
            field_selector=f"involvedObject.kind=Pod,involvedObject.name={pod['metadata']['name']}",
        )
        events.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")

    team_of = await namespace_teams(client)

    def explain() -> pendings.Cause:
        return pendings.explain(
            pod=pod,
            claims=claims,
            all_claims=all_claims,
            classes=classes,
            slices=slices,
            nodes=nodes,
            events=events,
            teams=team_of,
        )

    return await anyio.to_thread.run_sync(explain)


async def namespace_teams(client: kube.Client) -> dict[str, str]:
    """Namespace → the fleet team it belongs to; empty where Namespaces may not be listed."""
    try:
        return teams.namespace_teams(await _list(client, "v1", "Namespace"))
    except kube.Forbidden:
        return {}


def _claim_names(pod: dict[str, Any]) -> set[str]:
    names = {r.get("resourceClaimName") for r in (pod.get("spec") or {}).get("resourceClaims") or ()}
    names |= {s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
    return {n for n in names if n}


async def _run(args: argparse.Namespace) -> pendings.Cause:
    client = await kube.connect(kubeconfig=args.kubeconfig, context=args.context, timeout=30)
    try:
        return await gather(client, what=args.what, name=args.name, namespace=args.namespace)
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    cause = anyio.run(_run, args)
    if args.output == "json":
        sys.stdout.write(json.dumps(cause.as_dict(), indent=2) + "\n")
    else:
        lines = [f"cause: {cause.rule}", f"  {cause.summary}"]
        lines += [f"  - {e}" for e in cause.evidence]
        if cause.hint:
            lines.append(f"  hint: {cause.hint}")
        print("\n".join(lines))
    return 0 if cause.rule in OK else 1
