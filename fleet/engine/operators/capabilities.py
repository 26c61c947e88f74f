"""What a chart sees as ``.Capabilities``: the API versions and Kubernetes version it renders against.

Charts validate the cluster they will run on: NVIDIA's gpu-operator refuses
``gpuCluster.deployCR=true`` unless ``.Capabilities.APIVersions.Has
"resource.k8s.io/v1/DeviceClass"``. ``helm template`` alone knows only the API groups
compiled into helm, never a group/version/Kind, so it fails such a check on every cluster.
fleet therefore always renders with capabilities:

- **from the cluster** whenever one is reachable (``diff``, ``apply``, the controller):
  every served group/version and group/version/Kind from discovery, and the server's
  version (``helm template --api-versions ... --kube-version ...``);
- **from the table below** without one (``fleetctl render``): what the Cluster's
  ``kubernetesVersion`` serves with its default feature gates, said in the output.

The table is the resource.k8s.io part of each minor's defaults, read from
``pkg/registry/resource/rest`` and ``pkg/features/kube_features.go`` of each
version (``fleet.policy.featuregates`` keeps the gates): ``resource.k8s.io/v1``
with its four kinds is GA and on from 1.34, and serves DeviceTaintRule from 1.37
(DRADeviceTaintRules GA and on); ``v1beta1``, ``v1beta2`` and ``v1alpha3`` are
off by default, and with them DeviceTaintRule before 1.37 (``v1alpha3`` in
1.34-1.35, ``v1beta2`` in 1.36) and ResourcePoolStatusRequest. Core groups are
helm's own defaults.

``Capabilities.key`` is part of whatever decides that a render can be reused: the same chart
digest and values rendered against other capabilities may render other objects (or refuse).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fleet.kube import Client

DRA_KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")

SERVED_BY_DEFAULT: dict[str, dict[str, tuple[str, ...]]] = {
    "1.34": {"resource.k8s.io/v1": DRA_KINDS},
    "1.35": {"resource.k8s.io/v1": DRA_KINDS},
    "1.36": {"resource.k8s.io/v1": DRA_KINDS},
    "1.37": {"resource.k8s.io/v1": (*DRA_KINDS, "DeviceTaintRule")},
}
"""Per Kubernetes minor: the resource.k8s.io versions and kinds it serves with default feature gates."""


@dataclass(frozen=True)
class Capabilities:
    """``--api-versions`` and ``--kube-version`` for helm, and where they came from."""

    api_versions: tuple[str, ...]
    kube_version: str
    source: str
    """``cluster`` (discovery) or ``defaults`` (the table, for a Kubernetes minor)."""

    @property
    def key(self) -> str:
        """A digest of what a render depends on here (for a render cache's key)."""
        text = "\0".join((self.kube_version, *sorted(self.api_versions)))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        if self.source == "cluster":
            return f"the cluster's API versions (Kubernetes {self.kube_version})"
        served = ", ".join(v for v in self.api_versions if v.count("/") == 1 and v.startswith("resource.k8s.io"))
        return (
            f"the API versions Kubernetes {self.kube_version} serves with its default feature gates "
            f"({served or 'no resource.k8s.io version'}; no cluster was asked)"
        )


def for_minor(minor: str) -> Capabilities:
    """The capabilities of Kubernetes ``minor`` (``1.36``) with its default feature gates."""
    served = SERVED_BY_DEFAULT.get(minor)
    if served is None:
        known = sorted(SERVED_BY_DEFAULT, key=_minor)
        served = SERVED_BY_DEFAULT[known[-1]] if _minor(minor) > _minor(known[-1]) else {}
    versions: list[str] = []
    for group_version, kinds in served.items():
        versions.append(group_version)
        versions += [f"{group_version}/{kind}" for kind in kinds]
    return Capabilities(api_versions=tuple(versions), kube_version=f"v{minor}.0", source="defaults")


def _minor(text: str) -> int:
    try:
        return int(text.split(".")[1])
    except (IndexError, ValueError):
        return 0


async def from_cluster(client: Client) -> Capabilities:
    """What the cluster serves (discovery) and its version: as ``helm upgrade`` itself would see it."""
    served: set[str] = set()
    for kind in await client.discover():
        served.add(kind.api_version)
        served.add(f"{kind.api_version}/{kind.kind}")
    info = await client.version()
    git = str(info.get("gitVersion") or "")
    version = git.split("+")[0].split("-")[0] or f"v{info.get('major', '1')}.{info.get('minor', '0')}.0"
    return Capabilities(api_versions=tuple(sorted(served)), kube_version=version, source="cluster")


__all__ = ["DRA_KINDS", "SERVED_BY_DEFAULT", "Capabilities", "for_minor", "from_cluster"]
