"""What the control-plane fault tests share: a repository of many templates, reading them back, counts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from fleet import kube
from fleet.controller import statuses
from fleet.engine import ownership
from tests.apply.repos import Repo

RCT = "resource.k8s.io/v1"


def many_templates(root: Path, *, count: int) -> Repo:
    """One team (no quota: templates are not claims) with ``count`` one-GPU ResourceClaimTemplates."""
    repo = Repo(root=root)
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=None)
    for i in range(count):
        repo.claim_template("ml", f"t-{i:03d}")
    return repo


async def templates(client: kube.Client, namespace: str) -> dict[str, dict[str, Any]]:
    kind = await client.kind(api_version=RCT, kind="ResourceClaimTemplate")
    return {o["metadata"]["name"]: o for o in (await client.list(kind, namespace=namespace)).items}


def wrong_templates(live: dict[str, dict[str, Any]], repo: Repo, *, count: int) -> list[str]:
    """Object by object: every expected template present with the repository's content and fleet's labels."""
    wrong = []
    for i in range(count):
        name = f"t-{i:03d}"
        obj = live.get(name)
        if obj is None:
            wrong.append(f"{name}: missing")
            continue
        request = obj["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        labels = obj["metadata"].get("labels") or {}
        if (request.get("deviceClassName"), request.get("count")) != (repo.device_class_name, 1):
            wrong.append(f"{name}: {request}")
        if labels.get(ownership.MANAGED_BY) != ownership.MANAGER or labels.get(ownership.CLUSTER_LABEL) != repo.cluster:
            wrong.append(f"{name}: labels {labels}")
    extra = sorted(set(live) - {f"t-{i:03d}" for i in range(count)})
    return wrong + [f"{name}: not in the repository" for name in extra]


async def ready_at(client: kube.Client, cluster: str, revision: str) -> dict[str, Any] | None:
    """The FleetSync when it is Ready at ``revision``."""
    try:
        obj = await client.get(
            kube.Ref(api_version=statuses.API_VERSION, kind=statuses.KIND, namespace="", name=cluster)
        )
    except kube.NotFound:
        return None
    status = obj.get("status") or {}
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or ())
    return obj if ready and status.get("lastAppliedRevision") == revision else None


def delta(after: Counter[Any], before: dict[Any, int]) -> dict[Any, int]:
    return {k: n - before.get(k, 0) for k, n in sorted(after.items()) if n != before.get(k, 0)}
