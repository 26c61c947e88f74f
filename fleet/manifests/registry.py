"""Which model validates which ``apiVersion``/``kind``, and what replaced old versions.

One table, so the loader, the JSON Schema generator and the docs agree on
what a repository may contain.
"""

from __future__ import annotations

from fleet.manifests import kinds, maintenances, resources
from fleet.manifests.bases import Model

FLEET_KINDS: dict[str, type[Model]] = {
    "Fleet": kinds.Fleet,
    "Cluster": kinds.Cluster,
    "GPUOperator": kinds.GPUOperator,
    "GPUNodePool": kinds.GPUNodePool,
    "Team": kinds.Team,
    "Overlay": kinds.Overlay,
    "GPUMaintenance": maintenances.GPUMaintenance,
}

RESOURCE_KINDS: dict[str, type[Model]] = {
    "DeviceClass": resources.DeviceClass,
    "ResourceClaimTemplate": resources.ResourceClaimTemplate,
    "ResourceClaim": resources.ResourceClaim,
}

MODELS: dict[tuple[str, str], type[Model]] = {
    **{(kinds.API_VERSION, k): m for k, m in FLEET_KINDS.items()},
    **{(resources.API_VERSION, k): m for k, m in RESOURCE_KINDS.items()},
}

DEPRECATED_VERSIONS = ("resource.k8s.io/v1alpha3", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2")

CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "Node",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "DeviceClass",
        "ResourceSlice",
        "PriorityClass",
        "StorageClass",
        "PersistentVolume",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "APIService",
        "RuntimeClass",
        "IngressClass",
        "VolumeAttachment",
        "CSIDriver",
        "CSINode",
        "ClusterPolicy",
        "GPUCluster",
        "NVIDIADriver",
    }
)
"""Kinds that are not namespaced (forbidden in team folders)."""


def group_of(api_version: str) -> str:
    """``resource.k8s.io/v1`` → ``resource.k8s.io``; ``v1`` → ``""`` (core)."""
    return api_version.rpartition("/")[0]


__all__ = ["CLUSTER_SCOPED", "DEPRECATED_VERSIONS", "FLEET_KINDS", "MODELS", "RESOURCE_KINDS", "group_of"]
