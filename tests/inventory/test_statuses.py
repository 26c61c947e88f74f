"""What the kubelet and drivers report about allocated devices, read as Kubernetes 1.37 writes it (pure)."""

from __future__ import annotations

from typing import Any

from fleet.inventory import pendings, statuses


def claim(name: str, *devices: tuple[str, str], status: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    results = [{"request": request, "driver": "gpu.nvidia.com", "pool": "n1", "device": d} for request, d in devices]
    body: dict[str, Any] = {"allocation": {"devices": {"results": results}}, "reservedFor": [{"name": "p"}]}
    if status is not None:
        body["devices"] = status
    return {"metadata": {"name": name, "namespace": "ns", "uid": "u-1"}, "status": body}


def pod(*resources: tuple[str, list[dict[str, Any]]], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n1", "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}]},
        "status": {
            "resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus-x7k2p"}],
            "containerStatuses": [
                {"name": "c", "allocatedResourcesStatus": [{"name": n, "resources": r} for n, r in resources]}
            ],
            **status,
        },
    }


def test_the_kubelets_resource_ids_map_to_the_allocated_devices() -> None:
    claims = [claim("p-gpus-x7k2p", ("gpus", "gpu-3"), ("gpus", "gpu-13"), ("nic/any", "gpu-1"))]
    reported = pod(
        ("claim:gpus/gpus", [{"resourceID": "k8s.gpu.nvidia.com/claim=u-1-gpu-13", "health": "Unhealthy"}]),
        ("claim:gpus/nic", [{"resourceID": "gpu.nvidia.com/n1/gpu-1", "health": "Healthy"}]),
        ("nvidia.com/gpu", [{"resourceID": "GPU-0", "health": "Unhealthy"}]),  # a device plugin's
    )
    found = statuses.pod_health(reported, claims)
    assert [(h.device, h.health, h.claim, h.request) for h in found] == [
        ("gpu.nvidia.com/n1/gpu-13", "Unhealthy", "ns/p-gpus-x7k2p", "gpus"),
        ("gpu.nvidia.com/n1/gpu-1", "Healthy", "ns/p-gpus-x7k2p", "nic"),
    ]


def test_a_claim_the_scheduler_made_for_extended_resources_goes_by_its_own_name() -> None:
    claims = [claim("p-extended-resources-abc", ("container-0-request-0", "gpu-2"))]
    reported = pod(
        ("claim:p-extended-resources-abc/container-0-request-0", [{"resourceID": "cdi-id", "health": "Unknown"}]),
        extendedResourceClaimStatus={"resourceClaimName": "p-extended-resources-abc", "requestMappings": []},
    )
    [health] = statuses.pod_health(reported, claims)
    assert (health.device, health.health) == ("gpu.nvidia.com/n1/gpu-2", "Unknown")


def test_a_drivers_conditions_and_network_data() -> None:
    ready = {"type": "Ready", "status": "False", "reason": "XidError", "message": "XID 48"}
    network = {"interfaceName": "eth1", "ips": ["10.9.8.7/24"], "hardwareAddress": "ea:9f:00:00:00:01"}
    found = statuses.device_statuses(
        [
            claim(
                "c",
                ("gpus", "gpu-0"),
                status=[{"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0", "conditions": [ready]}],
            ),
            claim(
                "d",
                ("nic", "nic-0"),
                status=[{"driver": "nic.example.com", "pool": "n1", "device": "nic-0", "networkData": network}],
            ),
        ]
    )
    gpu, nic = found["gpu.nvidia.com/n1/gpu-0"], found["nic.example.com/n1/nic-0"]
    assert (gpu.claim, gpu.texts(), gpu.troubled) == ("ns/c", ["Ready=False (XidError: XID 48)"], True)
    assert (nic.texts(), nic.troubled) == (["network eth1 10.9.8.7/24 ea:9f:00:00:00:01"], False)


def test_explain_names_the_unhealthy_device_and_whom_it_heard_it_from() -> None:
    slices = [
        {
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": "gpu-3", "taints": [{"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}]},
                    {"name": "gpu-13"},
                ],
            }
        }
    ]
    claims = [claim("p-gpus-x7k2p", ("gpus", "gpu-3"), ("gpus", "gpu-13"))]
    healthy = pod(("claim:gpus", [{"resourceID": "x-gpu-3", "health": "Healthy"}]))
    fine = pendings.scheduled(healthy, claims=claims, slices=slices, teams={})
    assert fine.rule == "scheduled"  # an informing taint (effect None) is no sickness
    sick = pod(("claim:gpus", [{"resourceID": "x-gpu-13", "health": "Unhealthy", "message": "XID 79"}]))
    cause = pendings.scheduled(sick, claims=claims, slices=slices, teams={})
    assert (cause.rule, cause.summary) == (
        "device-unhealthy",
        "pod runs on n1, but the kubelet reports a device it holds unhealthy: gpu.nvidia.com/n1/gpu-13",
    )
    assert cause.evidence[0] == "gpu.nvidia.com/n1/gpu-13 is Unhealthy: XID 79 (claim ns/p-gpus-x7k2p, container c)"
    slices[0]["spec"]["devices"][1]["taints"] = [{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}]
    lost = pendings.scheduled(healthy, claims=claims, slices=slices, teams={})
    assert lost.summary.endswith("its driver reports a device it holds unhealthy: gpu.nvidia.com/n1/gpu-13")
    assert "gpu.nvidia.com/n1/gpu-13 carries taint gpu.nvidia.com/gpu-lost:NoSchedule" in lost.evidence


def test_a_taint_that_is_not_the_drivers_is_no_sickness() -> None:
    """A DeviceTaintRule's taint (a maintenance's, merged into the slice) is evidence of ``scheduled``."""
    slices = [
        {
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": "gpu-3",
                        "taints": [{"key": "fleet.gpufleet.dev/maintenance", "value": "rma", "effect": "NoExecute"}],
                    }
                ],
            }
        }
    ]
    cause = pendings.scheduled(pod(), claims=[claim("p-gpus-x7k2p", ("gpus", "gpu-3"))], slices=slices, teams={})
    assert cause.rule == "scheduled"
    assert "gpu.nvidia.com/n1/gpu-3 carries taint fleet.gpufleet.dev/maintenance=rma:NoExecute" in cause.evidence
