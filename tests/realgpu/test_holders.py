"""Who holds the real H100, from the captured claim and slice alone (no pod: the claim's own answer)."""

from __future__ import annotations

from fleet.inventory import pendings
from tests.realgpu import capture


def test_an_allocated_claim_names_device_uuid_pods_and_team() -> None:
    cause = pendings.explain(
        pod=None,
        claims=[capture.claim()],
        all_claims=[capture.claim()],
        classes={"gpu.nvidia.com": capture.device_class()},
        slices=capture.slices(),
        nodes=[],
        teams={"ml-research": "ml-research"},
    )
    assert cause.rule == "allocated"
    assert cause.evidence == (
        "ml-research/gpu-pod-gpu-8czjk holds gpu.nvidia.com/gpu-real-01/gpu-0 on gpu-real-01 "
        "(NVIDIA H100 80GB HBM3, uuid GPU-6543a1f8-73a6-c5df-0fb0-63c1fa380987), reserved for gpu-pod, "
        "team ml-research",
    )
    assert capture.nvidia_smi_uuids() == ["GPU-6543a1f8-73a6-c5df-0fb0-63c1fa380987"]
