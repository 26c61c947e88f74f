"""Kinds build exact REST paths; refs give stable inventory keys; discovery is parsed."""

from __future__ import annotations

import fleet.kube as kube
from fleet.kube import kinds


def test_paths_for_core_grouped_and_scoped_kinds() -> None:
    table = kinds.builtin()
    dc = table[("resource.k8s.io/v1", "DeviceClass")]
    path = dc.path(name="gpu.nvidia.com", namespace="ignored")
    assert path == "/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com"
    rct = table[("resource.k8s.io/v1", "ResourceClaimTemplate")]
    assert rct.path(namespace="team-a") == "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates"
    assert rct.path() == "/apis/resource.k8s.io/v1/resourceclaimtemplates"
    assert table[("v1", "Namespace")].path(name="x") == "/api/v1/namespaces/x"


def test_ref_key_round_trip() -> None:
    ref = kube.Ref.of(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "claims", "namespace": "team-a"},
        }
    )
    assert ref.key == "rbac.authorization.k8s.io/Role/team-a/claims"
    assert kube.Ref.from_key(ref.key, version="v1") == ref
    ns = kube.Ref.of({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert ns.key == "/Namespace//team-a" and kube.Ref.from_key(ns.key, version="v1") == ns


def test_aggregated_discovery_is_parsed() -> None:
    document = {
        "items": [
            {
                "metadata": {"name": "resource.k8s.io"},
                "versions": [
                    {
                        "version": "v1",
                        "resources": [
                            {
                                "resource": "deviceclasses",
                                "scope": "Cluster",
                                "responseKind": {"group": "resource.k8s.io", "version": "v1", "kind": "DeviceClass"},
                            },
                            {
                                "resource": "resourceclaims",
                                "scope": "Namespaced",
                                "responseKind": {"kind": "ResourceClaim"},
                            },
                        ],
                    }
                ],
            }
        ]
    }
    found = kinds.from_discovery(document)
    assert [(k.kind, k.plural, k.namespaced) for k in found] == [
        ("DeviceClass", "deviceclasses", False),
        ("ResourceClaim", "resourceclaims", True),
    ]


def test_public_surface_is_sorted_and_complete() -> None:
    assert kube.__all__ == sorted(kube.__all__)
    assert {n for n in dir(kube) if not n.startswith("_")} - set(kube.__all__) <= {
        "annotations",
        "clients",
        "errors",
        "kinds",
        "leases",
        "retries",
        "shapes",
        "timestamps",
        "transports",
        "watches",
    }
