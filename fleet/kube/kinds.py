"""Kinds and object references: how fleet names a Kubernetes resource and builds its URL.

kr8s derives plurals by appending "s" (``deviceclasss``) and assumes every kind is
namespaced, both wrong for DRA. fleet therefore carries an explicit ``Kind`` (group,
version, plural, scope) for every kind it touches: the built-in table below covers
what the engine writes, and ``discovery.parse`` fills in anything else from the
server's aggregated discovery. A ``Ref`` identifies one object; its ``key`` is the
stable string the inventory stores.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, order=True)
class Kind:
    """One resource type: ``group`` is "" for the core group."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    verbs: tuple[str, ...] = field(default=(), compare=False)
    """What the server allows on it (from discovery; empty for the built-in table)."""

    @property
    def listable(self) -> bool:
        return not self.verbs or "list" in self.verbs

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_kind(self) -> str:
        """``Kind.group`` as kubectl prints it: ``deviceclasses.resource.k8s.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, *, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path: ``/apis/g/v[/namespaces/ns]/plural[/name]`` (``/api/v1`` for core)."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [root]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        return "/".join(parts)


@dataclass(frozen=True, order=True)
class Ref:
    """One object: apiVersion, kind, namespace ("" when cluster-scoped) and name."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @functools.cached_property
    def key(self) -> str:
        """``group/Kind/namespace/name``: stable across versions of the same group (computed once:
        a no-op over 10,000 objects asks for it about ten times per object)."""
        return f"{self.group}/{self.kind}/{self.namespace}/{self.name}"

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"

    @classmethod
    def of(cls, obj: dict[str, Any]) -> Ref:
        meta = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name", "")),
        )

    @classmethod
    def from_key(cls, key: str, *, version: str) -> Ref:
        group, kind, namespace, name = key.split("/", 3)
        return cls(api_version=f"{group}/{version}" if group else version, kind=kind, namespace=namespace, name=name)


def _k(group: str, version: str, kind: str, plural: str, namespaced: bool) -> Kind:
    return Kind(group=group, version=version, kind=kind, plural=plural, namespaced=namespaced)


def builtin() -> dict[tuple[str, str], Kind]:
    """The kinds fleet writes or reads, keyed by (apiVersion, kind); no discovery needed for these."""
    kinds = [
        _k("", "v1", "Namespace", "namespaces", False),
        _k("", "v1", "Node", "nodes", False),
        _k("", "v1", "ConfigMap", "configmaps", True),
        _k("", "v1", "Secret", "secrets", True),
        _k("", "v1", "Pod", "pods", True),
        _k("", "v1", "ResourceQuota", "resourcequotas", True),
        _k("", "v1", "ServiceAccount", "serviceaccounts", True),
        _k("", "v1", "Event", "events", True),
        _k("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
        _k("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
        _k("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
        _k("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
        _k("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
        _k("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False),
        _k("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True),
        _k("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
        _k("resource.k8s.io", "v1", "DeviceTaintRule", "devicetaintrules", False),
        _k("coordination.k8s.io", "v1", "Lease", "leases", True),
        _k("apps", "v1", "Deployment", "deployments", True),
        _k("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False),
        _k("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies", False),
        _k("fleet.gpufleet.dev", "v1alpha1", "FleetSync", "fleetsyncs", False),
    ]
    return {(k.api_version, k.kind): k for k in kinds}


def from_discovery(document: dict[str, Any]) -> list[Kind]:
    """Kinds listed in an aggregated discovery document (``APIGroupDiscoveryList``, v2).

    Only top-level resources with a ``responseKind`` count (subresources such as
    ``status`` are skipped); ``/api`` lists the core group with an empty name.
    """
    kinds: list[Kind] = []
    for group in document.get("items") or ():
        group_name = str((group.get("metadata") or {}).get("name") or "")
        for version in group.get("versions") or ():
            for res in version.get("resources") or ():
                response_kind = res.get("responseKind") or {}
                if not response_kind.get("kind"):
                    continue
                kinds.append(
                    Kind(
                        group=group_name,
                        version=str(version.get("version", "")),
                        kind=str(response_kind["kind"]),
                        plural=str(res.get("resource", "")),
                        namespaced=res.get("scope") == "Namespaced",
                        verbs=tuple(str(v) for v in res.get("verbs") or ()),
                    )
                )
    return kinds


__all__ = ["Kind", "Ref", "builtin", "from_discovery"]
