"""What the operator stage reads before it decides anything: the Helm releases and cluster objects.

Every step of the stage starts from these reads (``helm list``, the release's user values,
other releases, objects of kinds that may not be served yet), so they live apart from the
steps that judge them. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleet import helm
from fleet.engine.changesets import Change
from fleet.errors import FleetError
from fleet.kube import Client, Ref

KUBELET_PLUGIN = "nvidia-dra-driver-kubelet-plugin"
DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com")
DRIVER = "gpu.nvidia.com"
GPUCLUSTER = Ref(api_version="nvidia.com/v1alpha1", kind="GPUCluster", namespace="", name="gpu-cluster")
CLUSTERPOLICY_API = "nvidia.com/v1"
RELEASE_API = "helm.sh/v3"


class OperatorRefused(FleetError):
    """fleet will not install, upgrade or remove the operator release as declared; nothing was changed.

    ``change`` is the release's entry as a refusal (``refused``, the reason as its error, the
    driver states seen): the controller's status shows it although the run stopped here.
    """

    def __init__(self, what: str, *, where: str = "", hint: str = "", change: Change | None = None) -> None:
        super().__init__(what, where=where, hint=hint)
        self.change = change


def release_ref(*, release: str, namespace: str) -> Ref:
    """The ChangeSet name of a Helm release (``helm.sh/v3 HelmRelease``; no such API object exists)."""
    return Ref(api_version=RELEASE_API, kind="HelmRelease", namespace=namespace, name=release)


@dataclass
class Observed:
    release: helm.Release | None = None
    values: dict[str, Any] = field(default_factory=dict)
    releases: list[helm.Release] = field(default_factory=list)


async def visible_releases(h: helm.Helm, *, namespace: str) -> list[helm.Release]:
    """Every release when helm may list release Secrets cluster-wide, else those in ``namespace``.

    The in-cluster controller reads Secrets only in the operator's namespace (overlays/gpu-operator
    grants a Role there, not a ClusterRole over every Secret): then the separate-DRA-driver guard
    sees that namespace's releases, and the CRD-ownership guard still sees every other release
    that owns one of the chart's CRDs. A refusal there too is raised (its hint names the overlay).
    """
    try:
        return await h.releases()
    except helm.HelmError as err:
        if not helm.forbidden(err):
            raise
    return await h.releases(namespace=namespace)


async def observe(*, h: helm.Helm, release: str, namespace: str) -> Observed:
    releases = await visible_releases(h, namespace=namespace)
    found = next((r for r in releases if (r.name, r.namespace) == (release, namespace)), None)
    obs = Observed(releases=releases)
    if found is not None:
        obs.release = await h.release(name=found.name, namespace=found.namespace)
        obs.values = await h.values(name=found.name, namespace=found.namespace)
    return obs


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The object's status condition ``kind`` when it is True."""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


async def events(client: Client, *, kind: str, name: str, namespace: str | None = None) -> str:
    """The object's last three Events as ``; events: Reason: message | ...`` ("" when none)."""
    found = await client.list_if_served(
        api_version="v1",
        kind="Event",
        namespace=namespace,
        field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
    )
    recent = sorted(found, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")[-3:]
    if not recent:
        return ""
    return "; events: " + " | ".join(f"{e.get('reason')}: {e.get('message')}" for e in recent)


def summary(release: helm.Release | None, values: dict[str, Any], *, chart: str) -> dict[str, Any] | None:
    """The release as the entry's ``before``: chart, version, status and user values."""
    if release is None:
        return None
    return {
        "chart": release.chart_name,
        "version": release.chart_version(chart),
        "status": release.status,
        "values": values,
    }


__all__ = [
    "CLUSTERPOLICY_API",
    "DEVICE_CLASSES",
    "DRIVER",
    "GPUCLUSTER",
    "KUBELET_PLUGIN",
    "RELEASE_API",
    "Observed",
    "OperatorRefused",
    "condition",
    "events",
    "observe",
    "release_ref",
    "summary",
    "visible_releases",
]
